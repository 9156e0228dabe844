/**
 * Imports the Chicago employee file into the HR schema: a mapping of its rows onto the generic loader
 * (src/load/load-entities.ts). A first pass over the file gives the departments (created when missing, a stored
 * one kept as it is); the second, the employees, each with a derived, stable, unique e-mail address. The loader
 * writes them as the worker would derive them, in EGTs per table and partition, gives each department its exact
 * summaries, and deletes the index entities of employees renamed since an earlier import.
 *
 * An EGT that fails for want of an answer is sent again with exponential back-off a bounded number of times; then
 * its rows are reported and the import goes on. Idempotent: the same file writes the same entities with the same
 * values.
 */
import { ErrorCode, TablegraphError } from '../../../src/errors';
import { loadEntities, type FailedBatch as LoadFailedBatch, type LoadOptions, type LoadProgress } from '../../../src/load/load-entities';
import type { ImportProgress } from '../../../src/load/progress';
import type { LoadRow } from '../../../src/load/load-rows';
import type { Model } from '../../../src/model/types';
import { readChicagoCsv, type EmployeeRecord, type SkippedRow } from './chicago-csv';

/** The domain of the e-mail addresses the import derives (`.example` is reserved: no real mailbox). */
export const EMAIL_DOMAIN = 'cityofchicago.example';

/** The Employee field values of a record (the id as an ID string). */
export function employeeValues(e: EmployeeRecord, email: string): Record<string, unknown> {
  return { ...e, id: String(e.id), email };
}

/** One lower-case word of letters and digits, accents dropped (`O'BRIEN` → `obrien`, `JOSÉ` → `jose`). */
function emailPart(name: string): string {
  return (
    name
      .normalize('NFKD')
      .replace(/[\u0300-\u036f]/g, '')
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '') || 'x'
  );
}

/**
 * Stable, unique e-mail addresses: `first.last@cityofchicago.example` for the first of that name in file order,
 * then `first.last.2@…`, `first.last.3@…` (a base never holds two dots, so suffixed forms never collide).
 */
function emailDeriver(): (e: EmployeeRecord) => string {
  const counts = new Map<string, number>();
  return (e) => {
    const base = `${emailPart(e.firstName)}.${emailPart(e.lastName)}`;
    const n = (counts.get(base) ?? 0) + 1;
    counts.set(base, n);
    return `${n === 1 ? base : `${base}.${n}`}@${EMAIL_DOMAIN}`;
  };
}

/** The departments of the file's valid rows, in order of first appearance, each at the line it first appears. */
async function* departmentRows(file: string): AsyncGenerator<LoadRow> {
  const seen = new Set<string>();
  for await (const row of readChicagoCsv(file)) {
    if (row.reason !== undefined || seen.has(row.employee.departmentId)) continue;
    seen.add(row.employee.departmentId);
    yield { line: row.line, values: { id: row.employee.departmentId, name: row.employee.departmentId } };
  }
}

/** The file's rows as Employee values; malformed rows with their reasons. */
async function* employeeRows(file: string): AsyncGenerator<LoadRow> {
  const emailFor = emailDeriver();
  for await (const row of readChicagoCsv(file)) {
    if (row.reason !== undefined) yield { line: row.line, reason: row.reason };
    else yield { line: row.line, values: employeeValues(row.employee, emailFor(row.employee)) };
  }
}

/** The loader's options (src/load/load-entities.ts), for the Chicago file. */
export interface ImportOptions extends Omit<LoadOptions, 'steps' | 'onProgress'> {
  /** A compiled schema with the HR types Employee and Department (examples/hr/hr.graphql). */
  model: Model;
  /** Path of the CSV file (Chicago's columns, see chicago-csv.ts). */
  file: string;
  /** Called after each EGT commits. */
  onProgress?(p: ImportProgress): void;
}

/** An EGT given up on after its attempts: the file lines of the rows it held, and why. */
export type FailedBatch = Omit<LoadFailedBatch, 'type'>;

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
 * Imports `file` (see chicago-csv.ts for the row rules and ids) into the model's tables, creating them if
 * missing. Malformed rows are skipped and listed with their line numbers; the rest load.
 * @returns the summary (counts in rows, entities and EGTs; seconds of wall time)
 * @throws TablegraphError BAD_USER_INPUT (unreadable file, concurrency not a positive integer), BAD_USER_INPUT (not
 *   the Chicago header), SCHEMA_INVALID (no HR types); a storage error that is not a failure to answer (a
 *   LIMIT_EXCEEDED, a refused credential) — EGTs committed before it stay, and re-running is harmless
 */
export async function importEmployees(opts: ImportOptions): Promise<ImportSummary> {
  for (const type of ['Department', 'Employee']) {
    if (!opts.model.entities.has(type))
      throw new TablegraphError(ErrorCode.SCHEMA_INVALID, `The import needs the HR schema's ${type} type (examples/hr/hr.graphql).`);
  }
  // Read once before anything is written: a file that is not the Chicago file fails here.
  for await (const _ of readChicagoCsv(opts.file)) break;
  const { file: _file, onProgress: _onProgress, ...loadOptions } = opts;
  const summary = await loadEntities({
    ...loadOptions,
    steps: [
      { type: 'Department', rows: departmentRows(opts.file), existing: 'keep', source: opts.file },
      { type: 'Employee', rows: employeeRows(opts.file), source: opts.file },
    ],
    onProgress: (p: LoadProgress) =>
      opts.onProgress?.({
        ...{ rowsRead: p.type === 'Employee' ? p.rowsRead : 0, rowsStored: p.type === 'Employee' ? p.rowsStored : 0 },
        rowsSkipped: p.type === 'Employee' ? p.rowsSkipped : 0,
        ...{ entitiesWritten: p.entitiesWritten, entitiesPlanned: p.entitiesPlanned, transactions: p.transactions },
      }),
  });
  const [departments, employees] = summary.steps;
  return {
    rows: employees.rows,
    imported: employees.loaded,
    // A department refused (its key over a limit) refuses its employees for the same reason: they are the report.
    skipped: employees.skipped,
    failed: summary.failed.map((f) => ({ lines: f.lines, table: f.table, partitionKey: f.partitionKey, error: f.error })),
    retries: summary.retries,
    staleDeleted: departments.staleDeleted + employees.staleDeleted,
    entities: summary.entities,
    transactions: summary.transactions,
    departments: employees.holders,
    seconds: summary.seconds,
    entitiesPerSecond: summary.entitiesPerSecond,
  };
}
