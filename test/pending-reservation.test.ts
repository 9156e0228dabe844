/**
 * A stale fan-out message must not free a unique key that a write still in flight has reserved: the reservation carries
 * its write's id and the state that write read, and the reconciler — reading the entity again after the reservation —
 * leaves it alone while the entity is still in that state (docs/architecture.md, "Unique values", "Eventually
 * consistent transactions pattern").
 */
import { ErrorCode, isTablegraphError } from '../src/errors';
import { handleMessage } from './support/handle-message';
import { WriteExecutor } from '../src/write/write-executor';
import { uniquePrefix } from './support/harness';
import { gate, hookedStore, hrWorld, run } from './support/fanout-fixtures';
import { emailAddress, employeeInput } from './support/write-fixtures';
import { until } from './support/wait';

const world = hrWorld(uniquePrefix());
beforeAll(() => world.ensureTables());
afterAll(() => world.dropTables());

test('a stale message reconciled while a write re-reserves an address leaves the reservation in place', async () => {
  const { model, store, sender } = world;
  await run(world, 'createDepartment', { id: 'PEND', name: 'PEND' });
  await run(world, 'createEmployee', employeeInput('PEND', '1', { email: 'x@pend.example' }));
  await run(world, 'updateEmployee', { departmentId: 'PEND', id: '1', email: 'y@pend.example' });
  const stale = sender.messages.at(-1)!; // candidates: x@ and y@
  for (const m of sender.messages) await handleMessage(m, { model, store, settleMs: 0 });
  const x = emailAddress(model, 'x@pend.example');
  expect(await store.getEntity(x)).toBeNull();

  // The employee takes x@ back; its EGT waits at a gate, after the reservation of x@ was made.
  const egt = gate();
  const paused = hookedStore(store, { before: { submitTransaction: () => egt.wait } });
  const writer = new WriteExecutor({ model, store: paused, workQueue: sender });
  const back = writer.execute(model.writes.get('Mutation.updateEmployee')!, { departmentId: 'PEND', id: '1', email: 'x@pend.example' });
  await until('the reservation of x@', () => store.getEntity(x), { timeoutMs: 10_000, everyMs: 10 });
  const employee = await store.getEntity({ table: `${world.prefix}Directory`, partitionKey: 'PEND', rowKey: 'empid_00000001' });
  const pending = sender.messages.at(-1)!;
  expect((await store.getEntity(x))?.properties).toMatchObject({ id: '1', WriteId: pending.writeId, BasedOn: employee?.properties.WriteId });

  // The stale message, redelivered now (as if past its settle time), reads the employee with y@: x@ is not derived
  // from it, points at this employee — and is the reservation of a write based on the state the employee is in.
  // The message comes back once the reservation's lease has ended, in case its write never commits.
  const result = await handleMessage(stale, { model, store, settleMs: 0 });
  expect(result).toMatchObject({ kind: 'retryLater', afterMs: expect.any(Number) });
  expect(await store.getEntity(x)).not.toBeNull();

  // So nobody else can take x@ meanwhile.
  await run(world, 'createEmployee', employeeInput('PEND', '2', { email: 'z@pend.example' }));
  const stolen = await run(world, 'updateEmployee', { departmentId: 'PEND', id: '2', email: 'x@pend.example' }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(isTablegraphError(stolen, ErrorCode.CONFLICT) && stolen.details.reason).toBe('UniqueKeyTaken');

  egt.open();
  await back;
  for (const m of sender.messages) await handleMessage(m, { model, store, settleMs: 0 });
  // Reconciled from the committed state: the reservation became the plain index entity (no lease, no write id).
  const confirmed = await store.getEntity(x);
  expect(confirmed?.properties).toMatchObject({ id: '1', departmentId: 'PEND' });
  expect([confirmed?.properties.WriteId, confirmed?.properties.BasedOn, confirmed?.properties.ReservedUntil]).toEqual([undefined, undefined, undefined]);
});
