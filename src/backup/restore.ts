/**
 * A restore's first step (docs/backup.md): a snapshot's primary entities written into the tables of another table
 * prefix, as the segments hold them (`@encrypted` values stay sealed), in EGTs of upserts per partition — never into
 * the tables the snapshot was read from. The rest — recording the schema in the new catalogue, building every derived
 * path over what was written, `verify` — is the command's (src/cli/restore.ts), with the machinery a schema change
 * uses.
 *
 * To a point in time (`--at`, change-replay.ts): the snapshot's rows of every entity changed in the replay window are
 * left out, and each one's last change is written instead — its image, or nothing after a delete.
 *
 * Moves under way in what was written are settled last (restore-moves.ts): in where the copy was written, out where not.
 *
 * Resumable: the segments written are recorded in `restores/<prefix>/progress.json` after each one; a restore run
 * again with the same snapshot and target skips them (a segment half-written before a kill is written again:
 * upserts of the same rows). Every segment's checksum is checked before its first row is written. The blobs the
 * entities' `@blob` fields name are copied into the fields' containers under the target prefix (blob-copies.ts).
 */
import { ErrorCode, TablegraphError } from '../errors';
import { blobFields } from '../model/blob-fields';
import { ENTITY_TYPE_PROPERTY, MOVED_IN_PROPERTY, type Model } from '../model/types';
import type { BlobStore } from '../storage/blob-store';
import type { TableStore } from '../storage/table-store';
import type { EntityToWrite, StorageObserver } from '../storage/storage-types';
import { planEgtBatches, writeEgtBatches } from '../write/egt-batches';
import { decodeSegment, type BackupRow, type SnapshotManifest } from './backup-format';
import { readJsonBlob, writeJsonBlob } from './backup-blobs';
import { backupBlobName, copyBlob, renamedBlob } from './blob-copies';
import { replayKey, type CapturedChange } from './change-format';
import { partAddresses } from '../model/wide-entities';
import { noteMoveMarks, settleMoves, type MoveMarks } from './restore-moves';

/** Which of a snapshot's entities to restore: all by default; else those of the types and partitions named. */
export interface RestoreFilter {
  /** EntityType values. */
  types?: string[];
  /** PartitionKey values (as stored). */
  partitions?: string[];
}

/** A restore's progress, as recorded. */
export interface RestoreProgress {
  snapshot: string;
  /** A point-in-time restore's time (ISO 8601). */
  at?: string;
  filter: RestoreFilter;
  /** Names of the segments written. */
  written: string[];
  rows: number;
  /** Set once a point-in-time restore's changes are written (after the segments). */
  changesWritten?: boolean;
  /** The move marks among the rows written (restore-moves.ts), and whether those moves are settled (after every row). */
  moves?: MoveMarks;
  movesSettled?: boolean;
  /** Set once the rows are all written and the schema is being recorded: the catalogue's deployment is the restore's. */
  deploying?: boolean;
}

export interface RestoreRowsOptions {
  /** The target's store, without a cipher: rows are written as the segments hold them. */
  target: TableStore;
  /** The schema compiled with the target prefix: its `@blob` fields' containers. */
  model: Model;
  /** The backup container's account. */
  blobs: BlobStore;
  /** The account of the `@blob` fields' containers under the target prefix. */
  entityBlobs: BlobStore;
  container: string;
  manifest: SnapshotManifest;
  /** The table prefix written under: not the snapshot's. */
  targetPrefix: string;
  filter?: RestoreFilter;
  /** A point-in-time restore: its time (ISO 8601), and of each entity changed in its window the last change (change-replay.ts). */
  pointInTime?: { at: string; changes: ReadonlyMap<string, CapturedChange> };
  /** EGTs in flight at once (default 8). */
  concurrency?: number;
  /** Told after each segment's rows and the progress are written; awaited. */
  onProgress?: (p: { segments: number; of: number; rows: number }) => void | Promise<void>;
  /** Told of every table call (a benchmark counts them). */
  observer?: StorageObserver;
}

/**
 * Times a restore's EGT that storage did not answer is sent again (writeEgtBatches): waits of 0.5 s doubling to 8 s, a
 * minute in all, as a busy or frozen service (Azurite's clean-up, a throttled account) comes back; only then is the
 * restore stopped, to be run again (it resumes).
 */
const RESENDS = 10;

/** Where a restore into `targetPrefix` records its progress. */
export function restoreProgressName(targetPrefix: string): string {
  return `restores/${targetPrefix === '' ? '-' : targetPrefix}/progress.json`;
}

/**
 * The restore's progress into `targetPrefix`: the one recorded (resumed), or a new one.
 * @throws TablegraphError CONFLICT (reason RestoreTargetInUse) when the target is the snapshot's own prefix, or a
 *   restore of another snapshot or subset was recorded there
 */
export async function restoreProgress(
  opts: Pick<RestoreRowsOptions, 'blobs' | 'container' | 'manifest' | 'targetPrefix' | 'filter'> & { at?: string },
): Promise<RestoreProgress> {
  const { manifest, targetPrefix } = opts;
  const filter = opts.filter ?? {};
  if (targetPrefix === manifest.tablePrefix) {
    throw new TablegraphError(
      ErrorCode.CONFLICT,
      `Snapshot ${manifest.id} was taken from table prefix "${targetPrefix}": a restore never writes into the tables it comes from. Give another --table-prefix.`,
      { reason: 'RestoreTargetInUse' },
    );
  }
  const recorded = await readJsonBlob<RestoreProgress>(opts.blobs, opts.container, restoreProgressName(targetPrefix));
  if (!recorded) return { snapshot: manifest.id, ...(opts.at !== undefined && { at: opts.at }), filter, written: [], rows: 0 };
  if (recorded.snapshot !== manifest.id || recorded.at !== opts.at || JSON.stringify(recorded.filter) !== JSON.stringify(filter)) {
    const what = recorded.at ? `the time ${recorded.at}` : `snapshot ${recorded.snapshot}`;
    throw new TablegraphError(
      ErrorCode.CONFLICT,
      `Table prefix "${targetPrefix}" holds a restore of ${what} ${JSON.stringify(recorded.filter)}: run that one again to finish it, or restore under another prefix.`,
      { reason: 'RestoreTargetInUse', snapshot: recorded.snapshot },
    );
  }
  return recorded;
}

function kept(row: BackupRow, filter: RestoreFilter): boolean {
  const type = row.entity.properties[ENTITY_TYPE_PROPERTY]?.value;
  if (filter.types && !filter.types.includes(String(type))) return false;
  return !filter.partitions || filter.partitions.includes(row.entity.partitionKey);
}

/**
 * The row as written under the target prefix: each blob its `@blob` fields name copied from the snapshot into the
 * field's container there, under its renamed name (blob-copies.ts), which the row then holds.
 */
async function withBlobs(opts: RestoreRowsOptions, row: BackupRow): Promise<EntityToWrite> {
  const entityType = row.entity.properties[ENTITY_TYPE_PROPERTY]?.value;
  const entity = [...opts.model.entities.values()].find((e) => e.entityType === entityType && !e.implementations);
  const fields = entity ? blobFields(entity) : [];
  if (fields.length === 0) return row.entity;
  const properties = { ...row.entity.properties };
  for (const f of fields) {
    const name = properties[f.name]?.value;
    if (typeof name !== 'string') continue;
    const renamed = renamedBlob(name, `${opts.manifest.tablePrefix}${row.table}`, `${opts.targetPrefix}${row.table}`);
    const from = { store: opts.blobs, container: opts.container, name: backupBlobName(opts.manifest.id, String(entityType), f.name, name) };
    // A blob the snapshot found missing (an upload URL never used) is missing here too: the entity names it as before.
    await copyBlob(from, { store: opts.entityBlobs, container: f.blob.container, name: renamed });
    properties[f.name] = { type: 'String', value: renamed };
  }
  return { ...row.entity, properties };
}

/**
 * Writes the snapshot's rows (those the filter keeps) under the target prefix, resuming `progress`.
 * @returns the progress, every segment written
 * @throws TablegraphError DATA_INTEGRITY (reason BackupCorrupt) for a segment missing or differing from the
 *   manifest — before any of its rows is written; STORAGE_UNAVAILABLE and others from storage (run it again)
 */
export async function restoreRows(opts: RestoreRowsOptions, progress: RestoreProgress): Promise<RestoreProgress> {
  const { manifest, blobs, container } = opts;
  const filter = opts.filter ?? {};
  const done = new Set(progress.written);
  const replaced = replacedRows(opts);
  for (const segment of manifest.segments) {
    if (done.has(segment.name) || (filter.types && !filter.types.includes(segment.entityType))) continue;
    const blob = await blobs.download(container, segment.name);
    if (!blob) {
      throw new TablegraphError(ErrorCode.DATA_INTEGRITY, `Segment ${segment.name} of snapshot ${manifest.id} is missing: the snapshot cannot be restored.`, {
        reason: 'BackupCorrupt',
        where: segment.name,
      });
    }
    const rows = decodeSegment(blob.bytes, segment).filter((r) => kept(r, filter) && !replaced.has(replayKey(r.table, r.entity.partitionKey, r.entity.rowKey)));
    const writes = [];
    for (const r of rows) writes.push({ table: `${opts.targetPrefix}${r.table}`, entity: await withBlobs(opts, r) });
    for (const w of writes) noteMoveMarks((progress.moves ??= {}), w.table, w.entity);
    await writeEgtBatches(opts.target, planEgtBatches(writes, opts.target.target), {
      concurrency: opts.concurrency ?? 8,
      observer: opts.observer,
      resends: RESENDS,
    });
    progress.written.push(segment.name);
    progress.rows += rows.length;
    await writeJsonBlob(blobs, container, restoreProgressName(opts.targetPrefix), progress);
    await opts.onProgress?.({ segments: progress.written.length, of: manifest.segments.length, rows: progress.rows });
  }
  if (opts.pointInTime && !progress.changesWritten) await writeChanges(opts, progress);
  if (!progress.movesSettled) {
    await settleMoves(opts.target, progress.moves ?? {});
    progress.movesSettled = true;
    await writeJsonBlob(blobs, container, restoreProgressName(opts.targetPrefix), progress);
  }
  return progress;
}

/** The rows of the entities a point-in-time restore writes from their changes (a wide entity's every part), by replayKey. */
function replacedRows(opts: RestoreRowsOptions): Set<string> {
  const keys = new Set<string>();
  for (const c of opts.pointInTime?.changes.values() ?? []) {
    const entity = [...opts.model.entities.values()].find((e) => e.entityType === c.of && !e.implementations);
    const base = { table: c.table, partitionKey: c.partitionKey, rowKey: c.rowKey };
    for (const a of entity?.wide ? partAddresses(entity.wide, base) : [base]) keys.add(replayKey(c.table, a.partitionKey, a.rowKey));
  }
  return keys;
}

/** A point-in-time restore's changes: each entity's image as of the time (none after a delete). */
async function writeChanges(opts: RestoreRowsOptions, progress: RestoreProgress): Promise<void> {
  const writes = [];
  for (const c of opts.pointInTime!.changes.values())
    for (const r of c.image ?? []) writes.push({ table: `${opts.targetPrefix}${r.table}`, entity: await withBlobs(opts, r) });
  for (const w of writes) noteMoveMarks((progress.moves ??= {}), w.table, w.entity);
  for (const c of opts.pointInTime!.changes.values()) {
    const moveId = c.image?.[0]?.entity.properties[MOVED_IN_PROPERTY]?.value;
    if (c.movedFrom && typeof moveId === 'string' && moveId !== '')
      ((progress.moves ??= {})[moveId] ??= {}).from = { ...c.movedFrom, table: `${opts.targetPrefix}${c.movedFrom.table}` };
  }
  await writeEgtBatches(opts.target, planEgtBatches(writes, opts.target.target), {
    concurrency: opts.concurrency ?? 8,
    observer: opts.observer,
    resends: RESENDS,
  });
  progress.changesWritten = true;
  progress.rows += [...opts.pointInTime!.changes.values()].filter((c) => c.image).length;
  await writeJsonBlob(opts.blobs, opts.container, restoreProgressName(opts.targetPrefix), progress);
}
