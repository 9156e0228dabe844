/**
 * Imports the Chicago employee file into the HR schema: every valid row becomes an Employee entity (with a derived,
 * stable, unique e-mail address) plus its index entities — the intra-partition ones and what `derive` gives, the
 * organisation-wide ones — written as EGTs of upsert-replace per table and partition (egt-batches: the guide's
 * "Entity Group Transactions"), not through the fan-out queue: Azurite's queue slows with depth, and the import
 * knows every entity it writes. Then one Department entity per department with its summary values (employeeCount
 * and payroll, computed with the schema's `@summary` definitions from the file on every run, never incremented).
 *
 * Streaming: rows are read one at a time and each partition's pending writes are handed to planEgtBatches as
 * soon as they fill an EGT, so memory holds at most an EGT's worth of writes per partition plus the EGTs in
 * flight. Idempotent: the same file writes the same entities with the same values, so a second run leaves every
 * entity as the first did.
 */
import { ErrorCode, TablegraphError } from '../errors';
import { entityWrites, type TableWrite } from '../model/entity-codec';
import { summaryContribution } from '../model/summaries';
import type { EntityModel, Model, SummaryModel } from '../model/types';
import { checkEntity, limitsFor } from '../storage/limits';
import type { TableStore } from '../storage/table-store';
import type { StorageObserver, StorageTarget } from '../storage/types';
import { planEgtBatches, writeEgtBatches, type EgtBatch } from '../write/egt-batches';
import { readChicagoCsv, type EmployeeRecord, type SkippedRow } from './chicago-csv';

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
  /** Called after each EGT commits. */
  onProgress?(p: ImportProgress): void;
  /** Receives one record per EGT sent (see src/read/cost.ts). */
  observer?: StorageObserver;
}

export interface ImportSummary {
  /** Data rows in the file, malformed ones included. */
  rows: number;
  /** Employees written. */
  imported: number;
  /** Malformed rows, in file order. */
  skipped: SkippedRow[];
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
 * A department's summary values, accumulated over the file with the schema's own `@summary` definitions:
 * summary field → value (employeeCount in entities, payroll in USD, not yet rounded).
 */
export type DepartmentTotals = Record<string, number>;

/** The domain of the e-mail addresses the import derives (`.example` is reserved: no real mailbox). */
export const EMAIL_DOMAIN = 'cityofchicago.example';

/** EGT batches ready to send, and whether they hold employees or the department summaries written after them. */
export interface PlannedBatches {
  stage: 'employees' | 'departments';
  batches: EgtBatch[];
}

/** The Employee field values of a record, as entityWrites takes them (the id as an ID string). */
export function employeeValues(e: EmployeeRecord, email: string): Record<string, unknown> {
  return { ...e, id: String(e.id), email };
}

/** The Department field values: name = id, its summary values rounded to cents. */
export function departmentValues(id: string, t: DepartmentTotals): Record<string, unknown> {
  const rounded = Object.fromEntries(Object.entries(t).map(([field, v]) => [field, Math.round(v * 100) / 100]));
  return { id, name: id, ...rounded };
}

/** One lower-case word of letters and digits, accents dropped (`O'BRIEN` → `obrien`, `JOSÉ` → `jose`). */
function emailPart(name: string): string {
  return name.normalize('NFKD').replace(/[\u0300-\u036f]/g, '').toLowerCase().replace(/[^a-z0-9]+/g, '') || 'x';
}

function hrEntity(model: Model, name: 'Employee' | 'Department'): EntityModel {
  const entity = model.entities.get(name);
  if (!entity) {
    throw new TablegraphError(ErrorCode.SCHEMA_INVALID, `The import needs the HR schema's ${name} type (schema/hr.graphql).`);
  }
  return entity;
}

/**
 * The import as a sequence of EGT batches, computed while the file is read. Counters are final once
 * `batches()` is exhausted; iterate it once per plan. The benchmark sends the same batches another way.
 */
export class ImportPlan {
  rowsRead = 0;
  imported = 0;
  readonly skipped: SkippedRow[] = [];
  readonly departments = new Map<string, DepartmentTotals>();
  private readonly employee: EntityModel;
  private readonly department: EntityModel;
  private readonly summaries: SummaryModel[];
  private readonly emailCounts = new Map<string, number>();

  /** @throws TablegraphError SCHEMA_INVALID when the model lacks Employee or Department */
  constructor(model: Model, readonly file: string, readonly target: StorageTarget) {
    this.employee = hrEntity(model, 'Employee');
    this.department = hrEntity(model, 'Department');
    this.summaries = [...model.summaries.values()].filter((s) => s.of === this.employee && s.holder === this.department);
  }

  /**
   * A stable, unique e-mail address: `first.last@cityofchicago.example` for the first of that name in file
   * order, then `first.last.2@…`, `first.last.3@…` (a base never holds two dots, so suffixed forms never collide).
   */
  private emailFor(e: EmployeeRecord): string {
    const base = `${emailPart(e.firstName)}.${emailPart(e.lastName)}`;
    const n = (this.emailCounts.get(base) ?? 0) + 1;
    this.emailCounts.set(base, n);
    return `${n === 1 ? base : `${base}.${n}`}@${EMAIL_DOMAIN}`;
  }

  private zeroTotals(): DepartmentTotals {
    return Object.fromEntries(this.summaries.map((s) => [s.field, 0]));
  }

  /**
   * Yields employee batches as partitions fill an EGT, the remaining ones at the end of the file, then the
   * department batches. A row whose entities the target would refuse (a key over its limit…) is skipped like a
   * malformed one, so that no EGT fails on one bad row.
   * @throws TablegraphError from readChicagoCsv (BAD_USER_INPUT, INVALID_ROW)
   */
  async *batches(): AsyncGenerator<PlannedBatches> {
    const pending = new Map<string, TableWrite[]>();
    const full = limitsFor(this.target).maxTransactionOperations;
    for await (const row of readChicagoCsv(this.file)) {
      this.rowsRead++;
      if (row.reason !== undefined) {
        this.skipped.push({ line: row.line, reason: row.reason });
        continue;
      }
      const values = employeeValues(row.employee, this.emailFor(row.employee));
      const writes = this.employeeWrites(values, row.employee.departmentId, row.line);
      if (!writes) continue;
      this.imported++;
      const totals = this.departments.get(row.employee.departmentId) ?? this.zeroTotals();
      for (const s of this.summaries) totals[s.field] += summaryContribution(s, values);
      this.departments.set(row.employee.departmentId, totals);
      const filled: TableWrite[][] = [];
      for (const w of writes) {
        const key = `${w.table}\u0000${w.entity.partitionKey}`;
        const list = pending.get(key) ?? [];
        list.push(w);
        pending.set(key, list);
        if (list.length >= full) {
          filled.push(list);
          pending.delete(key);
        }
      }
      if (filled.length > 0) yield { stage: 'employees', batches: planEgtBatches(filled.flat(), this.target) };
    }
    if (pending.size > 0) yield { stage: 'employees', batches: planEgtBatches([...pending.values()].flat(), this.target) };
    const departmentWrites = [...this.departments].flatMap(([id, totals]) => {
      const w = entityWrites(this.department, departmentValues(id, totals));
      return [w.primary, ...w.indexes];
    });
    if (departmentWrites.length > 0) yield { stage: 'departments', batches: planEgtBatches(departmentWrites, this.target) };
  }

  /** The row's entity and index entities, checked against the target's limits; undefined (and skipped) if refused. */
  private employeeWrites(values: Record<string, unknown>, departmentId: string, line: number): TableWrite[] | undefined {
    try {
      const w = entityWrites(this.employee, values);
      const writes = [w.primary, ...w.indexes];
      for (const x of writes) checkEntity(x.entity, this.target);
      if (!this.departments.has(departmentId)) {
        // The department's own keys (its RowKey in the departments index) must fit too, before it counts anyone.
        const d = entityWrites(this.department, departmentValues(departmentId, this.zeroTotals()));
        for (const x of [d.primary, ...d.indexes]) checkEntity(x.entity, this.target);
      }
      return writes;
    } catch (err) {
      if (!(err instanceof TablegraphError)) throw err;
      this.skipped.push({ line, reason: err.message });
      return undefined;
    }
  }
}

/**
 * Imports `file` (see chicago-csv.ts for the row rules and ids) into the model's tables, creating them if
 * missing. Malformed rows are skipped and listed with their line numbers; the rest load. Department entities are
 * written after every employee EGT has committed.
 * @returns the summary (counts in rows, entities and EGTs; seconds of wall time)
 * @throws TablegraphError BAD_USER_INPUT (unreadable file, concurrency not a positive integer), INVALID_ROW
 *   (not the Chicago header, unparsable CSV), SCHEMA_INVALID (no HR types), or any storage error of
 *   writeEgtBatches (STORAGE_UNAVAILABLE, LIMIT_EXCEEDED…) — EGTs committed before it stay, and re-running is
 *   harmless
 */
export async function importEmployees(opts: ImportOptions): Promise<ImportSummary> {
  const started = performance.now();
  const concurrency = opts.concurrency ?? 8;
  if (!Number.isSafeInteger(concurrency) || concurrency < 1) {
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `concurrency must be a positive integer, not ${concurrency}.`);
  }
  const plan = new ImportPlan(opts.model, opts.file, opts.store.target);
  const progress: ImportProgress = { rowsRead: 0, entitiesWritten: 0, transactions: 0 };
  const inFlight = new Set<Promise<void>>();
  let failure: { error: unknown } | undefined;
  const onBatch = (b: EgtBatch) => {
    progress.entitiesWritten += b.writes.length;
    progress.transactions++;
    progress.rowsRead = plan.rowsRead;
    opts.onProgress?.({ ...progress });
  };
  const drain = async () => {
    await Promise.all(inFlight);
    if (failure) throw failure.error;
  };
  // writeEgtBatches bounds the parallelism of one call; batches arrive here over time, so the bound across
  // calls is kept here: at most `concurrency` single-batch calls in flight, the reader waiting meanwhile.
  try {
    for await (const { stage, batches } of plan.batches()) {
      if (stage === 'departments') await drain();
      for (const batch of batches) {
        while (inFlight.size >= concurrency) await Promise.race(inFlight);
        if (failure) throw failure.error;
        const sent: Promise<void> = writeEgtBatches(opts.store, [batch], { concurrency: 1, observer: opts.observer, onBatch })
          .catch((error: unknown) => void (failure ??= { error }))
          .finally(() => inFlight.delete(sent));
        inFlight.add(sent);
      }
    }
    await drain();
  } finally {
    // On failure too: the caller may close storage next, so nothing of this import may still be running.
    await Promise.all(inFlight);
  }
  progress.rowsRead = plan.rowsRead;
  opts.onProgress?.({ ...progress });
  const seconds = (performance.now() - started) / 1000;
  return {
    rows: plan.rowsRead,
    imported: plan.imported,
    skipped: plan.skipped,
    entities: progress.entitiesWritten,
    transactions: progress.transactions,
    departments: plan.departments.size,
    seconds,
    entitiesPerSecond: seconds > 0 ? progress.entitiesWritten / seconds : 0,
  };
}
