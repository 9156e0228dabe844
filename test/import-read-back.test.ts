/**
 * The import through a Table service whose answers are lost (test/support/storage-proxy.ts): an EGT whose answer never
 * comes back may have been applied, and is read back before it is sent again or reported. A slice of the Chicago file
 * (examples/hr/import):
 * - every EGT applied, every answer lost (500 OperationTimedOut after the apply, SDK retry included): 0 failed EGTs,
 *   every row stored and counted, and no EGT sent again — the read-back found each one stored;
 * - the employees of one department truly refused (503 on every attempt, nothing applied): exactly their file lines
 *   are reported, and exactly they are missing from storage; every other row is stored.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { importEmployees } from '../examples/hr/import/import-employees';
import { readChicagoCsv } from '../examples/hr/import/chicago-csv';
import { TableStore } from '../src/storage/table-store';
import { compileHr, connectionString, testStore, uniquePrefix, writeChicagoSlice } from './support/harness';
import { startStorageProxy, type StorageProxy } from './support/storage-proxy';
import { testSeed } from './support/seed';

const ROWS = 400;
let tmp: string;
let file: string;
let proxy: StorageProxy | undefined;

beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-read-back-'));
  file = path.join(tmp, 'slice.csv');
  writeChicagoSlice(file, ROWS);
});
afterEach(async () => {
  await proxy?.close();
  proxy = undefined;
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** The store through the proxy: few SDK retries, a short back-off, so a refused EGT is given up on in seconds. */
function proxiedStore(p: StorageProxy): TableStore {
  return new TableStore({ connectionString: p.connectionString, target: 'azurite', timeoutMs: 10_000, retry: { maxRetries: 1, retryDelayInMs: 10 } });
}

/** The slice's employees by file line: their department and id. */
async function employeesByLine(): Promise<Map<number, { departmentId: string; id: number }>> {
  const rows = new Map<number, { departmentId: string; id: number }>();
  for await (const row of readChicagoCsv(file))
    if (row.reason === undefined) rows.set(row.line, { departmentId: row.employee.departmentId, id: row.employee.id });
  return rows;
}

/** The Employee entities stored, read straight from Azurite (no proxy): `department/id`. */
async function storedEmployees(table: string): Promise<Set<string>> {
  const found = new Set<string>();
  for await (const page of testStore().scan(table, { entityType: 'Employee' }))
    for (const e of page) found.add(`${e.properties.departmentId}/${e.properties.id}`);
  return found;
}

test('every answer lost, every EGT applied: nothing is reported failed, nothing sent again, every row stored', async () => {
  const seed = testSeed();
  proxy = await startStorageProxy(connectionString(), {
    seed,
    faults: { timedOutAfterApply: 1 },
    faultable: (method, p) => method === 'POST' && p.includes('$batch'),
  });
  const { model } = compileHr(uniquePrefix());
  const summary = await importEmployees({ store: proxiedStore(proxy), model, file, concurrency: 4, attempts: 3, backoffMs: 10 });
  expect(proxy.injected().timedOutAfterApply).toBeGreaterThan(10);
  expect(summary.failed).toEqual([]);
  expect(summary.retries).toBe(0);
  expect(summary.imported).toBe(ROWS);
  const employees = await employeesByLine();
  const stored = await storedEmployees(model.entities.get('Employee')!.layout.table);
  expect(stored.size).toBe(employees.size);
});

test('one department refused on every attempt: exactly its rows are reported, and exactly they are not stored', async () => {
  const employees = await employeesByLine();
  const counts = new Map<string, number>();
  for (const e of employees.values()) counts.set(e.departmentId, (counts.get(e.departmentId) ?? 0) + 1);
  // A department of a few rows, not the first one (its EGTs come between others').
  const [refused] = [...counts].filter(([, n]) => n >= 2 && n <= 40).map(([d]) => d);
  expect(refused).toBeDefined();
  proxy = await startStorageProxy(connectionString(), {
    seed: testSeed(),
    faults: { busy: 1 },
    // Its employees' EGTs only (their partition, their entity type): the department itself is stored.
    faultable: (method, p, body) =>
      method === 'POST' && p.includes('$batch') && body.includes(`"PartitionKey":${JSON.stringify(refused)}`) && body.includes('"EntityType":"Employee"'),
  });
  const { model } = compileHr(uniquePrefix());
  const summary = await importEmployees({ store: proxiedStore(proxy), model, file, concurrency: 4, attempts: 2, backoffMs: 10 });
  expect(proxy.injected().busy).toBeGreaterThan(0);
  const expected = [...employees].filter(([, e]) => e.departmentId === refused).map(([line]) => line);
  expect(summary.failed.flatMap((f) => f.lines).sort((a, b) => a - b)).toEqual(expected);
  expect(summary.failed.every((f) => f.partitionKey === refused && /^not stored: /.test(f.error))).toBe(true);
  const stored = await storedEmployees(model.entities.get('Employee')!.layout.table);
  const missing = [...employees.values()].filter((e) => !stored.has(`${e.departmentId}/${e.id}`)).map((e) => e.departmentId);
  expect(missing).toEqual(expected.map(() => refused));
});
