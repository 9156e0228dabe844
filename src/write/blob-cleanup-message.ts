/**
 * The blob cleanup message of `@blob` fields (the guide's "Large entities pattern", kept consistent with its
 * "Eventually consistent transactions pattern"): queued on the fan-out queue before a write uploads, replaces, clears
 * or deletes a blob, hidden for the cleanup delay D (TABLEGRAPH_BLOB_CLEANUP_DELAY_SECONDS). When it shows, the
 * worker (src/worker/blob-cleanup.ts) deletes every blob of the entity's `@blob` fields that the entity no longer
 * names. The times below make that safe:
 * - a write's EGT is applied within D/3 of its message (the committer refuses to send it later), and an upload URL
 *   expires D/4 after it: every blob the write may leave is written before D/2;
 * - the cleanup deletes only blobs last written more than D/2 ago, so a blob another write uploaded and has yet to
 *   name (its EGT not applied) is never taken: that write's own message comes later for it.
 */
import { randomUUID } from 'node:crypto';
import { blobFields } from '../model/blob-fields';
import type { EntityModel } from '../model/types';
import type { EntityAddress } from '../storage/types';

export interface BlobCleanupMessage {
  kind: 'blobCleanup';
  v: 1;
  /** Unique per message (UUID), for logs and the poison queue. */
  id: string;
  /** The @entity type name. */
  entity: string;
  /** The entity whose blobs are cleaned up. */
  primary: EntityAddress;
  /** When it was sent (ms since the epoch). */
  enqueuedAt: number;
  /** When it shows on the queue (ms since the epoch): the start of its fan-out lag. */
  visibleAt: number;
}

/** The times of a cleanup delay of `delaySeconds` (all ms). */
export function blobTimes(delaySeconds: number): { delayMs: number; uploadUrlMs: number; commitWindowMs: number; cleanupAgeMs: number } {
  const delayMs = delaySeconds * 1000;
  return { delayMs, uploadUrlMs: delayMs / 4, commitWindowMs: delayMs / 3, cleanupAgeMs: delayMs / 2 };
}

/** A new message for the entity at `primary`, sent now. */
export function blobCleanupMessage(entity: string, primary: EntityAddress, delaySeconds: number, now = Date.now()): BlobCleanupMessage {
  return { kind: 'blobCleanup', v: 1, id: randomUUID(), entity, primary, enqueuedAt: now, visibleAt: now + delaySeconds * 1000 };
}

/** The message parsed from queue text, or undefined when the text is no blob cleanup message. */
export function decodeBlobCleanup(text: string): BlobCleanupMessage | undefined {
  let m: BlobCleanupMessage;
  try {
    m = JSON.parse(text) as BlobCleanupMessage;
  } catch {
    return undefined;
  }
  const a = m?.primary;
  const valid =
    m?.kind === 'blobCleanup' &&
    m.v === 1 &&
    typeof m.id === 'string' &&
    typeof m.entity === 'string' &&
    typeof m.enqueuedAt === 'number' &&
    typeof m.visibleAt === 'number' &&
    typeof a === 'object' &&
    a !== null &&
    typeof a.table === 'string' &&
    typeof a.partitionKey === 'string' &&
    typeof a.rowKey === 'string';
  return valid ? m : undefined;
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
  entity: EntityModel,
  address: EntityAddress,
  previous: Record<string, unknown> | null,
  values: Record<string, unknown> | null,
  fanout: { send(text: string, opts: { visibilityDelaySeconds: number }): Promise<unknown> },
  cleanupDelaySeconds: number | undefined,
): Promise<number | undefined> {
  if (cleanupDelaySeconds === undefined || !dropsBlob(entity, previous, values)) return undefined;
  const sentAt = Date.now();
  await fanout.send(JSON.stringify(blobCleanupMessage(entity.name, address, cleanupDelaySeconds, sentAt)), { visibilityDelaySeconds: cleanupDelaySeconds });
  return sentAt + blobTimes(cleanupDelaySeconds).commitWindowMs;
}
