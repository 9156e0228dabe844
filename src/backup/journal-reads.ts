/**
 * What a capture pass reads and keeps of the capture journal (src/model/capture-journal.ts): the partitions marked
 * since its window's start, their change entities, the trims that are due, and the deletes of what it no longer needs.
 * Each is a range query — of one journal partition kind, of one written partition's change entities — or an EGT of one
 * partition: nothing here reads a table of the data whole.
 *
 * Guide sections: "Log tail pattern", "High volume delete pattern", "Entity Group Transactions".
 */
import { ErrorCode, isTablegraphError } from '../errors';
import { bucketKey, bucketOf, bucketStartOf, journalEntity, journalTable, LOOKBACK_MS, markedPartition, type MarkedPartition } from '../model/capture-journal';
import { CHANGE, CHANGE_ENTITY_TYPE, CHANGE_ROW_KEY_END, CHANGE_ROW_KEY_PREFIX, changesSinceBound, changeTime } from '../model/change-log';
import type { TableStore } from '../storage/table-store';
import type { StoredEntity } from '../storage/storage-types';

/** One journal row as read: its bucket (kind and start), its keys, and the partition it names. */
export interface JournalRow {
  bucket: string;
  start: number;
  rowKey: string;
  partition: MarkedPartition;
}

/** The key of a partition, for sets and maps. */
export function partitionId(p: MarkedPartition): string {
  return `${p.table}\u0000${p.partitionKey}`;
}

/**
 * The journal's rows of one kind (`c` marks, `t` trims) in buckets before `before` (ms; absent: all): one range query
 * over the journal's PartitionKeys, page by page. A journal not made yet holds none.
 * @throws storage errors of the query
 */
export async function readJournal(store: TableStore, tablePrefix: string, kind: 'c' | 't', before?: number): Promise<JournalRow[]> {
  const to = before === undefined ? String.fromCharCode(kind.charCodeAt(0) + 1) : bucketKey(kind, before);
  const rows: JournalRow[] = [];
  try {
    for await (const page of store.scan(journalTable(tablePrefix), { partitionKeyRange: { from: kind, to } })) {
      for (const e of page) {
        const partition = markedPartition(e);
        if (partition) rows.push({ bucket: e.partitionKey, start: bucketStartOf(e.partitionKey), rowKey: e.rowKey, partition });
      }
    }
  } catch (e) {
    if (isTablegraphError(e, ErrorCode.NOT_FOUND)) return [];
    throw e;
  }
  return rows;
}

/**
 * A partition's change entities committed at or after `since` (by the service's clock; absent: every one), through
 * the store's placement: a range query of its change entities whose writers' times can be that late — from LOOKBACK_MS
 * before `since` on (a change's time is taken before its EGT is sent, and the EGT applied within that) — filtered by
 * their Timestamp. A partition whose table is gone holds none.
 * @throws storage errors of the query
 */
export async function* partitionChanges(store: TableStore, p: MarkedPartition, since?: Date): AsyncGenerator<StoredEntity[]> {
  const to = since ? changesSinceBound(since.getTime() - LOOKBACK_MS) : CHANGE_ROW_KEY_END;
  try {
    yield* store.scan(p.table, {
      partitionKey: p.partitionKey,
      rowKeyRange: { from: CHANGE_ROW_KEY_PREFIX, to },
      entityType: CHANGE_ENTITY_TYPE,
      ...(since && { committedSince: since }),
    });
  } catch (e) {
    if (!isTablegraphError(e, ErrorCode.NOT_FOUND)) throw e;
  }
}

/**
 * Puts partitions in the trim queue, in the bucket of `dueAt` (ms): an upsert each, so putting one twice is harmless.
 * @throws storage errors of the upserts
 */
export async function queueTrims(store: TableStore, tablePrefix: string, dueAt: number, partitions: Iterable<MarkedPartition>): Promise<void> {
  const table = journalTable(tablePrefix);
  const bucket = bucketKey('t', bucketOf(dueAt));
  await store.ensureTable(table);
  const rows = [...partitions].map((p) => journalEntity(bucket, p));
  for (let i = 0; i < rows.length; i += 100) {
    await store.submitTransaction(
      table,
      rows.slice(i, i + 100).map((entity) => ({ kind: 'upsertReplace' as const, entity })),
    );
  }
}

/**
 * Deletes journal rows, in EGTs of one bucket; one gone already (another pass's delete) leaves its EGT's others to
 * be deleted one by one. Best effort: what is not deleted is read, and deleted, again by a later pass.
 * @returns how many were deleted
 */
export async function deleteJournalRows(store: TableStore, tablePrefix: string, rows: JournalRow[]): Promise<number> {
  const table = journalTable(tablePrefix);
  const byBucket = new Map<string, string[]>();
  for (const r of rows) byBucket.set(r.bucket, [...(byBucket.get(r.bucket) ?? []), r.rowKey]);
  let deleted = 0;
  for (const [bucket, rowKeys] of byBucket) {
    for (let i = 0; i < rowKeys.length; i += 100) {
      const chunk = rowKeys.slice(i, i + 100);
      try {
        await store.submitTransaction(
          table,
          chunk.map((rowKey) => ({ kind: 'delete' as const, partitionKey: bucket, rowKey, ifMatch: '*' })),
        );
        deleted += chunk.length;
      } catch {
        for (const rowKey of chunk) if (await store.deleteEntity({ table, partitionKey: bucket, rowKey }).catch(() => false)) deleted++;
      }
    }
  }
  return deleted;
}

/** What one partition's trim did: change entities deleted, and whether some are kept for a subscription still. */
export interface PartitionTrim {
  deleted: number;
  kept: boolean;
}

/**
 * Deletes one partition's change entities (and fences: change-fence.ts) made before `before` (ms, the writers'
 * clock) — those of a type in `followed` only once older than `retainedAfter` (ms, by their Timestamp) — at most
 * `most`, in EGTs of 100. `kept`: some are left (a subscription's, or past `most`, or an EGT that failed).
 * @throws storage errors of the query; a failed EGT is left for a later trim
 */
export async function trimPartition(
  store: TableStore,
  p: MarkedPartition,
  limits: { before: number; followed: ReadonlySet<string>; retainedAfter: number; most: number },
): Promise<PartitionTrim> {
  const doomed: string[] = [];
  let kept = false;
  let more = false;
  const old = { partitionKey: p.partitionKey, rowKeyRange: { from: changesSinceBound(limits.before), to: CHANGE_ROW_KEY_END }, select: [CHANGE.of] };
  try {
    for await (const page of store.scan(p.table, old)) {
      for (const e of page) {
        if (changeTime(e.rowKey) >= limits.before) continue;
        if (limits.followed.has(String(e.properties[CHANGE.of])) && Date.parse(e.timestamp ?? '') >= limits.retainedAfter) kept = true;
        else doomed.push(e.rowKey);
      }
      if (doomed.length >= limits.most) {
        more = true;
        break;
      }
    }
  } catch (e) {
    if (isTablegraphError(e, ErrorCode.NOT_FOUND)) return { deleted: 0, kept: false };
    throw e;
  }
  let deleted = 0;
  for (let i = 0; i < doomed.length; i += 100) {
    const batch = doomed.slice(i, i + 100).map((rowKey) => ({ kind: 'delete' as const, partitionKey: p.partitionKey, rowKey, ifMatch: '*' }));
    await store.submitTransaction(p.table, batch).then(
      () => (deleted += batch.length),
      () => undefined, // another pass deleted one of them first: the rest go next time
    );
  }
  return { deleted, kept: kept || more || doomed.length > deleted };
}
