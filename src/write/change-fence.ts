/**
 * The fate of an EGT whose answer was lost, decided by its change entities (src/model/change-log.ts). A write that
 * timed out may still be applied later — a Table service can hold a request past the client's timeout (a busy
 * service, an Azurite stopped a while) — and then a client told it failed finds it stored, and a change committed
 * later than the change log's readers look back (src/read/change-poller.ts) never reaches a live subscriber while one
 * resuming from an older cursor gets it: two streams that disagree for good. An EGT is all or nothing, and a change
 * entity is inserted in it, so a fence — an entity inserted at a change entity's RowKey — decides it:
 * - the fence goes in: the EGT, whenever it comes, is refused whole (its change entity's insert meets the fence) — the
 *   write was not applied, and never will be;
 * - the change entity is there: the EGT was applied. Committed later than its EGT's timeout after its time, each of
 *   its changes is told again, by a relay (a change entity of the same write at a time of now, naming the one it tells
 *   again), which readers deliver once for both.
 * The committer waits for the fate a little (`decide`); a fence storage does not answer by then is tried again in the
 * background, with back-off, for some five minutes (the EGT's own fate is settled by the service within its timeout).
 * An EGT with no change entity has nothing to fence.
 *
 * Guide sections: "Log tail pattern", "Entity Group Transactions".
 */
import { backOff } from 'exponential-backoff';
import { ErrorCode, isTablegraphError } from '../errors';
import { CHANGE_ENTITY_TYPE, changeTime, fenceEntity, isChangeEntity, nextChangeTime, relayEntity } from '../model/change-log';
import { ENTITY_TYPE_PROPERTY } from '../model/types';
import type { Logger } from '../log';
import type { TableStore } from '../storage/table-store';
import type { JournalMarks } from './journal-marks';
import type { TransactionOperation } from '../storage/storage-types';

/** Attempts of one fence in the background (with back-off from 1 s to 30 s: some five minutes). */
const FENCE_ATTEMPTS = 14;

/** What a fence found: the EGT applied, or fenced off (it never will be); unknown while storage does not answer. */
export type EgtFate = 'applied' | 'fenced' | 'unknown';

export interface ChangeFenceOptions {
  store: TableStore;
  /**
   * A change committed later than this after its time (ms) is told again by a relay: the least time the change log's
   * readers look back (the storage timeout: an EGT is applied within one of its change time, or answered).
   */
  lateAfterMs: number;
  /** With capture on: the capture journal, where a partition whose changes are told again is marked first. */
  journal?: JournalMarks;
  log?: Logger;
}

/** One EGT's change entities: where they are, and their RowKeys. */
interface Fenced {
  table: string;
  partitionKey: string;
  rowKeys: string[];
}

/** The fences of one writer (one per WriteExecutor). */
export class ChangeFences {
  private readonly running = new Set<Promise<unknown>>();
  private stopped = false;

  constructor(private readonly opts: ChangeFenceOptions) {}

  /**
   * The fate of an EGT of `table` (its `operations` as sent) whose answer was lost, as its change entities tell it,
   * within `withinMs` (ms); past it, the fence goes on in the background.
   * @returns undefined when the EGT has no change entity (nothing tells its fate)
   */
  async decide(table: string, operations: readonly TransactionOperation[], withinMs: number): Promise<EgtFate | undefined> {
    const egt = changesOf(table, operations);
    if (!egt) return undefined;
    const deadline = Date.now() + withinMs;
    for (let wait = 250; ; wait *= 2) {
      try {
        return await this.fenceOne(egt);
      } catch (e) {
        if (this.stopped || Date.now() + wait > deadline) break;
        this.opts.log?.debug({ err: e, table }, 'change log: the fence of an unanswered EGT was not answered either; trying again');
        await new Promise((r) => setTimeout(r, wait));
      }
    }
    this.inBackground(egt);
    return 'unknown';
  }

  /** Waits for the fences under way in the background (tests). */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.all([...this.running]);
  }

  /** Stops (shutdown): the attempt in hand ends, none follows; what is not fenced then is logged. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.idle();
  }

  private inBackground(egt: Fenced): void {
    const attempts = { numOfAttempts: FENCE_ATTEMPTS, startingDelay: 1000, maxDelay: 30_000, retry: () => !this.stopped };
    const run = backOff(() => this.fenceOne(egt), attempts).catch((err: unknown) =>
      this.opts.log?.error(
        { err, table: egt.table, partitionKey: egt.partitionKey, rowKey: egt.rowKeys[0] },
        'change log: an EGT whose answer was lost could not be fenced: if it is applied late, a live subscriber may miss it',
      ),
    );
    this.running.add(run);
    void run.finally(() => this.running.delete(run));
  }

  /** One attempt: the fence inserted, or the change entity found (and told again when it came late). */
  private async fenceOne(egt: Fenced): Promise<Exclude<EgtFate, 'unknown'>> {
    const { store, log } = this.opts;
    const { table, partitionKey, rowKeys } = egt;
    try {
      await store.createEntity(table, fenceEntity(partitionKey, rowKeys[0]));
      log?.info({ table, partitionKey, rowKey: rowKeys[0] }, 'change log: fenced an EGT whose answer was lost: it can no longer be applied');
      return 'fenced';
    } catch (e) {
      if (!isTablegraphError(e, ErrorCode.CONFLICT)) throw e;
    }
    // There already: the change entity (the EGT was applied), or a fence of an earlier attempt.
    const first = await store.getEntity({ table, partitionKey, rowKey: rowKeys[0] });
    if (!first || first.properties[ENTITY_TYPE_PROPERTY] !== CHANGE_ENTITY_TYPE) return 'fenced';
    const lateBy = Date.parse(first.timestamp ?? '') - changeTime(first.rowKey);
    if (lateBy > this.opts.lateAfterMs) {
      // Committed late, maybe after the capture passes stopped reading its partition's mark: marked again, now.
      await this.opts.journal?.mark(table, partitionKey);
      for (const rowKey of rowKeys) {
        const change = rowKey === first.rowKey ? first : await store.getEntity({ table, partitionKey, rowKey });
        if (change) await store.createEntity(table, relayEntity(change, nextChangeTime()));
      }
      log?.warn({ table, partitionKey, changes: rowKeys.length, lateByMs: lateBy }, 'change log: an EGT applied late: its changes are told again');
    }
    return 'applied';
  }
}

/** An EGT's change entities, or undefined when it has none. */
function changesOf(table: string, operations: readonly TransactionOperation[]): Fenced | undefined {
  const rowKeys: string[] = [];
  let partitionKey = '';
  for (const op of operations) {
    if (op.kind !== 'create' || !isChangeEntity(op.entity)) continue;
    partitionKey = op.entity.partitionKey;
    rowKeys.push(op.entity.rowKey);
  }
  return rowKeys.length > 0 ? { table, partitionKey, rowKeys } : undefined;
}
