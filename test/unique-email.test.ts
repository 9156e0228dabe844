/**
 * The unique e-mail index (docs/architecture.md, "Unique values"): a unique inter-partition key is reserved with a
 * conditional insert before the entity's EGT, so two employees never own one address; the worker frees an address an
 * employee gave up, and a reservation whose EGT failed is released — by the executor, or by the worker after the settle
 * time ("Inter-partition secondary index pattern", "Eventually consistent transactions pattern").
 */
import { journalTable } from '../src/model/capture-journal';
import type { Model } from '../src/model/types';
import type { EntityAddress, TransactionOperation } from '../src/storage/storage-types';
import { compileHr, startTestServer, testQueues, type TestServer } from './support/harness';
import {
  CREATE_DEPARTMENT,
  CREATE_EMPLOYEE,
  drainFanout,
  emailAddress,
  employeeInput,
  firstError,
  pollUntil,
  rawEntity,
  tableSnapshot,
  UPDATE_EMPLOYEE,
} from './support/write-fixtures';

let server: TestServer;
let model: Model;

beforeAll(async () => {
  server = await startTestServer({ TABLEGRAPH_WORKER: 'off' });
  model = compileHr(server.config.tablePrefix).model;
});
afterAll(() => server?.close());
afterEach(() => jest.restoreAllMocks());

let seq = 0;
const emailTable = (s: TestServer) => `${s.config.tablePrefix}EmployeesByEmail`;
/** The byEmail index entity of `email` on server `s` (its own table prefix). */
const reservation = (s: TestServer, email: string): EntityAddress => emailAddress(compileHr(s.config.tablePrefix).model, email);
const reconcileAll = () => drainFanout({ queues: testQueues(), store: server.store, model, tablePrefix: server.config.tablePrefix });

async function department(s: TestServer = server): Promise<string> {
  const id = `U${++seq}`;
  expect((await s.query(CREATE_DEPARTMENT, { input: { id, name: id } })).errors).toBeUndefined();
  return id;
}
async function create(input: Record<string, unknown>, s: TestServer = server): Promise<void> {
  expect((await s.query(CREATE_EMPLOYEE, { input })).errors).toBeUndefined();
}
async function byEmail(email: string): Promise<{ departmentId: string; id: string } | null> {
  const r = await server.query('query($email: String!) { employeeByEmail(email: $email) { departmentId id } }', { email });
  expect(r.errors).toBeUndefined();
  return r.data.employeeByEmail;
}
/** Makes the next EGT of `s` fail on an operation after its own (a merge of an entity that does not exist: 404). */
/** Makes the next EGT of the data fail (not one of the capture journal's, which an inline worker's pass sends). */
function failNextEgt(s: TestServer): void {
  const submit = s.store.submitTransaction.bind(s.store);
  let failed = false;
  jest.spyOn(s.store, 'submitTransaction').mockImplementation((table, ops, opts) => {
    if (failed || table === journalTable(s.config.tablePrefix)) return submit(table, ops, opts);
    failed = true;
    const pk = ops[0].kind === 'delete' ? ops[0].partitionKey : ops[0].entity.partitionKey;
    const missing: TransactionOperation = { kind: 'update', mode: 'merge', entity: { partitionKey: pk, rowKey: 'missing', properties: {} } };
    return submit(table, [...ops, missing], opts);
  });
}

test('8 concurrent creates with one e-mail in 8 departments: exactly one wins, no reservation points at a loser', async () => {
  const email = `same${++seq}@example.test`;
  const departments = await Promise.all(Array.from({ length: 8 }, () => department()));
  const results = await Promise.all(departments.map((d) => server.query(CREATE_EMPLOYEE, { input: employeeInput(d, 1, { email }) })));
  const won = results.flatMap((r, i) => (r.errors ? [] : [departments[i]]));
  expect(won).toHaveLength(1);
  for (const r of results.filter((x) => x.errors)) {
    expect(firstError(r)).toMatchObject({ code: 'CONFLICT', extensions: { reason: 'UniqueKeyTaken', index: 'byEmail', fields: ['email'] } });
  }
  await reconcileAll();
  expect(await byEmail(email)).toEqual({ departmentId: won[0], id: '1' });
  const rows = (await tableSnapshot(server.store, emailTable(server))).filter((e) => departments.includes(String(e.properties.departmentId)));
  const { partitionKey, rowKey } = reservation(server, email);
  expect(rows.map((e) => [e.partitionKey, e.rowKey, e.properties.departmentId])).toEqual([[partitionKey, rowKey, won[0]]]);
  for (const d of departments) {
    const count = (await server.query(`{ department(id: "${d}") { employeeCount } }`)).data.department.employeeCount;
    expect(count).toBe(d === won[0] ? 1 : 0);
  }
});

test('an e-mail another employee holds is refused; a free one is taken, and the old one is freed by reconciliation', async () => {
  const d = await department();
  const [a, b] = [`a${seq}@example.test`, `b${seq}@example.test`];
  await create(employeeInput(d, 1, { email: a }));
  await create(employeeInput(d, 2, { email: b }));
  const taken = await server.query(UPDATE_EMPLOYEE, { input: { departmentId: d, id: '1', email: b } });
  expect(firstError(taken)).toMatchObject({ code: 'CONFLICT', extensions: { reason: 'UniqueKeyTaken' } });
  // Refused on a read of the reservation: nothing written, no fan-out message.
  expect(taken.extensions.cost.writes).toBe(0);
  expect(
    (await drainFanout({ queues: testQueues(), store: server.store, model, tablePrefix: server.config.tablePrefix })).filter(
      (h) => h.message.primary.rowKey === 'empid_00000001' && h.message.candidates.some((c) => c.rowKey === b),
    ),
  ).toEqual([]);
  expect((await rawEntity(server.store, reservation(server, b)))?.properties).toMatchObject({ departmentId: d, id: '2' });

  const moved = `a${seq}.moved@example.test`;
  expect((await server.query(UPDATE_EMPLOYEE, { input: { departmentId: d, id: '1', email: moved } })).errors).toBeUndefined();
  // Until the worker reconciles, the old address still belongs to employee 1.
  const early = await server.query(CREATE_EMPLOYEE, { input: employeeInput(d, 3, { email: a }) });
  expect(firstError(early)).toMatchObject({ code: 'CONFLICT', extensions: { reason: 'UniqueKeyTaken' } });
  await reconcileAll();
  expect(await rawEntity(server.store, reservation(server, a))).toBeNull();
  expect(await byEmail(moved)).toEqual({ departmentId: d, id: '1' });
  await create(employeeInput(d, 3, { email: a }));
  await reconcileAll();
  expect(await byEmail(a)).toEqual({ departmentId: d, id: '3' });
});

test('creates of one group whose e-mails share an index partition: reserved together in EGTs; a taken one fails alone', async () => {
  const d = await department();
  const other = await department();
  // Twelve e-mails in one index partition (the index's PartitionKey hashes the e-mail into 16).
  const hr = compileHr(server.config.tablePrefix).model;
  const partitionOf = (email: string) => emailAddress(hr, email).partitionKey;
  const emails: string[] = [];
  for (let i = 0; emails.length < 12; i++) {
    const email = `batch${seq}.${i}@example.test`;
    if (emails.length === 0 || partitionOf(email) === partitionOf(emails[0])) emails.push(email);
  }
  // The fifth already belongs to an employee of another department.
  await create(employeeInput(other, 1, { email: emails[4] }));
  const submit = jest.spyOn(server.store, 'submitTransaction');
  const results = await Promise.all(emails.map((email, i) => server.query(CREATE_EMPLOYEE, { input: employeeInput(d, i + 1, { email }) })));
  const onIndex = submit.mock.calls.flatMap(([table], i) => (table === reservation(server, emails[0]).table ? [submit.mock.results[i].value] : []));
  const reservationEgts = onIndex.length;
  // The EGT holding the taken e-mail's insert was refused as a whole (and sent again without it).
  const refused = (await Promise.allSettled(onIndex)).filter((r) => r.status === 'rejected').length;
  submit.mockRestore();
  expect(refused).toBeGreaterThanOrEqual(1);
  results.forEach((r, i) => {
    if (i === 4) expect(firstError(r)).toMatchObject({ code: 'CONFLICT', extensions: { reason: 'UniqueKeyTaken' } });
    else expect(r.errors).toBeUndefined();
  });
  // Inserted in EGTs (one refused for the taken e-mail, then the rest again) and confirmed in EGTs: not one call
  // each. How the twelve split into groups depends on timing, so only a bound.
  expect(reservationEgts).toBeGreaterThanOrEqual(2);
  expect(reservationEgts).toBeLessThan(2 * emails.length);
  // Each e-mail's index entity names its own employee; the taken one still the other department's.
  for (const [i, email] of emails.entries()) {
    const stored = await rawEntity(server.store, reservation(server, email));
    expect(stored?.properties).toMatchObject(i === 4 ? { departmentId: other, id: '1' } : { departmentId: d, id: String(i + 1) });
  }
  await reconcileAll();
  for (const [i, email] of emails.entries()) {
    expect(await byEmail(email)).toEqual(i === 4 ? { departmentId: other, id: '1' } : { departmentId: d, id: String(i + 1) });
  }
});

test('a reservation whose EGT failed is released by the executor at once', async () => {
  const d = await department();
  const email = `failed${seq}@example.test`;
  failNextEgt(server);
  const r = await server.query(CREATE_EMPLOYEE, { input: employeeInput(d, 1, { email }) });
  // Ops 0-3: the employee, its index entity, its change entity (HR's employeeChanged), the department's summaries.
  expect(firstError(r)).toMatchObject({ code: 'NOT_FOUND', extensions: { operationIndex: 4 } });
  expect(await rawEntity(server.store, reservation(server, email))).toBeNull();
  await create(employeeInput(d, 2, { email }));
  await reconcileAll();
  expect(await byEmail(email)).toEqual({ departmentId: d, id: '2' });
});

describe('with the inline worker', () => {
  let live: TestServer;
  // A short storage timeout makes a short reservation lease (2 × 2 s + 5 s): the worker may remove a reservation
  // whose write can no longer commit only once its lease has ended.
  beforeAll(async () => void (live = await startTestServer({ TABLEGRAPH_SETTLE_MS: '500', TABLEGRAPH_STORAGE_TIMEOUT_MS: '2000' })));
  afterAll(() => live?.close());

  test('a reservation the executor could not release is removed by the worker once its lease has ended', async () => {
    const d = await department(live);
    const email = `orphan${seq}@example.test`;
    failNextEgt(live);
    const remove = live.store.deleteEntity.bind(live.store);
    let refused = 0;
    jest.spyOn(live.store, 'deleteEntity').mockImplementation(async (a, o) => {
      if (a.table === emailTable(live) && a.rowKey === reservation(live, email).rowKey && refused++ === 0) throw new Error('release lost (simulated)');
      return remove(a, o);
    });
    expect(firstError(await live.query(CREATE_EMPLOYEE, { input: employeeInput(d, 1, { email }) })).code).toBe('NOT_FOUND');
    expect(refused).toBe(1);
    // The orphan reservation points at an employee that does not exist, until the worker reconciles.
    expect((await rawEntity(live.store, reservation(live, email)))?.properties).toMatchObject({ departmentId: d, id: '1' });
    const until = (await rawEntity(live.store, reservation(live, email)))?.properties.ReservedUntil as Date;
    expect(until.getTime() - Date.now()).toBeGreaterThan(5000);
    // Another employee cannot take it while the lease runs; the worker removes it after.
    expect(firstError(await live.query(CREATE_EMPLOYEE, { input: employeeInput(d, 3, { email }) })).extensions.reason).toBe('UniqueKeyTaken');
    await pollUntil('the orphan reservation removed', async () => ((await rawEntity(live.store, reservation(live, email))) ? undefined : true), 30_000, 200);
    expect(Date.now()).toBeGreaterThanOrEqual(until.getTime());
    await create(employeeInput(d, 2, { email }), live);
    expect((await rawEntity(live.store, reservation(live, email)))?.properties).toMatchObject({ departmentId: d, id: '2' });
  });
});
