/**
 * What a normalising client cache keys each object by, read from the compiled schema: an entity type by the fields of
 * its PartitionKey and RowKey templates (its id is unique only within its partition, so `__typename` and `id` alone
 * would make two partitions' entities one), every other object type not at all (a payload, a connection, an edge, a
 * subscription's change event: kept inside what holds it), and each Relay connection field by the arguments that pick
 * its list (not `first`/`after`/`last`/`before`, so that pages fetched after one another are one list). Rendered for
 * Apollo Client (apollo-type-policies.ts) and urql Graphcache (urql-cache-config.ts) by the GraphQL Code Generator
 * plugin (scripts/codegen-cache-plugin.cjs).
 */
import { GraphQLSchema, getNamedType, isInterfaceType, isObjectType, isUnionType } from 'graphql';
import { TENANT_FIELD } from '../model/tenancy';
import type { AccessPath, Model } from '../model/types';

/** How a client cache keys one object type. */
export interface TypeKey {
  /** The GraphQL type name. */
  type: string;
  /**
   * The fields that identify an object of the type, in the order of its PartitionKey then RowKey template; `false`
   * when it is not normalised (not an entity).
   */
  keyFields: string[] | false;
}

/** A Relay connection field, paginated by `first`/`after` (and `last`/`before`). */
export interface ConnectionField {
  /** The type holding the field, e.g. `Query`. */
  type: string;
  field: string;
  /** The field's arguments other than the pagination ones: each value of them is a list of its own. */
  keyArgs: string[];
}

/**
 * A root point query field whose arguments are the keys of the entity it returns (`book(library: ID!, id: ID!)`): a
 * cache answers it from an entity it already holds, whichever query brought it (Apollo Client's cache redirects).
 */
export interface PointRedirect {
  field: string;
  /** The entity type returned. */
  type: string;
  /** For each key field of the type, the argument holding its value. */
  args: Record<string, string>;
}

/** Everything a normalising cache needs from the schema. */
export interface CacheKeys {
  /** Every object type of the client schema (not the root types, not introspection's), sorted by name. */
  types: TypeKey[];
  connections: ConnectionField[];
  redirects: PointRedirect[];
  /** The object types of each interface and union, by its name (Apollo Client's `possibleTypes`). */
  possibleTypes: Record<string, string[]>;
}

const PAGINATION_ARGUMENTS = new Set(['first', 'after', 'last', 'before']);

/**
 * @param model the compiled model (compileSchema(...).model)
 * @param schema the schema the client sees (clientSchema(...))
 * @returns the keys of every object type, the connection fields and the possible types
 */
export function cacheKeys(model: Model, schema: GraphQLSchema): CacheKeys {
  const roots = new Set([schema.getQueryType(), schema.getMutationType(), schema.getSubscriptionType()].map((t) => t?.name));
  const types: TypeKey[] = [];
  const connections: ConnectionField[] = [];
  const possibleTypes: Record<string, string[]> = {};
  for (const named of Object.values(schema.getTypeMap()).sort((a, b) => a.name.localeCompare(b.name))) {
    if (named.name.startsWith('__')) continue;
    if (isInterfaceType(named) || isUnionType(named)) {
      const objects = schema.getPossibleTypes(named).map((t) => t.name);
      if (objects.length > 0) possibleTypes[named.name] = objects.sort();
      continue;
    }
    if (!isObjectType(named)) continue;
    for (const [name, field] of Object.entries(named.getFields()))
      if (model.connections.has(getNamedType(field.type).name))
        connections.push({ type: named.name, field: name, keyArgs: field.args.map((a) => a.name).filter((a) => !PAGINATION_ARGUMENTS.has(a)) });
    if (roots.has(named.name)) continue;
    types.push(typeKey(model, named.name));
  }
  const query = schema.getQueryType()?.name;
  const redirects = [...model.accessPaths.values()].flatMap((path) => (path.parentType === query ? pointRedirect(model, path) : []));
  return { types, connections, redirects, possibleTypes };
}

/**
 * The redirect of a root point path, when it reads the entity itself at its own address from arguments alone: not
 * through an index or a table per period, no argument optional, and no `@auth` on the path or its type (the server
 * would decide per caller what a cache would then answer alike).
 */
function pointRedirect(model: Model, path: AccessPath): PointRedirect[] {
  const entity = model.entities.get(path.target.name);
  if (path.kind !== 'point' || !entity || path.index || path.tableTemplate || path.auth || entity.auth) return [];
  if (path.partitionKey.template.source !== entity.layout.partitionKey.source || path.rowKey.template.source !== entity.layout.rowKey.source) return [];
  const args: Record<string, string> = {};
  for (const bound of [path.partitionKey, path.rowKey])
    for (const [field, binding] of bound.bindings) {
      if (binding.source === 'tenant') continue;
      if (binding.source !== 'argument' || binding.optional) return [];
      args[field] = binding.name;
    }
  return [{ field: path.fieldName, type: entity.name, args }];
}

function typeKey(model: Model, type: string): TypeKey {
  const entity = model.entities.get(type);
  if (!entity) return { type, keyFields: false };
  // Under @tenancy the tenant is a key field no client sees (its token's): a client holds one tenant's objects at a
  // time. Every other key field is a field of the type (the compiler refuses a template naming anything else).
  return { type, keyFields: [...new Set(entity.keyFields.filter((f) => f !== TENANT_FIELD))] };
}
