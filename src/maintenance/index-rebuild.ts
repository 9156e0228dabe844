/**
 * `rebuild-index`: makes one index equal to what the primary entities derive (docs/architecture.md, "Maintenance") —
 * for an index added to an existing schema, or one that verify found out of line. It reads whole tables on purpose
 * (index-state.ts), then writes only what differs: the missing and different index entities, and deletes of the
 * orphaned ones, as EGTs per partition ("Entity Group Transactions", "Index Entities Pattern").
 */
import pLimit from 'p-limit';
import { ErrorCode, isTablegraphError } from '../errors';
import { type IndexModel, type Model } from '../model/types';
import type { TableStore } from '../storage/table-store';
import { limitsFor } from '../storage/limits';
import type { EntityAddress, StorageObserver, StoredEntity, TransactionOperation } from '../storage/storage-types';
import { planEgtBatches } from '../write/egt-batches';
import { addressKey } from '../storage/address-key';
import { readIndexState, resolveIndex, type IndexState, type ScanProgress } from './index-state';
import { readPrimary, settlePrimary, type OwnIndexEntity } from '../write/index-settle';
import { addressOfWrite, derivesIndexEntity, valuesIfOf } from '../model/entity-codec';

/** Progress: the scan (entities read so far), then the repair (index entities written and deleted so far). */
export interface RebuildProgress extends ScanProgress {
  phase: 'scan' | 'repair';
  upserted: number;
  deleted: number;
}

export interface RebuildIndexOptions {
  store: TableStore;
  model: Model;
  /** The entity type, e.g. `Order`. */
  type: string;
  /** One of its indexes, e.g. `byLastName` (any scope). */
  index: string;
  /** EGTs and deletes in flight at once (default 8). */
  concurrency?: number;
  onProgress?(p: RebuildProgress): void;
  observer?: StorageObserver;
  /** Awaited after the scans, before any write: lets tests write entities between the read and the repair. */
  afterScan?(): void | Promise<void>;
  /** Awaited before each EGT with its entities' count: a caller's write budget (an online build's, per second). */
  pace?(entities: number): Promise<void>;
}

export interface RebuildResult {
  type: string;
  index: string;
  table: string;
  /** Entities read by the scans (entities, all tables). */
  scanned: number;
  /** Primary entities read and the index entities they derive (entities). */
  primaries: number;
  expected: number;
  /** Index entities inserted (missing) or replaced (different) (entities). */
  upserted: number;
  /** Orphaned index entities deleted (entities). */
  deleted: number;
  /** Writes and deletes left alone because the entity changed since it was read: someone else wrote it (entities). */
  skipped: number;
  /** Addresses several primaries derive, and primaries whose index entity cannot be computed: left as they are. */
  unresolved: number;
  /** Wall time (seconds). */
  seconds: number;
}

/**
 * Rebuilds index `index` of entity type `type`. Missing index entities are inserted (create: refused if one
 * appeared meanwhile), different ones replaced with If-Match on the ETag read, orphaned ones deleted with
 * If-Match on the ETag read, all in EGTs per partition; an operation refused with 409/412/404 means someone —
 * the message worker, a mutation's EGT — wrote that entity since the scan, from a fresher read: it is dropped
 * from its EGT (the rest is sent again), skipped and counted.
 *
 * Safe while the server serves: it never overwrites or deletes a write made after its scan, and it reads the
 * index table before the primaries, so an index entity the worker writes for a primary changed meanwhile is
 * either unseen or seen with an ETag that no longer matches. A primary written meanwhile is re-derived by the
 * worker anyway (its fan-out message is queued before its EGT commits); one whose old index entity its writer
 * removed before this rebuild inserted it again is found by reading each repaired primary once more after the
 * writes, and settled (src/write/index-settle.ts); an orphan's primary is read again before its delete, for an
 * index sharing its primaries' table (read once) may have been read in the other order. A unique index's
 * reservation made for a create still in flight looks orphaned. Run verify once the work queue drained. Addresses that several primaries derive (a violated unique index) and primaries that cannot derive
 * (bad key values) are counted in `unresolved`, not guessed at.
 * @throws TablegraphError BAD_USER_INPUT for an unknown type or index (the message lists the known ones);
 *   STORAGE_UNAVAILABLE, LIMIT_EXCEEDED and others from the store (what was written before stays written, and
 *   running the rebuild again continues from there)
 */
export async function rebuildIndex(opts: RebuildIndexOptions): Promise<RebuildResult> {
  const started = performance.now();
  const { store, observer } = opts;
  const index = resolveIndex(opts.model, opts.type, opts.index);
  const progress: RebuildProgress = { phase: 'scan', table: index.layout.table, scanned: 0, upserted: 0, deleted: 0 };
  const report = () => opts.onProgress?.({ ...progress });
  const [state] = await readIndexState({
    store,
    indexes: [index],
    observer,
    onProgress: (p) => {
      Object.assign(progress, p);
      report();
    },
  });
  await opts.afterScan?.();
  progress.phase = 'repair';
  progress.table = index.layout.table;
  report();

  const limit = pLimit(opts.concurrency ?? 8);
  let skipped = 0;
  if (state.repairs.length > 0) await store.ensureTable(index.layout.table);
  const etags = new Map(state.repairs.flatMap((r) => (r.etag ? [[addressKey({ table: r.write.table, ...r.write.entity }), r.etag] as const] : [])));
  const batches = planEgtBatches(
    state.repairs.map((r) => r.write),
    store.target,
  );
  const written = new Map<string, string>();
  const writes = batches.map((batch) =>
    limit(async () => {
      await opts.pace?.(batch.writes.length);
      const ops: TransactionOperation[] = batch.writes.map((w) => {
        const etag = etags.get(addressKey({ table: w.table, ...w.entity }));
        return etag ? { kind: 'update', entity: w.entity, mode: 'replace', ifMatch: etag } : { kind: 'create', entity: w.entity };
      });
      const done = await submitSkippingChanged(store, batch.table, ops, observer, written);
      skipped += ops.length - done;
      progress.upserted += done;
      report();
    }),
  );
  await Promise.all(writes);
  // A primary written since the scan may have had its old index entity removed before the write above put it back.
  // Once per primary, with every index entity written for it (one per element over a list).
  for (const { primary, primaryEtag, own } of repairsByPrimary(state.repairs, written)) {
    const now = await store.getEntity(primary, { observer });
    if ((now?.etag ?? null) === primaryEtag) continue;
    await settlePrimary(store, index, primary, own, { observer });
  }

  const orphans = await stillOrphaned(store, index, state.orphans, limit, observer);
  skipped += state.orphans.length - orphans.length;
  const deletes = deleteBatches(orphans, limitsFor(store.target).maxTransactionOperations).map((batch) =>
    limit(async () => {
      const done = await submitSkippingChanged(store, batch.table, batch.ops, observer);
      skipped += batch.ops.length - done; // rewritten since the scan (it may belong to a primary now), or gone
      progress.deleted += done;
      report();
    }),
  );
  await Promise.all(deletes);

  const { diff } = state;
  return {
    type: diff.type,
    index: diff.index,
    table: diff.table,
    scanned: progress.scanned,
    primaries: diff.primaries,
    expected: diff.expected,
    upserted: progress.upserted,
    deleted: progress.deleted,
    skipped,
    unresolved: diff.duplicates.length + diff.underivable.length,
    seconds: (performance.now() - started) / 1000,
  };
}

/**
 * The orphans whose primary, read now, does not derive them. An intra-partition index's table is read once, so a
 * primary read before a write moved its index entity looks as if it does not derive the moved one, read after it;
 * reading the primary again tells. A write after this read that derives the orphan again rewrites it (a new ETag),
 * so the delete's If-Match leaves it. One point query per orphan.
 */
async function stillOrphaned(
  store: TableStore,
  index: IndexModel,
  orphans: IndexState['orphans'],
  limit: pLimit.Limit,
  observer?: StorageObserver,
): Promise<IndexState['orphans']> {
  const kept = await Promise.all(
    orphans.map((o) =>
      limit(async () => {
        if (!o.primary) return true;
        const now = await readPrimary(store, index.entity, o.primary, { observer });
        return !derivesAddress(index, now, o);
      }),
    ),
  );
  return orphans.filter((_, i) => kept[i]);
}

/** Whether `primary` as read (null: gone) derives the index entity at `address`. */
function derivesAddress(index: IndexModel, primary: StoredEntity | null, address: EntityAddress): boolean {
  return derivesIndexEntity(index, valuesIfOf(index.entity, primary), address);
}

/** The repairs grouped by their primary, each with the index entities written for it and their new ETags. */
function repairsByPrimary(
  repairs: IndexState['repairs'],
  written: Map<string, string>,
): Array<{ primary: EntityAddress; primaryEtag: string; own: OwnIndexEntity[] }> {
  const byPrimary = new Map<string, { primary: EntityAddress; primaryEtag: string; own: OwnIndexEntity[] }>();
  for (const r of repairs) {
    const key = addressKey(r.primary);
    const group = byPrimary.get(key) ?? { primary: r.primary, primaryEtag: r.primaryEtag, own: [] };
    byPrimary.set(key, group);
    const etag = written.get(addressKey(addressOfWrite(r.write)));
    if (etag) group.own.push({ address: addressOfWrite(r.write), etag });
  }
  return [...byPrimary.values()];
}

/** Conditional deletes (If-Match: the ETag read) grouped into EGTs per table and partition, `max` each. */
function deleteBatches(orphans: IndexState['orphans'], max: number): Array<{ table: string; ops: TransactionOperation[] }> {
  const groups = new Map<string, { table: string; ops: TransactionOperation[] }>();
  const batches: Array<{ table: string; ops: TransactionOperation[] }> = [];
  for (const o of orphans) {
    const key = `${o.table}\u0000${o.partitionKey}`;
    let batch = groups.get(key);
    if (!batch || batch.ops.length >= max) {
      groups.set(key, (batch = { table: o.table, ops: [] }));
      batches.push(batch);
    }
    batch.ops.push({ kind: 'delete', partitionKey: o.partitionKey, rowKey: o.rowKey, ifMatch: o.etag });
  }
  return batches;
}

/** True for the refusals that mean "this entity changed since it was read": 409, 412, 404 of an entity. */
function isChangedMeanwhile(e: unknown): boolean {
  if (isTablegraphError(e, ErrorCode.CONFLICT)) return true;
  return isTablegraphError(e, ErrorCode.NOT_FOUND) && e.details.reason !== 'TableNotFound';
}

/**
 * Sends `ops` as one EGT; when the service refuses one operation because its entity changed meanwhile, sends
 * the others again without it (an EGT applies all or nothing). Returns the operations applied; `etags` gets each
 * written entity's new ETag by address key.
 */
export async function submitSkippingChanged(
  store: TableStore,
  table: string,
  ops: TransactionOperation[],
  observer?: StorageObserver,
  etags?: Map<string, string>,
): Promise<number> {
  let pending = ops;
  while (pending.length > 0) {
    try {
      const result = await store.submitTransaction(table, pending, { observer });
      pending.forEach((op, i) => {
        if (op.kind !== 'delete' && result[i]) etags?.set(addressKey({ table, ...op.entity }), result[i]!);
      });
      return pending.length;
    } catch (e) {
      if (!isChangedMeanwhile(e)) throw e;
      const failed = (e as { details: Record<string, unknown> }).details.operationIndex;
      if (typeof failed !== 'number') return submitOneByOne(store, table, pending, observer, etags);
      pending = pending.filter((_, i) => i !== failed);
    }
  }
  return 0;
}

/** The fallback when a refused EGT does not name its failing operation: each operation on its own. */
async function submitOneByOne(
  store: TableStore,
  table: string,
  ops: TransactionOperation[],
  observer?: StorageObserver,
  etags?: Map<string, string>,
): Promise<number> {
  let applied = 0;
  for (const op of ops) {
    try {
      const [etag] = await store.submitTransaction(table, [op], { observer });
      if (op.kind !== 'delete' && etag) etags?.set(addressKey({ table, ...op.entity }), etag);
      applied++;
    } catch (e) {
      if (!isChangedMeanwhile(e)) throw e;
    }
  }
  return applied;
}
