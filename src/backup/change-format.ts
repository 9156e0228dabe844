/**
 * The continuous half of the backup format (docs/backup.md): what a capture pass (capture-pass.ts) writes to Blob
 * storage and a point-in-time restore reads back.
 *
 * - A **change segment** is one blob of gzip-compressed NDJSON, immutable once written: one line per change,
 *   `{"t": table, "pk": PartitionKey, "rk": the entity's RowKey, "ck": the change's RowKey, "at": ms, "c": commit
 *   Timestamp, "k": CREATED | UPDATED | DELETED, "of": EntityType, "img": [row lines] | null, "mf": [table, PartitionKey,
 *   RowKey]?}` — `t` the table's name after the prefix, `img` the entity's rows as stored after the write (row-text.ts
 *   lines; `@encrypted` values sealed), null after a delete, `mf` a move's create's old address.
 * - A **pass manifest** (`changes/<id>/manifest.json`) lists one pass's segments with their changes, bytes and
 *   SHA-256, the schema whose writes they are, and the pass's times. A pass that captured nothing writes none.
 * - **`changes/latest.json`** names the latest complete pass: when it started (every write acknowledged at or before
 *   then is in a durable segment: the latest restorable time), when the service's clock said it started (the next
 *   pass reads the changes committed since), and its lag.
 *
 * Everything read back is checked, as snapshots are (backup-format.ts): DATA_INTEGRITY, reason BackupCorrupt.
 */
import { corrupt, decodeRow, encodeRow, type BackupRow } from '../model/row-text';
import type { ChangeKind } from '../model/change-log';
import { BACKUP_FORMAT, decodeLines, encodeLines, manifestOfKind } from './backup-format';

/** The folder of every pass and of latest.json. */
export const CHANGES = 'changes';
/** The blob naming the latest complete pass. */
export const LATEST_PASS = `${CHANGES}/latest.json`;

/** One captured change. */
export interface CapturedChange {
  /** The table's name after the table prefix. */
  table: string;
  partitionKey: string;
  /** The changed entity's RowKey (a wide entity's first part). */
  rowKey: string;
  /** The change entity's RowKey: unique per change (src/model/change-log.ts). */
  changeKey: string;
  /** When the write's EGT was sent (ms since the epoch, the writer's clock): what `--at` compares. */
  at: number;
  /** The service Timestamp of the change entity (ISO 8601): the order of a partition's changes. */
  committed: string;
  kind: ChangeKind;
  /** The EntityType of the entity written. */
  of: string;
  /** The entity's rows after the write (tables after the prefix); null after a delete. */
  image: BackupRow[] | null;
  /** A move's create: the entity's old address (its table after the prefix). */
  movedFrom?: { table: string; partitionKey: string; rowKey: string };
}

/** A change segment as its pass's manifest lists it: one table's changes (a pass writes one or more per table). */
export interface ChangeSegmentRecord {
  /** The blob's name in the backup container. */
  name: string;
  /** The table's name after the prefix. */
  table: string;
  rows: number;
  /** Its size as stored (bytes, compressed). */
  bytes: number;
  /** SHA-256 of the stored bytes, hex. */
  sha256: string;
}

/** A pass's manifest (see the file comment). Times are ISO 8601, UTC. */
export interface PassManifest {
  format: typeof BACKUP_FORMAT;
  kind: 'changes';
  id: string;
  tablePrefix: string;
  /** The schema's layout hash when the pass ran. */
  schemaHash: string;
  /** When the pass started and finished (the worker's clock). */
  startedAt: string;
  finishedAt: string;
  changes: number;
  /** The least and greatest `at` among its changes (ms since the epoch). */
  firstAt: number;
  lastAt: number;
  segments: ChangeSegmentRecord[];
}

/** latest.json (see the file comment). */
export interface LatestPass {
  /** The pass's id; absent when it captured nothing. */
  id?: string;
  /** When the pass started, the worker's clock (ISO 8601): the latest restorable time. */
  startedAt: string;
  /** When it started by the service's clock (ISO 8601): the next pass reads changes committed from a little before. */
  serviceStartedAt: string;
  finishedAt: string;
  /** When the first pass of this container started (ISO 8601): nothing before it is captured. */
  firstPassAt: string;
  /** Changes it captured, and their lag (acknowledged → in a durable segment; ms): the greatest and the 99th percentile. */
  changes: number;
  lagMaxMs: number;
  lagP99Ms: number;
  /**
   * The RPO as the writes met it: from a change's commit (the service's Timestamp) to its restorable time — the end
   * of the first pass that started after it — over the changes committed between the last pass's start and this
   * one's (ms): the 99th percentile, the greatest, and how many — a pass without any keeps the last one's. Absent
   * before the first pass with writes, and in a pass of an older format.
   */
  rpo?: { p99Ms: number; maxMs: number; writes: number };
  schemaHash: string;
  /**
   * The tables the pass read, in the format before the capture journal: a pass after one of that format reads every
   * table once (capture-pass.ts readTablesOnce). Not written any more.
   */
  tables?: string[];
  /** The pass read the capture journal (src/model/capture-journal.ts): the next one reads it too. */
  journal?: true;
  /** What it read: journal marks, the partitions they named, the change entities read in those (rows). */
  read?: { marks: number; partitions: number; rows: number };
}

/** The key of an entity's address, its table after the prefix (a restore's replay keeps one change per key). */
export function replayKey(table: string, partitionKey: string, rowKey: string): string {
  return `${table}\u0000${partitionKey}\u0000${rowKey}`;
}

/** A change as a segment line (no newline). */
export function encodeChange(c: CapturedChange): string {
  const img = c.image ? c.image.map((r) => encodeRow(r)) : null;
  const mf = c.movedFrom ? [c.movedFrom.table, c.movedFrom.partitionKey, c.movedFrom.rowKey] : undefined;
  return JSON.stringify({ t: c.table, pk: c.partitionKey, rk: c.rowKey, ck: c.changeKey, at: c.at, c: c.committed, k: c.kind, of: c.of, img, mf });
}

const KINDS: ReadonlySet<string> = new Set<ChangeKind>(['CREATED', 'UPDATED', 'DELETED']);

/** A segment line back as a change. @throws TablegraphError DATA_INTEGRITY (reason BackupCorrupt) naming `where` */
export function decodeChange(line: string, where: string): CapturedChange {
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(line) as Record<string, unknown>;
  } catch {
    throw corrupt(where, 'a line is not JSON');
  }
  const texts = [raw.t, raw.pk, raw.rk, raw.ck, raw.c, raw.of];
  const img = raw.img;
  if (texts.some((t) => typeof t !== 'string') || typeof raw.at !== 'number' || !KINDS.has(String(raw.k)) || !(img === null || Array.isArray(img)))
    throw corrupt(where, 'a line is not a change');
  return {
    table: raw.t as string,
    partitionKey: raw.pk as string,
    rowKey: raw.rk as string,
    changeKey: raw.ck as string,
    at: raw.at,
    committed: raw.c as string,
    kind: raw.k as ChangeKind,
    of: raw.of as string,
    image: img === null ? null : imageRows(img as unknown[], where),
    ...(movedFromOf(raw.mf, where) && { movedFrom: movedFromOf(raw.mf, where) }),
  };
}

function movedFromOf(mf: unknown, where: string): CapturedChange['movedFrom'] {
  if (mf === undefined) return undefined;
  if (!Array.isArray(mf) || mf.length !== 3 || mf.some((x) => typeof x !== 'string')) throw corrupt(where, 'a moved-from address is malformed');
  return { table: mf[0] as string, partitionKey: mf[1] as string, rowKey: mf[2] as string };
}

function imageRows(lines: unknown[], where: string): BackupRow[] {
  return lines.map((l) => {
    if (typeof l !== 'string') throw corrupt(where, 'an image row is not text');
    return decodeRow(l, where);
  });
}

/** Changes as a segment's stored bytes, with their SHA-256 (hex). */
export function encodeChangeSegment(changes: readonly CapturedChange[]): { bytes: Buffer; sha256: string } {
  return encodeLines(changes.map((c) => encodeChange(c)));
}

/** A change segment's stored bytes back as changes, checked against its record. @throws TablegraphError DATA_INTEGRITY */
export function decodeChangeSegment(bytes: Buffer, record: ChangeSegmentRecord): CapturedChange[] {
  return decodeLines(bytes, record, 'changes', decodeChange);
}

/** A pass manifest's JSON, checked. @throws TablegraphError DATA_INTEGRITY naming `where` */
export function parsePassManifest(json: string, where: string): PassManifest {
  const m = manifestOfKind<PassManifest>(json, where, 'changes');
  const texts = [m.id, m.tablePrefix, m.schemaHash, m.startedAt, m.finishedAt];
  const numbers = [m.changes, m.firstAt, m.lastAt];
  if (texts.some((t) => typeof t !== 'string') || numbers.some((n) => typeof n !== 'number') || !Array.isArray(m.segments))
    throw corrupt(where, 'the manifest misses a field');
  for (const s of m.segments) {
    if (typeof s?.name !== 'string' || typeof s.table !== 'string' || typeof s.rows !== 'number' || typeof s.sha256 !== 'string')
      throw corrupt(where, 'a segment record is malformed');
  }
  return m as PassManifest;
}
