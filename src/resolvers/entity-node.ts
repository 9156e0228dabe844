/**
 * The value resolvers pass down for an entity: the stored entity as read, and whether it was read from an index
 * entity. Fields an index entity does not hold are read from the entity itself — a second wave, batched by the
 * point loader ("Index Entities Pattern": index entities hold keys and a projection).
 */
import { ErrorCode, TablegraphError } from '../errors';
import { primaryAddress, seriesValue } from '../model/entity-codec';
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
 * @throws TablegraphError NOT_FOUND when an index entity points at an entity that does not exist
 */
export async function fieldValue(node: EntityNode, name: string, ctx: RequestContext, info: GraphQLResolveInfo): Promise<unknown> {
  const properties = !node.fromIndex || node.fromIndex.projection.has(name) ? node.stored.properties : (await loadPrimary(node, ctx, info)).properties;
  const field = node.entity.fields.get(name);
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
