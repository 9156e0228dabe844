/**
 * What a document reads, field by field, on a compiled model: for every selected field (introspection's excepted),
 * the access path that serves it (for a federation subgraph's `_entities`, every key's; for Relay's `node` and `nodes`,
 * every entity type's own), the entity type (or
 * interface) it belongs to and its stored field, where each exists. The HTTP cache policy (http-cache.ts) and what
 * the cost may show (cost-visibility.ts) are read from it.
 */
import { TypeInfo, visit, visitWithTypeInfo, type DocumentNode, type GraphQLSchema } from 'graphql';
import type { AccessPath, EntityModel, Model, StoredField } from '../model/types';

/** One field a document selects. */
export interface ReadField {
  /** `Type.field`. */
  coordinate: string;
  /** The access path that reads it from storage, if it is one. */
  path?: AccessPath;
  /** The entity type or interface whose field it is, if any. */
  entity?: EntityModel;
  /** Its stored field on that entity, if it is one. */
  field?: StoredField;
}

/**
 * Calls `each` for every field `document` selects (fragments' included, as written), in document order; `each`
 * returning true stops the walk.
 */
export function forEachReadField(schema: GraphQLSchema, model: Model, document: DocumentNode, each: (f: ReadField) => boolean | void): void {
  const typeInfo = new TypeInfo(schema);
  let done = false;
  visit(
    document,
    visitWithTypeInfo(typeInfo, {
      Field(node) {
        const parent = typeInfo.getParentType();
        if (done || !parent || node.name.value.startsWith('__')) return;
        const coordinate = `${parent.name}.${node.name.value}`;
        if (model.federation && node.name.value === '_entities' && parent === schema.getQueryType()) {
          // A federation subgraph's `_entities` reads by any key of any type, whatever it selects (`__typename` alone
          // included): each key's point query counts as read.
          for (const key of [...model.federation.keys.values()].flat()) {
            if (!done && key.path) done = each({ coordinate, path: key.path, entity: key.path.target }) === true;
          }
          return;
        }
        if (model.nodes && (node.name.value === 'node' || node.name.value === 'nodes') && parent === schema.getQueryType()) {
          // Relay's `node` and `nodes` read any entity type by its own keys: each type's point query counts as read.
          for (const path of model.nodes.paths.values()) if (!done) done = each({ coordinate, path, entity: path.target }) === true;
          return;
        }
        const entity = model.entities.get(parent.name) ?? model.interfaces.get(parent.name);
        done = each({ coordinate, path: model.accessPaths.get(coordinate), entity, field: entity?.fields.get(node.name.value) }) === true;
      },
    }),
  );
}
