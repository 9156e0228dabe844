/**
 * The capture journal (docs/backup.md, "Continuous backup"): which partitions were written, by ten-second bucket, so
 * that a capture pass reads the change entities of those partitions alone — range queries, never a whole table, at
 * a cost that follows the writes since the last pass, not the size of the tables.
 *
 * - A writer marks a partition (its table and PartitionKey) in the bucket of its clock before the first EGT with
 *   change entities it sends there in that bucket: an idempotent upsert of a small entity, remembered by the process,
 *   so a partition written all the time costs one mark a bucket. A change is committed only after its mark is stored.
 * - A capture pass reads the marks of the buckets from its window's start (the last complete pass's start, less the
 *   clock margin and LOOKBACK_MS) to now, and then those partitions' change entities committed since.
 * - Once a pass has copied a partition's changes, it puts the partition in the trim queue (`t` buckets) for when those
 *   change entities may go; a later pass deletes them, partition by partition. Marks and trims it no longer needs are
 *   deleted, in EGTs of one bucket.
 *
 * The journal is one table of tablegraph's own (`<prefix>TablegraphJournal`, a reserved name), in the deployment's
 * account: PartitionKey `c<bucket start>` (marks) or `t<bucket start>` (trims), 13 digits of ms since the epoch;
 * RowKey the marked table and a hash of its PartitionKey (so that it fits every target's RowKey limit); the
 * PartitionKey itself in a property. A bucket holds one entity per partition written in it: at most a few thousand a
 * second per deployment before its partition is hot ("Scalability and performance targets").
 *
 * Guide sections: "Log tail pattern", "High volume delete pattern", "Eventually consistent transactions pattern".
 */
import { createHash } from 'node:crypto';
import type { EntityToWrite, StoredEntity } from '../storage/storage-types';
import { RESERVED_NAME_PREFIX } from '../storage/reserved-names';

/** The journal's bucket (ms): a partition written all the time is marked once per bucket. */
export const JOURNAL_BUCKET_MS = 10_000;

/**
 * How long before a change's commit its mark can be, at most (ms): the writer's storage call (its timeout, default
 * 10 s), the longest a Table service may hold a request before applying it (30 s, its own limit), and clocks apart.
 */
export const LOOKBACK_MS = 60_000;

/** The properties of a journal entity: the marked table (its full name) and PartitionKey. */
const TABLE = 'T';
const PARTITION = 'P';

/** The journal table of a deployment. */
export function journalTable(tablePrefix: string): string {
  return `${tablePrefix}${RESERVED_NAME_PREFIX}Journal`;
}

/** A bucket's start (ms since the epoch) for a time (ms). */
export function bucketOf(ms: number): number {
  return Math.floor(ms / JOURNAL_BUCKET_MS) * JOURNAL_BUCKET_MS;
}

/** The journal PartitionKey of a bucket: `c` (capture marks) or `t` (trims), then 13 digits. */
export function bucketKey(kind: 'c' | 't', bucketStart: number): string {
  return `${kind}${String(Math.max(0, bucketStart)).padStart(13, '0')}`;
}

/** A bucket's start back from its PartitionKey (ms). */
export function bucketStartOf(partitionKey: string): number {
  return Number(partitionKey.slice(1));
}

/** The journal RowKey of a partition: its table, and 24 characters of a SHA-256 of its PartitionKey. */
function journalRowKey(table: string, partitionKey: string): string {
  return `${table}_${createHash('sha256').update(partitionKey).digest('base64url').slice(0, 24)}`;
}

/** A partition the journal names. */
export interface MarkedPartition {
  table: string;
  partitionKey: string;
}

/** The journal entity of a partition in a bucket. */
export function journalEntity(bucket: string, p: MarkedPartition): EntityToWrite {
  return {
    partitionKey: bucket,
    rowKey: journalRowKey(p.table, p.partitionKey),
    properties: { [TABLE]: { type: 'String', value: p.table }, [PARTITION]: { type: 'String', value: p.partitionKey } },
  };
}

/** The partition a journal entity names; undefined for one that is not a journal entity. */
export function markedPartition(e: StoredEntity): MarkedPartition | undefined {
  const table = e.properties[TABLE];
  const partitionKey = e.properties[PARTITION];
  return typeof table === 'string' && typeof partitionKey === 'string' ? { table, partitionKey } : undefined;
}
