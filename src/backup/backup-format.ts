/**
 * The backup format (docs/backup.md): what a snapshot writes to Blob storage and a restore reads back.
 *
 * - A **segment** is one blob of gzip-compressed NDJSON, immutable once written: one line per stored row,
 *   `{"t": table, "pk": PartitionKey, "rk": RowKey, "p": [[name, EDM type, value as text], …]}`, `t` the table's name
 *   after the table prefix (so that a restore can put it under another). Values are as stored: an `@encrypted`
 *   property is its sealed bytes (Edm.Binary, base64), opened only by a process holding the key.
 * - A **manifest** (`snapshots/<id>/manifest.json`) lists a snapshot's segments with their rows, bytes and SHA-256,
 *   the schema that wrote the rows (its hash and SDL), and when the snapshot started and finished. A snapshot is
 *   complete exactly when its manifest exists: it is written last.
 *
 * Everything read back is checked before it is used: a segment whose checksum differs, or a line or manifest that
 * does not have this shape, is refused with DATA_INTEGRITY — a restore never writes what it cannot vouch for.
 */
import { createHash } from 'node:crypto';
import { gunzipSync, gzipSync } from 'node:zlib';
import { corrupt, decodeRow, encodeRow, type BackupRow } from '../model/row-text';

export { decodeRow, encodeRow, type BackupRow };

/** The format's version, in every manifest. */
export const BACKUP_FORMAT = 1;

/** A segment as the manifest lists it. */
export interface SegmentRecord {
  /** The blob's name in the backup container. */
  name: string;
  /** The entity type whose rows it holds. */
  entityType: string;
  rows: number;
  /** Its size as stored (bytes, compressed). */
  bytes: number;
  /** SHA-256 of the stored bytes, hex. */
  sha256: string;
}

/** A complete snapshot (see the file comment). Times are ISO 8601, UTC. */
export interface SnapshotManifest {
  format: typeof BACKUP_FORMAT;
  kind: 'snapshot';
  id: string;
  /** The table prefix the rows were read under. */
  tablePrefix: string;
  /** The hash of the schema's layout (the catalogue's) and the schema's SDL. */
  schemaHash: string;
  sdl: string;
  startedAt: string;
  finishedAt: string;
  /**
   * The latest service Timestamp among the rows read: when it is before `startedAt`, no row read changed while the
   * snapshot ran (a delete meanwhile leaves no row to tell, so this is a lower bound on the writes it overlapped).
   */
  latestEntityTimestamp: string;
  rows: number;
  /** Blobs of `@blob` fields copied (src/backup/blob-copies.ts). */
  blobs: number;
  segments: SegmentRecord[];
}

/** Lines (without newlines) as a segment's stored bytes — gzip of NDJSON — with their SHA-256 (hex). */
export function encodeLines(lines: readonly string[]): { bytes: Buffer; sha256: string } {
  const bytes = gzipSync(Buffer.from(lines.map((l) => `${l}\n`).join(''), 'utf8'));
  return { bytes, sha256: createHash('sha256').update(bytes).digest('hex') };
}

/**
 * A segment's stored bytes back as its lines, decoded by `decode` (given where each is: `<name>:<line>`), checked
 * against its record: SHA-256, gzip, count.
 * @param what what a line is, for the message (`rows`, `changes`)
 * @throws TablegraphError DATA_INTEGRITY (reason BackupCorrupt) naming the segment or line
 */
export function decodeLines<T>(
  bytes: Buffer,
  record: { name: string; rows: number; sha256: string },
  what: string,
  decode: (line: string, where: string) => T,
): T[] {
  if (createHash('sha256').update(bytes).digest('hex') !== record.sha256) throw corrupt(record.name, 'its SHA-256 differs from the manifest’s');
  let text: string;
  try {
    text = gunzipSync(bytes).toString('utf8');
  } catch {
    throw corrupt(record.name, 'it is not gzip');
  }
  const items = text
    .split('\n')
    .filter((l) => l !== '')
    .map((l, i) => decode(l, `${record.name}:${i + 1}`));
  if (items.length !== record.rows) throw corrupt(record.name, `it holds ${items.length} ${what}, the manifest says ${record.rows}`);
  return items;
}

/**
 * A manifest's JSON of format BACKUP_FORMAT and `kind`, its fields not yet checked.
 * @throws TablegraphError DATA_INTEGRITY (reason BackupCorrupt) naming `where`
 */
export function manifestOfKind<T>(json: string, where: string, kind: string): Partial<T> {
  let m: Partial<T> & { format?: unknown; kind?: unknown };
  try {
    m = JSON.parse(json) as Partial<T>;
  } catch {
    throw corrupt(where, 'the manifest is not JSON');
  }
  if (m.format !== BACKUP_FORMAT || m.kind !== kind)
    throw corrupt(where, `the manifest is not a format ${BACKUP_FORMAT} ${kind === 'changes' ? 'pass' : kind}`);
  return m;
}

/** Rows as a segment's stored bytes, with their SHA-256 (hex). */
export function encodeSegment(rows: BackupRow[]): { bytes: Buffer; sha256: string } {
  return encodeLines(rows.map((r) => encodeRow(r)));
}

/** A segment's stored bytes back as rows, checked against its record. @throws TablegraphError DATA_INTEGRITY */
export function decodeSegment(bytes: Buffer, record: SegmentRecord): BackupRow[] {
  return decodeLines(bytes, record, 'rows', decodeRow);
}

/** A manifest's JSON, checked. @throws TablegraphError DATA_INTEGRITY naming `where` */
export function parseManifest(json: string, where: string): SnapshotManifest {
  const m = manifestOfKind<SnapshotManifest>(json, where, 'snapshot');
  const texts = [m.id, m.tablePrefix, m.schemaHash, m.sdl, m.startedAt, m.finishedAt, m.latestEntityTimestamp];
  if (texts.some((t) => typeof t !== 'string') || typeof m.rows !== 'number' || typeof m.blobs !== 'number' || !Array.isArray(m.segments))
    throw corrupt(where, 'the manifest misses a field');
  for (const s of m.segments) {
    const ok = typeof s?.name === 'string' && typeof s.entityType === 'string' && typeof s.rows === 'number' && typeof s.sha256 === 'string';
    if (!ok) throw corrupt(where, 'a segment record is malformed');
  }
  return m as SnapshotManifest;
}
