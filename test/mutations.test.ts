/**
 * Mutations end to end (real server, real Azurite, no message worker: the tests reconcile by hand): summaries
 * kept exactly in the entity's EGT, the intra-partition index immediately consistent, ETags, no partial state
 * after a failed EGT, validation before anything is sent, and summary concurrency ("Entity Group
 * Transactions", "Intra-partition secondary index pattern", "Merge or replace").
 */
import type { Model } from '../src/model/types';
import { escapeKeyValue } from '../src/storage/key-escape';
import type { StoredEntity, TransactionOperation } from '../src/storage/storage-types';
import { compileHr, startTestServer, testQueues, type TestServer } from './support/harness';
import {
  CREATE_DEPARTMENT,
  CREATE_EMPLOYEE,
  DELETE_DEPARTMENT,
  DELETE_EMPLOYEE,
  DEPARTMENT_SUMMARY,
  drainFanout,
  emailAddress,
  employeeInput,
  firstError,
  partitionSnapshot,
  pollUntil,
  rawEntity,
  receiveFanout,
  REPLACE_EMPLOYEE,
  startNoteServer,
  UPDATE_EMPLOYEE,
} from './support/write-fixtures';

let server: TestServer;
let model: Model;
let directory: string;

beforeAll(async () => {
  server = await startTestServer({ TABLEGRAPH_WORKER: 'off' });
  model = compileHr(server.config.tablePrefix).model;
  directory = `${server.config.tablePrefix}Directory`;
});
afterAll(() => server?.close());
afterEach(() => jest.restoreAllMocks());

let seq = 0;
/** A new department (its own partition), created through GraphQL. */
async function newDepartment(id = `D${++seq}`): Promise<string> {
  const r = await server.query(CREATE_DEPARTMENT, { input: { id, name: `Dept ${id}` } });
  expect(r.errors).toBeUndefined();
  return id;
}
async function ok(query: string, input: Record<string, unknown>): Promise<any> {
  const r = await server.query(query, { input });
  expect(r.errors).toBeUndefined();
  return Object.values(r.data)[0];
}
const summary = async (id: string) => (await server.query(DEPARTMENT_SUMMARY, { id })).data.department;
const employeeAt = (d: string, id: number) => ({ table: directory, partitionKey: escapeKeyValue(d), rowKey: `empid_${String(id).padStart(8, '0')}` });
const snapshot = (d: string) => partitionSnapshot(server.store, directory, escapeKeyValue(d));
const lastNameIndex = async (d: string, lastName: string) =>
  (
    await server.query('query($d: ID!, $n: String!) { department(id: $d) { employeesByLastName(lastName: $n) { edges { node { id firstName } } } } }', {
      d,
      n: lastName,
    })
  ).data.department.employeesByLastName.edges.map((e: any) => Number(e.node.id));

describe('create, update, replace, delete', () => {
  test('summaries are exact, the intra-partition index is consistent at once, every write changes the ETag', async () => {
    const d = await newDepartment();
    const etags = new Set<string>([(await summary(d)).etag]);
    const hourly = { salaryOrHourly: 'HOURLY', annualSalary: null, hourlyRate: 20.25, typicalHours: 30 };
    for (const [id, extra] of [
      [1, {}],
      [2, { annualSalary: 61000.5 }],
      [3, hourly],
    ] as const) {
      const { employee } = await ok(CREATE_EMPLOYEE, employeeInput(d, id, extra));
      expect(employee.etag).toBe((await rawEntity(server.store, employeeAt(d, id)))!.etag);
      etags.add(employee.etag).add((await summary(d)).etag);
    }
    expect(await summary(d)).toMatchObject({ employeeCount: 3, payroll: '142590.5' });
    expect(await lastNameIndex(d, 'SMITH')).toEqual([1, 2, 3]);

    const renamed = (await ok(UPDATE_EMPLOYEE, { departmentId: d, id: '2', lastName: 'JONES' })).employee;
    expect(renamed).toMatchObject({ lastName: 'JONES', firstName: 'ANA', annualSalary: '61000.5' });
    expect([await lastNameIndex(d, 'SMITH'), await lastNameIndex(d, 'JONES')]).toEqual([[1, 3], [2]]);
    const raised = (await ok(UPDATE_EMPLOYEE, { departmentId: d, id: '2', annualSalary: 70000 })).employee;
    const replaced = (await ok(REPLACE_EMPLOYEE, { departmentId: d, id: '1', email: 'one@example.test', lastName: 'SMITH', firstName: 'BO' })).employee;
    expect(replaced).toMatchObject({ title: null, annualSalary: null, fullOrPartTime: null, firstName: 'BO' });
    expect(await summary(d)).toMatchObject({ employeeCount: 3, payroll: '101590' });
    const deleted = (await ok(DELETE_EMPLOYEE, { departmentId: d, id: '3' })).employee;
    expect(deleted).toMatchObject({ id: '3', hourlyRate: '20.25' });
    expect(await summary(d)).toMatchObject({ employeeCount: 2, payroll: '70000' });
    expect(await lastNameIndex(d, 'SMITH')).toEqual([1]);
    expect((await server.query('{ employee(departmentId: "' + d + '", id: "3") { id } }')).data.employee).toBeNull();
    for (const e of [renamed, raised, replaced]) etags.add(e.etag);
    etags.add((await summary(d)).etag);
    expect(etags.size).toBe(1 + 3 * 2 + 3 + 1); // every entity write and every summary change: a new ETag
  });

  test('a departmentId with / # ? works: its keys are escaped', async () => {
    const d = await newDepartment(`R&D/#${++seq}?`);
    await ok(CREATE_EMPLOYEE, employeeInput(d, 1, { title: 'ENGINEER I/II #2' }));
    expect((await rawEntity(server.store, employeeAt(d, 1)))?.partitionKey).toBe(`R&D%2F%23${seq}%3F`);
    expect(await summary(d)).toMatchObject({ id: d, employeeCount: 1, payroll: '50000' });
    expect(await lastNameIndex(d, 'SMITH')).toEqual([1]);
  });

  test('a department with employees cannot be deleted; an empty one can', async () => {
    const d = await newDepartment();
    await ok(CREATE_EMPLOYEE, employeeInput(d, 1));
    const refused = await server.query(DELETE_DEPARTMENT, { input: { id: d } });
    expect(firstError(refused)).toMatchObject({ code: 'CONFLICT', extensions: { reason: 'HasDependents' } });
    await ok(DELETE_EMPLOYEE, { departmentId: d, id: '1' });
    await ok(DELETE_DEPARTMENT, { id: d });
    expect((await server.query(DEPARTMENT_SUMMARY, { id: d })).data.department).toBeNull();
  });
});

describe('ETags', () => {
  test('the ETag read → written; a stale one → CONFLICT and nothing written; none → unconditional', async () => {
    const d = await newDepartment();
    const { etag } = (await ok(CREATE_EMPLOYEE, employeeInput(d, 1))).employee;
    const next = (await ok(UPDATE_EMPLOYEE, { departmentId: d, id: '1', ifMatch: etag, annualSalary: 60000 })).employee;
    expect(next.etag).not.toBe(etag);

    const before = await snapshot(d);
    for (const [query, input] of [
      [UPDATE_EMPLOYEE, { departmentId: d, id: '1', ifMatch: etag, lastName: 'JONES', annualSalary: 1 }],
      [REPLACE_EMPLOYEE, { ...employeeInput(d, 1, { lastName: 'JONES' }), ifMatch: etag }],
      [DELETE_EMPLOYEE, { departmentId: d, id: '1', ifMatch: etag }],
    ] as const) {
      const r = await server.query(query, { input });
      expect(firstError(r)).toMatchObject({ code: 'CONFLICT', extensions: { reason: 'ETagMismatch', currentEtag: next.etag } });
      expect(r.extensions.cost.writes).toBe(0);
    }
    expect(await snapshot(d)).toEqual(before);

    const forced = (await ok(UPDATE_EMPLOYEE, { departmentId: d, id: '1', firstName: 'BO' })).employee;
    expect(forced).toMatchObject({ firstName: 'BO', annualSalary: '60000' });
  });

  test('two updates racing with the same ETag: one wins, the other gets CONFLICT, the payroll counts the winner only', async () => {
    const d = await newDepartment();
    const { etag } = (await ok(CREATE_EMPLOYEE, employeeInput(d, 1))).employee;
    const salaries = [61000, 62000];
    const results = await Promise.all(
      salaries.map((s) => server.query(UPDATE_EMPLOYEE, { input: { departmentId: d, id: '1', ifMatch: etag, annualSalary: s } })),
    );
    const winners = results.filter((r) => !r.errors);
    expect(winners).toHaveLength(1);
    expect(firstError(results.find((r) => r.errors)!)).toMatchObject({ code: 'CONFLICT', extensions: { reason: 'ETagMismatch' } });
    const won = winners[0].data.updateEmployee.employee.annualSalary;
    expect(await summary(d)).toMatchObject({ employeeCount: 1, payroll: won });
  });

  test('five concurrent deletes with the same ETag: one deletes, the others get CONFLICT (not NOT_FOUND)', async () => {
    const d = await newDepartment();
    const { etag } = (await ok(CREATE_EMPLOYEE, employeeInput(d, 1))).employee;
    const results = await Promise.all(Array.from({ length: 5 }, () => server.query(DELETE_EMPLOYEE, { input: { departmentId: d, id: '1', ifMatch: etag } })));
    expect(results.filter((r) => !r.errors)).toHaveLength(1);
    for (const r of results.filter((x) => x.errors)) expect(firstError(r)).toMatchObject({ code: 'CONFLICT', extensions: { reason: 'ETagMismatch' } });
    // Without an ETag, deleting what is gone is NOT_FOUND.
    expect(firstError(await server.query(DELETE_EMPLOYEE, { input: { departmentId: d, id: '1' } })).code).toBe('NOT_FOUND');
    expect(await summary(d)).toMatchObject({ employeeCount: 0, payroll: '0' });
  });

  test("another employee's write to the department between read and EGT does not make a client's valid ETag fail", async () => {
    const d = await newDepartment();
    const { etag } = (await ok(CREATE_EMPLOYEE, employeeInput(d, 1))).employee;
    const submit = server.store.submitTransaction.bind(server.store);
    // Another process writes the department between this process's read and its EGT (in this process, writes
    // of one partition share an EGT and never interleave): the planned merge's If-Match fails, the write is
    // read again and retried — the client's own ETag still matches, so it must not get CONFLICT.
    const spy = jest.spyOn(server.store, 'submitTransaction').mockImplementationOnce(async (table, ops, opts) => {
      await server.store.updateEntity(table, { partitionKey: escapeKeyValue(d), rowKey: 'department', properties: {} }, 'merge');
      return submit(table, ops, opts);
    });
    const updated = (await ok(UPDATE_EMPLOYEE, { departmentId: d, id: '1', ifMatch: etag, annualSalary: 65000 })).employee;
    expect(spy).toHaveBeenCalledTimes(2);
    expect(updated.annualSalary).toBe('65000');
    expect(await summary(d)).toMatchObject({ employeeCount: 1, payroll: '65000' });
  });
});

describe('no partial state after a failed EGT', () => {
  /** Runs `mutate` with the EGT altered by `alter`, and asserts the partition and the e-mail index unchanged. */
  async function expectNothingWritten(d: string, alter: (ops: TransactionOperation[]) => TransactionOperation[], mutate: () => Promise<any>, egts = 1) {
    const before = await snapshot(d);
    const submit = server.store.submitTransaction.bind(server.store);
    const spy = jest.spyOn(server.store, 'submitTransaction').mockImplementationOnce((table, ops, opts) => submit(table, alter(ops), opts));
    const r = await mutate();
    expect(spy).toHaveBeenCalledTimes(egts);
    expect(await snapshot(d)).toEqual(before);
    return firstError(r);
  }

  test('op 0 fails (409: the employee appeared after it was read): no index entity, no summary change, no reservation', async () => {
    const d = await newDepartment();
    await ok(CREATE_EMPLOYEE, employeeInput(d, 1));
    const get = server.store.getEntity.bind(server.store);
    jest.spyOn(server.store, 'getEntity').mockImplementation(async (a, o) => (a.rowKey === 'empid_00000001' ? null : get(a, o)));
    const input = employeeInput(d, 1, { lastName: 'NEWNAME', email: `late${seq}@example.test` });
    // A create does not read its entity first: its EGT is refused, the entity is read (here: "not there") and the
    // EGT sent again, refused again. Two EGTs, neither applied.
    const e = await expectNothingWritten(
      d,
      (ops) => ops,
      () => server.query(CREATE_EMPLOYEE, { input }),
      2,
    );
    expect(e).toMatchObject({ code: 'CONFLICT', extensions: { operationIndex: 0, reason: 'EntityAlreadyExists' } });
    expect(await rawEntity(server.store, emailAddress(model, input.email as string))).toBeNull();
  });

  test('a later op fails (404 after the entity, its index entity, its change entity and the summary merge): all rolled back', async () => {
    const d = await newDepartment();
    const pk = escapeKeyValue(d);
    const missing: TransactionOperation = { kind: 'update', mode: 'merge', entity: { partitionKey: pk, rowKey: 'missing', properties: {} } };
    const input = employeeInput(d, 1, { email: `rolled${seq}@example.test` });
    const e = await expectNothingWritten(
      d,
      (ops) => [...ops, missing],
      () => server.query(CREATE_EMPLOYEE, { input }),
    );
    expect(e).toMatchObject({ code: 'NOT_FOUND', extensions: { operationIndex: 4 } });
    // The department and its own creation's change entity (continuous backup) alone: no employee, no index entity,
    // no change entity of the employee.
    expect((await snapshot(d)).size).toBe(2);
    expect(await summary(d)).toMatchObject({ employeeCount: 0, payroll: '0' });
    expect(await rawEntity(server.store, emailAddress(model, input.email as string))).toBeNull();
  });

  test('the old intra-partition index entity missing (an index added, not built yet): the refused EGT is sent again without its delete, the rename is whole', async () => {
    const d = await newDepartment();
    await ok(CREATE_EMPLOYEE, employeeInput(d, 1));
    const pk = escapeKeyValue(d);
    await server.store.deleteEntity({ table: directory, partitionKey: pk, rowKey: 'lastname_SMITH_00000001' });
    const submit = server.store.submitTransaction.bind(server.store);
    const refusals: unknown[] = [];
    const spy = jest.spyOn(server.store, 'submitTransaction').mockImplementation((table, ops, opts) =>
      submit(table, ops, opts).catch((e: unknown) => {
        refusals.push(e);
        throw e;
      }),
    );
    await ok(UPDATE_EMPLOYEE, { departmentId: d, id: '1', lastName: 'JONES' });
    // The first EGT is refused on the delete (op 2), nothing of it applied; the second, without that delete, applied.
    expect(spy).toHaveBeenCalledTimes(2);
    expect(refusals).toEqual([expect.objectContaining({ code: 'NOT_FOUND', details: expect.objectContaining({ operationIndex: 2 }) })]);
    expect((await rawEntity(server.store, employeeAt(d, 1)))?.properties.lastName).toBe('JONES');
    expect(await rawEntity(server.store, { table: directory, partitionKey: pk, rowKey: 'lastname_JONES_00000001' })).not.toBeNull();
    expect(await rawEntity(server.store, { table: directory, partitionKey: pk, rowKey: 'lastname_SMITH_00000001' })).toBeNull();
  });
});

describe('validation before anything is sent', () => {
  /** Asserts a refused create: the code, no write (cost.writes 0), no entity, no fan-out message, summary unchanged. */
  async function expectRefused(d: string, input: Record<string, unknown>, code: string) {
    await drainFanout({ queues: testQueues(), store: server.store, model, tablePrefix: server.config.tablePrefix });
    const before = await snapshot(d);
    const r = await server.query(CREATE_EMPLOYEE, { input });
    expect(firstError(r).code).toBe(code);
    // Refused from the input alone: not even a read was sent.
    expect(r.extensions.cost).toMatchObject({ writes: 0, roundTrips: 0 });
    expect(await snapshot(d)).toEqual(before);
    expect(await receiveFanout(testQueues(), server.config.tablePrefix)).toEqual([]);
  }

  test('a value over 64 KiB, a key over the target limit: LIMIT_EXCEEDED; an id that is no number: BAD_USER_INPUT', async () => {
    const d = await newDepartment();
    await expectRefused(d, employeeInput(d, 1, { middleInitial: 'x'.repeat(32769) }), 'LIMIT_EXCEEDED'); // 65538 bytes
    await expectRefused(d, employeeInput(d, 1, { firstName: 'x'.repeat(40000) }), 'LIMIT_EXCEEDED');
    await expectRefused(d, employeeInput(d, 1, { lastName: 'x'.repeat(600) }), 'LIMIT_EXCEEDED'); // RowKey > 512 chars
    await expectRefused(d, employeeInput(d, 1, { title: 't'.repeat(600) }), 'LIMIT_EXCEEDED'); // byTitle PartitionKey
    await expectRefused(d, employeeInput(d, 'abc'), 'BAD_USER_INPUT');
    await expectRefused(d, employeeInput(d, 1, { annualSalary: '-1' }), 'BAD_USER_INPUT'); // @constraint(min: 0)
    await expectRefused(d, employeeInput(d, 1, { annualSalary: '1'.repeat(35) }), 'BAD_USER_INPUT'); // over 34 digits
    const ok32k = await server.query(CREATE_EMPLOYEE, { input: employeeInput(d, 2, { middleInitial: 'x'.repeat(32768) }) });
    expect(ok32k.errors).toBeUndefined(); // exactly 64 KiB is allowed
  });

  test('declared in the schema: a blank or control-character department id, an e-mail that is no address: BAD_USER_INPUT, nothing read', async () => {
    const d = await newDepartment();
    await expectRefused(d, employeeInput(d, 1, { email: 'not-an-email' }), 'BAD_USER_INPUT');
    await expectRefused(d, employeeInput(d, 1, { email: 'a b@example.test' }), 'BAD_USER_INPUT');
    for (const id of ['', '   ', ' PAD', 'TAB\tIN', 'BELL\u0007', 'LONE\ud800']) {
      const r = await server.query(CREATE_DEPARTMENT, { input: { id, name: 'x' } });
      expect(firstError(r)).toMatchObject({ code: 'BAD_USER_INPUT', extensions: { field: 'id' } });
      expect(r.extensions.cost.roundTrips).toBe(0);
      // Read with the same id: refused before the point query too.
      const read = await server.query('query($id: ID!) { department(id: $id) { id } }', { id });
      expect(firstError(read)).toMatchObject({ code: 'BAD_USER_INPUT' });
      expect(read.extensions.cost.roundTrips).toBe(0);
    }
  });

  test('a missing required field: a GraphQL validation error, nothing written', async () => {
    const d = await newDepartment();
    const literal = await server.query(
      `mutation { createEmployee(input: { departmentId: "${d}", id: "1", email: "a@b", firstName: "A" }) { employee { id } } }`,
    );
    expect(firstError(literal)).toMatchObject({ code: 'GRAPHQL_VALIDATION_FAILED' });
    const { lastName: _omitted, ...input } = employeeInput(d, 1);
    expect(firstError(await server.query(CREATE_EMPLOYEE, { input }))).toMatchObject({ code: 'BAD_USER_INPUT' });
    expect(await rawEntity(server.store, employeeAt(d, 1))).toBeNull();
    expect(await summary(d)).toMatchObject({ employeeCount: 0 });
  });

  test('an entity over 1 MiB whose every value is within 64 KiB: LIMIT_EXCEEDED, nothing written', async () => {
    const notes = await startNoteServer();
    try {
      const field = (i: number) => `p${String(i).padStart(2, '0')}`;
      const big = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [field(i + 1), 'y'.repeat(32000)])); // 17 × 64000 bytes
      const r = await notes.query('mutation($input: CreateNoteInput!) { createNote(input: $input) { note { id } } }', { input: { id: 'n1', ...big } });
      expect(firstError(r)).toMatchObject({ code: 'LIMIT_EXCEEDED', extensions: { limit: 1024 * 1024 } });
      expect(r.extensions.cost.writes).toBe(0);
      const { p17: _dropped, ...fits } = big;
      expect(
        (await notes.query('mutation($input: CreateNoteInput!) { createNote(input: $input) { note { id } } }', { input: { id: 'n1', ...fits } })).errors,
      ).toBeUndefined();
    } finally {
      await notes.close();
    }
  });
});

test('an update that changes no org-wide index: the entity and its department read in one wave, then one EGT', async () => {
  const d = await newDepartment();
  await ok(CREATE_EMPLOYEE, employeeInput(d, 1));
  const r = await server.query(UPDATE_EMPLOYEE, { input: { departmentId: d, id: '1', annualSalary: 12345 } });
  expect(r.errors).toBeUndefined();
  // The department (the summary holder) follows from the key field departmentId, so it is read beside the employee
  // — or not at all, when this process's committer of the partition still holds it from the create's EGT.
  expect(r.extensions.cost).toMatchObject({ rangeQueries: 0, writes: 1, waves: 2, partitionScans: 0, tableScans: 0 });
  expect([1, 2]).toContain(r.extensions.cost.pointQueries);
});

test('10 concurrent creates in one department (no ifMatch) all succeed, and the count is exactly +10', async () => {
  const d = await newDepartment();
  await ok(CREATE_EMPLOYEE, employeeInput(d, 100));
  const results = await Promise.all(
    Array.from({ length: 10 }, (_, i) => server.query(CREATE_EMPLOYEE, { input: employeeInput(d, i + 1, { annualSalary: 1000 * (i + 1) }) })),
  );
  expect(results.map((r) => r.errors)).toEqual(Array(10).fill(undefined));
  expect(await summary(d)).toMatchObject({ employeeCount: 11, payroll: '105000' });
  const ids = [...(await snapshot(d)).values()].filter((e: StoredEntity) => e.rowKey.startsWith('lastname_')).length;
  expect(ids).toBe(11);
});

describe('org-wide indexes, kept by the inline worker', () => {
  let live: TestServer;
  beforeAll(async () => void (live = await startTestServer({ TABLEGRAPH_SETTLE_MS: '500' })));
  afterAll(() => live?.close());

  const ORG = `query($email: String!, $lastName: String!, $title: String!) {
    byEmail: employeeByEmail(email: $email) { id lastName title }
    byLastName: employeesByLastName(lastName: $lastName) { edges { node { id } } }
    byTitle: employeesByTitle(title: $title) { edges { node { id } } } }`;
  const org = async (email: string, lastName: string, title: string) => {
    const r = await live.query(ORG, { email, lastName, title });
    expect(r.errors).toBeUndefined();
    const ids = (c: any) => c.edges.map((e: any) => e.node.id);
    return { byEmail: r.data.byEmail, byLastName: ids(r.data.byLastName), byTitle: ids(r.data.byTitle), consistency: r.extensions.consistency };
  };

  test('a create, an update and a delete show up in employeeByEmail, employeesByLastName, employeesByTitle', async () => {
    const d = `W${++seq}`;
    expect((await live.query(CREATE_DEPARTMENT, { input: { id: d, name: d } })).errors).toBeUndefined();
    const input = employeeInput(d, 7, { email: `w${seq}@example.test`, lastName: `LN${seq}`, title: `T/${seq}` });
    expect((await live.query(CREATE_EMPLOYEE, { input })).errors).toBeUndefined();
    // employeeByEmail answers at once (the reservation is the index entity); the other two wait for the worker.
    const created = await pollUntil('the index entities', async () => {
      const o = await org(input.email as string, input.lastName as string, input.title as string);
      return o.byEmail && o.byLastName.length > 0 && o.byTitle.length > 0 ? o : undefined;
    });
    expect(created).toEqual({
      byEmail: { id: '7', lastName: input.lastName, title: input.title },
      byLastName: ['7'],
      byTitle: ['7'],
      consistency: { eventual: true, indexes: ['Employee.byEmail', 'Employee.byLastName', 'Employee.byTitle'] },
    });
    const point = await live.query(`{ employee(departmentId: "${d}", id: "7") { id lastName } }`);
    expect(point.extensions.consistency).toEqual({ eventual: false, indexes: [] });

    const changed = { email: `w${seq}.new@example.test`, lastName: `NEW${seq}`, title: `NEW/${seq}` };
    expect((await live.query(UPDATE_EMPLOYEE, { input: { departmentId: d, id: '7', ...changed } })).errors).toBeUndefined();
    const after = await pollUntil('the new index entities and the old ones gone', async () => {
      const [now, old] = [
        await org(changed.email, changed.lastName, changed.title),
        await org(input.email as string, input.lastName as string, input.title as string),
      ];
      return now.byEmail && !old.byEmail && old.byLastName.length + old.byTitle.length === 0 ? now : undefined;
    });
    expect([after.byEmail, after.byLastName, after.byTitle]).toEqual([{ id: '7', lastName: changed.lastName, title: changed.title }, ['7'], ['7']]);

    expect((await live.query(DELETE_EMPLOYEE, { input: { departmentId: d, id: '7' } })).errors).toBeUndefined();
    await pollUntil('the index entities deleted', async () => {
      const o = await org(changed.email, changed.lastName, changed.title);
      return !o.byEmail && o.byLastName.length + o.byTitle.length === 0 ? o : undefined;
    });
  });
});
