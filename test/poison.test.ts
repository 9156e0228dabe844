/**
 * Poison handling of the work queue (docs/architecture.md, "Fan-out and reconciliation": a message that keeps
 * failing moves to a poison queue after N dequeues, with its error, and the others go on; the guide's "Eventually
 * consistent transactions pattern"). A message that can never succeed — not JSON, an entity type the schema does not
 * have, a handler that always throws — lands in the poison queue after TABLEGRAPH_MAX_DEQUEUE_COUNT receives with its
 * error text, the other messages are reconciled, and the server's /health shows it.
 *
 * Timing: a failing message is hidden again for min(visibility timeout, 2^(receives-1)) s, so with a maximum of
 * 2 receives it is poisoned on its third receive, about 1 + 2 s after it was sent.
 */
import { decodeEntityMessage, encodeMessage, type EntityMessage } from '../src/queue/messages';
import { primaryAddress } from '../src/model/entity-codec';
import { createMessageWorker } from '../src/worker/message-worker';
import { ensureWorkQueues, workQueueNames, queueSender } from '../src/queue/sender';
import { WriteExecutor } from '../src/write/write-executor';
import { expectConverged, hrWorld, run } from './support/fanout-fixtures';
import { compileHr, startTestServer, testQueues, uniquePrefix, type TestServer } from './support/harness';
import { pollUntil } from './support/write-fixtures';

const queues = testQueues();

interface PoisonEntry {
  message: string;
  id: string;
  dequeueCount: number;
  error?: string;
  poisonedAt: string;
}

/** Every entry of a poison queue (received, hidden for 30 s, not deleted). */
async function poisonEntries(queue: string): Promise<PoisonEntry[]> {
  const out: PoisonEntry[] = [];
  for (
    let batch = await queues.receive(queue, { max: 32, visibilityTimeoutSeconds: 30 });
    batch.length > 0;
    batch = await queues.receive(queue, { max: 32, visibilityTimeoutSeconds: 30 })
  ) {
    out.push(...batch.map((m) => JSON.parse(m.text) as PoisonEntry));
  }
  return out;
}

describe('poison messages through the server', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ TABLEGRAPH_MAX_DEQUEUE_COUNT: '2', TABLEGRAPH_SETTLE_MS: '500' });
  });
  afterAll(async () => {
    await server?.close();
    const names = workQueueNames(server.config.tablePrefix);
    await Promise.all([queues.deleteQueue(names.queue), queues.deleteQueue(names.poison)]);
  });

  it('moves never-succeeding messages to the poison queue with their error, handles the others, and /health says so', async () => {
    const names = workQueueNames(server.config.tablePrefix);
    const health = async () => (await (await fetch(server.url.replace(/\/graphql$/, '/health'))).json()) as any;
    expect((await health()).fanout).toMatchObject({ poisonCount: 0, queueDepth: 0 });
    const employee = compileHr(server.config.tablePrefix).model.entities.get('Employee')!;
    const unknownType: EntityMessage = {
      kind: 'fanout',
      v: 3,
      id: 'unknown-type',
      entity: 'Nope',
      primary: primaryAddress(employee, { departmentId: 'Marketing', id: '1' }),
      writeId: 'w-unknown',
      basedOn: null,
      deleted: false,
      candidates: [],
      enqueuedAt: Date.now(),
    };
    // A message whose write never shows (a create of an employee that never appears): not poison — after the
    // settle time it is reconciled.
    const neverVisible: EntityMessage = {
      ...unknownType,
      id: 'never-visible',
      entity: 'Employee',
      writeId: 'w-never',
      primary: primaryAddress(employee, { departmentId: 'Marketing', id: '999' }),
    };
    await queues.send(names.queue, 'not json {');
    await queues.send(names.queue, encodeMessage(unknownType));
    await queues.send(names.queue, encodeMessage(neverVisible));
    const created = await server.query('mutation($input: CreateEmployeeInput!) { createEmployee(input: $input) { employee { id } } }', {
      input: { departmentId: 'Marketing', id: '77', email: 'still-handled@contoso.com', lastName: 'Handled', firstName: 'Ok' },
    });
    expect(created.errors).toBeUndefined();

    const settled = await pollUntil(
      'two poisoned messages and an empty work queue',
      async () => {
        const h = await health();
        return h.fanout.poisonCount === 2 && h.fanout.queueDepth === 0 ? h : undefined;
      },
      20_000,
      100,
    );
    expect(settled.fanout.worker).toMatchObject({
      running: true,
      poisoned: 2,
      failed: 4, // two receives each of the two poison messages
      lag: { count: expect.any(Number), p50Ms: expect.any(Number), p99Ms: expect.any(Number) },
    });
    expect(settled.fanout.worker.handled).toBe(2); // the write's message, and the never-visible one after its settle time
    expect(settled.fanout.worker.lag.count).toBe(settled.fanout.worker.handled);
    expect(settled.fanout.worker.lag.p99Ms).toBeGreaterThanOrEqual(settled.fanout.worker.lag.p50Ms);

    const byEmail = await server.query('{ employeeByEmail(email: "still-handled@contoso.com") { id lastName } }');
    expect(byEmail.data).toEqual({ employeeByEmail: { id: '77', lastName: 'Handled' } });

    const entries = await poisonEntries(names.poison);
    expect(entries.map((e) => e.message).sort()).toEqual([encodeMessage(unknownType), 'not json {'].sort());
    const errorOf = (text: string) => entries.find((e) => e.message === text)!;
    expect(errorOf('not json {')).toMatchObject({ dequeueCount: 3, error: 'fan-out message is not JSON' });
    expect(errorOf(encodeMessage(unknownType))).toMatchObject({
      dequeueCount: 3,
      error: expect.stringContaining('names Nope, which the schema does not have'),
    });
    expect(entries.every((e) => !Number.isNaN(Date.parse(e.poisonedAt)))).toBe(true);
  }, 40_000);
});

describe('a handler that always throws', () => {
  const world = hrWorld(uniquePrefix());
  const names = workQueueNames(world.prefix);
  afterAll(async () => {
    await Promise.all([queues.deleteQueue(names.queue), queues.deleteQueue(names.poison), world.dropTables()]);
  });

  it('poisons only the message it fails on, after maxDequeueCount receives, with the thrown text', async () => {
    await world.ensureTables();
    await ensureWorkQueues(queues, world.prefix);
    const writer = { model: world.model, executor: new WriteExecutor({ model: world.model, store: world.store, workQueue: queueSender(queues, names.queue) }) };
    await run(writer, 'createDepartment', { id: 'D', name: 'D' });
    for (const id of ['1', '666', '2']) {
      await run(writer, 'createEmployee', { departmentId: 'D', id, email: `e${id}@poison.example`, lastName: `L${id}`, firstName: 'F' });
    }
    const cursed = primaryAddress(world.model.entities.get('Employee')!, { departmentId: 'D', id: '666' });
    const worker = createMessageWorker({
      model: world.model,
      store: world.store,
      queues,
      tablePrefix: world.prefix,
      maxDequeueCount: 2,
      settleMs: 500,
      afterUpserts: (m) => {
        if (m.primary.rowKey === cursed.rowKey) throw new Error('forced failure for employee 666');
      },
    });
    const drained = await worker.drain({ timeoutMs: 20_000, settleMs: 3000 });
    expect(drained).toEqual({ handled: 3, poisoned: 1, retried: 0 }); // department, employees 1 and 2
    expect(worker.stats()).toMatchObject({ failed: 2, lastError: 'forced failure for employee 666' });
    const [entry, ...more] = await poisonEntries(names.poison);
    expect(more).toEqual([]);
    expect(entry).toMatchObject({ dequeueCount: 3, error: 'forced failure for employee 666' });
    expect(decodeEntityMessage(entry.message)).toMatchObject({ entity: 'Employee', primary: cursed });
    expect(await queues.approximateDepth(names.queue)).toBe(0);
    // The failure came after the upserts: what 666 derives is there too, so every index is in line.
    await expectConverged(world.store, world.model);
  }, 40_000);
});
