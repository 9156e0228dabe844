/**
 * A stale fan-out message must not free a unique key that a write still in flight has reserved: the reservation
 * carries the version of its write, and the reconciler leaves a reservation alone while the entity has not
 * reached that version (DESIGN.md §4.2, "Eventually consistent transactions pattern").
 */
import { ErrorCode, isTablegraphError } from '../src/errors';
import { reconcile } from '../src/worker/reconciler';
import { WriteExecutor } from '../src/write/write-executor';
import { uniquePrefix } from './support/harness';
import { gate, hookedStore, hrWorld, run } from './support/fanout-fixtures';
import { emailAddress, employeeInput } from './support/write-fixtures';

const world = hrWorld(uniquePrefix());
beforeAll(() => world.ensureTables());
afterAll(() => world.dropTables());

test('a stale message reconciled while a write re-reserves an address leaves the reservation in place', async () => {
  const { model, store, sender } = world;
  await run(world, 'createDepartment', { id: 'PEND', name: 'PEND' });
  await run(world, 'createEmployee', employeeInput('PEND', '1', { email: 'x@pend.example' }));
  await run(world, 'updateEmployee', { departmentId: 'PEND', id: '1', email: 'y@pend.example' });
  const stale = sender.messages.at(-1)!; // candidates: x@ and y@
  for (const m of sender.messages) await reconcile(m, { model, store, settleMs: 0 });
  const x = emailAddress(model, 'x@pend.example');
  expect(await store.getEntity(x)).toBeNull();

  // The employee takes x@ back; its EGT waits at a gate, after the reservation of x@ was made.
  const egt = gate();
  const paused = hookedStore(store, { before: { submitTransaction: () => egt.wait } });
  const writer = new WriteExecutor({ model, store: paused, fanout: sender });
  const back = writer.execute(model.writes.get('Mutation.updateEmployee')!, { departmentId: 'PEND', id: '1', email: 'x@pend.example' });
  for (let i = 0; i < 200 && !(await store.getEntity(x)); i++) await new Promise((r) => setTimeout(r, 10));
  expect((await store.getEntity(x))?.properties).toMatchObject({ id: '1', Version: 3 });

  // The stale message, redelivered now, reads the employee at version 2 (email y@): x@ is not derived from it,
  // points at this employee — and is the pending reservation of version 3, so it stays.
  const result = await reconcile(stale, { model, store, settleMs: 0 });
  expect(result.kind).toBe('done');
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
  for (const m of sender.messages) await reconcile(m, { model, store, settleMs: 0 });
  // Reconciled from the committed state: the reservation became the plain index entity (no pending version).
  const confirmed = await store.getEntity(x);
  expect(confirmed?.properties).toMatchObject({ id: '1', departmentId: 'PEND' });
  expect(confirmed?.properties.Version).toBeUndefined();
});
