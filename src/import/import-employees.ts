/**
 * Imports the Chicago employee file into the HR schema (the plan: import-plan.ts): EGTs of upsert-replace per
 * table and partition, written directly rather than through the fan-out queue — Azurite's queue slows with depth,
 * and the import knows every entity it writes ("Entity Group Transactions"). Department entities come after every
 * employee EGT has committed, and then the index entities that rewritten employees no longer derive are deleted
 * (each only while it still points at its employee, as the fan-out worker would: the "Eventually consistent
 * transactions pattern").
 *
 * An EGT that fails for want of an answer (a timeout, a 5xx after the SDK's own retries) is sent again with
 * exponential back-off — its upserts are idempotent — a bounded number of times; then its rows are reported and
 * the import goes on. Idempotent: the same file writes the same entities with the same values.
 */
import { backOff } from 'exponential-backoff';
import { ErrorCode, isTablegraphError, TablegraphError } from '../errors';
import { repairHolder } from '../maintenance/summary-state';
import { prefixUpperBound, renderKey, renderKeyPrefix } from '../model/key-template';
import type { Model } from '../model/types';
import type { TableStore } from '../storage/table-store';
import type { StorageObserver } from '../storage/types';
import { deleteIfPointsAt } from '../worker/reconciler';
import { writeEgtBatches, type EgtBatch } from '../write/egt-batches';
import type { SkippedRow } from './chicago-csv';
import { ImportPlan, type PartitionState } from './import-plan';

export { EMAIL_DOMAIN, employeeValues, ImportPlan } from './import-plan';

/** Progress so far: data rows read (malformed included), entities written, EGTs committed. */
export interface ImportProgress {
  rowsRead: number;
  entitiesWritten: number;
  transactions: number;
}

export interface ImportOptions {
  store: TableStore;
  /** A compiled schema with the HR types Employee and Department (schema/hr.graphql). */
  model: Model;
  /** Path of the CSV file (Chicago's columns, see chicago-csv.ts). */
  file: string;
  /** EGTs in flight at once (default 8). */
  concurrency?: number;
  /** Sends of one EGT before its rows are given up on (attempts, default 5). */
  attempts?: number;
  /** The first back-off between two sends of an EGT (ms, default 1000; doubling, at most 16000, with jitter). */
  backoffMs?: number;
  /** Called after each EGT commits. */
  onProgress?(p: ImportProgress): void;
  /** Told of each EGT sent again, with the error that made it fail. */
  onRetry?(e: unknown, attempt: number): void;
  /** Receives one record per storage call (see src/read/cost.ts). */
  observer?: StorageObserver;
}

/** An EGT given up on after its attempts: the file lines of the rows it held, and why. */
export interface FailedBatch {
  lines: number[];
  /** The table and PartitionKey of the EGT. */
  table: string;
  partitionKey: string;
  error: string;
}

export interface ImportSummary {
  /** Data rows in the file, malformed ones included. */
  rows: number;
  /** Employees planned for writing (rows of failed EGTs included: see `failed`). */
  imported: number;
  /** Malformed rows, in file order. */
  skipped: SkippedRow[];
  /** EGTs given up on, with their rows: re-run the import to load them. */
  failed: FailedBatch[];
  /** EGTs sent again after a failure (sends). */
  retries: number;
  /** Index entities of rewritten employees' earlier states, deleted (entities). */
  staleDeleted: number;
  /** Entities written: employees, their index entities, departments and theirs. */
  entities: number;
  /** EGTs committed (one round trip each). */
  transactions: number;
  /** Department entities written. */
  departments: number;
  /** Wall time in seconds. */
  seconds: number;
  entitiesPerSecond: number;
}

/**
 * What a department partition holds: its employees (one range query over the Employee RowKey prefix, following
 * continuation tokens) and its Department entity (one point query).
 */
function partitionReader(store: TableStore, model: Model, observer?: StorageObserver): (departmentId: string) => Promise<PartitionState> {
  const employee = model.entities.get('Employee')!;
  const department = model.entities.get('Department')!;
  const prefix = renderKeyPrefix(employee.layout.rowKey, {});
  return async (departmentId) => {
    const partitionKey = renderKey(employee.layout.partitionKey, { departmentId });
    const table = employee.layout.table;
    const [range, dept] = await Promise.all([
      store.queryRange({ table, partitionKey, rowKeyFrom: prefix, rowKeyTo: prefixUpperBound(prefix), limit: Number.MAX_SAFE_INTEGER - 1 }, { observer }),
      store.getEntity({ table: department.layout.table, partitionKey, rowKey: renderKey(department.layout.rowKey, { id: departmentId }) }, { observer }),
    ]);
    const employees = new Map(range.entities.filter((e) => e.properties.EntityType === employee.entityType).map((e) => [e.rowKey, e]));
    return { employees, department: dept };
  };
}

/**
 * Imports `file` (see chicago-csv.ts for the row rules and ids) into the model's tables, creating them if
 * missing. Malformed rows are skipped and listed with their line numbers; the rest load.
 * @returns the summary (counts in rows, entities and EGTs; seconds of wall time)
 * @throws TablegraphError BAD_USER_INPUT (unreadable file, concurrency not a positive integer), INVALID_ROW (not
 *   the Chicago header), SCHEMA_INVALID (no HR types); a storage error that is not a failure to answer (a
 *   LIMIT_EXCEEDED, a refused credential) — EGTs committed before it stay, and re-running is harmless
 */
export async function importEmployees(opts: ImportOptions): Promise<ImportSummary> {
  const started = performance.now();
  const concurrency = opts.concurrency ?? 8;
  if (!Number.isSafeInteger(concurrency) || concurrency < 1) {
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `concurrency must be a positive integer, not ${concurrency}.`);
  }
  const { store, model, observer } = opts;
  for (const table of model.tables) await store.ensureTable(table);
  const plan = new ImportPlan(model, opts.file, store.target, partitionReader(store, model, observer));
  const progress: ImportProgress = { rowsRead: 0, entitiesWritten: 0, transactions: 0 };
  const failed: FailedBatch[] = [];
  let retries = 0;
  const inFlight = new Set<Promise<void>>();
  let fatal: { error: unknown } | undefined;
  const onBatch = (b: EgtBatch) => {
    progress.entitiesWritten += b.writes.length;
    progress.transactions++;
    progress.rowsRead = plan.rowsRead;
    opts.onProgress?.({ ...progress });
  };
  const attempts = opts.attempts ?? 5;
  const send = async (batch: EgtBatch) => {
    try {
      await backOff(() => writeEgtBatches(store, [batch], { concurrency: 1, observer, onBatch }), {
        numOfAttempts: attempts,
        startingDelay: opts.backoffMs ?? 1000,
        timeMultiple: 2,
        maxDelay: 16_000,
        jitter: 'full',
        retry: (e: unknown, attempt: number) => {
          if (!isTablegraphError(e, ErrorCode.STORAGE_UNAVAILABLE)) return false;
          if (attempt >= attempts) return true; // asked after the last attempt too: nothing is sent again then
          retries++;
          opts.onRetry?.(e, attempt);
          return true;
        },
      });
    } catch (e) {
      if (!isTablegraphError(e, ErrorCode.STORAGE_UNAVAILABLE)) throw e;
      const lines = [...new Set(batch.writes.map((w) => plan.lines.get(w)).filter((l): l is number => l !== undefined))].sort((a, b) => a - b);
      failed.push({ lines, table: batch.table, partitionKey: batch.partitionKey, error: e.message });
    }
  };
  const drain = async () => {
    await Promise.all(inFlight);
    if (fatal) throw fatal.error;
  };
  // EGTs are sent as the plan yields them, at most `concurrency` at once, the reader waiting meanwhile.
  try {
    for await (const { stage, batches } of plan.batches()) {
      if (stage === 'departments') await drain();
      for (const batch of batches) {
        while (inFlight.size >= concurrency) await Promise.race(inFlight);
        if (fatal) throw fatal.error;
        const sent: Promise<void> = send(batch)
          .catch((error: unknown) => void (fatal ??= { error }))
          .finally(() => inFlight.delete(sent));
        inFlight.add(sent);
      }
    }
    await drain();
  } finally {
    // On failure too: the caller may close storage next, so nothing of this import may still be running.
    await Promise.all(inFlight);
  }
  // Departments whose employees did not all arrive: their summaries are recounted from what is stored.
  const department = model.entities.get('Department')!;
  const summaries = [...model.summaries.values()].filter((s) => s.holder === department);
  for (const partitionKey of new Set(failed.filter((f) => f.table === department.layout.table).map((f) => f.partitionKey))) {
    const address = { table: department.layout.table, partitionKey, rowKey: renderKeyPrefix(department.layout.rowKey, {}) };
    await repairHolder(store, summaries, address, 5, observer).catch(() => false);
  }
  const employee = model.entities.get('Employee')!;
  let staleDeleted = 0;
  for (const { primary, addresses } of plan.stale) {
    for (const address of addresses) {
      if ((await deleteIfPointsAt(store, employee, address, primary, { observer }, Date.now)) === 'deleted') staleDeleted++;
    }
  }
  progress.rowsRead = plan.rowsRead;
  opts.onProgress?.({ ...progress });
  const seconds = (performance.now() - started) / 1000;
  return {
    rows: plan.rowsRead,
    imported: plan.imported,
    skipped: plan.skipped,
    failed,
    retries,
    staleDeleted,
    entities: progress.entitiesWritten,
    transactions: progress.transactions,
    departments: plan.departments.size,
    seconds,
    entitiesPerSecond: seconds > 0 ? progress.entitiesWritten / seconds : 0,
  };
}
