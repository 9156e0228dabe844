/**
 * Carries out a blob cleanup message (src/write/blob-cleanup-message.ts, the guide's "Large entities pattern"):
 * reads the entity as it is now, lists the blobs of each of its type's `@blob` fields under the entity's prefix,
 * and deletes those the entity does not name that were last written more than half the cleanup delay ago (the
 * delay the message was hidden for). Every
 * step is idempotent — deleting a deleted blob is fine, and a name once left is never named again — so a
 * redelivered message, or one whose worker died midway, ends where one delivery would.
 */
import { ErrorCode, TablegraphError } from '../errors';
import { blobFields, blobPrefix } from '../model/blob-fields';
import type { Model } from '../model/types';
import type { BlobStore } from '../storage/blob-store';
import type { TableStore } from '../storage/table-store';
import type { StorageObserver } from '../storage/types';
import { blobTimes, type BlobCleanupMessage } from '../write/blob-cleanup-message';

export interface BlobCleanupOptions {
  model: Model;
  store: TableStore;
  blobs?: BlobStore;
  observer?: StorageObserver;
  /** The time now (ms since the epoch); tests leave it. */
  now?: () => number;
}

/**
 * @returns blobs deleted and kept (named by the entity, or too recent to judge)
 * @throws TablegraphError BAD_USER_INPUT when the schema has no such type (poison); CONFIG_INVALID with no blob
 *   store (retried, then poison); storage errors (retried)
 */
export async function cleanUpBlobs(message: BlobCleanupMessage, opts: BlobCleanupOptions): Promise<{ deleted: number; kept: number }> {
  const entity = opts.model.entities.get(message.entity);
  if (!entity) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `blob cleanup message ${message.id} names ${message.entity}, which the schema does not have`);
  if (!opts.blobs) throw new TablegraphError(ErrorCode.CONFIG_INVALID, `blob cleanup message ${message.id}: this worker has no blob store`);
  const fields = blobFields(entity);
  const stored = await opts.store.getEntity(message.primary, { select: fields.map((f) => f.name), observer: opts.observer });
  // The delay the writer used (its configuration, not this worker's): the message was hidden for it.
  const before = (opts.now ?? Date.now)() - blobTimes((message.visibleAt - message.enqueuedAt) / 1000).cleanupAgeMs;
  let deleted = 0;
  let kept = 0;
  for (const { name, blob } of fields) {
    const named = stored?.properties[name];
    const listed = await opts.blobs.list(blob.container, blobPrefix(message.primary, name));
    for (const b of listed) {
      if (b.name === named || b.lastModified.getTime() > before) kept++;
      else if (await opts.blobs.delete(blob.container, b.name)) deleted++;
    }
  }
  return { deleted, kept };
}
