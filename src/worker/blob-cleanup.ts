/**
 * Carries out a blob cleanup message (src/queue/messages.ts, the guide's "Large entities pattern"):
 * reads the entity as it is now, lists the blobs of each of its type's `@blob` fields under the entity's prefix,
 * and deletes those the entity does not name that were last written more than half the cleanup delay ago (the
 * delay the message was hidden for). Every
 * step is idempotent — deleting a deleted blob is fine, and a name once left is never named again — so a
 * redelivered message, or one whose worker died midway, ends where one delivery would.
 */
import { ErrorCode, TablegraphError } from '../errors';
import { blobFields, blobPrefix } from '../model/blob-fields';
import type { BlobSpec, Model } from '../model/types';
import type { BlobStore, ListedBlob } from '../storage/blob-store';
import type { TableStore } from '../storage/table-store';
import type { StorageObserver } from '../storage/storage-types';
import { blobTimes } from '../write/blob-cleanup-send';
import { type BlobCleanupMessage } from '../queue/messages';

export interface BlobCleanupOptions {
  model: Model;
  store: TableStore;
  blobs?: BlobStore;
  observer?: StorageObserver;
  /** The time now (ms since the epoch); tests leave it. */
  now?: () => number;
}

/**
 * A blob the entity names is checked too once it can no longer change (older than half the delay: its upload URL
 * has expired): one uploaded through an upload URL — which cannot limit size or type — over the field's `maxBytes`
 * or of a content type it does not allow is deleted (`rejected`), so it is not served; the field's read URL then
 * answers 404, as before an upload.
 * @returns blobs deleted (rejected ones included), kept (named by the entity, or too recent to judge) and rejected
 * @throws TablegraphError BAD_USER_INPUT when the schema has no such type (poison); CONFIG_INVALID with no blob
 *   store (retried, then poison); storage errors (retried)
 */
export async function cleanUpBlobs(message: BlobCleanupMessage, opts: BlobCleanupOptions): Promise<{ deleted: number; kept: number; rejected: number }> {
  const entity = opts.model.entities.get(message.entity);
  if (!entity)
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `blob cleanup message ${message.id} names ${message.entity}, which the schema does not have`);
  if (!opts.blobs) throw new TablegraphError(ErrorCode.CONFIG_INVALID, `blob cleanup message ${message.id}: this worker has no blob store`);
  const fields = blobFields(entity);
  const stored = await opts.store.getEntity(message.primary, { select: fields.map((f) => f.name), observer: opts.observer });
  // The delay the writer used (its configuration, not this worker's): the message was hidden for it.
  const before = (opts.now ?? Date.now)() - blobTimes((message.visibleAt - message.enqueuedAt) / 1000).cleanupAgeMs;
  let deleted = 0;
  let kept = 0;
  let rejected = 0;
  for (const { name, blob } of fields) {
    const named = stored?.properties[name];
    // A tenant-scoped entity's blobs written before names carried the tenant are under the bare prefix.
    const prefixes = [blobPrefix(entity, message.primary, name), ...(entity.tenantScoped ? [blobPrefix({}, message.primary, name)] : [])];
    const listed = (await Promise.all(prefixes.map((p) => opts.blobs!.list(blob.container, p)))).flat();
    for (const b of listed) {
      const final = b.lastModified.getTime() <= before;
      if (b.name === named && final && breaks(blob, b)) {
        if (await opts.blobs.delete(blob.container, b.name)) {
          deleted++;
          rejected++;
        }
      } else if (b.name === named || !final) kept++;
      else if (await opts.blobs.delete(blob.container, b.name)) deleted++;
    }
  }
  return { deleted, kept, rejected };
}

/** Whether a stored blob breaks its field's declaration: over `maxBytes`, or of a content type it does not allow. */
function breaks(blob: BlobSpec, b: ListedBlob): boolean {
  const type = b.contentType?.split(';')[0].trim().toLowerCase() ?? '';
  return b.bytes > blob.maxBytes || (blob.contentTypes.length > 0 && !blob.contentTypes.includes(type));
}
