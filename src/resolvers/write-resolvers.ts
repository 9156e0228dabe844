/**
 * The generic mutation resolver: every `@write` field runs the write executor and returns its payload, whose one
 * field is the entity as written (read from nothing: the write's own result).
 */
import type { GraphQLFieldResolver } from 'graphql';
import { ErrorCode, TablegraphError } from '../errors';
import { ENTITY_TYPE_PROPERTY, type WriteModel } from '../model/types';
import type { RequestContext } from './context';
import type { EntityNode } from './entity-node';

/**
 * @throws TablegraphError from WriteExecutor.execute (CONFLICT, NOT_FOUND, BAD_USER_INPUT, LIMIT_EXCEEDED, …);
 *   STORAGE_UNAVAILABLE when the server runs without a write path
 */
export function writeResolver(write: WriteModel): GraphQLFieldResolver<unknown, RequestContext, { input: Record<string, unknown> }> {
  return async (_root, args, ctx) => {
    if (!ctx.writer) throw new TablegraphError(ErrorCode.STORAGE_UNAVAILABLE, 'This server has no write path configured');
    const result = await ctx.writer.execute(write, { ...args.input }, ctx.cost);
    const node: EntityNode = {
      entity: write.entity,
      stored: {
        partitionKey: result.address.partitionKey,
        rowKey: result.address.rowKey,
        etag: result.etag,
        properties: { ...result.values, [ENTITY_TYPE_PROPERTY]: write.entity.entityType },
      },
    };
    return { [write.payloadField]: node };
  };
}
