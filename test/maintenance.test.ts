/**
 * The maintenance commands against the test run's Azurite: verify compares every index (intra- and
 * inter-partition) with what the primary entities derive, and rebuild-index repairs one index — only what
 * differs, and never over a write made after its scan.
 */
import { entityWrites, indexWrites } from '../src/model/entity-codec';
import type { EntityModel, Model } from '../src/model/types';
import { differingProperties, resolveIndex, type IndexDiff } from '../src/maintenance/index-state';
import { rebuildIndex } from '../src/maintenance/index-rebuild';
import { formatVerifyReport, verifyDerived, type VerifyReport } from '../src/maintenance/verify-derived';
import { TableStore } from '../src/storage/table-store';
import type { EntityAddress, StoredEntity } from '../src/storage/storage-types';
import { compileHr, connectionString, testStore, uniquePrefix } from './support/harness';
import { employeeRow, FINANCE, SLASHED, writeFixtures, type DepartmentFixture } from './support/read-fixtures';

const store = testStore();

/** The test run's store, running `hook` once before its second table scan: a write "during" a maintenance command. */
class ScanHookStore extends TableStore {
  readonly scans: string[] = [];
  constructor(private readonly hook: () => Promise<void>) {
    super({ connectionString: connectionString(), target: 'azurite' });
  }
  override async *scan(table: string, opts?: Parameters<TableStore['scan']>[1]): AsyncIterable<StoredEntity[]> {
    this.scans.push(table);
    if (this.scans.length === 2) await this.hook();
    yield* super.scan(table, opts);
  }
}

/**
 * The test run's store reading `table` one entity a page, running `hook` once after the page holding `after`: a write
 * between two pages of one table's scan.
 */
class PageHookStore extends TableStore {
  private done = false;
  constructor(
    private readonly at: EntityAddress,
    private readonly hook: () => Promise<void>,
  ) {
    super({ connectionString: connectionString(), target: 'azurite' });
  }
  override async scanPage(table: string, token: string | undefined, opts?: Parameters<TableStore['scanPage']>[2]) {
    const mine = table === this.at.table;
    const page = await super.scanPage(table, token, mine ? { ...opts, pageSize: 1 } : opts);
    if (mine && !this.done && page.entities.some((e) => e.partitionKey === this.at.partitionKey && e.rowKey === this.at.rowKey)) {
      this.done = true;
      await this.hook();
    }
    return page;
  }
}

/** A department with an employee without a title: the sparse byTitle index has no entity for it. */
const SPARSE: DepartmentFixture = {
  id: 'SPARSE',
  name: 'SPARSE',
  employees: [employeeRow('SPARSE', 3001), { ...employeeRow('SPARSE', 3002), title: null as unknown as string }],
};
const DEPARTMENTS = [FINANCE, SLASHED, SPARSE];
const EMPLOYEES = DEPARTMENTS.reduce((n, d) => n + d.employees.length, 0);

function diffOf(report: VerifyReport, type: string, index: string): IndexDiff {
  const d = report.indexes.find((x) => x.type === type && x.index === index);
  if (!d) throw new Error(`no ${type}.${index} in the report`);
  return d;
}

const problems = (d: IndexDiff) => ({
  missing: d.missing,
  different: d.different,
  orphaned: d.orphaned,
  duplicates: d.duplicates,
  underivable: d.underivable,
});
const CLEAN = { missing: [], different: [], orphaned: [], duplicates: [], underivable: [] };

/** The address of `index`'s entity for a FINANCE employee. */
function indexAddress(employee: EntityModel, index: string, id: number): EntityAddress {
  const w = indexWrites(employee.indexes.get(index)!, { ...employeeRow('FINANCE', id) })[0];
  return { table: w.table, partitionKey: w.entity.partitionKey, rowKey: w.entity.rowKey };
}

describe('verify and rebuild-index on one data set', () => {
  let model: Model;
  let employee: EntityModel;

  beforeAll(async () => {
    model = compileHr(uniquePrefix()).model;
    employee = model.entities.get('Employee')!;
    await writeFixtures(store, model, DEPARTMENTS);
    // Another entity type in an index's table: verify must leave it alone, not call it orphaned.
    const foreign = { partitionKey: 'SMITH', rowKey: 'note', properties: { EntityType: { type: 'String' as const, value: 'Note' } } };
    await store.upsertEntity(employee.indexes.get('byLastName')!.layout.table, foreign, 'replace');
  }, 60_000);

  test('consistent data: every index of every type is clean, the sparse index expects no entity for a null title', async () => {
    const report = await verifyDerived({ store, model });
    expect(report.ok).toBe(true);
    expect(report.problems).toBe(0);
    expect(report.indexes.map((d) => `${d.type}.${d.index}:${d.scope}`).sort()).toEqual([
      'Department.all:interPartition',
      'Employee.byEmail:interPartition',
      'Employee.byLastName:interPartition',
      'Employee.byLastNameInDepartment:intraPartition',
      'Employee.byTitle:interPartition',
    ]);
    for (const d of report.indexes) expect(problems(d)).toEqual(CLEAN);
    const byTitle = diffOf(report, 'Employee', 'byTitle');
    expect(byTitle).toMatchObject({ primaries: EMPLOYEES, expected: EMPLOYEES - 1, found: EMPLOYEES - 1, checked: EMPLOYEES - 1 });
    expect(diffOf(report, 'Employee', 'byLastNameInDepartment')).toMatchObject({ primaries: EMPLOYEES, expected: EMPLOYEES, found: EMPLOYEES });
    expect(diffOf(report, 'Department', 'all')).toMatchObject({ primaries: 3, expected: 3, found: 3 });
    expect(formatVerifyReport(report)).toMatch(/^verify: ok — 5 indexes, 2 summaries, 0 copies, \d+ references and 0 @blob fields match/m);
  });

  test('a deleted, a changed and an orphaned index entity: verify reports exactly those, rebuild-index repairs them', async () => {
    const byLastName = employee.indexes.get('byLastName')!;
    const gone = indexAddress(employee, 'byLastName', 1002);
    const changed = indexAddress(employee, 'byLastName', 1003);
    await store.deleteEntity(gone);
    const before = (await store.getEntity(changed))!;
    await store.upsertEntity(
      changed.table,
      {
        partitionKey: changed.partitionKey,
        rowKey: changed.rowKey,
        properties: { firstName: { type: 'String', value: 'CHANGED' }, Extra: { type: 'Int32', value: 1 } },
      },
      'merge',
    );
    // An index entity of an employee that does not exist (FINANCE has no employee 1999).
    const orphan = indexWrites(byLastName, { ...employeeRow('FINANCE', 1999) })[0];
    await store.upsertEntity(orphan.table, orphan.entity, 'replace');
    const orphanAddress = { table: orphan.table, partitionKey: orphan.entity.partitionKey, rowKey: orphan.entity.rowKey };

    const report = await verifyDerived({ store, model });
    expect(report.ok).toBe(false);
    expect(report.problems).toBe(3);
    expect(problems(diffOf(report, 'Employee', 'byLastName'))).toEqual({
      ...CLEAN,
      missing: [gone],
      different: [{ ...changed, properties: ['Extra', 'firstName'] }],
      orphaned: [orphanAddress],
    });
    for (const d of report.indexes.filter((x) => x.index !== 'byLastName')) expect(problems(d)).toEqual(CLEAN);
    const text = formatVerifyReport(report);
    expect(text).toContain(`FAIL Employee.byLastName`);
    expect(text).toContain(`different  PartitionKey ${JSON.stringify(changed.partitionKey)} RowKey ${JSON.stringify(changed.rowKey)}: Extra, firstName`);
    expect(formatVerifyReport(report, 1)).toContain('… and 2 more');
    // The totals line names what fails and how to repair it: an index here, nothing else.
    expect(text).toMatch(
      /^verify: 3 problems in 1 of 5 indexes \(Employee\.byLastName\) \(\d+ entities read in [\d.]+ s\); repair with rebuild-index <Type>$/m,
    );

    const phases: string[] = [];
    const result = await rebuildIndex({ store, model, type: 'Employee', index: 'byLastName', onProgress: (p) => phases.push(p.phase) });
    expect(result).toMatchObject({ primaries: EMPLOYEES, expected: EMPLOYEES, upserted: 2, deleted: 1, skipped: 0, unresolved: 0 });
    expect(phases[0]).toBe('scan');
    expect(phases.at(-1)).toBe('repair');
    const repaired = (await store.getEntity(changed))!;
    expect(repaired.properties).toEqual(before.properties);
    expect(await store.getEntity(orphanAddress)).toBeNull();
    expect(await store.getEntity(gone)).not.toBeNull();

    const again = await verifyDerived({ store, model });
    expect(again.ok).toBe(true);
  });

  test('rebuild-index repairs an intra-partition index too', async () => {
    const gone = indexAddress(employee, 'byLastNameInDepartment', 1010);
    await store.deleteEntity(gone);
    const report = await verifyDerived({ store, model, types: ['Employee'] });
    expect(report.indexes.map((d) => d.type)).not.toContain('Department');
    expect(diffOf(report, 'Employee', 'byLastNameInDepartment').missing).toEqual([gone]);
    const result = await rebuildIndex({ store, model, type: 'Employee', index: 'byLastNameInDepartment' });
    expect(result).toMatchObject({ upserted: 1, deleted: 0 });
    expect((await verifyDerived({ store, model })).ok).toBe(true);
  });

  test('rebuild-index never overwrites or deletes an entity written after its scan', async () => {
    const byTitle = employee.indexes.get('byTitle')!;
    const goneWrite = indexWrites(byTitle, { ...employeeRow('FINANCE', 1020) })[0];
    const gone = indexAddress(employee, 'byTitle', 1020);
    await store.deleteEntity(gone);
    // 1021's index entity differs at the scan; 1020's is missing; both in partition ENGINEER, so in one EGT.
    const staleWrite = indexWrites(byTitle, { ...employeeRow('FINANCE', 1021) })[0];
    const stale = indexAddress(employee, 'byTitle', 1021);
    await store.upsertEntity(
      stale.table,
      { ...staleWrite.entity, properties: { ...staleWrite.entity.properties, lastName: { type: 'String', value: 'STALE' } } },
      'replace',
    );
    expect(stale.partitionKey).toBe(gone.partitionKey);
    const orphan = indexWrites(byTitle, { ...employeeRow('FINANCE', 1998) })[0];
    await store.upsertEntity(orphan.table, orphan.entity, 'replace');
    const orphanAddress = { table: orphan.table, partitionKey: orphan.entity.partitionKey, rowKey: orphan.entity.rowKey };
    const concurrent = { type: 'String' as const, value: 'WRITTEN MEANWHILE' };

    const result = await rebuildIndex({
      store,
      model,
      type: 'Employee',
      index: 'byTitle',
      // Someone (a worker reconciling a newer state) writes the three entities between the scan and the repair.
      afterScan: async () => {
        await store.upsertEntity(gone.table, { ...goneWrite.entity, properties: { ...goneWrite.entity.properties, firstName: concurrent } }, 'replace');
        await store.upsertEntity(orphan.table, { ...orphan.entity, properties: { ...orphan.entity.properties, firstName: concurrent } }, 'replace');
        await store.upsertEntity(stale.table, { ...staleWrite.entity, properties: { ...staleWrite.entity.properties, firstName: concurrent } }, 'replace');
      },
    });
    expect(result).toMatchObject({ upserted: 0, deleted: 0, skipped: 3 });
    expect((await store.getEntity(stale))!.properties.firstName).toBe('WRITTEN MEANWHILE');
    expect((await store.getEntity(gone))!.properties.firstName).toBe('WRITTEN MEANWHILE');
    expect((await store.getEntity(orphanAddress))!.properties.firstName).toBe('WRITTEN MEANWHILE');

    // Without interference, a second run repairs all three.
    expect(await rebuildIndex({ store, model, type: 'Employee', index: 'byTitle' })).toMatchObject({ upserted: 2, deleted: 1, skipped: 0 });
    expect((await verifyDerived({ store, model })).ok).toBe(true);
  });

  test('an index entity the worker moves between the two scans is neither deleted nor re-created stale', async () => {
    // A mutation renames employee 1030 and the worker reconciles it, all between the rebuild's scan of the index
    // table and its scan of the primaries' table.
    const old = { ...employeeRow('FINANCE', 1030) };
    const renamed = { ...old, lastName: 'MOVED' };
    const oldByLastName = indexAddress(employee, 'byLastName', 1030);
    const oldIntra = indexAddress(employee, 'byLastNameInDepartment', 1030);
    const moved = entityWrites(employee, renamed);
    const newByLastName = moved.indexes.find((w) => w.index.name === 'byLastName')!;
    const hooked = new ScanHookStore(async () => {
      for (const w of [moved.primary, ...moved.indexes]) await store.upsertEntity(w.table, w.entity, 'replace');
      await store.deleteEntity(oldByLastName);
      await store.deleteEntity(oldIntra);
    });

    const result = await rebuildIndex({ store: hooked, model, type: 'Employee', index: 'byLastName' });
    expect(hooked.scans).toEqual([oldByLastName.table, employee.layout.table]);
    // The scans saw the old index entity and the renamed primary: both writes were refused, nothing was lost.
    expect(result).toMatchObject({ upserted: 0, deleted: 0, skipped: 2 });
    const kept = await store.getEntity({ table: newByLastName.table, partitionKey: newByLastName.entity.partitionKey, rowKey: newByLastName.entity.rowKey });
    expect(kept?.properties.lastName).toBe('MOVED');
    expect(await store.getEntity(oldByLastName)).toBeNull();
    expect((await verifyDerived({ store, model })).ok).toBe(true);
  });

  test("an intra-partition index entity moved or rewritten between its primary's page and its own is neither deleted nor left stale", async () => {
    // The index shares the primaries' table, read once: FINANCE's primaries (empid_…) come before its index entities
    // (lastname_…). A mutation renames 1036 and changes 1037's first name (an included value) after both primaries
    // were read, before any index entity was.
    const intra = employee.indexes.get('byLastNameInDepartment')!;
    const renamed = { ...employeeRow('FINANCE', 1036), lastName: 'MOVED' };
    const changed = { ...employeeRow('FINANCE', 1037), firstName: 'CHANGED' };
    const address = (w: { table: string; entity: { partitionKey: string; rowKey: string } }) => ({
      table: w.table,
      partitionKey: w.entity.partitionKey,
      rowKey: w.entity.rowKey,
    });
    const oldIntra = indexAddress(employee, 'byLastNameInDepartment', 1036);
    const oldByLastName = indexAddress(employee, 'byLastName', 1036);
    const hooked = new PageHookStore(address(entityWrites(employee, changed).primary), async () => {
      for (const row of [renamed, changed]) {
        const w = entityWrites(employee, row);
        for (const x of [w.primary, ...w.indexes]) await store.upsertEntity(x.table, x.entity, 'replace');
      }
      await store.deleteEntity(oldIntra);
      await store.deleteEntity(oldByLastName);
    });

    await rebuildIndex({ store: hooked, model, type: 'Employee', index: 'byLastNameInDepartment' });
    const moved = await store.getEntity(address(indexWrites(intra, { ...renamed })[0]));
    expect(moved?.properties.lastName).toBe('MOVED');
    expect(await store.getEntity(oldIntra)).toBeNull();
    const rewritten = await store.getEntity(address(indexWrites(intra, { ...changed })[0]));
    expect(rewritten?.properties.firstName).toBe('CHANGED');
    const report = await verifyDerived({ store, model });
    expect(formatVerifyReport(report)).toMatch(/^verify: ok/m);
  });

  test('unknown types and indexes are BAD_USER_INPUT naming the known ones', async () => {
    await expect(rebuildIndex({ store, model, type: 'Nope', index: 'byLastName' })).rejects.toMatchObject({
      code: 'BAD_USER_INPUT',
      message: expect.stringContaining('Entity types: Department, Employee'),
    });
    await expect(rebuildIndex({ store, model, type: 'Employee', index: 'byShoeSize' })).rejects.toMatchObject({
      code: 'BAD_USER_INPUT',
      message: expect.stringContaining('byLastNameInDepartment, byEmail, byLastName, byTitle'),
    });
    await expect(verifyDerived({ store, model, types: ['Nope'] })).rejects.toMatchObject({ code: 'BAD_USER_INPUT' });
    expect(() => resolveIndex(model, 'Department', 'all')).not.toThrow();
  });
});

test('two employees with one e-mail: verify reports the duplicate, rebuild-index leaves it alone', async () => {
  const model = compileHr(uniquePrefix()).model;
  const employee = model.entities.get('Employee')!;
  const a = { ...employeeRow('DUP', 1), email: 'same@example.org' };
  const b = { ...employeeRow('DUP', 2), email: 'same@example.org' };
  await writeFixtures(store, model, [{ id: 'DUP', name: 'DUP', employees: [a, b] }]);
  const primary = (e: typeof a) => {
    const w = entityWrites(employee, { ...e }).primary;
    return { table: w.table, partitionKey: w.entity.partitionKey, rowKey: w.entity.rowKey };
  };

  const report = await verifyDerived({ store, model, types: ['Employee'] });
  const byEmail = diffOf(report, 'Employee', 'byEmail');
  const shared = indexWrites(employee.indexes.get('byEmail')!, { ...a })[0];
  expect(byEmail.duplicates).toEqual([
    { table: shared.table, partitionKey: shared.entity.partitionKey, rowKey: shared.entity.rowKey, primaries: [primary(a), primary(b)] },
  ]);
  // The stored entity belongs to one of them (the fixture wrote b's last), so it is not "different".
  expect(byEmail.different).toEqual([]);
  expect(report.ok).toBe(false);

  const result = await rebuildIndex({ store, model, type: 'Employee', index: 'byEmail' });
  expect(result).toMatchObject({ upserted: 0, deleted: 0, unresolved: 1 });
});

test('differingProperties compares decoded values by type and names one-sided properties', () => {
  const when = new Date('2024-01-02T03:04:05.678Z');
  const expected = {
    EntityType: { type: 'String' as const, value: 'Employee.byTitle' },
    n: { type: 'Double' as const, value: 111444 },
    big: { type: 'Int64' as const, value: 5n },
    at: { type: 'DateTime' as const, value: when },
    gone: null,
  };
  expect(differingProperties(expected, { EntityType: 'Employee.byTitle', n: 111444, big: 5n, at: new Date(when.getTime()) })).toEqual([]);
  expect(differingProperties(expected, { EntityType: 'Employee.byTitle', n: '111444', big: 5, at: when, gone: 'x' })).toEqual(['big', 'gone', 'n']);
});
