/**
 * The generic mutation resolver: every `@write` field runs the write executor and returns its payload, whose one
 * field is the entity as written (read from nothing: the write's own result).
 */
import type { GraphQLFieldResolver } from 'graphql';
import { ErrorCode, TablegraphError } from '../errors';
import { decide, forbidden } from '../model/authorization';
import { ENTITY_TYPE_PROPERTY, type WriteModel } from '../model/types';
import { IF_MATCH_FIELD } from '../model/write-inputs';
import { requireTenant, TENANT_FIELD } from '../model/tenancy';
import type { RequestContext } from './context';
import type { EntityNode } from './entity-node';
import type { WriteResult } from '../write/commit-types';

/**
 * @throws TablegraphError FORBIDDEN when `@auth` does not let the caller make this write (from the input before
 *   anything is read, or on the entity as read and as it would be written); from WriteExecutor.execute (CONFLICT,
 *   NOT_FOUND, BAD_USER_INPUT, LIMIT_EXCEEDED, …); UNAUTHENTICATED for a tenant-scoped entity without a tenant;
 *   STORAGE_UNAVAILABLE when the server runs without a write path
 */
export function writeResolver(write: WriteModel): GraphQLFieldResolver<unknown, RequestContext, { input: Record<string, unknown> }> {
  return async (_root, args, ctx) => {
    if (!ctx.writer) throw new TablegraphError(ErrorCode.STORAGE_UNAVAILABLE, 'This server has no write path configured');
    const { input, check } = authorizeWrite(write, args.input, ctx);
    const result = await ctx.writer.execute(write, input, ctx.cost, check);
    const node = writtenNode(write, result);
    // `@blobUpload` payload fields: the upload URL of a @blob the client uploads itself, else null.
    const uploads = [...(write.uploadFields ?? [])].map(([payloadField, field]) => [payloadField, result.uploadUrls?.[field] ?? null]);
    return { [write.payloadField]: node, ...Object.fromEntries(uploads) };
  };
}

/** The entity a write left, as a field returns it (read from nothing: the write's own result). */
export function writtenNode(write: WriteModel, result: WriteResult): EntityNode {
  return {
    entity: write.entity,
    stored: {
      partitionKey: result.address.partitionKey,
      rowKey: result.address.rowKey,
      etag: result.etag,
      properties: { ...result.values, [ENTITY_TYPE_PROPERTY]: write.entity.entityType },
    },
  };
}

/**
 * A write's input as it is written — in the caller's tenant — and its `@auth`: decided from the input alone where it
 * can be, now; the rest (`check`) on the entity as read and as it would be written.
 * @throws TablegraphError FORBIDDEN when the input alone denies it; UNAUTHENTICATED for a tenant-scoped entity without
 *   a tenant
 */
export function authorizeWrite(
  write: WriteModel,
  given: Record<string, unknown>,
  ctx: RequestContext,
): { input: Record<string, unknown>; check?: (previous: Record<string, unknown> | null, next: Record<string, unknown> | null) => void } {
  const input = { ...given };
  // A tenant-scoped entity is written in the caller's tenant: the token's claim, over anything the input holds.
  if (write.entity.tenantScoped) input[TENANT_FIELD] = requireTenant(ctx.principal?.tenant);
  const principal = ctx.principal;
  const fields = Object.keys(input).filter((k) => k !== IF_MATCH_FIELD && input[k] !== undefined && !write.entity.keyFields.includes(k));
  const keys = write.entity.keyFields.filter((k) => k !== TENANT_FIELD);
  const what = `${write.coordinate.split('.')[1]} ${keys.map((k) => `${k}=${JSON.stringify(input[k])}`).join(', ')}`;
  // From the input alone, before anything is read: the keys and the fields given may already decide.
  if (decide(write.auth, principal, (f) => input[f], fields) === 'deny') throw forbidden(what, principal!);
  if (!write.auth || !principal) return { input };
  // Then on the entity as read and as it would be written: neither may be out of the caller's scope.
  const check = (previous: Record<string, unknown> | null, next: Record<string, unknown> | null) => {
    for (const values of [previous, next]) {
      if (values && decide(write.auth, principal, (f) => values[f] ?? null, fields) !== 'allow') throw forbidden(what, principal);
    }
  };
  return { input, check };
}
