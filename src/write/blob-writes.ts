/**
 * The blob half of a write of a type with `@blob` fields (the guide's "Large entities pattern"): what a `BlobInput`
 * stores, checked before anything leaves the process (planBlobs, pure); then, in this order, the cleanup message
 * (blob-cleanup-send.ts), the uploads and copies, and the upload URLs (applyBlobs). Only then is the entity
 * written, naming the new blobs, within the commit window the committer enforces (PendingWrite.sendBy). A crash at
 * any point leaves at most blobs that no entity names, and a message on its way to delete them.
 */
import { ErrorCode, TablegraphError } from '../errors';
import { blobFields, newBlobName } from '../model/blob-fields';
import type { BlobSpec, WriteModel } from '../model/types';
import type { BlobStore } from '../storage/blob-store';
import type { EntityAddress } from '../storage/storage-types';
import { blobCleanupMessage, encodeMessage } from '../queue/messages';
import { blobTimes } from './blob-cleanup-send';
import type { WorkQueueSender } from '../queue/sender';
import type { Values } from './plan-types';

/** What a write needs for its blobs: the store, and the cleanup delay (TABLEGRAPH_BLOB_CLEANUP_DELAY_SECONDS). */
export interface BlobWriting {
  store: BlobStore;
  cleanupDelaySeconds: number;
}

/** A blob a move's create carries from the old address (src/worker/carry-out-move.ts): copied to a name of the new one. */
export interface BlobCopy {
  copyOf: { container: string; name: string };
}

/** What a write does to Blob storage before its entity is written. */
export interface BlobPlan {
  /** The input with each `@blob` field's BlobInput replaced by the new blob's name (or null). */
  input: Values;
  uploads: Array<{ field: string; blob: BlobSpec; name: string; bytes: Buffer; contentType: string }>;
  copies: Array<{ field: string; blob: BlobSpec; name: string; from: BlobCopy['copyOf'] }>;
  /** Blobs the client uploads itself, through an upload URL. */
  pending: Array<{ field: string; blob: BlobSpec; name: string }>;
  /**
   * Whether the write makes a blob (an upload, a copy, an upload URL), which it may leave unnamed: its cleanup
   * message goes before. A write that only replaces, clears or deletes a stored blob sends its message once its
   * entity is read, and only when that names a blob (dropsBlob).
   */
  cleanup: boolean;
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * @param input the mutation's input: a `@blob` field holds a BlobInput `{ contentType, base64? }` (or a BlobCopy
 *   from a move), null to clear it, or is absent
 * @returns undefined when the write touches no blob
 * @throws TablegraphError BAD_USER_INPUT (field, reason: ContentTypeInvalid, ContentTypeNotAllowed, NotBase64 or
 *   Empty);
 *   LIMIT_EXCEEDED (field, bytes, limit) for bytes over `maxBytes`
 */
export function planBlobs(write: WriteModel, input: Values, address: EntityAddress): BlobPlan | undefined {
  const fields = blobFields(write.entity);
  if (fields.length === 0) return undefined;
  const plan: BlobPlan = { input: { ...input }, uploads: [], copies: [], pending: [], cleanup: false };
  for (const { name: field, blob } of fields) {
    const given = input[field];
    if (given === undefined || given === null) continue;
    plan.cleanup = true;
    const name = newBlobName(write.entity, address, field);
    plan.input[field] = name;
    if (typeof given === 'object' && 'copyOf' in given) {
      plan.copies.push({ field, blob, name, from: (given as BlobCopy).copyOf });
      continue;
    }
    const { contentType, base64 } = given as { contentType: string; base64?: string | null };
    const type = contentType.trim().toLowerCase();
    if (!/^[\w.+-]+\/[\w.+-]+$/.test(type)) {
      throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${field}: "${contentType}" is not a content type (type/subtype)`, {
        field,
        reason: 'ContentTypeInvalid',
      });
    }
    if (blob.contentTypes.length > 0 && !blob.contentTypes.includes(type)) {
      throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${field}: content type "${contentType}" is not one of ${blob.contentTypes.join(', ')}`, {
        field,
        reason: 'ContentTypeNotAllowed',
        allowed: blob.contentTypes,
      });
    }
    if (base64 === undefined || base64 === null) {
      plan.pending.push({ field, blob, name });
      continue;
    }
    // Checked before decoding: Node's decoder skips what is not base64 rather than refusing it.
    const text = base64.replace(/\s+/g, '');
    const bytes = Math.floor((text.length * 3) / 4) - (text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0);
    if (bytes > blob.maxBytes) {
      throw new TablegraphError(ErrorCode.LIMIT_EXCEEDED, `${field}: ${bytes} bytes; at most ${blob.maxBytes}`, { field, bytes, limit: blob.maxBytes });
    }
    if (!BASE64.test(text)) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${field}: base64 is not base64 text`, { field, reason: 'NotBase64' });
    if (bytes === 0)
      throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${field}: base64 holds no bytes (give null to clear the field)`, { field, reason: 'Empty' });
    plan.uploads.push({ field, blob, name, bytes: Buffer.from(text, 'base64'), contentType: type });
  }
  return plan;
}

/**
 * Sends the cleanup message (hidden for the cleanup delay), then uploads and copies, and signs the upload URLs.
 * A copy whose source is gone leaves the field null.
 * @returns the input to write, the time by which its EGT must be applied (ms since the epoch; undefined when the
 *   write leaves no blob behind) and the upload URLs by field
 * @throws TablegraphError CONFIG_INVALID with no blob store; STORAGE_UNAVAILABLE and others from the queue and Blob
 *   storage
 */
export async function applyBlobs(
  plan: BlobPlan,
  write: WriteModel,
  address: EntityAddress,
  queue: WorkQueueSender,
  writing: BlobWriting | undefined,
): Promise<{ input: Values; sendBy?: number; uploadUrls: Record<string, string> }> {
  const writes = plan.uploads.length + plan.copies.length + plan.pending.length > 0;
  if (!writing && writes) throw new TablegraphError(ErrorCode.CONFIG_INVALID, `${write.coordinate} writes a @blob field, and this process has no blob store`);
  // Without a blob store (a process that never writes blobs, e.g. a test's write path) nothing is cleaned up.
  if (!plan.cleanup || !writing) return { input: plan.input, uploadUrls: {} };
  const { store, cleanupDelaySeconds } = writing;
  const times = blobTimes(cleanupDelaySeconds);
  const sentAt = Date.now();
  await queue.send(encodeMessage(blobCleanupMessage(write.entity.name, address, cleanupDelaySeconds, sentAt)), {
    visibilityDelaySeconds: cleanupDelaySeconds,
  });
  const input = { ...plan.input };
  const containers = [...new Set([...plan.uploads, ...plan.copies, ...plan.pending].map((b) => b.blob.container))];
  await Promise.all(containers.map((c) => store.ensureContainer(c)));
  await Promise.all([
    ...plan.uploads.map((u) => store.upload(u.blob.container, u.name, u.bytes, u.contentType)),
    ...plan.copies.map(async (c) => {
      if (!(await store.copy(c.from, { container: c.blob.container, name: c.name }))) input[c.field] = null;
    }),
  ]);
  const expiresOn = new Date(sentAt + times.uploadUrlMs);
  const uploadUrls = Object.fromEntries(
    await Promise.all(plan.pending.map(async (p) => [p.field, await store.uploadUrl(p.blob.container, p.name, expiresOn)])),
  );
  return { input, sendBy: sentAt + times.commitWindowMs, uploadUrls };
}
