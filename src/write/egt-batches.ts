/**
 * Bulk writes as entity-group transactions: entities grouped by table and PartitionKey, cut into EGTs within the
 * target's limits (operations and bytes), sent with bounded parallelism ("Entity Group Transactions";
 * "Performance and scalability checklist": batch, and bound the parallelism). Every operation is an
 * upsert-replace, so writing the same entities twice leaves the store as once.
 */
import pLimit from 'p-limit';
import { ErrorCode, isTablegraphError } from '../errors';
import type { TableWrite } from '../model/entity-codec';
import { estimateEntityBytes, limitsFor } from '../storage/limits';
import type { TableStore } from '../storage/table-store';
import type { StorageObserver, StorageTarget } from '../storage/storage-types';

/** One EGT to send: at most the target's operation count and bytes, one PartitionKey, one operation per entity. */
export interface EgtBatch {
  table: string;
  partitionKey: string;
  writes: TableWrite[];
}

/** Room kept in each EGT for the multipart envelope around the entities (bytes). */
const ENVELOPE_BYTES_PER_OPERATION = 512;

/**
 * Groups `writes` into EGT batches. A later write of the same entity (table, PartitionKey, RowKey) replaces an
 * earlier one, since an EGT may hold one operation per entity. Batches come out grouped by table and partition,
 * in first-seen order.
 */
export function planEgtBatches(writes: Iterable<TableWrite>, target: StorageTarget): EgtBatch[] {
  const limits = limitsFor(target);
  const byPartition = new Map<string, Map<string, TableWrite>>();
  for (const w of writes) {
    const key = `${w.table}\u0000${w.entity.partitionKey}`;
    let entities = byPartition.get(key);
    if (!entities) byPartition.set(key, (entities = new Map()));
    entities.set(w.entity.rowKey, w);
  }
  const batches: EgtBatch[] = [];
  for (const entities of byPartition.values()) {
    let current: EgtBatch | undefined;
    let bytes = 0;
    for (const w of entities.values()) {
      const size = estimateEntityBytes(w.entity) + ENVELOPE_BYTES_PER_OPERATION;
      if (!current || current.writes.length >= limits.maxTransactionOperations || bytes + size > limits.maxTransactionBytes) {
        current = { table: w.table, partitionKey: w.entity.partitionKey, writes: [] };
        batches.push(current);
        bytes = 0;
      }
      current.writes.push(w);
      bytes += size;
    }
  }
  return batches;
}

export interface WriteBatchesOptions {
  /** EGTs in flight at once (transactions). */
  concurrency: number;
  observer?: StorageObserver;
  /** Called after each EGT commits, with the entities it wrote. */
  onBatch?(batch: EgtBatch): void;
  /**
   * Times an EGT storage did not answer (STORAGE_UNAVAILABLE: a timeout, a lost answer, a 5xx after the SDK's
   * retries) is sent again before its failure is thrown (default 0). Upserts of the same entities are idempotent, so
   * one applied with its answer lost is harmless to send again. Waits 0.5 s, doubling, at most 8 s between sends.
   */
  resends?: number;
}

/**
 * Sends every batch as one EGT of upsert-replace operations. Stops at the first failure and rethrows it (EGTs
 * already committed stay committed; each is atomic, and re-running the same writes is harmless).
 * @throws TablegraphError from TableStore.submitTransaction (LIMIT_EXCEEDED, STORAGE_UNAVAILABLE — after `resends`
 *   sends again —, …)
 */
export async function writeEgtBatches(store: TableStore, batches: EgtBatch[], opts: WriteBatchesOptions): Promise<void> {
  const limit = pLimit(opts.concurrency);
  const tables = new Set(batches.map((b) => b.table));
  for (const t of tables) await store.ensureTable(t);
  await Promise.all(
    batches.map((batch) =>
      limit(async () => {
        const ops = batch.writes.map((w) => ({ kind: 'upsertReplace' as const, entity: w.entity }));
        for (let sent = 0; ; sent++) {
          try {
            await store.submitTransaction(batch.table, ops, { observer: opts.observer });
            break;
          } catch (e) {
            if (sent >= (opts.resends ?? 0) || !isTablegraphError(e, ErrorCode.STORAGE_UNAVAILABLE)) throw e;
            await new Promise((r) => setTimeout(r, Math.min(500 * 2 ** sent, 8000)));
          }
        }
        opts.onBatch?.(batch);
      }),
    ),
  );
}
