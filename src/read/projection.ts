/**
 * Projection from the selection set (the guide: "Use projection" in "Optimizing queries for the Table service"):
 * which properties of each entity type a request needs, so every query sends a `$select` of just those.
 * Computed once per request over the whole operation, so that all reads of one entity type in a request ask
 * for the same properties and the point loader's cache (primed by range queries) is always complete.
 */
import {
  getNamedType,
  isInterfaceType,
  isObjectType,
  isUnionType,
  Kind,
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

function projectionFor(projection: Projection, entity: EntityModel): Set<string> {
  let set = projection.get(entity.name);
  if (!set) {
    // Keys, and what `@auth` decides on: every entity read can be checked as it arrives.
    set = new Set([...entity.keyFields, ...entity.authFields]);
    projection.set(entity.name, set);
  }
  return set;
}

/** The `$select` list for reading `entity` itself in this request. */
export function entitySelect(projection: Projection, entity: EntityModel): string[] {
  // An interface (the guide's "Inheritance relationships"): whatever the request reads of any implementation.
  if (entity.implementations) return [...new Set(entity.implementations.flatMap((e) => entitySelect(projection, e)))].sort();
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
