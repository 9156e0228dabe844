/**
 * A point-in-time restore's plan (docs/backup.md): for a time T, the latest usable snapshot finished at or before T,
 * and the captured changes made from a little before it started (REPLAY_MARGIN_MS) to T — of each entity the last one
 * by commit order, which is its state at T: its image, or gone. A snapshot reads while writes go on, so each entity it
 * holds is as it was at some moment while it ran; every change after that moment and up to T is among those replayed,
 * and the last of them wins. A write is taken when its change's time — stamped once per EGT, right before it is sent
 * (src/model/change-log.ts stampChanges) — is at or before T: every write acknowledged by T is in, none begun after T
 * is, and an EGT is never split.
 */
import { ErrorCode, TablegraphError } from '../errors';
import type { BlobStore } from '../storage/blob-store';
import type { SnapshotManifest } from './backup-format';
import { decodeChangeSegment, parsePassManifest, replayKey, CHANGES, type CapturedChange, type PassManifest } from './change-format';
import { REPLAY_MARGIN_MS, restorableWindow } from './restorable-window';
import type { RestoreFilter } from './restore';
import { bulkWriteBetween, listBulkWrites } from './bulk-writes';
import { listManifests } from './backup-blobs';

/** What a restore to time `at` reads. */
export interface PointInTime {
  /** T (ms since the epoch). */
  at: number;
  snapshot: SnapshotManifest;
  /** The passes holding changes made from the snapshot's start (less the margin) to T, oldest first. */
  passes: PassManifest[];
}

function notRestorable(message: string, details: Record<string, unknown>): TablegraphError {
  return new TablegraphError(ErrorCode.BAD_USER_INPUT, message, { reason: 'NotRestorable', ...details });
}

/**
 * The snapshot and passes a restore to `at` reads.
 * @param at ISO 8601
 * @throws TablegraphError BAD_USER_INPUT (reason NotRestorable) when `at` is not a time or is outside the restorable
 *   window, or a bulk write (bulk-writes.ts) wrote between the snapshot and `at`; SCHEMA_INVALID (reason SchemaChangedInWindow) when a pass in the window captured another schema's writes;
 *   DATA_INTEGRITY (reason BackupCorrupt) for a bad manifest
 */
export async function pointInTime(blobs: BlobStore, container: string, at: string): Promise<PointInTime> {
  const t = Date.parse(at);
  if (!/^\d{4}-\d\d-\d\dT/.test(at) || Number.isNaN(t)) throw notRestorable(`--at ${at} is not an ISO 8601 time (2026-11-28T04:30:00Z).`, { at });
  const window = await restorableWindow(blobs, container);
  const { earliestRestorableTime: earliest, latestRestorableTime: latest } = window;
  if (!earliest || !latest || t < Date.parse(earliest) || t > Date.parse(latest)) {
    const span =
      earliest && latest
        ? `from ${earliest} to ${latest}`
        : 'empty (no capture pass yet, or no snapshot since capture began: a worker takes one after its first pass)';
    throw notRestorable(`${at} is outside the restorable window, which is ${span} (npm run backup -- status).`, { at, earliest, latest });
  }
  const snapshot = window.snapshots.filter((s) => Date.parse(s.finishedAt) <= t).at(-1)!;
  const bulk = bulkWriteBetween(await listBulkWrites(blobs, container), Date.parse(snapshot.startedAt), t);
  if (bulk) {
    throw notRestorable(
      `${bulk.command}, started ${bulk.startedAt}${bulk.finishedAt ? '' : ' and never recorded as finished'}, wrote between snapshot ${snapshot.id} and ${at} without change entities: restore to a time after a snapshot taken after it.`,
      { at, snapshot: snapshot.id, bulkWrite: bulk.id },
    );
  }
  const from = Date.parse(snapshot.startedAt) - REPLAY_MARGIN_MS;
  const passes = (await listManifests(blobs, container, CHANGES, parsePassManifest)).filter((p) => p.firstAt <= t && p.lastAt >= from);
  const other = passes.find((p) => p.schemaHash !== snapshot.schemaHash);
  if (other) {
    throw new TablegraphError(
      ErrorCode.SCHEMA_INVALID,
      `The schema changed between snapshot ${snapshot.id} and ${at} (pass ${other.id} captured another schema's writes): restore to a time after a snapshot of the new schema.`,
      { reason: 'SchemaChangedInWindow', snapshot: snapshot.id, pass: other.id },
    );
  }
  return { at: t, snapshot, passes };
}

/**
 * Commit order of two changes of one partition: service Timestamp, then time, then RowKey (newer changes have smaller
 * ones). @returns < 0 when `a` committed first
 */
export function commitOrder(a: CapturedChange, b: CapturedChange): number {
  if (a.committed !== b.committed) return a.committed < b.committed ? -1 : 1;
  return a.at - b.at || (a.changeKey < b.changeKey ? 1 : a.changeKey > b.changeKey ? -1 : 0);
}

/**
 * Of each entity the filter keeps, its last change in the window (see the file comment), by replayKey.
 * @throws TablegraphError DATA_INTEGRITY (reason BackupCorrupt) for a segment missing or differing from its manifest
 */
export async function changesAsOf(blobs: BlobStore, container: string, pit: PointInTime, filter: RestoreFilter = {}): Promise<Map<string, CapturedChange>> {
  const from = Date.parse(pit.snapshot.startedAt) - REPLAY_MARGIN_MS;
  const last = new Map<string, CapturedChange>();
  for (const pass of pit.passes) {
    for (const segment of pass.segments) {
      const blob = await blobs.download(container, segment.name);
      if (!blob) {
        throw new TablegraphError(ErrorCode.DATA_INTEGRITY, `Change segment ${segment.name} is missing: the backup cannot be restored to this time.`, {
          reason: 'BackupCorrupt',
          where: segment.name,
        });
      }
      for (const c of decodeChangeSegment(blob.bytes, segment)) {
        if (c.at < from || c.at > pit.at) continue;
        if ((filter.types && !filter.types.includes(c.of)) || (filter.partitions && !filter.partitions.includes(c.partitionKey))) continue;
        const key = replayKey(c.table, c.partitionKey, c.rowKey);
        const before = last.get(key);
        if (!before || commitOrder(before, c) < 0) last.set(key, c);
      }
    }
  }
  return last;
}
