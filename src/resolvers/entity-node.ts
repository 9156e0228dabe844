/**
 * The value resolvers pass down for an entity: the stored entity as read, and whether it was read from an index
 * entity. Fields an index entity does not hold are read from the entity itself — a second wave, batched by the
 * point loader ("Index Entities Pattern": index entities hold keys and a projection).
 */
import { ErrorCode, TablegraphError } from '../errors';
import { jsonOf, primaryAddress, seriesValue } from '../model/entity-codec';
import type { EntityModel, IndexModel } from '../model/types';
import { entitySelect } from '../read/projection';
import type { StoredEntity } from '../storage/storage-types';
import type { RequestContext } from './context';
import type { GraphQLResolveInfo } from 'graphql';

export interface EntityNode {
  entity: EntityModel;
  stored: StoredEntity;
  /** Set when `stored` is an index entity of this index. */
  fromIndex?: IndexModel;
  /**
   * How to read the entity itself when `stored` cannot address it: a many-to-many node served from a join entity
   * that names its target through a unique index (its keys are not on the join). Default: by `stored`'s keys.
   */
  primary?: () => Promise<StoredEntity | null>;
}

/**
 * The value of stored field `name` of `node`, read from the entity itself when the index entity lacks it.
 * @returns the value, or — only when the entity must be read first — a promise of it (a resolver that returns it
 *   as it is then costs no promise for the fields a node holds: the common case)
 * @throws TablegraphError NOT_FOUND (from the promise) when an index entity points at an entity that does not exist
 */
export function fieldValue(node: EntityNode, name: string, ctx: RequestContext, info: GraphQLResolveInfo): unknown {
  if (!node.fromIndex || node.fromIndex.projection.has(name)) return valueOf(node.entity, name, node.stored.properties);
  return loadPrimary(node, ctx, info).then((primary) => valueOf(node.entity, name, primary.properties));
}

function valueOf(entity: EntityModel, name: string, properties: StoredEntity['properties']): unknown {
  const field = entity.fields.get(name);
  if (field?.list || field?.value) return jsonOf(properties, name);
  return field?.series ? seriesValue(field, properties) : (properties[name] ?? null);
}

/** The entity's ETag (an index entity's own ETag is not the entity's: the entity is read for it). */
export async function etagOf(node: EntityNode, ctx: RequestContext, info: GraphQLResolveInfo): Promise<string> {
  return node.fromIndex ? (await loadPrimary(node, ctx, info)).etag : node.stored.etag;
}

async function loadPrimary(node: EntityNode, ctx: RequestContext, info: GraphQLResolveInfo): Promise<StoredEntity> {
  if (node.primary) {
    const stored = await node.primary();
    if (!stored)
      throw new TablegraphError(ErrorCode.NOT_FOUND, `the ${node.entity.name} a join entity names through index ${node.fromIndex?.name} does not exist`, {
        index: node.fromIndex?.name,
      });
    return stored;
  }
  const address = primaryAddress(node.entity, node.stored.properties);
  const stored = await ctx.loaders.point.load({ ...address, select: entitySelect(ctx.projection(info), node.entity) });
  if (!stored) {
    throw new TablegraphError(
      ErrorCode.NOT_FOUND,
      `${node.entity.name} ${address.partitionKey}/${address.rowKey} is listed by index ${node.fromIndex?.name} but does not exist`,
      {
        index: node.fromIndex?.name,
      },
    );
  }
  return stored;
}
