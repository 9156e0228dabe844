/**
 * The resolvers of Relay's Global Object Identification (`extend schema @nodeInterface`, src/compiler/node-interface.ts):
 * each entity's global id is its type and key values sealed like a cursor (src/read/cursor.ts: AES-256-GCM, nothing
 * of it readable), bound to the request's tenant; `node` and `nodes` open each id and answer it with the point query
 * of its type's own keys through the request's point loader — `nodes` in one wave — under `@auth` as a nullable
 * `@point` field is.
 */
import { getNamedType, isInterfaceType, isLeafType, isObjectType, type GraphQLObjectType, type GraphQLResolveInfo, type GraphQLSchema } from 'graphql';
import { ErrorCode, isTablegraphError } from '../errors';
import { TENANT_FIELD } from '../model/tenancy';
import type { EntityModel, Model, NodeModel } from '../model/types';
import type { RequestContext } from './context';
import { fieldValue, type EntityNode } from './entity-node';
import { pointResolver } from './path-resolvers';

/** What an id is sealed for: the request's tenant ('' without tenancy), so another tenant's id opens to nothing. */
function scopeOf(ctx: RequestContext): string {
  return `node\u0000${ctx.principal?.tenant ?? ''}`;
}

/** An entity type as the resolvers need it: its GraphQL type, key fields (not the tenant) and point query. */
interface NodeType {
  type: GraphQLObjectType;
  keys: string[];
  resolve: ReturnType<typeof pointResolver>;
}

/** Sets the resolvers of every entity type's id field, of `node` and `nodes`, and `Node`'s resolveType. Mutates `schema`. */
export function attachNodes(schema: GraphQLSchema, model: Model): void {
  const nodes = model.nodes;
  const query = schema.getQueryType();
  if (!nodes || !query) return;
  const byType = new Map<string, NodeType>();
  for (const entity of model.entities.values()) {
    const type = schema.getType(entity.name);
    const path = nodes.paths.get(entity.name);
    if (!isObjectType(type) || !path) continue;
    byType.set(entity.name, { type, keys: entity.keyFields.filter((f) => f !== TENANT_FIELD), resolve: pointResolver(path) });
    const idField = type.getFields()[nodes.idField];
    if (idField) idField.resolve = (node: EntityNode, _args, ctx: RequestContext, info) => globalId(entity, byType.get(entity.name)!, { node, ctx, info });
  }
  const node = schema.getType('Node');
  if (isInterfaceType(node)) node.resolveType = (n: EntityNode) => n.entity.name;
  const fields = query.getFields();
  const one = (id: unknown, ctx: RequestContext, info: GraphQLResolveInfo) => resolveId(nodes, byType, { id, ctx, info });
  if (fields.node) fields.node.resolve = (_s, args: Record<string, unknown>, ctx: RequestContext, info) => one(args[nodes.idField], ctx, info);
  if (fields.nodes)
    fields.nodes.resolve = (_s, args: Record<string, unknown>, ctx: RequestContext, info) =>
      (args[`${nodes.idField}s`] as unknown[]).map((id) => one(id, ctx, info));
}

/** An entity's global id: `[type, ...key values]` (each as its scalar serializes it), sealed for the request's tenant. */
async function globalId(entity: EntityModel, nodeType: NodeType, at: { node: EntityNode; ctx: RequestContext; info: GraphQLResolveInfo }): Promise<string> {
  const values: unknown[] = [entity.name];
  for (const f of nodeType.keys) {
    const leaf = getNamedType(nodeType.type.getFields()[f]!.type);
    const value = await fieldValue(at.node, f, at.ctx, at.info);
    values.push(isLeafType(leaf) ? leaf.serialize(value) : value);
  }
  return at.ctx.cursors.seal(scopeOf(at.ctx), values);
}

/**
 * The entity a global id names, or null: for an id that is not one this server sealed for the request's tenant, or
 * whose values no longer fit its type's keys, before any storage call; for one out of the caller's `@auth`, after its
 * point query (or before it, when the keys or the caller's roles alone say so) — a missing entity, whatever the reason.
 * @throws what the point query throws otherwise (STORAGE_UNAVAILABLE, ACCESS_PATH_BUILDING, …)
 */
async function resolveId(
  nodes: NodeModel,
  byType: Map<string, NodeType>,
  at: { id: unknown; ctx: RequestContext; info: GraphQLResolveInfo },
): Promise<EntityNode | null> {
  let opened: unknown;
  try {
    opened = at.ctx.cursors.open(scopeOf(at.ctx), String(at.id), nodes.idField);
  } catch {
    return null;
  }
  if (!Array.isArray(opened) || typeof opened[0] !== 'string') return null;
  const nodeType = byType.get(opened[0]);
  if (!nodeType || opened.length !== nodeType.keys.length + 1) return null;
  const args: Record<string, unknown> = {};
  try {
    nodeType.keys.forEach((f, i) => {
      const leaf = getNamedType(nodeType.type.getFields()[f]!.type);
      args[f] = isLeafType(leaf) ? leaf.parseValue(opened[i + 1]) : opened[i + 1];
    });
  } catch {
    return null; // sealed by this server, for a type whose keys have changed since
  }
  try {
    return (await nodeType.resolve(undefined, args, at.ctx, { ...at.info, returnType: nodeType.type })) as EntityNode | null;
  } catch (e) {
    if (isTablegraphError(e) && e.code === ErrorCode.FORBIDDEN) return null;
    throw e;
  }
}
