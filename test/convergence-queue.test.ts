/**
 * Inter-partition indexes converge through the real work queue (docs/architecture.md, "Fan-out and reconciliation";
 * the guide's "Eventually consistent transactions pattern"): four writers change twelve employees at once while two
 * message workers compete for the messages on one Azurite queue, one of them dying mid-message now and then. When both
 * have drained the queue, every index entity equals derive(primary), none is an orphan, and nothing was poisoned. The
 * seed of the writers' choices is printed; TEST_SEED=<seed> replays them (the interleaving is not).
 */
import { ErrorCode, isTablegraphError } from '../src/errors';
import { createMessageWorker } from '../src/worker/message-worker';
import { ensureWorkQueues, workQueueNames } from '../src/queue/sender';
import type { QueueWorker } from '../src/worker/queue-worker';
import { WriteExecutor } from '../src/write/write-executor';
import { EmployeeScenario } from './support/employee-scenario';
import { expectConverged, foundIndexEntities, hrWorld, run, seededRng } from './support/fanout-fixtures';
import { testQueues, uniquePrefix } from './support/harness';
import { testSeed } from './support/seed';

const SEED = testSeed();
const DEPARTMENTS = ['ENG', 'OPS', 'R&D/2'];
const world = hrWorld(uniquePrefix());
const { model, store, prefix } = world;
const queues = testQueues();
const names = workQueueNames(prefix);
let sent = 0;
const writer = {
  model,
  executor: new WriteExecutor({ model, store, workQueue: { send: async (text) => void (await queues.send(names.queue, text), sent++) } }),
};
const workers: QueueWorker[] = [];

beforeAll(async () => {
  await world.ensureTables();
  await ensureWorkQueues(queues, prefix);
  for (const id of DEPARTMENTS) await run(writer, 'createDepartment', { id, name: id });
});

afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
  await Promise.all([queues.deleteQueue(names.queue), queues.deleteQueue(names.poison), world.dropTables()]);
});

it(`concurrent writes converge through the real queue with two competing workers, one dying mid-message (seed ${SEED})`, async () => {
  console.log(`convergence-queue seed ${SEED} — replay the writers' choices with TEST_SEED=${SEED}`);
  let calls = 0;
  let crashes = 0;
  const common = { model, store, queues, tablePrefix: prefix, concurrency: 4, settleMs: 1500, visibilityTimeoutSeconds: 5 };
  const dying = createMessageWorker({
    ...common,
    afterUpserts: () => {
      if (++calls % 5 === 1) {
        crashes++;
        throw new Error('worker A died mid-message');
      }
    },
  });
  const steady = createMessageWorker(common);
  workers.push(dying, steady);
  dying.start();
  steady.start();

  // Four writers at once, each with three employees of its own spread over the departments (so they contend for
  // the departments' summary ETags, and the executor re-plans), 25 operations each.
  const lanes = [0, 1, 2, 3].map((lane) => {
    const slots = DEPARTMENTS.map((d, j) => [d, String(10 * lane + j + 1)] as [string, string]);
    return new EmployeeScenario(seededRng(SEED + lane), slots, `lane${lane}.example`);
  });
  const failures: unknown[] = [];
  let writes = 0;
  await Promise.all(
    lanes.map(async (scenario) => {
      for (let i = 0; i < 25; i++) {
        const op = scenario.next();
        try {
          await run(writer, op.mutation, op.input);
          scenario.applied(op);
          writes++;
        } catch (e) {
          failures.push(e);
        }
      }
    }),
  );
  // Only contention may refuse a write (the executor gave up re-planning); no write's own input is wrong.
  expect(failures.filter((e) => !(isTablegraphError(e, ErrorCode.CONFLICT) && e.details.reason === 'ETagMismatch'))).toEqual([]);
  expect(writes).toBeGreaterThan(80);

  // settleMs above the visibility timeout (5 s): a message whose handler died is back-off-deferred by up to that.
  const drained = await Promise.all([dying, steady].map((w) => w.drain({ timeoutMs: 40_000, settleMs: 6000 })));
  await Promise.all([dying.stop(), steady.stop()]);
  expect(await queues.approximateDepth(names.queue)).toBe(0);
  expect(await queues.approximateDepth(names.poison)).toBe(0);
  const [a, b] = [dying.stats(), steady.stats()];
  expect(a.handled).toBeGreaterThan(0);
  expect(b.handled).toBeGreaterThan(0);
  expect(a.handled + b.handled).toBe(sent); // every message deleted once, by one of the two
  expect(crashes).toBeGreaterThan(0);
  expect(a.failed).toBe(crashes);
  expect(a.poisoned + b.poisoned).toBe(0);

  const report = await expectConverged(store, model);
  const live = lanes.reduce((n, s) => n + s.live.size, 0);
  expect(report.indexes.find((d) => d.index === 'byEmail')!.found).toBe(live);
  console.log(
    `seed ${SEED}: ${writes} writes (${failures.length} refused on contention), ${sent} messages; worker A handled ${a.handled} ` +
      `(${crashes} deaths, ${a.retried} deferred), worker B ${b.handled} (${b.retried} deferred); lag p50 ${b.lag.p50Ms} ms, ` +
      `p99 ${b.lag.p99Ms} ms; drains ${JSON.stringify(drained)}; ${live} employees, ${foundIndexEntities(report)} index entities`,
  );
}, 90_000);
