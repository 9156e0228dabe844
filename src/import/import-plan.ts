/**
 * The Chicago import as a plan, computed while the file is read: every valid row becomes an Employee entity (with
 * a derived, stable, unique e-mail address) plus its index entities — the intra-partition ones and what `derive`
 * gives, the organisation-wide ones — grouped into EGTs of upsert-replace per table and partition (egt-batches:
 * the guide's "Entity Group Transactions"); then one Department entity per department, its summary values the
 * exact sums of the schema's `@summary` definitions.
 *
 * A re-import meets what is already stored. For each department partition the plan is told what it holds
 * (PartitionState, read before the partition's first row): an employee the file rewrites whose earlier state
 * derived other index entities (renamed by a mutation since) leaves those stale — the plan lists them, to be
 * deleted once the new state is written; employees stored but not in the file count towards the department's
 * summaries; a department that exists keeps its name.
 *
 * Streaming: each partition's pending writes are handed to planEgtBatches as soon as they fill an EGT, so memory
 * holds at most an EGT's worth of writes per partition, the EGTs in flight, and the partitions' stored state.
 */
import { ErrorCode, TablegraphError } from '../errors';
import { Decimal, decimalText } from '../model/decimal';
import { entityWrites, indexWrite, valuesOf, type TableWrite } from '../model/entity-codec';
import { summaryContribution } from '../model/summaries';
import type { EntityModel, Model, SummaryModel } from '../model/types';
import { checkEntity, limitsFor } from '../storage/limits';
import type { EntityAddress, StorageTarget, StoredEntity } from '../storage/types';
import { planEgtBatches, type EgtBatch } from '../write/egt-batches';
import { addressKey } from '../write/fanout-message';
import { readChicagoCsv, type EmployeeRecord, type SkippedRow } from './chicago-csv';

/**
 * A department's summary values, accumulated with the schema's own `@summary` definitions: summary field →
 * exact value (employeeCount in entities, payroll in USD).
 */
export type DepartmentTotals = Record<string, Decimal>;

/** The domain of the e-mail addresses the import derives (`.example` is reserved: no real mailbox). */
export const EMAIL_DOMAIN = 'cityofchicago.example';

/** EGT batches ready to send, and whether they hold employees or the departments written after them. */
export interface PlannedBatches {
  stage: 'employees' | 'departments';
  batches: EgtBatch[];
}

/** What a department partition holds before the import writes to it. */
export interface PartitionState {
  /** Stored Employee entities by RowKey. */
  employees: Map<string, StoredEntity>;
  /** The Department entity, or null. */
  department: StoredEntity | null;
}

/** Index entities an employee's stored state derived that its new state does not: to delete after the write. */
export interface StaleDerived {
  primary: EntityAddress;
  addresses: EntityAddress[];
}

/** The Employee field values of a record, as entityWrites takes them (the id as an ID string). */
export function employeeValues(e: EmployeeRecord, email: string): Record<string, unknown> {
  return { ...e, id: String(e.id), email };
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

function addressOf(w: TableWrite): EntityAddress {
  return { table: w.table, partitionKey: w.entity.partitionKey, rowKey: w.entity.rowKey };
}

/**
 * The import as a sequence of EGT batches. Counters, `stale` and the line of each write are final once `batches()`
 * is exhausted; iterate it once per plan. The benchmark sends the same batches another way.
 */
export class ImportPlan {
  rowsRead = 0;
  imported = 0;
  readonly skipped: SkippedRow[] = [];
  readonly departments = new Map<string, DepartmentTotals>();
  /** Stale index entities of rewritten employees, in file order. */
  readonly stale: StaleDerived[] = [];
  /** The file line each employee write came from. */
  readonly lines = new WeakMap<TableWrite, number>();
  private readonly employee: EntityModel;
  private readonly department: EntityModel;
  private readonly summaries: SummaryModel[];
  private readonly emailCounts = new Map<string, number>();
  private readonly partitions = new Map<string, PartitionState>();
  /** Per partition: RowKeys of the employees the file writes. */
  private readonly written = new Map<string, Set<string>>();

  /**
   * @param stored what a department partition holds (read from storage); absent: every partition is empty
   * @throws TablegraphError SCHEMA_INVALID when the model lacks Employee or Department
   */
  constructor(model: Model, readonly file: string, readonly target: StorageTarget, private readonly stored?: (departmentId: string) => Promise<PartitionState>) {
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
    return Object.fromEntries(this.summaries.map((s) => [s.field, new Decimal(0)]));
  }

  /** The department's stored state, read once, before its first row is planned. */
  private async partition(departmentId: string): Promise<PartitionState> {
    let state = this.partitions.get(departmentId);
    if (!state) {
      state = this.stored ? await this.stored(departmentId) : { employees: new Map(), department: null };
      this.partitions.set(departmentId, state);
    }
    return state;
  }

  /**
   * Yields employee batches as partitions fill an EGT, the remaining ones at the end of the file, then the
   * department batches. A row whose entities the target would refuse (a key over its limit…) is skipped like a
   * malformed one, so that no EGT fails on one bad row.
   * @throws TablegraphError from readChicagoCsv (BAD_USER_INPUT, INVALID_ROW); storage errors from `stored`
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
      const state = await this.partition(row.employee.departmentId);
      this.noteStale(writes, state);
      this.imported++;
      const totals = this.departments.get(row.employee.departmentId) ?? this.zeroTotals();
      for (const s of this.summaries) totals[s.field] = totals[s.field].plus(summaryContribution(s, values));
      this.departments.set(row.employee.departmentId, totals);
      const filled: TableWrite[][] = [];
      for (const w of writes) {
        this.lines.set(w, row.line);
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
      const w = entityWrites(this.department, this.departmentValues(id, totals));
      return [w.primary, ...w.indexes];
    });
    if (departmentWrites.length > 0) yield { stage: 'departments', batches: planEgtBatches(departmentWrites, this.target) };
  }

  /**
   * The Department's field values: its stored name (the id for a new one), and its summaries — the file's
   * totals plus what the partition's employees the file does not hold contribute.
   */
  departmentValues(id: string, totals: DepartmentTotals): Record<string, unknown> {
    const state = this.partitions.get(id);
    const written = this.written.get(id) ?? new Set();
    const all = { ...totals };
    for (const [rowKey, e] of state?.employees ?? []) {
      if (written.has(rowKey)) continue;
      const values = valuesOf(this.employee, e.properties);
      for (const s of this.summaries) all[s.field] = all[s.field].plus(summaryContribution(s, values));
    }
    const summaries = Object.fromEntries(
      this.summaries.map((s) => [s.field, s.holder.fields.get(s.field)!.graphqlType === 'Int' ? all[s.field].toNumber() : decimalText(all[s.field])]),
    );
    const name = state?.department?.properties.name;
    return { id, name: typeof name === 'string' ? name : id, ...summaries };
  }

  /** Records the row's employee as written, and the index entities its stored state derives that `writes` do not. */
  private noteStale(writes: TableWrite[], state: PartitionState): void {
    const primary = addressOf(writes[0]);
    let written = this.written.get(primary.partitionKey);
    if (!written) this.written.set(primary.partitionKey, (written = new Set()));
    written.add(primary.rowKey);
    const before = state.employees.get(primary.rowKey);
    if (!before) return;
    const now = new Set(writes.map((w) => addressKey(addressOf(w))));
    const old = valuesOf(this.employee, before.properties);
    const stale: EntityAddress[] = [];
    for (const index of this.employee.indexes.values()) {
      let w: TableWrite | undefined;
      try {
        w = indexWrite(index, old);
      } catch {
        continue; // a stored value that cannot form a key derived nothing
      }
      if (w && !now.has(addressKey(addressOf(w)))) stale.push(addressOf(w));
    }
    if (stale.length > 0) this.stale.push({ primary, addresses: stale });
  }

  /** The row's entity and index entities, checked against the target's limits; undefined (and skipped) if refused. */
  private employeeWrites(values: Record<string, unknown>, departmentId: string, line: number): TableWrite[] | undefined {
    try {
      const w = entityWrites(this.employee, values);
      const writes = [w.primary, ...w.indexes];
      for (const x of writes) checkEntity(x.entity, this.target);
      if (!this.departments.has(departmentId)) {
        // The department's own keys (its RowKey in the departments index) must fit too, before it counts anyone.
        const d = entityWrites(this.department, { id: departmentId, name: departmentId, ...this.zeroSummaries() });
        for (const x of [d.primary, ...d.indexes]) checkEntity(x.entity, this.target);
      }
      return writes;
    } catch (err) {
      if (!(err instanceof TablegraphError)) throw err;
      this.skipped.push({ line, reason: err.message });
      return undefined;
    }
  }

  private zeroSummaries(): Record<string, unknown> {
    return Object.fromEntries(this.summaries.map((s) => [s.field, 0]));
  }
}
