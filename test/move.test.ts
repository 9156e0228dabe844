/**
 * Key changes (`@write(action: MOVE)`): `moveEmployee` moves employees between departments as the guide's
 * "Eventually consistent transactions pattern" does — queued, then copied to the new partition and deleted from the
 * old one by the worker. Checked: what the request refuses before anything is queued; what each address answers
 * before and after; both departments' summaries and every index (the unique e-mail taken over by the new address)
 * after redelivered, reordered messages, two workers and workers killed mid-message; a write to the old address
 * before the move is carried along; a move and a delete and re-create of one key (the delete ends the move); a
 * second move refused while one is under way; every move and archive message delivered again late, after the old
 * addresses were reused, with a move abandoned because its new address was taken, checked against every
 * acknowledged write. And the guide's archiving
 * example, `archiveEmployee` (`@write(action: MOVE, to: "ArchivedEmployee")`): copied to the Archive table as
 * another type, deleted from the Directory, under the same redelivery and killed workers.
 */
import { formatVerifyReport, verifyDerived } from '../src/maintenance/verify-derived';
import type { Model } from '../src/model/types';
import { WriteExecutor } from '../src/write/write-executor';
import { queueSender, workQueueNames } from '../src/queue/sender';
import { compileHr, startTestServer, testQueues, testStore, type TestServer } from './support/harness';
import { deliverTwiceByTwoWorkers, drainWithRedelivery, seededRng } from './support/fanout-fixtures';
import { handleMessage } from './support/handle-message';
import { CREATE_DEPARTMENT, CREATE_EMPLOYEE, DEPARTMENT_SUMMARY, employeeInput, firstError, receiveFanout, UPDATE_EMPLOYEE } from './support/write-fixtures';
import { testSeed } from './support/seed';

let server: TestServer;
let model: Model;
let writer: WriteExecutor;

beforeAll(async () => {
  server = await startTestServer({ TABLEGRAPH_WORKER: 'off' });
  model = compileHr(server.config.tablePrefix).model;
  writer = new WriteExecutor({ model, store: server.store, workQueue: queueSender(testQueues(), workQueueNames(server.config.tablePrefix).queue) });
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
const drain = (random: () => number) =>
  drainWithRedelivery({ model, store: server.store, writer, queues: testQueues(), tablePrefix: server.config.tablePrefix }, random);

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
  const seed = testSeed();
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
  // Another is deleted and created again at the old address: the delete ends its move, and the new entity, which
  // no move was requested for, stays where it was created.
  await ok('mutation($input: DeleteEmployeeInput!) { deleteEmployee(input: $input) { employee { id } } }', {
    input: { departmentId: 'SRC', id: moving[7].id },
  });
  await ok(CREATE_EMPLOYEE, { input: { ...moving[7], lastName: 'AGAIN' } });
  // A second move of an entity whose move is under way is refused, not acknowledged and dropped.
  expect(firstError(await server.query(MOVE, { input: { departmentId: 'SRC', id: moving[1].id, toDepartmentId: 'MV2' } })).extensions).toMatchObject({
    code: 'CONFLICT',
    reason: 'MovePending',
  });
  // Before the worker: the old address answers, the new one does not.
  expect((await ok(WHERE, { d: 'SRC', id: moving[1].id })).employee.departmentId).toBe('SRC');
  expect((await ok(WHERE, { d: 'DST', id: moving[1].id })).employee).toBeNull();

  const { messages, killed } = await drain(random);

  const carried = moving.slice(0, 7);
  for (const p of people) {
    const moved = carried.includes(p);
    const at = await ok(WHERE, { d: moved ? 'DST' : 'SRC', id: p.id });
    expect(at.employee).toMatchObject({ departmentId: moved ? 'DST' : 'SRC', email: p.email, department: { id: moved ? 'DST' : 'SRC' } });
    if (moved) expect((await ok(WHERE, { d: 'SRC', id: p.id })).employee).toBeNull();
    // The unique e-mail index answers the new address.
    const byEmail = await ok('query($e: String!) { employeeByEmail(email: $e) { departmentId } }', { e: p.email });
    expect(byEmail.employeeByEmail.departmentId).toBe(moved ? 'DST' : 'SRC');
  }
  expect((await ok(WHERE, { d: 'DST', id: moving[0].id })).employee.lastName).toBe('RENAMED');
  expect((await ok(WHERE, { d: 'SRC', id: moving[7].id })).employee.lastName).toBe('AGAIN');
  expect((await ok(WHERE, { d: 'DST', id: moving[7].id })).employee).toBeNull();
  const sum = (list: typeof people) => list.reduce((n, p) => n + Number(p.annualSalary), 0);
  expect((await ok(DEPARTMENT_SUMMARY, { id: 'SRC' })).department).toMatchObject({ employeeCount: 5, payroll: String(sum([moving[7], ...people.slice(8)])) });
  expect((await ok(DEPARTMENT_SUMMARY, { id: 'DST' })).department).toMatchObject({ employeeCount: 7, payroll: String(sum(carried)) });
  const report = await verifyDerived({ store: server.store, model });
  if (report.problems) console.log(formatVerifyReport(report));
  expect(report.problems).toBe(0);
  console.log(`moves seed ${seed}: 8 moves requested (7 carried out, 1 ended by a delete), ${messages} messages, ${killed} deliveries killed mid-message`);
}, 120_000);

const ARCHIVE = 'mutation($input: MoveEmployeeInput!) { archiveEmployee(input: $input) { employee { departmentId id lastName } } }';
const EMPLOYEE_ID = 'query($d: ID!, $id: ID!) { employee(departmentId: $d, id: $id) { id } }';
const ARCHIVED = 'query($d: ID!, $id: ID!) { archivedEmployee(departmentId: $d, id: $id) { id departmentId email lastName annualSalary homeAddress } }';

test('archived through the queue: copied to the Archive table, deleted from the Directory, counts and indexes updated', async () => {
  const seed = testSeed();
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
      id,
      departmentId: 'AR1',
      email: employeeInput('AR1', id).email,
      lastName: 'SMITH',
      annualSalary: `${id}000`,
      homeAddress: `Street ${id}`,
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
  console.log(
    `archive seed ${seed}: 3 employees archived, ${messages} messages delivered twice each, ${killed} deliveries killed mid-message (an archive between its copy and its delete)`,
  );

  // An employee archived already cannot be archived again from a re-created one until the archive is free.
  await ok(CREATE_EMPLOYEE, { input: employeeInput('AR1', 2) });
  expect((await server.query(ARCHIVE, { input: { departmentId: 'AR1', id: '2' } })).errors?.[0].extensions).toMatchObject({
    code: 'CONFLICT',
    reason: 'EntityAlreadyExists',
  });
});

test('move and archive messages delivered again late, after the old addresses are reused, change nothing acknowledged', async () => {
  const seed = testSeed();
  const rng = seededRng(seed);
  const random = () => rng.int(0x7fffffff) / 0x7fffffff;
  const reconcileOpts = { model, store: server.store, writer, settleMs: 0, holdMs: 0 };
  for (const id of ['LS', 'LD']) await ok(CREATE_DEPARTMENT, { input: { id, name: id } });
  const people = Array.from({ length: 6 }, (_, i) => employeeInput('LS', i + 1, { annualSalary: String(100 * (i + 1)) })) as Array<Record<string, string>>;
  for (const input of people) await ok(CREATE_EMPLOYEE, { input });
  await drain(random);

  // 3 is moved, and its worker dies between the copy and the delete: the copy is the move's until the move ends.
  await ok(MOVE, { input: { departmentId: 'LS', id: '3', toDepartmentId: 'LD' } });
  const [{ message: third }] = await receiveFanout(testQueues(), server.config.tablePrefix);
  const killedAfterCopy = () => Promise.reject(new Error('worker killed mid-message'));
  await expect(handleMessage(third, { ...reconcileOpts, afterUpserts: killedAfterCopy })).rejects.toThrow('worker killed mid-message');
  expect(firstError(await server.query(UPDATE_EMPLOYEE, { input: { departmentId: 'LD', id: '3', lastName: 'EARLY' } })).extensions).toMatchObject({
    code: 'CONFLICT',
    reason: 'MovePending',
  });
  await ok(UPDATE_EMPLOYEE, { input: { departmentId: 'LS', id: '3', lastName: 'CARRIED' } }); // the old entity: carried along
  // 1 and 2 are moved, 4 and 5 archived; 6 is moved, but before the worker someone creates LD/6: it cannot be honoured.
  for (const id of ['1', '2', '6']) await ok(MOVE, { input: { departmentId: 'LS', id, toDepartmentId: 'LD' } });
  for (const id of ['4', '5']) await ok(ARCHIVE, { input: { departmentId: 'LS', id } });
  const squatter = employeeInput('LD', 6, { email: 'squatter@example.test', lastName: 'SQUATTER', annualSalary: '7' });
  await ok(CREATE_EMPLOYEE, { input: squatter });
  const first = await drain(random);
  expect(await handleMessage(third, reconcileOpts)).toMatchObject({ kind: 'done', outcome: 'moved' }); // the killed delivery, again
  await drain(random);
  const moves = [third, ...first.seen.filter((m) => m.move)];
  expect(moves).toHaveLength(6);

  // The old addresses are reused, the moved entities written; then every move and archive message comes again.
  const reborn = ['1', '2', '3', '4', '5'].map((id) => employeeInput('LS', id, { email: `reborn${id}@example.test`, lastName: 'REBORN', annualSalary: '1' }));
  for (const input of reborn) await ok(CREATE_EMPLOYEE, { input });
  await ok(UPDATE_EMPLOYEE, { input: { departmentId: 'LD', id: '1', lastName: 'AFTER' } });
  await ok(UPDATE_EMPLOYEE, { input: { departmentId: 'LS', id: '6', lastName: 'STAYED' } }); // the abandoned move left it writable
  await drain(random);
  const late = await deliverTwiceByTwoWorkers(moves, reconcileOpts, random);
  const results = await Promise.all(moves.map((m) => handleMessage(m, reconcileOpts)));
  expect(results.map((r) => r.kind === 'done' && 'outcome' in r && r.outcome)).toEqual(moves.map(() => 'nothingToDo'));
  await drain(random);

  // Every acknowledged write, against the final state.
  const expectEmployee = async (d: string, id: string, fields: Record<string, unknown> | null) => {
    const at = (await ok(WHERE, { d, id })).employee;
    if (fields === null) expect([d, id, at]).toEqual([d, id, null]);
    else expect([d, id, at]).toEqual([d, id, expect.objectContaining(fields)]);
  };
  for (const r of reborn) await expectEmployee('LS', r.id as string, { lastName: 'REBORN', email: r.email });
  await expectEmployee('LS', '6', { lastName: 'STAYED', email: people[5].email });
  await expectEmployee('LD', '1', { lastName: 'AFTER', email: people[0].email });
  await expectEmployee('LD', '2', { lastName: 'SMITH', email: people[1].email });
  await expectEmployee('LD', '3', { lastName: 'CARRIED', email: people[2].email });
  await expectEmployee('LD', '6', { lastName: 'SQUATTER', email: 'squatter@example.test' });
  for (const id of ['4', '5']) {
    expect((await ok(ARCHIVED, { d: 'LS', id })).archivedEmployee).toMatchObject({ id, lastName: 'SMITH', email: people[Number(id) - 1].email });
    await expectEmployee('LD', id, null);
  }
  for (const [email, departmentId, id] of [
    ...reborn.map((r) => [r.email, 'LS', r.id]),
    [people[5].email, 'LS', '6'],
    [people[0].email, 'LD', '1'],
    [people[2].email, 'LD', '3'],
    ['squatter@example.test', 'LD', '6'],
  ]) {
    expect((await ok('query($e: String!) { employeeByEmail(email: $e) { departmentId id } }', { e: email })).employeeByEmail).toEqual({ departmentId, id });
  }
  expect((await ok(DEPARTMENT_SUMMARY, { id: 'LS' })).department).toMatchObject({ employeeCount: 6, payroll: '605' }); // 5 × 1 + 600
  expect((await ok(DEPARTMENT_SUMMARY, { id: 'LD' })).department).toMatchObject({ employeeCount: 4, payroll: '607' }); // 100 + 200 + 300 + 7
  // No mark is left on any of them.
  for (const [d, id] of [
    ['LS', '6'],
    ['LD', '1'],
    ['LD', '2'],
    ['LD', '3'],
  ]) {
    const stored = await testStore().getEntity({ table: `${server.config.tablePrefix}Directory`, partitionKey: d, rowKey: `empid_${id.padStart(8, '0')}` });
    expect([d, id, stored?.properties.MoveId ?? null, stored?.properties.MovedIn ?? null]).toEqual([d, id, null, null]);
  }
  const report = await verifyDerived({ store: server.store, model });
  if (report.problems) console.log(formatVerifyReport(report));
  expect(report.problems).toBe(0);
  console.log(
    `late moves seed ${seed}: 6 move and archive messages (1 abandoned) delivered again late ${late.deliveries} times, ${first.killed + late.killed} deliveries killed mid-message`,
  );
}, 120_000);
