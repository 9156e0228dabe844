/**
 * `npm run worker` as a process of its own (docs/architecture.md, "The worker": competing consumers on one
 * queue): a server started with TABLEGRAPH_WORKER=off leaves its fan-out messages on the queue, and the child
 * worker reconciles them; on SIGTERM the child finishes the message in hand, logs "stopped" and exits 0, and
 * messages sent after that stay on the queue ("Eventually consistent transactions pattern").
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { indexWrites } from '../src/model/entity-codec';
import type { EntityAddress } from '../src/storage/storage-types';
import { workQueueNames } from '../src/queue/sender';
import { planEgtBatches, writeEgtBatches } from '../src/write/egt-batches';
import { encodeMessage } from '../src/queue/messages';
import { WriteExecutor } from '../src/write/write-executor';
import { run } from './support/fanout-fixtures';
import { compileHr, connectionString, ROOT, startTestServer, testQueues, uniquePrefix, type TestServer } from './support/harness';
import { pollUntil } from './support/write-fixtures';

const prefix = uniquePrefix();
const queues = testQueues();
const names = workQueueNames(prefix);
const STALE = 500;
let server: TestServer;
let child: ChildProcess | undefined;
const lines: Array<{ msg?: string; [k: string]: unknown }> = [];

const CREATE = 'mutation($input: CreateEmployeeInput!) { createEmployee(input: $input) { employee { id } } }';
// The organisation-wide last-name index: only the worker writes it (the e-mail index entity is a reservation the
// write itself inserts, so it would answer without any worker).
const BY_LAST_NAME = 'query($lastName: String!) { employeesByLastName(lastName: $lastName) { edges { node { id lastName } } } }';
const byLastName = async (lastName: string) => (await server.query(BY_LAST_NAME, { lastName })).data?.employeesByLastName.edges.map((e: any) => e.node);
const employee = (id: string) => ({ departmentId: 'Marketing', id, email: `proc${id}@contoso.com`, lastName: `Proc${id}`, firstName: 'W' });

/** Resolves with the first log line whose `msg` is `msg` (bounded). */
const logged = (msg: string, timeoutMs = 30_000) => pollUntil(`the log line "${msg}"`, async () => lines.find((l) => l.msg === msg), timeoutMs, 20);

beforeAll(async () => {
  server = await startTestServer({ TABLEGRAPH_WORKER: 'off', TABLEGRAPH_TABLE_PREFIX: prefix });
  child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/worker.ts'], {
    cwd: ROOT,
    env: { ...process.env, AZURE_STORAGE_CONNECTION_STRING: connectionString(), TABLEGRAPH_TABLE_PREFIX: prefix, LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let partial = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    const text = partial + chunk.toString('utf8');
    const complete = text.split('\n');
    partial = complete.pop()!;
    for (const line of complete) if (line.trim()) lines.push(JSON.parse(line));
  });
  child.stderr!.on('data', (chunk: Buffer) => lines.push({ stderr: chunk.toString('utf8') }));
  await logged('message worker started');
}, 40_000);

afterAll(async () => {
  if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await server?.close();
  await Promise.all([queues.deleteQueue(names.queue), queues.deleteQueue(names.poison)]);
});

it('reconciles what a server without a worker writes; on SIGTERM finishes the message in hand and exits 0', async () => {
  // The server only queues: the child worker makes the organisation-wide index answer.
  expect((await server.query(CREATE, { input: employee('501') })).errors).toBeUndefined();
  const found = await pollUntil(
    'employeesByLastName to answer',
    async () => {
      const nodes = await byLastName('Proc501');
      return nodes?.length ? nodes : undefined;
    },
    20_000,
    100,
  );
  expect(found).toEqual([{ id: '501', lastName: 'Proc501' }]);

  // A message that keeps the worker busy for a while: employee 502 was written without a message, and 500 stale
  // index entities point at it; its message lists them, so the worker deletes them one by one (about 2 s).
  const { model } = compileHr(prefix);
  const quiet = { model, executor: new WriteExecutor({ model, store: server.store, workQueue: { send: async () => undefined } }) };
  const e502 = await run(quiet, 'createEmployee', employee('502'));
  const lastNameIndex = model.entities.get('Employee')!.indexes.get('byLastName')!;
  const stale = Array.from({ length: STALE }, (_, i) => {
    const w = indexWrites(lastNameIndex, { ...e502.values, lastName: `STALE${i}` })[0];
    return { table: w.table, entity: { ...w.entity, partitionKey: 'lastname_stale' } };
  });
  await writeEgtBatches(server.store, planEgtBatches(stale, server.store.target), { concurrency: 2 });
  const remaining = async () =>
    (await server.store.queryRange({ table: lastNameIndex.layout.table, partitionKey: 'lastname_stale', limit: 1000 })).entities.length;
  const candidates: EntityAddress[] = stale.map((w) => ({ table: w.table, partitionKey: w.entity.partitionKey, rowKey: w.entity.rowKey }));
  await queues.send(
    names.queue,
    encodeMessage({
      kind: 'fanout',
      v: 3,
      id: 'busy',
      entity: 'Employee',
      primary: e502.address,
      writeId: 'w-busy',
      basedOn: null,
      deleted: false,
      candidates,
      enqueuedAt: Date.now(),
    }),
  );

  // SIGTERM while the worker is deleting them (some gone, some left): it must finish that message before it exits.
  // The worker deletes them all at once, so the count is taken the moment before the signal, not after its log line.
  const atStop = await pollUntil(
    'the worker to start deleting the stale index entities',
    async () => {
      const left = await remaining();
      return left < STALE && left > 0 ? left : undefined;
    },
    20_000,
    5,
  );
  child!.kill('SIGTERM');
  await logged('stopping: finishing the messages in hand', 10_000);
  expect((await server.query(CREATE, { input: employee('503') })).errors).toBeUndefined(); // sent while it stops

  const [code, signal] = (await once(child!, 'exit')) as [number | null, NodeJS.Signals | null];
  expect({ code, signal }).toEqual({ code: 0, signal: null });
  expect(lines.some((l) => l.msg === 'stopped')).toBe(true);
  expect(await remaining()).toBe(0); // finished, not abandoned
  // …and the message did its work: 502's organisation-wide last-name index entity is there.
  expect(await byLastName('Proc502')).toEqual([{ id: '502', lastName: 'Proc502' }]);

  // Sent after it stopped: they wait on the queue for the next worker (the busy message is not among them).
  expect((await server.query(CREATE, { input: employee('504') })).errors).toBeUndefined();
  expect(await queues.approximateDepth(names.queue)).toBe(2);
  expect(await byLastName('Proc503')).toEqual([]);
  console.log(`worker process: ${atStop} of ${STALE} stale index entities left at SIGTERM, all deleted before exit 0`);
}, 60_000);
