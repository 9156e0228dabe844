/**
 * Continuous backup's copy (docs/backup.md): a capture pass reads the change entities committed since the last
 * complete pass (src/model/change-log.ts: with capture on, every write keeps one, with the entity's image, in its own
 * EGT), writes them to Blob storage as immutable compressed segments with a manifest (change-format.ts), then says so
 * in `changes/latest.json` — and only then deletes the change entities that may go.
 *
 * Which changes: those of the partitions the capture journal names (src/model/capture-journal.ts: each writer marks a
 * partition, once a ten-second bucket, before its first EGT there), each partition's change entities read by a
 * range query — from LOOKBACK_MS before the window's start, by the writers' clocks — filtered by their service
 * Timestamp: at or after the last complete pass's start by the service's clock, less CLOCK_MARGIN_MS. A pass reads
 * what was written since the last one, whatever the size of the tables: no table of the data is read whole. (A
 * container whose last pass is of the format before the journal has every table read whole once, by the first pass.)
 * A change committed while the pass reads is in this pass or the next one; one read twice is in two segments, and a
 * restore takes it once (its RowKey). So when a pass completes, every write acknowledged before it started is in a
 * durable segment: its start is the latest restorable time.
 *
 * Which are deleted: the partitions a pass copied from go in the journal's trim queue, due after FENCE_WINDOW_MS (a
 * writer whose EGT's answer was lost decides its fate by the change entity for some minutes: change-fence.ts) — for
 * types a subscription follows, after the subscriptions' retention — and a later pass deletes their change entities
 * made before its window, one partition at a time. The marks no later pass reads are deleted last.
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
import { bucketOf, JOURNAL_BUCKET_MS, LOOKBACK_MS, type MarkedPartition } from '../model/capture-journal';
import { deleteJournalRows, partitionChanges, partitionId, queueTrims, readJournal, trimPartition, type JournalRow } from './journal-reads';

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
  /** Each change's commit (ms since the epoch, the service's Timestamp). */
  readonly commits: number[] = [];

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
    this.commits.push(Date.parse(c.committed));
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
 * The RPO the pass's writes met (LatestPass.rpo): of the changes committed from the last pass's start to this one's
 * — the latest restorable times, by the worker's clock, which a commit's Timestamp is taken to share — restorable
 * once this pass is recorded (one committed later is counted by the next pass, which reads it again), the time from
 * commit to now. Undefined for none.
 */
function rpoOf(commits: number[], previous: LatestPass | undefined, started: Date, finished: Date): LatestPass['rpo'] {
  const from = previous ? Date.parse(previous.startedAt) : Number.NEGATIVE_INFINITY;
  const mine = commits.filter((c) => c >= from && c < started.getTime()).map((c) => finished.getTime() - c);
  if (mine.length === 0) return undefined;
  return { p99Ms: p99(mine), maxMs: Math.max(...mine), writes: mine.length };
}

/** The changes a pass read, its reads (for the bench and `backup status`), and the partitions it copied from. */
interface PassReads {
  /** Journal marks read (rows), the partitions they named, and the change entities read in those. */
  marks: number;
  partitions: number;
  rows: number;
  /** The partitions changes were copied from, and whether any of them is of a type a subscription follows. */
  copied: Map<string, { partition: MarkedPartition; followed: boolean }>;
  /** The marks read: those before the next window's start are deleted once the pass is recorded. */
  journal: JournalRow[];
}

/**
 * The pass's changes from the journal: every partition marked from the window's start on (and any older mark left
 * behind), then each one's change entities committed since `since`.
 */
async function readMarked(opts: CapturePassOptions, writer: SegmentWriter, since: Date | undefined): Promise<PassReads> {
  const journal = await readJournal(opts.store, opts.tablePrefix, 'c');
  const followed = followedTypes(opts.model);
  const partitions = new Map<string, MarkedPartition>();
  for (const row of journal) partitions.set(partitionId(row.partition), row.partition);
  const reads: PassReads = { marks: journal.length, partitions: partitions.size, rows: 0, copied: new Map(), journal };
  for (const partition of partitions.values()) {
    for await (const page of partitionChanges(opts.store, partition, since)) {
      reads.rows += page.length;
      for (const e of page) {
        const c = captured(opts, partition.table, e);
        if (!c) continue;
        await writer.add(c);
        noteCopied(reads, partition, followed.has(c.of));
      }
    }
  }
  return reads;
}

/** A change copied from `partition`: the partition is trimmed later, after a subscription's retention if `followed`. */
function noteCopied(reads: PassReads, partition: MarkedPartition, followed: boolean): void {
  const id = partitionId(partition);
  reads.copied.set(id, { partition, followed: (reads.copied.get(id)?.followed ?? false) || followed });
}

/** The entity types a subscription follows: their change entities are kept for its retention. */
function followedTypes(model: Model): Set<string> {
  return new Set([...model.entities.values()].filter((e) => e.changeLogged).map((e) => e.entityType));
}

/**
 * A pass of a container whose last pass was of the format before the journal: every entity table read whole for the
 * changes since (as that format did), once — the journal is read from the next pass on.
 */
async function readTablesOnce(opts: CapturePassOptions, writer: SegmentWriter, since: Date | undefined): Promise<PassReads> {
  const reads: PassReads = { marks: 0, partitions: 0, rows: 0, copied: new Map(), journal: [] };
  const followed = followedTypes(opts.model);
  for (const table of await entityTables(opts.store, opts.model)) {
    for await (const page of opts.store.scan(table, { entityType: CHANGE_ENTITY_TYPE, ...(since && { committedSince: since }) })) {
      reads.rows += page.length;
      for (const e of page) {
        const c = captured(opts, table, e);
        if (!c) continue;
        await writer.add(c);
        noteCopied(reads, { table, partitionKey: e.partitionKey }, followed.has(c.of));
      }
    }
  }
  return reads;
}

/**
 * One capture pass (see the file comment): copies the changes committed since the last complete pass, queues the
 * partitions they came from for their trim, records the pass, then deletes the change entities that are due and the
 * journal rows no later pass needs.
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
  const reads = previous && !previous.journal ? await readTablesOnce(opts, writer, since) : await readMarked(opts, writer, since);
  await writer.flushAll();
  // Queued before the pass is recorded: a pass cut short after that records nothing, and the next one queues again.
  await queueCopied(opts, reads);
  const latest = await recordPass(opts, { id, started, serviceStarted, previous, writer, reads });
  const trimmed = await trimDue(opts, new Date(Math.min(serviceStarted.getTime() - CLOCK_MARGIN_MS, Date.now() - FENCE_WINDOW_MS)));
  // Marks before the next pass's window start are read by no later pass.
  const nextFrom = serviceStarted.getTime() - CLOCK_MARGIN_MS - LOOKBACK_MS - JOURNAL_BUCKET_MS;
  await deleteJournalRows(
    store,
    opts.tablePrefix,
    reads.journal.filter((r) => r.start < nextFrom),
  );
  return { latest, trimmed };
}

/** The partitions a pass copied from, in the trim queue: due once the fence window (and a subscription's retention) has passed. */
async function queueCopied(opts: CapturePassOptions, reads: PassReads): Promise<void> {
  const now = Date.now();
  const plain = [...reads.copied.values()].filter((c) => !c.followed).map((c) => c.partition);
  const followed = [...reads.copied.values()].filter((c) => c.followed).map((c) => c.partition);
  if (plain.length > 0) await queueTrims(opts.store, opts.tablePrefix, now + FENCE_WINDOW_MS, plain);
  if (followed.length > 0) await queueTrims(opts.store, opts.tablePrefix, now + Math.max(FENCE_WINDOW_MS, opts.subscriptionRetentionMs), followed);
}

/** Writes the pass's manifest (when it copied anything), then `changes/latest.json`. @returns latest.json as written */
async function recordPass(
  opts: CapturePassOptions,
  pass: { id: string; started: Date; serviceStarted: Date; previous: LatestPass | undefined; writer: SegmentWriter; reads: PassReads },
): Promise<LatestPass> {
  const { id, started, serviceStarted, previous, writer, reads } = pass;
  const finished = new Date();
  const lags = writer.ats.map((at) => finished.getTime() - at);
  // A pass without writes in its window keeps the last one's: the RPO the latest writes met.
  const rpo = rpoOf(writer.commits, previous, started, finished) ?? previous?.rpo;
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
    await writeJsonBlob(opts.blobs, opts.container, `${CHANGES}/${id}/manifest.json`, manifest);
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
    ...(rpo && { rpo }),
    schemaHash: opts.schemaHash,
    journal: true,
    read: { marks: reads.marks, partitions: reads.partitions, rows: reads.rows },
  };
  await writeJsonBlob(opts.blobs, opts.container, LATEST_PASS, latest);
  return latest;
}

/**
 * The trims that are due (their bucket over): each partition's change entities made before `before` and copied
 * already deleted — a subscription's kept for its retention, the partition queued again for then — at most MAX_TRIM
 * in a pass (the rest stay queued). Best effort: what fails is done by a later pass.
 * @returns how many change entities were deleted
 */
async function trimDue(opts: CapturePassOptions, before: Date): Promise<number> {
  const { store, tablePrefix } = opts;
  const due = await readJournal(store, tablePrefix, 't', bucketOf(Date.now()));
  if (due.length === 0) return 0;
  const followed = followedTypes(opts.model);
  const retainedAfter = Date.now() - opts.subscriptionRetentionMs;
  // Made before the pass's window (copied by a complete pass) and past the fence window, by the writers' clocks.
  const limits = { before: before.getTime() - LOOKBACK_MS, followed, retainedAfter };
  let deleted = 0;
  const done: JournalRow[] = [];
  const again = new Map<string, MarkedPartition>();
  for (const row of due) {
    if (deleted >= MAX_TRIM) break;
    try {
      const trim = await trimPartition(store, row.partition, { ...limits, most: MAX_TRIM - deleted });
      deleted += trim.deleted;
      if (trim.kept) again.set(partitionId(row.partition), row.partition);
      done.push(row);
    } catch (err) {
      opts.log?.debug({ err, table: row.partition.table, partitionKey: row.partition.partitionKey }, 'backup: captured change entities not deleted this time');
    }
  }
  if (again.size > 0) await queueTrims(store, tablePrefix, Date.now() + Math.min(FENCE_WINDOW_MS, opts.subscriptionRetentionMs), again.values());
  await deleteJournalRows(store, tablePrefix, done);
  return deleted;
}
