/**
 * Projection from the selection set (the guide: "Use projection" in "Optimizing queries for the Table service"):
 * which properties of each entity type a request needs, so every query sends a `$select` of just those.
 * Computed once per request over the whole operation, so that all reads of one entity type in a request ask
 * for the same properties and the point loader's cache (primed by range queries) is always complete.
 */
import {
  BREAK,
  getNamedType,
  isInterfaceType,
  isObjectType,
  isUnionType,
  Kind,
  visit,
  type DirectiveNode,
  type FragmentDefinitionNode,
  type GraphQLObjectType,
  type GraphQLResolveInfo,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type SelectionSetNode,
} from 'graphql';
import { ENTITY_TYPE_PROPERTY, type EntityModel, type IndexModel, type Model } from '../model/types';
import { isIncluded } from './selection';

/** Entity type name → the properties the request reads of it. */
export type Projection = Map<string, Set<string>>;

/**
 * Walks the operation (fragments included) and lists, per entity type, its selected stored fields plus what
 * the access paths below them bind from the parent and the type's key fields — leaving out what `@skip`/`@include`
 * leave out for `variables` (the request's, coerced).
 */
export function collectProjection(
  schema: GraphQLSchema,
  model: Model,
  operation: OperationDefinitionNode,
  fragments: Record<string, FragmentDefinitionNode>,
  variables: Record<string, unknown> = {},
): Projection {
  const projection: Projection = new Map();
  const seen = new Set<string>();

  const visit = (type: GraphQLObjectType, selectionSet: SelectionSetNode | undefined): void => {
    if (!selectionSet) return;
    const entity = model.entities.get(type.name);
    const props = entity ? projectionFor(projection, entity) : undefined;
    for (const selection of selectionSet.selections) {
      if (!isIncluded(selection, variables)) continue; // what execution leaves out is not read
      if (selection.kind === Kind.FIELD) {
        const field = type.getFields()[selection.name.value];
        if (!field) continue;
        if (props && entity?.fields.has(field.name)) props.add(field.name);
        const path = model.accessPaths.get(`${type.name}.${field.name}`);
        if (path && props) {
          for (const bound of [
            path.partitionKey,
            ...('rowKey' in path ? [path.rowKey] : []),
            ...('rowKeyPrefix' in path && path.rowKeyPrefix ? [path.rowKeyPrefix] : []),
          ]) {
            for (const b of bound.bindings.values()) if (b.source === 'parent') props.add(b.name);
          }
        }
        // Read through an eventually consistent index, an entity under `@auth` is read itself, and answered only
        // while it still has the index's key values (path-resolvers.ts): those fields are read too.
        if (path?.index?.scope === 'interPartition' && path.target.authFields.size > 0) {
          const target = projectionFor(projection, path.target);
          for (const f of [...path.index.layout.partitionKey.fields, ...path.index.layout.rowKey.fields]) target.add(f);
        }
        const named = getNamedType(field.type);
        if (isObjectType(named)) visit(named, selection.selectionSet);
        // An interface's selection applies to each implementation ("Inheritance relationships"); a union's (a federation
        // subgraph's `_entities`) to each member, whose own inline fragments pick what each reads.
        else if (isInterfaceType(named) || isUnionType(named)) for (const impl of schema.getPossibleTypes(named)) visit(impl, selection.selectionSet);
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        const cond = selection.typeCondition ? schema.getType(selection.typeCondition.name.value) : type;
        if (isObjectType(cond)) visit(cond, selection.selectionSet);
        else if (isInterfaceType(cond)) visit(type, selection.selectionSet); // `... on SomeInterface` within an implementation
      } else {
        const fragment = fragments[selection.name.value];
        const key = `${type.name}:${selection.name.value}`;
        if (!fragment || seen.has(key)) continue;
        seen.add(key);
        const cond = schema.getType(fragment.typeCondition.name.value);
        if (isObjectType(cond)) visit(cond, fragment.selectionSet);
        else if (isInterfaceType(cond)) visit(type, fragment.selectionSet);
      }
    }
  };

  const root = operation.operation === 'query' ? schema.getQueryType() : operation.operation === 'mutation' ? schema.getMutationType() : undefined;
  if (root) visit(root, operation.selectionSet);
  return projection;
}

/** Per model, the projection of each operation no variable can change (no `@skip`/`@include` reads a variable). */
const fixedProjections = new WeakMap<Model, WeakMap<OperationDefinitionNode, Projection>>();
/** Whether an operation's selection depends on its variables (`@skip`/`@include` with a variable), per operation. */
const variableConditions = new WeakMap<OperationDefinitionNode, boolean>();

/**
 * The projection of a resolver's operation (collectProjection over `info`'s schema, operation, fragments and
 * variables), kept per operation across requests when no variable can change it: a prepared operation (the query lane
 * runs the same document node again) is walked once. The projection returned is shared: never change it.
 */
export function projectionOf(model: Model, info: Pick<GraphQLResolveInfo, 'schema' | 'operation' | 'fragments' | 'variableValues'>): Projection {
  const { schema, operation, fragments, variableValues } = info;
  let conditioned = variableConditions.get(operation);
  if (conditioned === undefined) variableConditions.set(operation, (conditioned = hasVariableConditions(operation, fragments)));
  if (conditioned) return collectProjection(schema, model, operation, fragments, variableValues);
  let byOperation = fixedProjections.get(model);
  if (!byOperation) fixedProjections.set(model, (byOperation = new WeakMap()));
  let projection = byOperation.get(operation);
  if (!projection) byOperation.set(operation, (projection = collectProjection(schema, model, operation, fragments, variableValues)));
  return projection;
}

/** Whether a `@skip` or `@include` of the operation or of any fragment reads a variable. */
function hasVariableConditions(operation: OperationDefinitionNode, fragments: Record<string, FragmentDefinitionNode>): boolean {
  let found = false;
  const look = {
    Directive(node: DirectiveNode) {
      if ((node.name.value === 'skip' || node.name.value === 'include') && node.arguments?.some((a) => a.value.kind === Kind.VARIABLE)) {
        found = true;
        return BREAK;
      }
      return undefined;
    },
  };
  visit(operation, look);
  for (const fragment of Object.values(fragments)) if (!found) visit(fragment, look);
  return found;
}

function projectionFor(projection: Projection, entity: EntityModel): Set<string> {
  let set = projection.get(entity.name);
  if (!set) {
    // Keys, and what `@auth` decides on: every entity read can be checked as it arrives.
    set = new Set([...entity.keyFields, ...entity.authFields]);
    projection.set(entity.name, set);
  }
  return set;
}

/** Each projection's `$select` lists, by entity type: a projection kept across requests (projectionOf) makes them once. */
const selects = new WeakMap<Projection, Map<string, string[]>>();

/** The `$select` list for reading `entity` itself in this request (shared: never change it). */
export function entitySelect(projection: Projection, entity: EntityModel): string[] {
  let byEntity = selects.get(projection);
  if (!byEntity) selects.set(projection, (byEntity = new Map()));
  let select = byEntity.get(entity.name);
  if (!select) byEntity.set(entity.name, (select = Object.freeze(entitySelectOf(projection, entity)) as string[]));
  return select;
}

function entitySelectOf(projection: Projection, entity: EntityModel): string[] {
  // An interface (the guide's "Inheritance relationships"): whatever the request reads of any implementation.
  if (entity.implementations) return [...new Set(entity.implementations.flatMap((e) => entitySelectOf(projection, e)))].sort();
  const fields = [...(projection.get(entity.name) ?? new Set([...entity.keyFields, ...entity.authFields]))];
  // A `@series` field is one property per element.
  return [...fields.flatMap((f) => entity.fields.get(f)?.series?.properties ?? [f]), ENTITY_TYPE_PROPERTY].sort();
}

/** The `$select` list for reading index entities of `index`: what the request needs that the index holds. */
export function indexSelect(projection: Projection, index: IndexModel): string[] {
  const needed = projection.get(index.entity.name) ?? new Set([...index.entity.keyFields, ...index.entity.authFields]);
  return [
    ...[...index.projection].filter((f) => needed.has(f) || index.entity.keyFields.includes(f) || index.entity.authFields.has(f)),
    ENTITY_TYPE_PROPERTY,
  ].sort();
}

/** True when the index entities hold every property the request reads of the entity (one wave, no second read). */
export function indexCovers(projection: Projection, index: IndexModel): boolean {
  const needed = projection.get(index.entity.name);
  if (!needed) return true;
  for (const f of needed) if (!index.projection.has(f)) return false;
  return true;
}

/**
 * The names of the fields a connection field's selection asks of its nodes (`edges { node { … } }`, fragments
 * included), whatever their type: what a page must answer, as opposed to the projection, which adds every type's
 * keys.
 */
export function selectedNodeFields(info: GraphQLResolveInfo): Set<string> {
  const out = new Set<string>();
  const walk = (set: SelectionSetNode | undefined, depth: 'connection' | 'edge' | 'node', seen: Set<string>): void => {
    for (const selection of set?.selections ?? []) {
      if (!isIncluded(selection, info.variableValues)) continue;
      if (selection.kind === Kind.FIELD) {
        const name = selection.name.value;
        if (depth === 'node') out.add(name);
        else if (depth === 'connection' && name === 'edges') walk(selection.selectionSet, 'edge', seen);
        else if (depth === 'edge' && name === 'node') walk(selection.selectionSet, 'node', seen);
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        walk(selection.selectionSet, depth, seen);
      } else if (!seen.has(selection.name.value)) {
        seen.add(selection.name.value);
        walk(info.fragments[selection.name.value]?.selectionSet, depth, seen);
      }
    }
  };
  for (const node of info.fieldNodes) walk(node.selectionSet, 'connection', new Set());
  return out;
}
