/**
 * Keeps the change log (src/model/change-log.ts) from growing without end: the writers of a partition delete its
 * change entities older than the retention. A process trims a partition it wrote at most once per quarter of the
 * retention: one range query for the oldest expired change entities (keys only, 100 at most: one EGT) and one EGT
 * that deletes them, repeated while a page comes back full. Trimming is best effort and never fails a write: an
 * EGT that meets a change entity another process deleted first fails whole, and the next trim does it.
 *
 * Guide sections: "Log tail pattern", "Entity Group Transactions".
 */
import { CHANGE_ROW_KEY_END, changesSinceBound } from '../model/change-log';
import type { Logger } from '../log';
import type { TableStore } from '../storage/table-store';

/** Change entities one EGT deletes (the EGT limit). */
const BATCH = 100;
/** EGTs one trim of a partition sends at most; what is left waits for the next trim. */
const MAX_BATCHES = 10;

export interface ChangeLogTrimOptions {
  store: TableStore;
  /** How long change entities are kept (ms): a subscriber may resume from a cursor this old. */
  retentionMs: number;
  log?: Logger;
}

/** Trims the partitions this process writes. One per WriteExecutor. */
export class ChangeLogTrimmer {
  /** When each partition (table, PartitionKey) was last trimmed by this process (ms since the epoch). */
  private readonly lastTrim = new Map<string, number>();
  private readonly running = new Set<Promise<void>>();

  constructor(private readonly opts: ChangeLogTrimOptions) {}

  /** A write committed in this partition: trims it when this process has not for a quarter of the retention. */
  touched(table: string, partitionKey: string, now = Date.now()): void {
    const key = `${table}\u0000${partitionKey}`;
    const interval = this.opts.retentionMs / 4;
    const last = this.lastTrim.get(key);
    if (last !== undefined && now - last < interval) return;
    this.lastTrim.set(key, now);
    // Partitions not written for a while are forgotten: the map holds the recently written ones only.
    if (this.lastTrim.size > 10_000) for (const [k, t] of this.lastTrim) if (now - t >= interval) this.lastTrim.delete(k);
    const run: Promise<void> = this.trim(table, partitionKey, now).then(
      () => undefined,
      (err: unknown) => this.opts.log?.warn({ err, table, partitionKey }, 'change log: old change entities not deleted this time'),
    );
    this.running.add(run);
    void run.finally(() => this.running.delete(run));
  }

  /**
   * Deletes the change entities of one partition older than the retention.
   * @returns how many were deleted (entities)
   * @throws storage errors of the query or an EGT
   */
  async trim(table: string, partitionKey: string, now = Date.now()): Promise<number> {
    let deleted = 0;
    for (let i = 0; i < MAX_BATCHES; i++) {
      // Inverted ticks: the older a change, the larger its RowKey; the expired ones run to the end of the log.
      const page = await this.opts.store.queryRange({
        table,
        partitionKey,
        rowKeyFrom: changesSinceBound(now - this.opts.retentionMs),
        rowKeyTo: CHANGE_ROW_KEY_END,
        select: [],
        limit: BATCH,
      });
      if (page.entities.length === 0) break;
      await this.opts.store.submitTransaction(
        table,
        page.entities.map((e) => ({ kind: 'delete' as const, partitionKey, rowKey: e.rowKey, ifMatch: '*' })),
      );
      deleted += page.entities.length;
      if (page.entities.length < BATCH) break;
    }
    return deleted;
  }

  /** Waits for the trims under way (shutdown, tests). */
  async idle(): Promise<void> {
    await Promise.all([...this.running]);
  }
}
