/**
 * The generic loader: rows of any schema's entity types, in steps of one type each (a manifest lists them in
 * dependency order: a type before the types whose references or summaries reach it), written as the worker would
 * derive them (load-plan.ts) — EGTs of upsert-replace per table and partition, sent directly rather than through
 * the work queue, with bounded parallelism ("Entity Group Transactions"; the "Performance and scalability
 * checklist": batch, and bound the parallelism). After a step's EGTs: one merge per summary holder with its exact
 * totals, then the deletion of the index entities that rewritten entities no longer derive (each only while it
 * still points at its entity, as the message worker deletes: the "Eventually consistent transactions pattern").
 *
 * An EGT that fails for want of an answer (a timeout, a 5xx after the SDK's own retries) may have been applied: what is
 * stored is read back, and only an EGT that is not is sent again, with exponential back-off — its upserts are
 * idempotent — a bounded number of times; then its rows are reported and the load goes on (a holder of its partition
 * is then recounted from what is stored). Its reads (they only read)
 * are sent again the same way, then fail the load. Idempotent: loading the same
 * rows again writes nothing (what is stored exactly as it would write it is not written) and leaves no orphan.
 */
import { backOff } from 'exponential-backoff';
import pLimit from 'p-limit';
import { ErrorCode, isTablegraphError, isTransientStorageError, TablegraphError } from '../errors';
import { repairHolder } from '../maintenance/summary-state';
import { checkLoadable, typeNeeds } from '../model/load-order';
import type { EntityModel, Model, SummaryModel } from '../model/types';
import type { TableStore } from '../storage/table-store';
import type { EntityAddress, StorageObserver, StoredEntity } from '../storage/storage-types';
import { writeEventualHolders } from './eventual-holders';
import { refreshSummaryChains } from '../derived/summary-chains';
import { addressKey } from '../storage/address-key';
import { deleteIfPointsAt } from '../derived/index-entities';
import { writeEgtBatches, type EgtBatch } from '../write/egt-batches';
import { egtStored } from './read-back';
import { LoadPlan, type SkippedRow } from './load-plan';
import type { LoadReads } from './step-store';
import type { LoadRow } from './load-rows';

/** One step: the rows of one entity type. */
export interface LoadStep {
  /** The entity type's name, e.g. `Order`. */
  type: string;
  rows: AsyncIterable<LoadRow>;
  /** An entity already stored: replaced (default) or kept as it is. */
  existing?: 'replace' | 'keep';
  /** Where the rows come from, for reports (a file name). */
  source?: string;
}

/**
 * Progress so far: the step's type, its rows read (bad ones included), its rows done (every entity of the row
 * committed, or none needed — a bad row is done too), of them the bad rows skipped, entities written and EGTs
 * committed in all.
 */
export interface LoadProgress {
  type: string;
  rowsRead: number;
  rowsStored: number;
  rowsSkipped: number;
  entitiesWritten: number;
  /** Entities the rows read so far are to write, in all steps (entitiesWritten reaches it as their EGTs commit). */
  entitiesPlanned: number;
  transactions: number;
}

export interface LoadOptions {
  store: TableStore;
  model: Model;
  steps: LoadStep[];
  /** EGTs in flight at once (default 8). */
  concurrency?: number;
  /** Sends of one EGT before its rows are given up on (attempts, default 5). */
  attempts?: number;
  /** The first back-off between two sends of an EGT (ms, default 1000; doubling, at most 16000, with jitter). */
  backoffMs?: number;
  /** Called after each EGT commits. */
  onProgress?(p: LoadProgress): void;
  /** Told of each EGT sent again, with the error that made it fail. */
  onRetry?(e: unknown, attempt: number): void;
  /** Receives one record per storage call (see src/read/cost.ts). */
  observer?: StorageObserver;
}

/** An EGT given up on after its attempts: the lines of the rows it held, and why. */
export interface FailedBatch {
  type: string;
  lines: number[];
  /** The table and PartitionKey of the EGT. */
  table: string;
  partitionKey: string;
  error: string;
}

/** What one step did. */
export interface StepSummary {
  type: string;
  source?: string;
  /** Rows read, bad ones included. */
  rows: number;
  /** Rows written (rows of failed EGTs included: see LoadSummary.failed). */
  loaded: number;
  /** Of `loaded`: rows whose entity was stored with the same values. */
  unchanged: number;
  /** Rows whose stored entity was kept (`existing: 'keep'`). */
  kept: number;
  /** Bad rows, in file order, with their reasons. */
  skipped: SkippedRow[];
  /** Index entities of rewritten entities' earlier states, deleted (entities). */
  staleDeleted: number;
  /** Summary holders given their totals (entities). */
  holders: number;
}

export interface LoadSummary {
  steps: StepSummary[];
  /** EGTs given up on, with their rows: load again to write them. */
  failed: FailedBatch[];
  /** EGTs and reads sent again after a failure (sends). */
  retries: number;
  /** Entities written: entities, index entities and summary holders. */
  entities: number;
  /** EGTs committed (one round trip each). */
  transactions: number;
  /** Wall time (seconds). */
  seconds: number;
  entitiesPerSecond: number;
}

/**
 * The loader's reads: a whole partition or table (all pages), and point queries, each sent again by `retrying` when
 * storage fails for now (they read only). A table's scan is kept in `scans` for the next steps, until a step writes
 * to that table (loadEntities drops it then).
 */
function storeReads(
  store: TableStore,
  scans: Map<string, Promise<StoredEntity[]>>,
  retrying: <T>(call: () => Promise<T>) => Promise<T>,
  observer?: StorageObserver,
): LoadReads {
  return {
    partition: (table, partitionKey) =>
      retrying(async () => (await store.queryRange({ table, partitionKey, limit: Number.MAX_SAFE_INTEGER - 1 }, { observer })).entities),
    table: (table) => {
      let scanned = scans.get(table);
      if (!scanned) {
        scanned = retrying(async () => {
          const all: StoredEntity[] = [];
          for await (const page of store.scan(table, { observer })) all.push(...page);
          return all;
        });
        scanned.catch(() => scans.delete(table));
        scans.set(table, scanned);
      }
      return scanned;
    },
    entity: (address) => retrying(() => store.getEntity(address, { observer })),
  };
}

/**
 * Refuses steps whose order cannot work: an unknown type, a type load cannot write (a table per period, a wide
 * entity), or a type whose (non-optional) references or summary
 * holders are of a type loaded by a later step.
 * @throws TablegraphError BAD_USER_INPUT
 */
export function checkStepOrder(model: Model, types: string[]): void {
  for (const type of types) checkLoadable(model, type);
  types.forEach((type, i) => {
    for (const other of typeNeeds(model, type)) {
      const j = types.indexOf(other, i + 1);
      if (j > i && other !== type) {
        throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${type} refers to ${other}, which is loaded after it: load ${other} first`, {
          type,
          needs: other,
        });
      }
    }
  });
}

/**
 * Loads every step in order, creating the model's tables if missing.
 * @returns what each step did, and the totals (entities, EGTs, seconds)
 * @throws TablegraphError BAD_USER_INPUT (steps out of order, an unknown type, a bad file header, concurrency not a
 *   positive integer); a storage error that is not a failure to answer (LIMIT_EXCEEDED, a refused credential) —
 *   what was committed before it stays, and loading again is harmless
 */
export async function loadEntities(opts: LoadOptions): Promise<LoadSummary> {
  const started = performance.now();
  const run = startRun(opts);
  checkStepOrder(
    opts.model,
    opts.steps.map((s) => s.type),
  );
  for (const table of opts.model.tables) await opts.store.ensureTable(table);
  const steps: StepSummary[] = [];
  for (const step of opts.steps) steps.push(await loadStep(run, step));
  const { totals } = run;
  const seconds = (performance.now() - started) / 1000;
  return {
    steps,
    failed: run.failed,
    retries: totals.retries,
    entities: totals.entities,
    transactions: totals.transactions,
    seconds,
    entitiesPerSecond: seconds > 0 ? totals.entities / seconds : 0,
  };
}

/** One load's state across its steps: what it was given, its storage observer, its reads kept, its totals. */
interface LoadRun {
  opts: LoadOptions;
  /** EGTs in flight at once (EGTs). */
  concurrency: number;
  /** Sends of one call before it is given up on (attempts). */
  attempts: number;
  observer: StorageObserver;
  /** Tables a step wrote to (any write, failed ones included): their scans are not kept for the next step. */
  writtenTables: Set<string>;
  scans: Map<string, Promise<StoredEntity[]>>;
  reads: LoadReads;
  written: Set<string>;
  failed: FailedBatch[];
  /** Entities written, entities planned by the steps done, EGTs committed, sends again. */
  totals: { entities: number; planned: number; transactions: number; retries: number };
  /** A storage call sent again on transient errors, with back-off. */
  retrying<T>(call: () => Promise<T>): Promise<T>;
}

/** @throws TablegraphError BAD_USER_INPUT when `concurrency` is not a positive integer */
function startRun(opts: LoadOptions): LoadRun {
  const concurrency = opts.concurrency ?? 8;
  if (!Number.isSafeInteger(concurrency) || concurrency < 1) {
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `concurrency must be a positive integer, not ${concurrency}.`);
  }
  const writtenTables = new Set<string>();
  const observer: StorageObserver = {
    onCallStart: () => opts.observer?.onCallStart?.(),
    onCall: (r) => {
      if (r.kind === 'transaction' || r.kind === 'write') writtenTables.add(r.table);
      opts.observer?.onCall(r);
    },
  };
  const totals = { entities: 0, planned: 0, transactions: 0, retries: 0 };
  const attempts = opts.attempts ?? 5;
  const retrying = <T>(call: () => Promise<T>) =>
    backOff(call, {
      numOfAttempts: attempts,
      startingDelay: opts.backoffMs ?? 1000,
      timeMultiple: 2,
      maxDelay: 16_000,
      jitter: 'full',
      retry: (e: unknown, attempt: number) => {
        if (!isTransientStorageError(e)) return false;
        if (attempt >= attempts) return true; // asked after the last attempt too: nothing is sent again then
        totals.retries++;
        opts.onRetry?.(e, attempt);
        return true;
      },
    });
  const scans = new Map<string, Promise<StoredEntity[]>>();
  const reads = storeReads(opts.store, scans, retrying, observer);
  return { opts, concurrency, attempts, observer, writtenTables, scans, reads, written: new Set(), failed: [], totals, retrying };
}

/** One step: its rows in EGTs, then its summary holders, its contributions elsewhere, and its stale index entities. */
async function loadStep(run: LoadRun, step: LoadStep): Promise<StepSummary> {
  const { opts, totals } = run;
  const { store, model } = opts;
  const entity = model.entities.get(step.type)!;
  const plan = new LoadPlan({ model, entity, target: store.target, reads: run.reads, written: run.written, existing: step.existing });
  const progress = () =>
    opts.onProgress?.({
      type: step.type,
      rowsRead: plan.rowsRead,
      rowsStored: plan.rowsStored,
      rowsSkipped: plan.skipped.length,
      entitiesWritten: totals.entities,
      entitiesPlanned: totals.planned + plan.writesPlanned,
      transactions: totals.transactions,
    });
  // Told as rows are read too: rows that need no write (stored as they are, or bad) commit nothing.
  const failedPartitions = await writeRows(run, { ...step, rows: ticking(step.rows, progress) }, plan, progress);
  const summaries = [...model.summaries.values()].filter((s) => s.of === entity);
  let holders = await mergeHolders(run, plan, summaries, failedPartitions);
  // Summaries held in other partitions: their stale contribution entities go, and each holder is set to the sum
  // of its contributions.
  for (const address of plan.staleContributions) {
    if (
      await store
        .deleteEntity(address, { observer: run.observer })
        .catch((e: unknown) => (isTablegraphError(e, ErrorCode.NOT_FOUND) ? false : Promise.reject(e)))
    )
      totals.entities++;
  }
  holders += [...plan.folded].filter((key) => !failedPartitions.has(key.split('\u0000')[1])).length;
  holders += await writeEventualHolders(plan, store, {
    attempts: run.attempts,
    concurrency: run.concurrency,
    failedPartitions,
    observer: run.observer,
    retrying: run.retrying,
    onWrite: () => totals.entities++,
  });
  totals.entities += await refreshChainedHolders(model, store, plan, summaries, run.observer);
  totals.planned += plan.writesPlanned;
  const staleDeleted = await deleteStaleIndexEntities(run, plan, entity);
  for (const table of run.writtenTables) run.scans.delete(table);
  run.writtenTables.clear();
  progress();
  return {
    type: step.type,
    source: step.source,
    rows: plan.rowsRead,
    loaded: plan.loaded,
    unchanged: plan.unchanged,
    kept: plan.kept,
    skipped: plan.skipped,
    staleDeleted,
    holders,
  };
}

/**
 * A step's rows, in the EGTs its plan forms; an EGT not stored after its attempts is recorded as failed.
 * @returns the PartitionKeys of the EGTs that failed
 */
async function writeRows(run: LoadRun, step: LoadStep, plan: LoadPlan, progress: () => void): Promise<Set<string>> {
  const { totals } = run;
  const failedPartitions = new Set<string>();
  const send = async (batch: EgtBatch) => {
    const outcome = await sendSettled(run, batch);
    if (outcome.stored) {
      totals.entities += batch.writes.length;
      totals.transactions++;
      plan.committed(batch.writes);
      progress();
      return;
    }
    const lines = [...new Set(batch.writes.map((w) => plan.lines.get(w)).filter((l): l is number => l !== undefined))].sort((a, b) => a - b);
    const why = outcome.known ? 'not stored' : 'whether it was stored could not be read back';
    run.failed.push({ type: step.type, lines, table: batch.table, partitionKey: batch.partitionKey, error: `${why}: ${outcome.error.message}` });
    failedPartitions.add(batch.partitionKey);
  };
  await sendAll(plan.batches(step.rows), send, run.concurrency);
  return failedPartitions;
}

/**
 * One EGT, sent until it is stored: a send that fails for want of an answer may have been applied, so what is stored
 * is read back (read-back.ts) before the EGT is sent again, and after its last attempt. Only an EGT that is not stored
 * — or whose read-back itself got no answer — is given up on.
 * @returns stored (by this send or an earlier one); or the last error, and whether it is known not to be stored
 * @throws what is not a failure to answer (LIMIT_EXCEEDED, a refused credential)
 */
async function sendSettled(run: LoadRun, batch: EgtBatch): Promise<{ stored: true } | { stored: false; known: boolean; error: TablegraphError }> {
  const { store } = run.opts;
  let known = true;
  try {
    await run.retrying(async () => {
      try {
        await writeEgtBatches(store, [batch], { concurrency: 1, observer: run.observer });
      } catch (e) {
        if (!isTablegraphError(e) || !isTransientStorageError(e)) throw e;
        let stored = false;
        try {
          stored = await egtStored(store, batch.table, batch.writes, run.observer);
          known = true;
        } catch {
          known = false; // the read got no answer either: sent again, as one known not to be stored
        }
        if (!stored) throw e;
      }
    });
    return { stored: true };
  } catch (e) {
    if (!isTablegraphError(e) || !isTransientStorageError(e)) throw e;
    return { stored: false, known, error: e };
  }
}

/**
 * The summary holders of the step's partitions: merged with the plan's values, or, in a partition some of whose
 * EGTs failed, counted again from what is stored.
 * @returns holders written (entities)
 */
async function mergeHolders(run: LoadRun, plan: LoadPlan, summaries: SummaryModel[], failedPartitions: Set<string>): Promise<number> {
  const { store } = run.opts;
  const { observer, totals } = run;
  let holders = 0;
  const merging = pLimit(run.concurrency);
  await Promise.all(
    (await plan.holderMerges()).map((merge) =>
      merging(async () => {
        if (failedPartitions.has(merge.address.partitionKey)) {
          // Some of the partition's entities may not be stored: count what is.
          const own = summaries.filter((s) => s.via.table === merge.address.table);
          if (await repairHolder(store, own, merge.address, run.attempts, observer)) holders++;
          return;
        }
        if (merge.unchanged || plan.folded.has(addressKey(merge.address))) return; // written in its partition's last EGT
        const { address } = merge;
        const properties = { partitionKey: address.partitionKey, rowKey: address.rowKey, properties: merge.properties };
        await run.retrying(() => store.updateEntity(address.table, properties, 'merge', { observer }));
        totals.entities++;
        totals.transactions++;
        holders++;
      }),
    ),
  );
  return holders;
}

/** Index entities the step's rows no longer derive, where they still point at their entity. @returns deleted (entities) */
async function deleteStaleIndexEntities(run: LoadRun, plan: LoadPlan, entity: EntityModel): Promise<number> {
  let deleted = 0;
  for (const { primary, addresses } of plan.stale) {
    for (const address of addresses) {
      if ((await deleteIfPointsAt({ store: run.opts.store, entity, primary, observer: run.observer }, address, Date.now)) === 'deleted') deleted++;
    }
  }
  return deleted;
}

/** Rows read between two progress calls while reading (rows). */
const TICK_ROWS = 500;

/** `rows` as they are, `tick` called every TICK_ROWS of them. */
async function* ticking(rows: AsyncIterable<LoadRow>, tick: () => void): AsyncGenerator<LoadRow> {
  let n = 0;
  for await (const row of rows) {
    yield row;
    if (++n % TICK_ROWS === 0) tick();
  }
}

/**
 * Sends the batches a plan yields, at most `concurrency` at once, the plan waiting meanwhile.
 * @throws the first error `send` throws (after every send in flight has ended)
 */
async function sendAll(batches: AsyncIterable<EgtBatch[]>, send: (b: EgtBatch) => Promise<void>, concurrency: number): Promise<void> {
  const inFlight = new Set<Promise<void>>();
  let fatal: { error: unknown } | undefined;
  try {
    for await (const group of batches) {
      for (const batch of group) {
        while (inFlight.size >= concurrency) await Promise.race(inFlight);
        if (fatal) throw fatal.error;
        const sent: Promise<void> = send(batch)
          .catch((error: unknown) => void (fatal ??= { error }))
          .finally(() => inFlight.delete(sent));
        inFlight.add(sent);
      }
    }
    await Promise.all(inFlight);
    if (fatal) throw fatal.error;
  } finally {
    // On failure too: the caller may close storage next, so nothing of this load may still be running.
    await Promise.all(inFlight);
  }
}

/**
 * A summary of a summary: the holders a step changed whose values other summaries sum bring their contributions to
 * those up to date, as the worker does after a write (src/derived/summary-chains.ts).
 * @param summaries the summaries of the step's entity type
 * @returns contribution entities changed (entities)
 */
async function refreshChainedHolders(model: Model, store: TableStore, plan: LoadPlan, summaries: SummaryModel[], observer?: StorageObserver): Promise<number> {
  const chained = new Map<string, { holder: EntityModel; address: EntityAddress }>();
  for (const m of await plan.holderMerges()) if (summaries.some((s) => s.holder === m.holder && s.feeds.length > 0)) chained.set(addressKey(m.address), m);
  for (const { summary, address } of plan.eventualHolders.values())
    if (summary.feeds.length > 0) chained.set(addressKey(address), { holder: summary.holder, address });
  let changed = 0;
  for (const { holder, address } of chained.values()) changed += await refreshSummaryChains(model, store, holder, address, observer);
  return changed;
}
