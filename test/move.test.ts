/**
 * Key changes (`@write(action: MOVE)`): `moveEmployee` moves employees between departments as the guide's
 * "Eventually consistent transactions pattern" does — queued, then copied to the new partition and deleted from the
 * old one by the worker. Checked: what the request refuses before anything is queued; what each address answers
 * before and after; both departments' summaries and every index (the unique e-mail taken over by the new address)
 * after redelivered, reordered messages, two workers and workers killed mid-message; a write to the old address
 * before the move is carried along; a move and a delete and re-create of one key. And the guide's archiving
 * example, `archiveEmployee` (`@write(action: MOVE, to: "ArchivedEmployee")`): copied to the Archive table as
 * another type, deleted from the Directory, under the same redelivery and killed workers.
 */
import { formatVerifyReport, verifyDerived } from '../src/maintenance/verify';
import type { Model } from '../src/model/types';
import { WriteExecutor } from '../src/write/write-executor';
import { queueSender, fanoutQueueNames } from '../src/worker/fanout-worker';
import { compileHr, startTestServer, testQueues, testStore, type TestServer } from './support/harness';
import { drainWithRedelivery, seededRng } from './support/fanout-fixtures';
import { CREATE_DEPARTMENT, CREATE_EMPLOYEE, DEPARTMENT_SUMMARY, employeeInput, firstError, receiveFanout, UPDATE_EMPLOYEE } from './support/write-fixtures';

let server: TestServer;
let model: Model;
let writer: WriteExecutor;

beforeAll(async () => {
  server = await startTestServer({ TABLEGRAPH_WORKER: 'off' });
  model = compileHr(server.config.tablePrefix).model;
  writer = new WriteExecutor({ model, store: server.store, fanout: queueSender(testQueues(), fanoutQueueNames(server.config.tablePrefix).queue) });
}, 60_000);
afterAll(() => server?.close());

const MOVE = 'mutation($input: MoveEmployeeInput!) { moveEmployee(input: $input) { employee { departmentId id lastName } } }';
const WHERE = 'query($d: ID!, $id: ID!) { employee(departmentId: $d, id: $id) { departmentId id email lastName department { id } } }';

async function ok(query: string, variables: Record<string, unknown>): Promise<any> {
  const r = await server.query(query, variables);
  expect(r.errors).toBeUndefined();
  return r.data;
}

/** Every message on the queue, delivered twice, reordered, by workers that die mid-message, until none is left. */
const drain = (random: () => number) => drainWithRedelivery({ model, store: server.store, writer, queues: testQueues(), tablePrefix: server.config.tablePrefix }, random);

test('the request refuses what cannot be moved, before anything is queued', async () => {
  for (const id of ['MV1', 'MV2']) await ok(CREATE_DEPARTMENT, { input: { id, name: id } });
  await ok(CREATE_EMPLOYEE, { input: employeeInput('MV1', 1) });
  await ok(CREATE_EMPLOYEE, { input: employeeInput('MV2', 1) });
  const refusals = [
    [{ departmentId: 'MV1', id: '1', toDepartmentId: 'MV1' }, 'BAD_USER_INPUT'],
    [{ departmentId: 'MV1', id: '1', toDepartmentId: 'MV2' }, 'CONFLICT'], // MV2/1 exists
    [{ departmentId: 'MV1', id: '1', toDepartmentId: 'NOWHERE' }, 'NOT_FOUND'], // no such department
    [{ departmentId: 'MV1', id: '9', toDepartmentId: 'MV2' }, 'NOT_FOUND'], // nothing to move
    [{ departmentId: 'MV1', id: '1', toDepartmentId: 'MV2', toId: 'x' }, 'BAD_USER_INPUT'],
    [{ departmentId: 'MV1', id: '1', toDepartmentId: 'MV2', toId: '2', ifMatch: 'W/"stale"' }, 'CONFLICT'],
  ] as const;
  await drain(() => 0.5); // what the creates sent: reconciled, none killed
  for (const [input, code] of refusals) expect([input, firstError(await server.query(MOVE, { input })).code]).toEqual([input, code]);
  expect(firstError(await server.query(MOVE, { input: refusals[2][0] })).extensions).toMatchObject({ reason: 'ReferenceMissing', field: 'department' });
  expect(await receiveFanout(testQueues(), server.config.tablePrefix)).toEqual([]);
});

test('moves carried out exactly under concurrency, redelivery, two workers and killed workers', async () => {
  const seed = Number(process.env.FANOUT_SEED) || Date.now() % 2 ** 31;
  const rng = seededRng(seed);
  const random = () => rng.int(0x7fffffff) / 0x7fffffff;
  for (const id of ['SRC', 'DST']) await ok(CREATE_DEPARTMENT, { input: { id, name: id } });
  const people = Array.from({ length: 12 }, (_, i) => employeeInput('SRC', i + 1, { annualSalary: String(1000 + i) })) as Array<Record<string, string>>;
  await Promise.all(people.map((input) => ok(CREATE_EMPLOYEE, { input })));
  await drain(random);

  // Eight move (keeping their ids); one of them is renamed at the old address after its move was requested.
  const moving = people.slice(0, 8);
  const answers = await Promise.all(moving.map((p) => ok(MOVE, { input: { departmentId: 'SRC', id: p.id, toDepartmentId: 'DST' } })));
  expect(answers.map((a) => a.moveEmployee.employee.departmentId)).toEqual(moving.map(() => 'SRC')); // as it is
  await ok(UPDATE_EMPLOYEE, { input: { departmentId: 'SRC', id: moving[0].id, lastName: 'RENAMED' } });
  // Another is deleted and created again at the old address: the move takes what is there when carried out.
  await ok('mutation($input: DeleteEmployeeInput!) { deleteEmployee(input: $input) { employee { id } } }', { input: { departmentId: 'SRC', id: moving[7].id } });
  await ok(CREATE_EMPLOYEE, { input: { ...moving[7], lastName: 'AGAIN' } });
  // Before the worker: the old address answers, the new one does not.
  expect((await ok(WHERE, { d: 'SRC', id: moving[1].id })).employee.departmentId).toBe('SRC');
  expect((await ok(WHERE, { d: 'DST', id: moving[1].id })).employee).toBeNull();

  const { messages, killed } = await drain(random);

  for (const p of people) {
    const moved = moving.includes(p);
    const at = await ok(WHERE, { d: moved ? 'DST' : 'SRC', id: p.id });
    expect(at.employee).toMatchObject({ departmentId: moved ? 'DST' : 'SRC', email: p.email, department: { id: moved ? 'DST' : 'SRC' } });
    if (moved) expect((await ok(WHERE, { d: 'SRC', id: p.id })).employee).toBeNull();
    // The unique e-mail index answers the new address.
    const byEmail = await ok('query($e: String!) { employeeByEmail(email: $e) { departmentId } }', { e: p.email });
    expect(byEmail.employeeByEmail.departmentId).toBe(moved ? 'DST' : 'SRC');
  }
  expect((await ok(WHERE, { d: 'DST', id: moving[0].id })).employee.lastName).toBe('RENAMED');
  expect((await ok(WHERE, { d: 'DST', id: moving[7].id })).employee.lastName).toBe('AGAIN');
  const sum = (list: typeof people) => list.reduce((n, p) => n + Number(p.annualSalary), 0);
  expect((await ok(DEPARTMENT_SUMMARY, { id: 'SRC' })).department).toMatchObject({ employeeCount: 4, payroll: String(sum(people.slice(8))) });
  expect((await ok(DEPARTMENT_SUMMARY, { id: 'DST' })).department).toMatchObject({ employeeCount: 8, payroll: String(sum(moving)) });
  const report = await verifyDerived({ store: server.store, model });
  if (report.problems) console.log(formatVerifyReport(report));
  expect(report.problems).toBe(0);
  console.log(`moves seed ${seed}: 8 moves, ${messages} messages, ${killed} deliveries killed mid-message`);
}, 120_000);

const ARCHIVE = 'mutation($input: MoveEmployeeInput!) { archiveEmployee(input: $input) { employee { departmentId id lastName } } }';
const EMPLOYEE_ID = 'query($d: ID!, $id: ID!) { employee(departmentId: $d, id: $id) { id } }';
const ARCHIVED = 'query($d: ID!, $id: ID!) { archivedEmployee(departmentId: $d, id: $id) { id departmentId email lastName annualSalary homeAddress } }';

test('archived through the queue: copied to the Archive table, deleted from the Directory, counts and indexes updated', async () => {
  const seed = Number(process.env.FANOUT_SEED) || Date.now() % 2 ** 31;
  const rng = seededRng(seed);
  const random = () => rng.int(0x7fffffff) / 0x7fffffff;
  await ok(CREATE_DEPARTMENT, { input: { id: 'AR1', name: 'AR1' } });
  for (let id = 1; id <= 6; id++) await ok(CREATE_EMPLOYEE, { input: employeeInput('AR1', id, { annualSalary: `${id}000`, homeAddress: `Street ${id}` }) });
  await drain(random); // the creates' index entities
  const email = employeeInput('AR1', 2).email as string;
  expect((await ok('query($e: String!) { employeeByEmail(email: $e) { id } }', { e: email })).employeeByEmail).toEqual({ id: '2' });

  // Refused before anything is queued: nothing there, or already archived there.
  expect((await server.query(ARCHIVE, { input: { departmentId: 'AR1', id: '99' } })).errors?.[0].extensions.code).toBe('NOT_FOUND');

  for (const id of ['2', '3', '5']) {
    const r = await ok(ARCHIVE, { input: { departmentId: 'AR1', id } });
    expect(r.archiveEmployee.employee).toEqual({ departmentId: 'AR1', id, lastName: 'SMITH' });
  }
  // Until the worker carries it out, the Directory still answers the employee.
  expect((await ok(EMPLOYEE_ID, { d: 'AR1', id: '2' })).employee).toEqual({ id: '2' });
  const { messages, killed } = await drain(random);

  for (const id of ['2', '3', '5']) {
    expect((await ok(EMPLOYEE_ID, { d: 'AR1', id })).employee).toBeNull();
    expect((await ok(ARCHIVED, { d: 'AR1', id })).archivedEmployee).toEqual({
      id, departmentId: 'AR1', email: employeeInput('AR1', id).email, lastName: 'SMITH', annualSalary: `${id}000`, homeAddress: `Street ${id}`,
    });
  }
  const stored = await testStore().getEntity({ table: `${server.config.tablePrefix}Archive`, partitionKey: 'AR1', rowKey: 'empid_00000002' });
  expect(stored?.properties).toMatchObject({ EntityType: 'ArchivedEmployee', id: '2', annualSalary: '2000' });
  expect(stored?.properties.homeAddress).toBeInstanceOf(Uint8Array); // sealed in the archive too
  // The department counts and sums the three left; the unique e-mail index no longer lists the archived.
  expect((await ok(DEPARTMENT_SUMMARY, { id: 'AR1' })).department).toMatchObject({ employeeCount: 3, payroll: '11000' }); // 1000 + 4000 + 6000
  expect((await ok('query($e: String!) { employeeByEmail(email: $e) { id } }', { e: email })).employeeByEmail).toBeNull();
  const report = await verifyDerived({ store: server.store, model });
  if (report.problems) console.log(formatVerifyReport(report));
  expect(report.problems).toBe(0);
  console.log(`archive seed ${seed}: 3 employees archived, ${messages} messages delivered twice each, ${killed} deliveries killed mid-message (an archive between its copy and its delete)`);

  // An employee archived already cannot be archived again from a re-created one until the archive is free.
  await ok(CREATE_EMPLOYEE, { input: employeeInput('AR1', 2) });
  expect((await server.query(ARCHIVE, { input: { departmentId: 'AR1', id: '2' } })).errors?.[0].extensions).toMatchObject({ code: 'CONFLICT', reason: 'EntityAlreadyExists' });
});
