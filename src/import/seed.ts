/**
 * The guide's own example rows (its "About the Azure Table service" table: Don Hall and Jun Cao of Marketing,
 * Ken Kwok of Sales), loaded when a server starts on an empty store so the API answers something at once.
 */
import { ErrorCode, TablegraphError } from '../errors';
import { entityWrites, type TableWrite } from '../model/entity-codec';
import type { Model } from '../model/types';
import type { Department, Employee } from '../generated/graphql';
import type { TableStore } from '../storage/table-store';
import { planEgtBatches, writeEgtBatches } from '../write/egt-batches';

type SeedEmployee = Pick<Employee, 'departmentId' | 'id' | 'email' | 'firstName' | 'lastName'>;
type DepartmentSummary = Pick<Department, 'id' | 'name' | 'employeeCount' | 'payroll'>;

const SEED_EMPLOYEES: SeedEmployee[] = [
  { departmentId: 'Marketing', id: '1', email: 'donh@contoso.com', firstName: 'Don', lastName: 'Hall' },
  { departmentId: 'Marketing', id: '2', email: 'junc@contoso.com', firstName: 'Jun', lastName: 'Cao' },
  { departmentId: 'Sales', id: '10', email: 'kenk@contoso.com', firstName: 'Ken', lastName: 'Kwok' },
];

/** The entities of the seed rows: employees, their departments with summary values, and all index entities. */
export function seedWrites(model: Model): TableWrite[] {
  const employee = model.entities.get('Employee');
  const department = model.entities.get('Department');
  if (!employee || !department) {
    throw new TablegraphError(ErrorCode.SCHEMA_INVALID, 'The seed rows need the HR schema (types Department and Employee)');
  }
  const writes: TableWrite[] = [];
  for (const e of SEED_EMPLOYEES) {
    const w = entityWrites(employee, e);
    writes.push(w.primary, ...w.indexes);
  }
  for (const id of new Set(SEED_EMPLOYEES.map((e) => e.departmentId))) {
    const count = SEED_EMPLOYEES.filter((e) => e.departmentId === id).length;
    const summary: DepartmentSummary = { id, name: id, employeeCount: count, payroll: '0' };
    const w = entityWrites(department, summary);
    writes.push(w.primary, ...w.indexes);
  }
  return writes;
}

/**
 * Writes the seed rows when the store holds no department (one range query on the departments index).
 * @returns true when it seeded
 */
export async function seedIfEmpty(store: TableStore, model: Model): Promise<boolean> {
  const all = model.entities.get('Department')?.indexes.get('all');
  if (!all) return false;
  await store.ensureTable(all.layout.table);
  const probe = await store.queryRange({ table: all.layout.table, partitionKey: all.layout.partitionKey.source, limit: 1, select: ['RowKey'] });
  if (probe.entities.length > 0) return false;
  await writeEgtBatches(store, planEgtBatches(seedWrites(model), store.target), { concurrency: 4 });
  return true;
}
