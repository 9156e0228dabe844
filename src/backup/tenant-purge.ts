/**
 * A deleted tenant's rows taken out of the backup (docs/tenancy.md "Deleting a tenant"): every complete capture pass's
 * change segments and every complete snapshot's segments are read, and each segment that holds a change or a row of
 * the tenant — a tenant-scoped entity type's, its PartitionKey in the tenant's range — is written again without them,
 * under a new name, with the snapshot's copies of the blobs those rows named deleted. The manifest is written next,
 * naming the new segments, and only then are the old segments deleted: a purge cut short leaves a backup that restores
 * (either segment matches its manifest), and run again it deletes what the manifest no longer names.
 *
 * It first waits for a capture pass that started after the tenant's last entity was deleted: passes run one at a
 * time, so every change entity of the tenant a pass could read is then in a segment this purge reads. It then takes
 * the capture passes' lease (capture-loop.ts), so that no pass writes meanwhile: the segments of a pass without a
 * manifest are then a pass cut short's, which no restore reads and the next pass captured again, and are deleted.
 * A snapshot without a manifest (under way, or cut short and to be resumed) is left as it is and named in the result:
 * the delete is run again once it is complete.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { randomUUID } from 'node:crypto';
import { ErrorCode, TablegraphError } from '../errors';
import { blobFields } from '../model/blob-fields';
import { corrupt } from '../model/row-text';
import { tenantOfPartitionKey } from '../model/tenancy';
import type { Model } from '../model/types';
import type { BlobStore } from '../storage/blob-store';
import { decodeSegment, encodeSegment, parseManifest, type SegmentRecord, type SnapshotManifest } from './backup-format';
import { listManifests, readJsonBlob, SNAPSHOTS, writeJsonBlob } from './backup-blobs';
import { backupBlobName } from './blob-copies';
import { LEADER } from './capture-loop';
import { asLeader } from './leader-lease';
import { CHANGES, LATEST_PASS, decodeChangeSegment, encodeChangeSegment, parsePassManifest, type LatestPass, type PassManifest } from './change-format';

/** Slack for the capture worker's clock against this one (ms). */
const CLOCK_SLACK_MS = 5_000;

export interface TenantPurgeOptions {
  /** The backup's store and container (TABLEGRAPH_BACKUP_CONNECTION_STRING or the blobs', TABLEGRAPH_BACKUP_CONTAINER). */
  blobs: BlobStore;
  container: string;
  model: Model;
  tenant: string;
  /** When the tenant's last entity was deleted (ms since the epoch, this process's clock). */
  deletedAt: number;
  /** How long to wait for a capture pass that started after `deletedAt` (ms); 0: none is waited for (capture is off). */
  captureWaitMs: number;
  /** Told of each pass and snapshot it wrote again. */
  onProgress?(p: { kind: 'pass' | 'snapshot'; id: string; removed: number }): void;
}

/**
 * What a purge took out: passes and snapshots written again, changes and rows removed, blob copies deleted; segments of
 * passes cut short deleted; and the snapshots it could not purge, not yet complete.
 */
export interface TenantPurgeResult {
  passes: number;
  snapshots: number;
  changes: number;
  rows: number;
  blobs: number;
  abandoned: number;
  incompleteSnapshots: string[];
}

/**
 * @returns what was taken out (all zero for a container without a backup)
 * @throws TablegraphError STORAGE_UNAVAILABLE (reason CaptureBehind) when no capture pass started after `deletedAt`
 *   within `captureWaitMs`: run the delete again once a worker with capture on runs; DATA_INTEGRITY (BackupCorrupt)
 *   for a segment that does not match its manifest; storage errors as the blob store maps them
 */
export async function purgeTenantFromBackup(opts: TenantPurgeOptions): Promise<TenantPurgeResult> {
  const result: TenantPurgeResult = { passes: 0, snapshots: 0, changes: 0, rows: 0, blobs: 0, abandoned: 0, incompleteSnapshots: [] };
  await awaitCapture(opts);
  const scoped = new Set([...opts.model.entities.values()].filter((e) => e.tenantScoped).map((e) => e.entityType));
  const mine: Mine = (entityType, partitionKey) => scoped.has(entityType) && tenantOfPartitionKey(partitionKey) === opts.tenant;
  // Without continuous backup in the container there is no pass, nor a lease to take (nor a container to make).
  const captured = (await opts.blobs.list(opts.container, `${CHANGES}/`)).length > 0;
  if (captured) {
    await asCaptureLeader(opts, async () => {
      result.abandoned = await deleteAbandonedPasses(opts);
      for (const pass of await listManifests(opts.blobs, opts.container, CHANGES, parsePassManifest)) await purgePass(opts, pass, mine, result);
    });
  }
  for (const snapshot of await listManifests(opts.blobs, opts.container, SNAPSHOTS, parseManifest)) await purgeSnapshot(opts, snapshot, mine, result);
  result.incompleteSnapshots = await incompleteSnapshots(opts);
  return result;
}

/** Runs `job` holding the capture passes' lease, waiting for it while a pass holds it (up to a minute, or the capture wait). */
async function asCaptureLeader(opts: TenantPurgeOptions, job: () => Promise<void>): Promise<void> {
  const waitMs = Math.max(60_000, opts.captureWaitMs);
  const deadline = Date.now() + waitMs;
  while (!(await asLeader(opts.blobs, opts.container, LEADER, job)).led) {
    if (Date.now() > deadline) {
      throw new TablegraphError(
        ErrorCode.STORAGE_UNAVAILABLE,
        `A capture pass held the backup's lease for ${Math.round(waitMs / 1000)} s, so tenant ${opts.tenant}'s changes could not be taken out of it: run the delete again.`,
        { reason: 'CaptureBehind' },
      );
    }
    await sleep(1000);
  }
}

/** The blobs of every capture pass without a manifest (run with the passes' lease held: none is under way). @returns how many */
async function deleteAbandonedPasses(opts: TenantPurgeOptions): Promise<number> {
  const listed = (await opts.blobs.list(opts.container, `${CHANGES}/`)).map((b) => b.name);
  const complete = new Set(listed.filter((n) => n.endsWith('/manifest.json')).map((n) => n.split('/')[1]));
  let deleted = 0;
  for (const name of listed) {
    const parts = name.split('/');
    if (parts.length === 3 && !complete.has(parts[1]) && (await opts.blobs.delete(opts.container, name))) deleted++;
  }
  return deleted;
}

/** The ids of the snapshots with progress and no manifest: under way, or cut short. */
async function incompleteSnapshots(opts: TenantPurgeOptions): Promise<string[]> {
  const listed = (await opts.blobs.list(opts.container, `${SNAPSHOTS}/`)).map((b) => b.name);
  const complete = new Set(listed.filter((n) => n.endsWith('/manifest.json')).map((n) => n.split('/')[1]));
  return listed.filter((n) => n.endsWith('/progress.json') && !complete.has(n.split('/')[1])).map((n) => n.split('/')[1]);
}

/** Whether a row or change of an entity type, at a PartitionKey, is the tenant's. */
type Mine = (entityType: string, partitionKey: string) => boolean;

/** One capture pass without the tenant's changes. */
async function purgePass(opts: TenantPurgeOptions, pass: PassManifest, mine: Mine, result: TenantPurgeResult): Promise<void> {
  const segments = await rewrite(opts, pass.segments, {
    decode: decodeChangeSegment,
    keep: (c) => !mine(c.of, c.partitionKey),
    encode: encodeChangeSegment,
    removed: () => undefined,
  });
  const removed = pass.changes - segments.reduce((n, s) => n + s.rows, 0);
  if (removed > 0) {
    await writeJsonBlob(opts.blobs, opts.container, `${CHANGES}/${pass.id}/manifest.json`, { ...pass, changes: pass.changes - removed, segments });
    result.passes++;
    result.changes += removed;
    opts.onProgress?.({ kind: 'pass', id: pass.id, removed });
  }
  await deleteUnnamed(opts, `${CHANGES}/${pass.id}/`, segments);
}

/** One snapshot without the tenant's rows, nor the copies of the blobs they named. */
async function purgeSnapshot(opts: TenantPurgeOptions, snapshot: SnapshotManifest, mine: Mine, result: TenantPurgeResult): Promise<void> {
  let blobs = 0;
  const segments: SegmentRecord[] = [];
  for (const record of snapshot.segments) {
    const [kept] = await rewrite(opts, [record], {
      decode: decodeSegment,
      keep: (r) => !mine(record.entityType, r.entity.partitionKey),
      encode: encodeSegment,
      removed: async (r) => (blobs += await deleteBlobCopies(opts, snapshot.id, record.entityType, r.entity.properties)),
    });
    segments.push(kept);
  }
  const removed = snapshot.rows - segments.reduce((n, s) => n + s.rows, 0);
  if (removed > 0) {
    const manifest = { ...snapshot, rows: snapshot.rows - removed, blobs: snapshot.blobs - blobs, segments };
    await writeJsonBlob(opts.blobs, opts.container, `${SNAPSHOTS}/${snapshot.id}/manifest.json`, manifest);
    Object.assign(result, { snapshots: result.snapshots + 1, rows: result.rows + removed, blobs: result.blobs + blobs });
    opts.onProgress?.({ kind: 'snapshot', id: snapshot.id, removed });
  }
  await deleteUnnamed(opts, `${SNAPSHOTS}/${snapshot.id}/`, segments);
}

/** Waits until a capture pass that started after `deletedAt` has finished; at once when the container has none. */
async function awaitCapture(opts: TenantPurgeOptions): Promise<void> {
  if (opts.captureWaitMs === 0) return;
  const after = opts.deletedAt + CLOCK_SLACK_MS;
  const deadline = Date.now() + opts.captureWaitMs;
  for (;;) {
    const latest = await readJsonBlob<LatestPass>(opts.blobs, opts.container, LATEST_PASS);
    if (!latest || Date.parse(latest.startedAt) > after) return;
    if (Date.now() > deadline) {
      throw new TablegraphError(
        ErrorCode.STORAGE_UNAVAILABLE,
        `No capture pass started in the ${Math.round(opts.captureWaitMs / 1000)} s after tenant ${opts.tenant}'s entities were deleted, so its last changes may not be in the backup yet: run the delete again once a worker with TABLEGRAPH_BACKUP_CAPTURE on is running.`,
        { reason: 'CaptureBehind', latestRestorableTime: latest.startedAt },
      );
    }
    await sleep(1000);
  }
}

/** How a segment of one kind is read, filtered and written again. */
interface SegmentCodec<T, R extends { name: string; rows: number; bytes: number; sha256: string }> {
  decode(bytes: Buffer, record: R): T[];
  keep(item: T): boolean;
  encode(items: T[]): { bytes: Buffer; sha256: string };
  /** Told of each item left out. */
  removed(item: T): void | Promise<unknown>;
}

/** Each segment that holds an item `keep` refuses, written again without it under a new name. @returns the records now */
async function rewrite<T, R extends { name: string; rows: number; bytes: number; sha256: string }>(
  opts: TenantPurgeOptions,
  records: R[],
  codec: SegmentCodec<T, R>,
): Promise<R[]> {
  const out: R[] = [];
  for (const record of records) {
    const blob = await opts.blobs.download(opts.container, record.name);
    if (!blob) throw corrupt(record.name, 'the segment its manifest names does not exist');
    const items = codec.decode(blob.bytes, record);
    const kept = items.filter((i) => codec.keep(i));
    if (kept.length === items.length) {
      out.push(record);
      continue;
    }
    for (const item of items) if (!codec.keep(item)) await codec.removed(item);
    const { bytes, sha256 } = codec.encode(kept);
    const name = `${record.name.replace(/(\.purged-[0-9a-f]{8})?\.ndjson\.gz$/, '')}.purged-${randomUUID().slice(0, 8)}.ndjson.gz`;
    await opts.blobs.upload(opts.container, name, bytes, 'application/gzip');
    out.push({ ...record, name, rows: kept.length, bytes: bytes.length, sha256 });
  }
  return out;
}

/** The snapshot's copies of the blobs a removed row's `@blob` fields named, deleted. @returns how many there were */
async function deleteBlobCopies(
  opts: TenantPurgeOptions,
  snapshot: string,
  entityType: string,
  properties: Record<string, { value: unknown } | null>,
): Promise<number> {
  const entity = [...opts.model.entities.values()].find((e) => e.entityType === entityType);
  let deleted = 0;
  for (const f of entity ? blobFields(entity) : []) {
    const name = properties[f.name]?.value;
    if (typeof name === 'string' && (await opts.blobs.delete(opts.container, backupBlobName(snapshot, entityType, f.name, name)))) deleted++;
  }
  return deleted;
}

/**
 * Segments directly under `folder` its complete manifest no longer names (an earlier purge's old ones, or those of a
 * purge cut short), deleted. Other blobs (a snapshot's blob copies and progress) are left.
 */
async function deleteUnnamed(opts: TenantPurgeOptions, folder: string, named: Array<{ name: string }>): Promise<void> {
  const keep = new Set(named.map((s) => s.name));
  for (const b of await opts.blobs.list(opts.container, folder)) {
    const segment = b.name.endsWith('.ndjson.gz') && !b.name.slice(folder.length).includes('/');
    if (segment && !keep.has(b.name)) await opts.blobs.delete(opts.container, b.name);
  }
}
