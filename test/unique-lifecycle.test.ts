/**
 * One e-mail, one owner, across lives of one key (docs/architecture.md, "Unique values"; the guide's "Eventually
 * consistent transactions pattern" with a unique "Inter-partition secondary index pattern"). The loop that once gave an
 * address two owners: create RC/1 with E; create RC/2 with E (must fail UniqueKeyTaken); delete RC/1 — a thousand
 * times, while the fan-out messages pile up undelivered (a worker stopped, a backlog), then are delivered late — past
 * their settle time, shuffled, several at once — while the loop goes on. Write ids are never reused, so a late message
 * of an earlier life of RC/1 can never take the live reservation for its own; every cycle's refusal is checked, and at
 * the end every index entity equals what its employee derives and no address is owned twice.
 */
import { ErrorCode, isTablegraphError } from '../src/errors';
import { handleMessage } from './support/handle-message';
import { expectConverged, hrWorld, run, seededRng } from './support/fanout-fixtures';
import { uniquePrefix } from './support/harness';
import { employeeInput } from './support/write-fixtures';
import { testSeed } from './support/seed';
import { pause } from './support/wait';

const CYCLES = Number(process.env.LIFECYCLE_CYCLES) || 1000;
const SEED = testSeed();
const SETTLE_MS = 30_000;
const world = hrWorld(uniquePrefix());

beforeAll(async () => {
  await world.ensureTables();
  await run(world, 'createDepartment', { id: 'RC', name: 'RC' });
});
afterAll(() => world.dropTables());

test(`create / duplicate / delete of one e-mail, ${CYCLES} cycles, late and shuffled delivery: never two owners (seed ${SEED})`, async () => {
  const { model, store, sender } = world;
  const rng = seededRng(SEED);
  const email = 'e@rc.example';
  let delivered = 0;
  let deliveries = 0;
  let failed = 0;
  let stop = false;
  // The late worker: starts after the first fifth of the cycles (the backlog), then delivers whatever is
  // recorded, as if past its settle time, shuffled, four at once — until the loop is over and nothing is left.
  // A delivery that fails (an index entity that kept changing under the loop) comes back later, as on a queue.
  const again: typeof sender.messages = [];
  const worker = (async () => {
    while (!stop || delivered < sender.messages.length || again.length > 0) {
      if (sender.messages.length < CYCLES / 5 && !stop) {
        await pause(20, 'pace'); // the backlog grows first
        continue;
      }
      const batch = rng.shuffle([...sender.messages.slice(delivered), ...again.splice(0)]);
      delivered = sender.messages.length;
      const late = () => Date.now() + SETTLE_MS + 1;
      for (let i = 0; i < batch.length; i += 4) {
        await Promise.all(
          batch.slice(i, i + 4).map((m) =>
            handleMessage(m, { model, store, settleMs: SETTLE_MS, holdMs: 0, now: late }).then(
              () => void deliveries++,
              () => void (failed++, again.push(m)),
            ),
          ),
        );
      }
      if (batch.length === 0) await pause(20, 'pace'); // nothing recorded since: look again soon
    }
  })();

  let refused = 0;
  try {
    for (let cycle = 1; cycle <= CYCLES; cycle++) {
      await run(world, 'createEmployee', employeeInput('RC', 1, { email }));
      const duplicate = await run(world, 'createEmployee', employeeInput('RC', 2, { email })).then(
        () => undefined,
        (e: unknown) => e,
      );
      if (!(isTablegraphError(duplicate, ErrorCode.CONFLICT) && duplicate.details.reason === 'UniqueKeyTaken')) {
        throw new Error(`cycle ${cycle}: RC/2 was given ${email} while RC/1 held it (${String(duplicate)})`);
      }
      refused++;
      await run(world, 'deleteEmployee', { departmentId: 'RC', id: '1' });
    }
  } finally {
    stop = true;
    await worker;
  }
  // Once more, every message late: whatever order the backlog came in, the end state is derived from the truth.
  for (const m of rng.shuffle(sender.messages)) await handleMessage(m, { model, store, settleMs: SETTLE_MS, holdMs: 0, now: () => Date.now() + SETTLE_MS + 1 });

  console.log(
    `unique lifecycle seed ${SEED}: ${CYCLES} cycles, ${sender.messages.length} messages, ${deliveries} late deliveries (${failed} failed and came back)`,
  );
  expect(refused).toBe(CYCLES);
  expect(deliveries).toBeGreaterThanOrEqual(sender.messages.length);
  // One message per committed write: a create and a delete per cycle (the refused creates sent none; an attempt
  // that could not commit withdrew its own).
  expect(sender.kept().filter((m) => m.entity === 'Employee')).toHaveLength(2 * CYCLES);
  const report = await expectConverged(store, model);
  expect(report.indexes.flatMap((d) => d.duplicates)).toEqual([]);
  const count = (await store.getEntity({ table: `${world.prefix}Directory`, partitionKey: 'RC', rowKey: 'department' }))?.properties.employeeCount;
  expect(count).toBe(0);
}, 600_000);
