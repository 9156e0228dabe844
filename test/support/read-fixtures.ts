/**
 * Fixtures for the read-path, pagination and server tests: deterministic HR departments written through the real
 * write path (entityWrites → planEgtBatches → writeEgtBatches), so every entity, index entity ("Index Entities
 * Pattern") and summary value is exactly what the importer would store.
 */
import type { Model } from '../../src/model/types';
import { entityWrites, type TableWrite } from '../../src/model/entity-codec';
import type { TableStore } from '../../src/storage/table-store';
import { planEgtBatches, writeEgtBatches } from '../../src/write/egt-batches';

/** One employee as GraphQL sees it (field name → value). */
export interface EmployeeRow {
  id: string;
  departmentId: string;
  email: string;
  firstName: string;
  lastName: string;
  title: string;
  fullOrPartTime: 'FULL_TIME' | 'PART_TIME';
  salaryOrHourly: 'SALARY' | 'HOURLY';
  /** USD, as the Decimal scalar writes it (canonical decimal text). */
  annualSalary?: string;
  /** USD per hour, as the Decimal scalar writes it. */
  hourlyRate?: string;
  typicalHours?: number;
}

/** A department with its employees; `employeeCount` and `payroll` are derived from them. */
export interface DepartmentFixture {
  id: string;
  name: string;
  employees: EmployeeRow[];
}

const LAST_NAMES = ['SMITH', 'JOHNSON', 'NGUYEN', "O'BRIEN", 'GARCIA', 'DE LA CRUZ', 'KOWALSKI', 'WILLIAMSON'];
const FIRST_NAMES = ['ANA', 'BO', 'CARLOS', 'DIANA', 'EMEKA', 'FATIMA', 'GUS'];

/** Employee `id` of department `departmentId`: every 35th id is a WILLIAMS, every 7th title holds a `/`. */
export function employeeRow(departmentId: string, id: number): EmployeeRow {
  const salaried = id % 2 === 0;
  return {
    id: String(id),
    departmentId,
    email: `employee${id}@${departmentId.toLowerCase().replace(/[^a-z0-9]/g, '')}.example`,
    firstName: FIRST_NAMES[id % FIRST_NAMES.length],
    lastName: id % 35 === 0 ? 'WILLIAMS' : LAST_NAMES[id % LAST_NAMES.length],
    title: id % 7 === 0 ? 'ENGINEER I/II #' + (id % 3) : 'ENGINEER',
    fullOrPartTime: salaried ? 'FULL_TIME' : 'PART_TIME',
    salaryOrHourly: salaried ? 'SALARY' : 'HOURLY',
    ...(salaried ? { annualSalary: String(50000 + id * 100) } : { hourlyRate: `${20 + (id % 10)}.25`, typicalHours: 20 }),
  };
}

function department(id: string, ids: number[]): DepartmentFixture {
  return { id, name: id, employees: ids.map((n) => employeeRow(id, n)) };
}

const range = (from: number, count: number) => Array.from({ length: count }, (_, i) => from + i);

/** ENGINEERING: 250 employees, ids 9..258 (so 9, 10 and 100 sort by number), 7 of them WILLIAMS, some WILLIAMSON. */
export const ENGINEERING = department('ENGINEERING', range(9, 250));
/** FINANCE: 40 employees, ids 1001..1040, one WILLIAMS (1015): another partition with the same last name. */
export const FINANCE = department('FINANCE', range(1001, 40));
/** A department whose id holds characters keys forbid (`/`, `#`): its keys are escaped. */
export const SLASHED = department('A/B #1', [2001, 2002, 2003]);

/** The fixture departments, in the order the departments index lists them (RowKey = escaped id). */
export const FIXTURE_DEPARTMENTS = [SLASHED, ENGINEERING, FINANCE];

/** Yearly payroll in USD as the schema defines it — salaries plus rate × weekly hours × 52 — as decimal text. */
export function payrollOf(d: DepartmentFixture): string {
  // In cents, as integers: exact, and independent of the decimal arithmetic under test.
  const cents = (text: string | undefined) => (text === undefined ? 0n : BigInt(Math.round(Number(text) * 100)));
  const total = d.employees.reduce(
    (sum, e) => sum + (e.annualSalary !== undefined ? cents(e.annualSalary) : cents(e.hourlyRate) * BigInt(e.typicalHours ?? 0) * 52n),
    0n,
  );
  const whole = total / 100n;
  const rest = total % 100n;
  return rest === 0n ? String(whole) : `${whole}.${String(rest).padStart(2, '0').replace(/0$/, '')}`;
}

/** The employees of `d` named `lastName`, in id order. */
export function withLastName(d: DepartmentFixture, lastName: string): EmployeeRow[] {
  return d.employees.filter((e) => e.lastName === lastName).sort((a, b) => Number(a.id) - Number(b.id));
}

/** Every entity of `departments`: employees, their index entities, departments (summaries) and their index entities. */
export function fixtureWrites(model: Model, departments: DepartmentFixture[]): TableWrite[] {
  const employee = model.entities.get('Employee')!;
  const dept = model.entities.get('Department')!;
  const writes: TableWrite[] = [];
  for (const d of departments) {
    for (const e of d.employees) {
      const w = entityWrites(employee, { ...e });
      writes.push(w.primary, ...w.indexes);
    }
    const w = entityWrites(dept, { id: d.id, name: d.name, employeeCount: d.employees.length, payroll: payrollOf(d) });
    writes.push(w.primary, ...w.indexes);
  }
  return writes;
}

/**
 * Writes `departments` as EGTs (one per table and partition, at most 100 operations each).
 * @throws TablegraphError from the store (STORAGE_UNAVAILABLE, LIMIT_EXCEEDED, …)
 */
export async function writeFixtures(store: TableStore, model: Model, departments: DepartmentFixture[] = FIXTURE_DEPARTMENTS): Promise<void> {
  await writeEgtBatches(store, planEgtBatches(fixtureWrites(model, departments), store.target), { concurrency: 4 });
}

/** The exactly determined numbers of a response's `extensions.cost` (storageMs is wall time, never asserted). */
export interface ExpectedCost {
  pointQueries: number;
  rangeQueries: number;
  entitiesRead: number;
  waves: number;
}

/**
 * Asserts a GraphQL response's `extensions.cost`: the given counts exactly, no scan and no write (a read never
 * scans, "Design for querying"), one round trip per query (no page here needs a continuation token) — and that
 * the worst case estimated before the request ran (demand control) is not below what it cost.
 */
export function expectCost(response: { extensions?: { cost?: Record<string, unknown> } }, expected: ExpectedCost): void {
  const { estimate, ...cost } = (response.extensions?.cost ?? {}) as Record<string, unknown> & { estimate?: { storageCalls: number; entitiesRead: number } };
  if (estimate) {
    expect(estimate.storageCalls).toBeGreaterThanOrEqual(expected.pointQueries + expected.rangeQueries);
    expect(estimate.entitiesRead).toBeGreaterThanOrEqual(expected.entitiesRead);
  }
  const queries = expected.pointQueries + expected.rangeQueries;
  expect(cost).toEqual({
    ...expected,
    partitionScans: 0,
    tableScans: 0,
    writes: 0,
    captureMarks: 0,
    roundTrips: queries,
    azureTransactions: queries,
    storageMs: expect.any(Number),
    cosmosRequestUnits: expect.any(Number),
  });
  // 1 RU per entity read, at least 1 per query (a miss, an empty page): between the two bounds.
  expect(cost.cosmosRequestUnits).toBeGreaterThanOrEqual(Math.max(expected.entitiesRead, queries > 0 ? 1 : 0));
  expect(cost.cosmosRequestUnits).toBeLessThanOrEqual(expected.entitiesRead + queries);
}
