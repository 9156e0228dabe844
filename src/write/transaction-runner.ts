/**
 * Runs a transaction (docs/reads-and-writes.md, "Transactions"): reads what its items need in waves (group-read.ts),
 * plans them as one EGT (transaction-plan.ts) and sends it. An EGT is all or nothing ("Entity Group Transactions"):
 * every item is written, or none. What another process changed since the read (a summary holder, an entity written
 * without `ifMatch`) makes the transaction read again and retry; what is the client's own — a stale `ifMatch`, an
 * entity that exists — fails it, naming the item. A failure without an answer (a timeout, a lost reply) is settled by
 * reading the items back: each carries its attempt's WriteId once the EGT was applied. What the worker keeps after it —
 * inter-partition index entities, summaries held elsewhere, copies, a delete's dependents — is handed to it as a single
 * mutation hands it ("Eventually consistent transactions pattern"): the items' fan-out messages go out before the EGT,
 * are withdrawn when it is known not applied, and stay when it may be (the worker settles them on what is stored). The
 * items' unique values are reserved after the messages and before the EGT, confirmed after it, released when it is
 * known not applied (transaction-reservations.ts).
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { ErrorCode, isTablegraphError, TablegraphError } from '../errors';
import type { JournalMarks } from './journal-marks';
import { CHANGE, CHANGE_ENTITY_TYPE, changedPartition, isChangeEntity, stampChanges } from '../model/change-log';
import { ENTITY_TYPE_PROPERTY, type Model } from '../model/types';
import { writtenBy } from '../model/wide-entities';
import type { TableStore } from '../storage/table-store';
import type { EntityToWrite, StorageObserver, StoredEntity } from '../storage/storage-types';
import type { WriteResult } from './commit-types';
import { readEntity, readGroupState } from './group-read';
import { itemError, planTransaction, type TransactionItem, type TransactionPlan } from './transaction-plan';
import { addressOf } from './write-plan';
import { encodeBatches, entityMessage } from '../queue/messages';
import { CLOCK_MARGIN_MS, leaseMs } from './reservations';
import { confirmItemKeys, releaseItemKeys, reserveItemKeys } from './transaction-reservations';
import type { SentMessage, WorkQueueSender } from '../queue/sender';

/** Reads of the items after an EGT whose outcome is not known, before it is said to be unknown (reads). */
const READ_BACK_ATTEMPTS = 4;

export interface TransactionRunnerOptions {
  model: Model;
  store: TableStore;
  /** Attempts when other processes keep changing what was read (attempts). */
  maxAttempts: number;
  /** Continuous backup captures writes: each item's change entity carries its image (group-plan.ts GroupTarget). */
  capture?: boolean;
  /** Told of the partition once a transaction committed there (the change log's trimmer). */
  committed?(table: string, partitionKey: string): void;
  /** With capture on: the capture journal, where the partition is marked before its EGT (journal-marks.ts). */
  journal?: JournalMarks;
  /** Where the items' fan-out messages go, before the EGT: required when an item's type has anything eventual. */
  workQueue?: WorkQueueSender;
}

/** How an attempt ended; `failed` with `mayApply`: not known applied, and it may still be (its messages stay). */
type Outcome =
  | { kind: 'applied'; results: WriteResult[] }
  /** Try again: another process changed what was read, or (`error`) another attempt of an item's entity holds a key. */
  | { kind: 'retry'; error?: unknown }
  | { kind: 'failed'; error: unknown; mayApply?: true };

/** Runs transactions; one instance serves every request of a process. */
export class TransactionRunner {
  constructor(private readonly opts: TransactionRunnerOptions) {}

  /**
   * @param items the writes, their inputs complete (keys, the tenant), each checked already (write-executor.ts)
   * @returns each item's result, in order: the entity as written, with its new ETag (a delete: as it was)
   * @throws TablegraphError with `itemIndex`: CONFLICT (ETagMismatch, EntityAlreadyExists, HasDependents,
   *   UniqueKeyTaken; ReservationBusy, with `heldUntil`, after `maxAttempts`), NOT_FOUND, BAD_USER_INPUT (a unique value
   *   two items give), FORBIDDEN — nothing written; LIMIT_EXCEEDED when the whole does not fit one EGT;
   *   STORAGE_UNAVAILABLE (reason Contention after `maxAttempts`; or storage's own, its outcome not known: read the
   *   entities before writing again)
   */
  async run(items: TransactionItem[], observer?: StorageObserver): Promise<WriteResult[]> {
    // Every attempt's ids, per item: a reservation an earlier attempt of this call left is the item's own.
    const own = items.map(() => new Set<string>());
    for (let attempt = 1; ; attempt++) {
      const outcome = await this.attempt(items, own, observer);
      if (outcome.kind === 'applied') return outcome.results;
      if (outcome.kind === 'failed') throw outcome.error;
      if (attempt >= this.opts.maxAttempts) {
        // A key another attempt of the same entity holds says until when; otherwise other writers kept winning.
        throw (
          outcome.error ??
          new TablegraphError(ErrorCode.STORAGE_UNAVAILABLE, `The transaction gave up after ${attempt} attempts against concurrent writers`, {
            reason: 'Contention',
          })
        );
      }
      // Writers of other processes in this partition: back off, exponentially with jitter, before reading again.
      await delay(Math.random() * Math.min(1000, 10 * 2 ** attempt));
    }
  }

  /**
   * One attempt: read, plan, send the worker's part, reserve the unique values, mark the journal, send the EGT; undo
   * what it sent and reserved when it is known not applied.
   */
  private async attempt(items: TransactionItem[], own: Array<Set<string>>, observer?: StorageObserver): Promise<Outcome> {
    const { model, store } = this.opts;
    const table = addressOf(items[0].write, items[0].input).table;
    const writeIds = items.map(() => randomUUID());
    writeIds.forEach((id, i) => own[i].add(id));
    const readers = items.map((item, i) => ({ ...item, entity: item.write.entity, address: addressOf(item.write, item.input), ownAttempts: own[i] }));
    const state = await readGroupState(model, store, readers, new Map(), observer);
    const seal = this.opts.capture ? (e: EntityToWrite) => store.sealed(e) : undefined;
    const plan = planTransaction(model, items, state, { target: store.target, table, writeIds, ...(seal && { seal }) });
    const stamped = stampChanges(plan.operations);
    // The worker's part first, then the reservations: a crash after either leaves a message naming what to settle.
    const sent = await this.sendFanout(plan);
    const reservedUntil = new Date(Date.now() + leaseMs(store.timeoutMs));
    const reserved = await reserveItemKeys(store, plan.plans, readers, { reservedUntil, observer });
    if ('error' in reserved) {
      if (reserved.released) await this.withdraw(sent);
      return reserved.busy ? { kind: 'retry', error: reserved.error } : { kind: 'failed', error: reserved.error };
    }
    // A reservation left behind is the worker's to clear, and the message names it: the message stays then.
    const undo = async () => (await releaseItemKeys(store, reserved.held, observer)) && (await this.withdraw(sent));
    // Its partition in the capture journal before any change of it can be committed (journal-marks.ts).
    const changed = this.opts.journal && changedPartition(stamped);
    if (changed !== undefined)
      await this.opts.journal!.mark(table, changed, observer).catch(async (e: unknown) => {
        await undo();
        throw e;
      });
    // Past the lease no EGT may go out: the keys would be free for another entity meanwhile.
    if (reserved.held.length > 0 && Date.now() + store.timeoutMs > reservedUntil.getTime() - CLOCK_MARGIN_MS) {
      await undo();
      return { kind: 'retry' };
    }
    let outcome: Outcome;
    try {
      const etags = await store.submitTransaction(table, stamped, { observer });
      outcome = { kind: 'applied', results: results(plan, (i) => etags[plan.owners.findIndex((o) => 'write' in o && o.write === i)]) };
    } catch (e) {
      outcome = await this.afterFailure(items, { ...plan, operations: stamped }, e, observer);
    }
    if (outcome.kind === 'applied') {
      this.opts.committed?.(table, plan.plans[0].address.partitionKey);
      await confirmItemKeys(store, reserved.held, observer);
    } else if (outcome.kind === 'retry' || !outcome.mayApply) await undo();
    return outcome;
  }

  /**
   * Sends the fan-out messages of the items that have any, as few queue messages as fit (messages.ts encodeBatches).
   * @returns what was sent, to withdraw if the EGT is known not applied
   * @throws the queue's error once what was sent is withdrawn (nothing of the transaction is written then);
   *   CONFIG_INVALID when there is something to send and no work queue
   */
  private async sendFanout(plan: TransactionPlan): Promise<SentMessage[]> {
    const drafts = plan.plans.flatMap((p) => (p.fanout ? [entityMessage(p.fanout)] : []));
    if (drafts.length === 0) return [];
    const queue = this.opts.workQueue;
    if (!queue) throw new TablegraphError(ErrorCode.CONFIG_INVALID, 'This process has no work queue for what the transaction leaves to the worker.');
    const sent: SentMessage[] = [];
    try {
      for (const { text } of encodeBatches(drafts)) {
        const message = await queue.send(text);
        if (message) sent.push(message);
      }
    } catch (e) {
      await this.withdraw(sent);
      throw e;
    }
    return sent;
  }

  /** Withdraws messages of an attempt known not applied (best effort: one left is settled by the worker). */
  private async withdraw(sent: SentMessage[]): Promise<void> {
    const queue = this.opts.workQueue;
    if (queue?.withdraw) await Promise.all(sent.map((m) => queue.withdraw!(m).catch(() => undefined)));
  }

  /** What an EGT's failure means: applied after all (a lost answer), another process's doing (retry), or an item's. */
  private async afterFailure(items: TransactionItem[], plan: TransactionPlan, error: unknown, observer?: StorageObserver): Promise<Outcome> {
    const named = isTablegraphError(error) && typeof error.details.operationIndex === 'number' ? (error.details.operationIndex as number) : undefined;
    // Deletes alone leave nothing to read back that would tell their own attempt from another client's delete.
    if (mayBeOwnAttempt(error) && !plan.plans.some((p) => p.values)) return { kind: 'failed', error: outcomeUnknown(), mayApply: true };
    if (named === undefined || mayBeOwnAttempt(error)) {
      const back = await this.readBack(items, plan, observer);
      if (back.applied) return { kind: 'applied', results: results(plan, (i) => back.applied[i]?.etag) };
      // Not known to be applied, and no operation named: it may still be applied late. Not acknowledged.
      if (named === undefined || !back.known) return { kind: 'failed', error, mayApply: true };
    }
    const owner = plan.owners[named!];
    // A summary holder or a copy changed in another process since it was read: read again.
    if (!owner || !('write' in owner)) return { kind: 'retry' };
    const i = owner.write;
    if (!isTablegraphError(error)) return { kind: 'failed', error };
    const exists = error.code === ErrorCode.CONFLICT && error.details.reason === 'EntityAlreadyExists';
    const changed = !exists && (error.code === ErrorCode.CONFLICT || error.code === ErrorCode.NOT_FOUND);
    // Its entity changed since it was read: with `ifMatch`, the client's conflict; without, read it again.
    if (changed && typeof items[i].input.ifMatch !== 'string') return { kind: 'retry' };
    if (changed) {
      const stale = new TablegraphError(ErrorCode.CONFLICT, `${items[i].write.entity.name} changed since it was read (stale ifMatch ETag)`, {
        reason: 'ETagMismatch',
      });
      return { kind: 'failed', error: itemError(i, stale) };
    }
    return { kind: 'failed', error: itemError(i, error) };
  }

  /**
   * Whether the EGT was applied: an item's change entity (a subscription follows its type, or continuous backup
   * captures) is there — it is in the EGT, and nothing but a capture pass removes it — or else every item's entity
   * read back carries its attempt's WriteId (a delete: is gone). A later write of the entity hides the WriteId, not
   * the change entity.
   * @param plan its `operations` as they were sent (the change entities' RowKeys as stamped)
   * @returns `applied`: the entities as read, one per item; else `known`: whether an item shows it was not
   */
  private async readBack(
    items: TransactionItem[],
    plan: TransactionPlan,
    observer?: StorageObserver,
  ): Promise<{ applied: Array<StoredEntity | null>; known?: undefined } | { applied: undefined; known: boolean }> {
    const { store } = this.opts;
    const table = plan.plans[0].address.table;
    const change = plan.operations.flatMap((op) => (op.kind === 'create' && isChangeEntity(op.entity) ? [op.entity] : []))[0];
    let now: Array<StoredEntity | null | undefined> = [];
    for (let attempt = 0; attempt < READ_BACK_ATTEMPTS; attempt++) {
      if (attempt > 0) await delay(200 * 2 ** attempt);
      const logged = change
        ? await store.getEntity({ table, partitionKey: change.partitionKey, rowKey: change.rowKey }, { observer }).catch(() => undefined)
        : null;
      now = await Promise.all(plan.plans.map((p, i) => readEntity(store, items[i].write.entity, p.address, observer).catch(() => undefined)));
      // The change entity shows the EGT applied (all or nothing): the items' ETags are those read now.
      if (logged && ownChange(logged, change!) && now.every((e) => e !== undefined)) return { applied: now as Array<StoredEntity | null> };
      if (logged !== undefined && now.every((e) => e !== undefined)) break;
    }
    const shows = plan.plans.map((p, i) => {
      if (now[i] === undefined) return undefined;
      if (p.values) return now[i] !== null && writtenBy(now[i]!, p.writeId);
      return now[i] === null ? undefined : false; // a delete's absence proves nothing alone (another may have deleted)
    });
    const proof = shows.some((x) => x === true);
    if (proof && shows.every((x, i) => x === true || (x === undefined && now[i] === null))) return { applied: now as Array<StoredEntity | null> };
    return { applied: undefined, known: shows.some((x) => x === false) };
  }
}

function outcomeUnknown(): TablegraphError {
  return new TablegraphError(
    ErrorCode.STORAGE_UNAVAILABLE,
    "The transaction's answer was lost and its outcome cannot be read back: read the entities before writing again.",
    {
      reason: 'OutcomeUnknown',
    },
  );
}

/** Whether what is stored at a change entity's address is that change (not a fence put there: change-fence.ts). */
function ownChange(stored: StoredEntity, sent: EntityToWrite): boolean {
  return stored.properties[ENTITY_TYPE_PROPERTY] === CHANGE_ENTITY_TYPE && stored.properties[CHANGE.writeId] === sent.properties[CHANGE.writeId]?.value;
}

/** Each item's result from the plan, its ETag from `etagOf` (the EGT's answer, or the entity read back). */
function results(plan: TransactionPlan, etagOf: (i: number) => string | undefined): WriteResult[] {
  return plan.plans.map((p, i) =>
    p.values
      ? { address: p.address, values: p.values, etag: etagOf(i) ?? '', deleted: false }
      : { address: p.address, values: p.previous!, etag: '', deleted: true },
  );
}

/**
 * Whether a refusal naming an operation may be what the SDK's retry of this very EGT met after its first attempt was
 * applied with its answer lost: an insert that finds its entity, an If-Match that finds its own ETag gone.
 */
function mayBeOwnAttempt(error: unknown): boolean {
  if (!isTablegraphError(error)) return false;
  const retried = typeof error.details.attempts === 'number' && error.details.attempts > 1;
  return retried && (error.code === ErrorCode.CONFLICT || (error.code === ErrorCode.NOT_FOUND && error.details.reason !== 'TableNotFound'));
}
