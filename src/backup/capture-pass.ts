/**
 * Continuous backup's copy (docs/backup.md): a capture pass reads the change entities committed since the last
 * complete pass (src/model/change-log.ts: with capture on, every write keeps one, with the entity's image, in its own
 * EGT), writes them to Blob storage as immutable compressed segments with a manifest (change-format.ts), then says so
 * in `changes/latest.json` — and only then deletes the change entities it copied.
 *
 * Which changes: each entity table is read with a filter the service applies (EntityType `~Change`, Timestamp at or
 * after the last complete pass's start by the service's clock, less CLOCK_MARGIN_MS; a table that pass did not read,
 * from the start) — a read of the whole table, never on a request path, whose cost grows with the table, not with
 * the changes. A change committed while the pass
 * reads is in this pass or the next one; one read twice is in two segments, and a restore takes it once (its RowKey).
 * So when a pass completes, every write acknowledged before it started is in a durable segment: its start is the
 * latest restorable time.
 *
 * Which are deleted: those committed before this pass's start (less the margin) and older than FENCE_WINDOW_MS — a
 * writer whose EGT's answer was lost decides its fate by the change entity for some minutes (src/write/change-fence.ts),
 * and one deleted under it would read as "never applied" — and, for types a subscription follows, older than the
 * subscriptions' retention.
 *
 * Guide sections: "Log tail pattern", "Entity Group Transactions".
 */
import { changeImage, readChange, CHANGE_ENTITY_TYPE, CHANGE } from '../model/change-log';
import type { Model } from '../model/types';
import type { Logger } from '../log';
import type { BlobStore } from '../storage/blob-store';
import type { TableStore } from '../storage/table-store';
import type { StoredEntity } from '../storage/storage-types';
import { BACKUP_FORMAT } from './backup-format';
import { readJsonBlob, snapshotId, writeJsonBlob } from './backup-blobs';
import { encodeChangeSegment, CHANGES, LATEST_PASS, type CapturedChange, type ChangeSegmentRecord, type LatestPass, type PassManifest } from './change-format';
import { entityTables } from './snapshot';

/** How far the service's clocks (Table and Blob) may differ, and a commit take to show (ms): read again, not missed. */
export const CLOCK_MARGIN_MS = 5_000;
/** How long a change entity stays after its write, at least (ms): beyond a lost answer's fence (change-fence.ts). */
export const FENCE_WINDOW_MS = 10 * 60_000;
/** Change entities one pass deletes at most (the rest wait for the next pass). */
const MAX_TRIM = 10_000;

export interface CapturePassOptions {
  /** The tables' store (change entities are not encrypted; their images are sealed as the tables hold them). */
  store: TableStore;
  /** The backup container's account. */
  blobs: BlobStore;
  container: string;
  model: Model;
  tablePrefix: string;
  /** The schema's layout hash (the catalogue's), kept in the pass manifest. */
  schemaHash: string;
  /** How long change entities of types a subscription follows are kept (ms): a subscriber may resume that far back. */
  subscriptionRetentionMs: number;
  /** Changes per segment at most (default 5000). */
  segmentChanges?: number;
  /** Told after each segment is written (its number, from 1), before the pass's manifest; awaited. */
  onSegment?: (n: number) => void | Promise<void>;
  log?: Logger;
}

/** What a pass did. */
export interface PassResult {
  latest: LatestPass;
  /** Change entities deleted after the pass. */
  trimmed: number;
}

/** Accumulates one pass's changes into segments. */
class SegmentWriter {
  readonly segments: ChangeSegmentRecord[] = [];
  private readonly buffer = new Map<string, CapturedChange[]>();
  changes = 0;
  firstAt = Number.POSITIVE_INFINITY;
  lastAt = 0;
  readonly ats: number[] = [];

  constructor(
    private readonly opts: CapturePassOptions,
    private readonly id: string,
  ) {}

  async add(c: CapturedChange): Promise<void> {
    const list = this.buffer.get(c.table) ?? [];
    list.push(c);
    this.buffer.set(c.table, list);
    this.changes++;
    this.ats.push(c.at);
    this.firstAt = Math.min(this.firstAt, c.at);
    this.lastAt = Math.max(this.lastAt, c.at);
    if (list.length >= (this.opts.segmentChanges ?? 5000)) await this.flush(c.table);
  }

  async flush(table: string): Promise<void> {
    const list = this.buffer.get(table);
    if (!list || list.length === 0) return;
    this.buffer.delete(table);
    const { bytes, sha256 } = encodeChangeSegment(list);
    const name = `${CHANGES}/${this.id}/${String(this.segments.length).padStart(5, '0')}.ndjson.gz`;
    await this.opts.blobs.upload(this.opts.container, name, bytes, 'application/x-ndjson+gzip');
    this.segments.push({ name, table, rows: list.length, bytes: bytes.length, sha256 });
    await this.opts.onSegment?.(this.segments.length);
  }

  async flushAll(): Promise<void> {
    for (const table of [...this.buffer.keys()]) await this.flush(table);
  }
}

/** A stored change entity as a captured change; undefined for a relay, or a change without an image that is not a delete. */
function captured(opts: CapturePassOptions, table: string, e: StoredEntity): CapturedChange | undefined {
  const c = readChange(table, e);
  // A relay tells again a change whose own entity is there; a summary holder's change (no image) is derived.
  if (!c || c.relays) return undefined;
  const rows = c.kind === 'DELETED' ? null : changeImage(e);
  if (rows === undefined) return undefined;
  const short = table.slice(opts.tablePrefix.length);
  return {
    table: short,
    partitionKey: c.address.partitionKey,
    rowKey: c.address.rowKey,
    changeKey: c.changeKey,
    at: c.at,
    committed: c.committed,
    kind: c.kind,
    of: c.of,
    image: rows && rows.map((entity) => ({ table: short, entity })),
    ...movedFrom(opts, e),
  };
}

/** A move's create's old address, as the change entity names it (its table after the prefix). */
function movedFrom(opts: CapturePassOptions, e: StoredEntity): Pick<CapturedChange, 'movedFrom'> {
  const [table, partitionKey, rowKey] = [CHANGE.movedFromTable, CHANGE.movedFromPartitionKey, CHANGE.movedFromRowKey].map((p) => e.properties[p]);
  if (typeof table !== 'string' || typeof partitionKey !== 'string' || typeof rowKey !== 'string') return {};
  return { movedFrom: { table: table.slice(opts.tablePrefix.length), partitionKey, rowKey } };
}

/** The 99th percentile of `values` (0 for none). */
function p99(values: number[]): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)];
}

/**
 * One capture pass (see the file comment): copies the changes committed since the last complete pass, records the
 * pass, then deletes the change entities it may.
 * @returns the pass as latest.json now names it, and how many change entities were deleted
 * @throws TablegraphError STORAGE_UNAVAILABLE and others from storage (nothing is deleted then: the next pass reads
 *   the same changes again); DATA_INTEGRITY (reason BackupCorrupt) for a change entity whose image cannot be read
 */
export async function runCapturePass(opts: CapturePassOptions): Promise<PassResult> {
  const { blobs, container, store } = opts;
  await blobs.ensureContainer(container);
  const previous = await readJsonBlob<LatestPass>(blobs, container, LATEST_PASS);
  const started = new Date();
  // The service's clock, from the blob it writes now: change entities carry the Table service's Timestamp.
  const serviceStarted = (await blobs.upload(container, `${CHANGES}/clock`, Buffer.alloc(0), 'application/octet-stream')) ?? started;
  const since = previous ? new Date(Date.parse(previous.serviceStartedAt) - CLOCK_MARGIN_MS) : undefined;
  const id = snapshotId(started);
  const writer = new SegmentWriter(opts, id);
  const tables = await entityTables(store, opts.model);
  // A table the last pass did not read (a type of a newer schema, a worker of an older one) is read whole.
  const known = previous?.tables && new Set(previous.tables);
  for (const table of tables) {
    const from = since && (!known || known.has(table)) ? since : undefined;
    for await (const page of store.scan(table, { entityType: CHANGE_ENTITY_TYPE, ...(from && { committedSince: from }) })) {
      for (const e of page) {
        const c = captured(opts, table, e);
        if (c) await writer.add(c);
      }
    }
  }
  await writer.flushAll();
  const finished = new Date();
  const lags = writer.ats.map((at) => finished.getTime() - at);
  if (writer.changes > 0) {
    const manifest: PassManifest = {
      format: BACKUP_FORMAT,
      kind: 'changes',
      id,
      tablePrefix: opts.tablePrefix,
      schemaHash: opts.schemaHash,
      startedAt: started.toISOString(),
      finishedAt: finished.toISOString(),
      changes: writer.changes,
      firstAt: writer.firstAt,
      lastAt: writer.lastAt,
      segments: writer.segments,
    };
    await writeJsonBlob(blobs, container, `${CHANGES}/${id}/manifest.json`, manifest);
  }
  const latest: LatestPass = {
    ...(writer.changes > 0 && { id }),
    startedAt: started.toISOString(),
    serviceStartedAt: serviceStarted.toISOString(),
    finishedAt: finished.toISOString(),
    firstPassAt: previous?.firstPassAt ?? started.toISOString(),
    changes: writer.changes,
    lagMaxMs: lags.length > 0 ? Math.max(...lags) : 0,
    lagP99Ms: p99(lags),
    schemaHash: opts.schemaHash,
    tables,
  };
  await writeJsonBlob(blobs, container, LATEST_PASS, latest);
  const trimmed = await trimCaptured(opts, tables, new Date(Math.min(serviceStarted.getTime() - CLOCK_MARGIN_MS, Date.now() - FENCE_WINDOW_MS)));
  return { latest, trimmed };
}

/**
 * Deletes the change entities committed before `before` (all in durable segments by then), those of types a
 * subscription follows only past its retention: per partition, EGTs of up to 100 deletes. Best effort: a failed EGT
 * (an entity another pass deleted first) is left for the next pass.
 * @returns how many were deleted
 */
async function trimCaptured(opts: CapturePassOptions, tables: string[], before: Date): Promise<number> {
  const followed = new Set([...opts.model.entities.values()].filter((e) => e.changeLogged).map((e) => e.entityType));
  const retained = Date.now() - opts.subscriptionRetentionMs;
  let deleted = 0;
  for (const table of tables) {
    const byPartition = new Map<string, string[]>();
    for await (const page of opts.store.scan(table, { entityType: CHANGE_ENTITY_TYPE, committedBefore: before, select: [CHANGE.of] })) {
      for (const e of page) {
        if (followed.has(String(e.properties[CHANGE.of])) && Date.parse(e.timestamp ?? '') >= retained) continue;
        byPartition.set(e.partitionKey, [...(byPartition.get(e.partitionKey) ?? []), e.rowKey]);
      }
      if ([...byPartition.values()].reduce((n, l) => n + l.length, 0) >= MAX_TRIM) break;
    }
    for (const [partitionKey, rowKeys] of byPartition) {
      for (let i = 0; i < rowKeys.length; i += 100) {
        const batch = rowKeys.slice(i, i + 100).map((rowKey) => ({ kind: 'delete' as const, partitionKey, rowKey, ifMatch: '*' }));
        try {
          await opts.store.submitTransaction(table, batch);
          deleted += batch.length;
        } catch (err) {
          opts.log?.debug({ err, table, partitionKey }, 'backup: captured change entities not deleted this time');
        }
      }
    }
  }
  return deleted;
}
