/**
 * Summary values are exact and checkable (docs/architecture.md, "Writes"; the guide's "Entity Group Transactions" keep
 * a department's payroll in the same EGT as its employees): any sequence of writes followed by their inverses returns
 * the payroll to its exact earlier value (decimal arithmetic, src/model/decimal.ts); 50 and 200 concurrent
 * unconditional creates into one department all succeed with exact totals (group commit); verify compares every summary
 * with a recount, and repair-summaries fixes a drifted one.
 */
import fc from 'fast-check';
import { repairSummaries, readSummaryState } from '../src/maintenance/summary-state';
import { formatVerifyReport, verifyDerived } from '../src/maintenance/verify-derived';
import { hrWorld, run } from './support/fanout-fixtures';
import { uniquePrefix } from './support/harness';
import { employeeInput } from './support/write-fixtures';

const world = hrWorld(uniquePrefix());
const { model, store } = world;
const directory = `${world.prefix}Directory`;
beforeAll(() => world.ensureTables());
afterAll(() => world.dropTables());

let seq = 0;
async function newDepartment(): Promise<string> {
  const id = `S${++seq}`;
  await run(world, 'createDepartment', { id, name: id });
  return id;
}
async function summary(d: string): Promise<{ employeeCount: unknown; payroll: unknown }> {
  const e = await store.getEntity({ table: directory, partitionKey: d, rowKey: 'department' });
  return { employeeCount: e?.properties.employeeCount, payroll: e?.properties.payroll };
}

/** Money as clients send it: whole, cents, huge, tiny, as text or as a JSON number. */
const money = fc.oneof(
  fc.integer({ min: 0, max: 10_000_000 }),
  fc.integer({ min: 0, max: 10_000_000_00 }).map((c) => `${Math.floor(c / 100)}.${String(c % 100).padStart(2, '0')}`),
  fc.constantFrom(1e20, '0.000001', '99999999999999999999.99', 0.1, 0.2, 111444),
);
const hours = fc.oneof(fc.integer({ min: 0, max: 168 }), fc.constantFrom(0.5, 37.5, 20.25, 0.1));

type Pay = { salaryOrHourly: 'SALARY' | 'HOURLY'; annualSalary: unknown; hourlyRate: unknown; typicalHours: unknown };
const pay: fc.Arbitrary<Pay> = fc.oneof(
  money.map((annualSalary) => ({ salaryOrHourly: 'SALARY' as const, annualSalary, hourlyRate: null, typicalHours: null })),
  fc.tuple(money, hours).map(([hourlyRate, typicalHours]) => ({ salaryOrHourly: 'HOURLY' as const, annualSalary: null, hourlyRate, typicalHours })),
);

test('random writes followed by their inverses return the payroll to its exact start', async () => {
  const d = await newDepartment();
  for (let id = 1; id <= 3; id++) await run(world, 'createEmployee', employeeInput(d, id, { annualSalary: '50000.10' }));
  const start = await summary(d);
  expect(start).toEqual({ employeeCount: 3, payroll: '150000.3' });
  let extra = 100;
  await fc.assert(
    fc.asyncProperty(fc.array(fc.tuple(fc.integer({ min: 1, max: 3 }), pay, fc.boolean()), { minLength: 1, maxLength: 8 }), async (steps) => {
      // Forward: change pay, or create a new employee with it; then the inverses, newest first.
      const undo: Array<() => Promise<unknown>> = [];
      for (const [id, next, create] of steps) {
        if (create) {
          const newId = ++extra;
          await run(world, 'createEmployee', employeeInput(d, newId, { ...next, email: `x${newId}.${d}@example.test` }));
          undo.push(() => run(world, 'deleteEmployee', { departmentId: d, id: String(newId) }));
        } else {
          const before = (await store.getEntity({ table: directory, partitionKey: d, rowKey: `empid_${String(id).padStart(8, '0')}` }))!.properties;
          await run(world, 'updateEmployee', { departmentId: d, id: String(id), ...next });
          const back = {
            salaryOrHourly: before.salaryOrHourly,
            annualSalary: before.annualSalary ?? null,
            hourlyRate: before.hourlyRate ?? null,
            typicalHours: before.typicalHours ?? null,
          };
          undo.push(() => run(world, 'updateEmployee', { departmentId: d, id: String(id), ...back }));
        }
      }
      for (const u of undo.reverse()) await u();
      expect(await summary(d)).toEqual(start);
    }),
    { numRuns: 12, seed: Number(process.env.SUMMARY_SEED) || undefined },
  );
  const [payroll] = (await readSummaryState({ store, model, summaries: ['Department.payroll'] })).map((s) => s.different.filter((x) => x.partitionKey === d));
  expect(payroll).toEqual([]);
}, 120_000);

test('1e20 added and taken away leaves the payroll exactly as it was (a double would keep 112 more)', async () => {
  const d = await newDepartment();
  await run(world, 'createEmployee', employeeInput(d, 1, { annualSalary: 111444 }));
  await run(world, 'updateEmployee', { departmentId: d, id: '1', annualSalary: 1e20 });
  expect((await summary(d)).payroll).toBe('100000000000000000000');
  await run(world, 'updateEmployee', { departmentId: d, id: '1', annualSalary: 111444 });
  expect(await summary(d)).toEqual({ employeeCount: 1, payroll: '111444' });
});

test.each([50, 200])(
  '%i concurrent unconditional creates into one department all succeed; count and payroll exact',
  async (n) => {
    const d = await newDepartment();
    const results = await Promise.allSettled(
      Array.from({ length: n }, (_, i) => run(world, 'createEmployee', employeeInput(d, i + 1, { annualSalary: `${1000 + i}.01` }))),
    );
    expect(results.filter((r) => r.status === 'rejected')).toEqual([]);
    // Σ (1000 + i + 0.01) for i < n, in cents.
    const cents = BigInt(n) * 100_001n + BigInt((n * (n - 1)) / 2) * 100n;
    expect(await summary(d)).toEqual({ employeeCount: n, payroll: `${cents / 100n}.${String(cents % 100n).padStart(2, '0')}`.replace(/\.?0+$/, '') });
  },
  120_000,
);

test('verify finds a drifted summary; repair-summaries recounts and fixes it, and verify is clean again', async () => {
  const d = await newDepartment();
  await run(world, 'createEmployee', employeeInput(d, 1, { annualSalary: '1000.5' }));
  await run(world, 'createEmployee', employeeInput(d, 2, { salaryOrHourly: 'HOURLY', annualSalary: null, hourlyRate: '20.25', typicalHours: 10 }));
  // Drift, as an older version's doubles or a hand edit would leave it.
  await store.updateEntity(
    directory,
    { partitionKey: d, rowKey: 'department', properties: { payroll: { type: 'String', value: '11530.5000001' }, employeeCount: { type: 'Int32', value: 7 } } },
    'merge',
  );
  const report = await verifyDerived({ store, model, types: ['Department'] });
  expect(report.ok).toBe(false);
  const drifted = Object.fromEntries(report.summaries.map((s) => [s.summary, s.different.filter((x) => x.partitionKey === d)]));
  expect(drifted['Department.payroll']).toEqual([expect.objectContaining({ stored: '11530.5000001', expected: '11530.5' })]);
  expect(drifted['Department.employeeCount']).toEqual([expect.objectContaining({ stored: '7', expected: '2' })]);
  // The totals line names the summaries that fail (beside the index this world's worker never ran for), and the
  // command that repairs them.
  expect(formatVerifyReport(report)).toMatch(
    /^verify: \d+ problems in .*2 of 2 summaries \(Department\.employeeCount, Department\.payroll\) .*; repair with .*repair-summaries$/m,
  );

  const repaired = await repairSummaries({ store, model });
  expect(repaired.repaired.filter((a) => a.partitionKey === d)).toHaveLength(1);
  expect(repaired.busy).toEqual([]);
  expect(await summary(d)).toEqual({ employeeCount: 2, payroll: '11530.5' });
  expect((await verifyDerived({ store, model, types: ['Department'] })).summaries.every((s) => s.different.length === 0)).toBe(true);
});
