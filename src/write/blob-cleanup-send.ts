/**
 * When a write sends the blob cleanup message of `@blob` fields (src/queue/messages.ts; the guide's "Large entities
 * pattern", kept consistent with its "Eventually consistent transactions pattern"): on the work queue before a
 * write uploads, replaces, clears or deletes a blob, hidden for the cleanup delay D
 * (TABLEGRAPH_BLOB_CLEANUP_DELAY_SECONDS). When it shows, the worker (src/worker/blob-cleanup.ts) deletes every blob
 * of the entity's `@blob` fields that the entity no longer names. The times below make that safe:
 * - a write's EGT is applied within D/3 of its message (the committer refuses to send it later), and an upload URL
 *   expires D/4 after it: every blob the write may leave is written before D/2;
 * - the cleanup deletes only blobs last written more than D/2 ago, so a blob another write uploaded and has yet to
 *   name (its EGT not applied) is never taken: that write's own message comes later for it.
 */
import { blobFields } from '../model/blob-fields';
import { blobCleanupMessage, encodeMessage } from '../queue/messages';
import type { EntityModel } from '../model/types';
import type { EntityAddress } from '../storage/storage-types';

/** The times of a cleanup delay of `delaySeconds` (all ms). */
export function blobTimes(delaySeconds: number): { delayMs: number; uploadUrlMs: number; commitWindowMs: number; cleanupAgeMs: number } {
  const delayMs = delaySeconds * 1000;
  return { delayMs, uploadUrlMs: delayMs / 4, commitWindowMs: delayMs / 3, cleanupAgeMs: delayMs / 2 };
}

/** Whether a write leaves a blob its entity named unnamed: it replaces, clears or deletes one (values: null = deleted). */
export function dropsBlob(entity: EntityModel, previous: Record<string, unknown> | null, values: Record<string, unknown> | null): boolean {
  return blobFields(entity).some(({ name }) => typeof previous?.[name] === 'string' && values?.[name] !== previous[name]);
}

/**
 * The cleanup message of a write that drops a stored blob and made none (applyBlobs sent none): sent once its entity
 * was read, before its EGT, hidden for the cleanup delay.
 * @returns the time by which the write's EGT must be applied (ms since the epoch), or undefined when none was needed
 */
export async function sendDropCleanup(
  change: { entity: EntityModel; address: EntityAddress; previous: Record<string, unknown> | null; values: Record<string, unknown> | null },
  queue: { send(text: string, opts: { visibilityDelaySeconds: number }): Promise<unknown> },
  cleanupDelaySeconds: number | undefined,
): Promise<number | undefined> {
  const { entity, address, previous, values } = change;
  if (cleanupDelaySeconds === undefined || !dropsBlob(entity, previous, values)) return undefined;
  const sentAt = Date.now();
  await queue.send(encodeMessage(blobCleanupMessage(entity.name, address, cleanupDelaySeconds, sentAt)), { visibilityDelaySeconds: cleanupDelaySeconds });
  return sentAt + blobTimes(cleanupDelaySeconds).commitWindowMs;
}
