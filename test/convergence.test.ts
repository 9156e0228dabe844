/**
 * Inter-partition indexes converge (docs/architecture.md, "Fan-out and reconciliation"; the guide's "Eventually
 * consistent transactions pattern" and "Inter-partition secondary index pattern"): whatever the delivery of the fan-out
 * messages — duplicated, shuffled, concurrent, early, cut short by a dying worker — once every message has been
 * delivered after its write, every index entity equals derive(primary) and none is an orphan. Writes run through the
 * real WriteExecutor against the test Azurite; messages are recorded and delivered by hand through `reconcile` (the
 * same through real queues and competing QueueWorkers: convergence-queue.test.ts). Then three races, each made to
 * happen exactly with store hooks: a write that dies between its reservation and its EGT, a worker acting on an old
 * read while an e-mail changes hands, two writes of one employee racing to the same new e-mail.
 *
 * The random sequence is seeded: the seed is printed; TEST_SEED=<seed> replays it.
 */
import { ErrorCode, isTablegraphError } from '../src/errors';
import { primaryAddress } from '../src/model/entity-codec';
import { handleMessage, type HandleOptions } from './support/handle-message';
import type { ReconcileResult } from '../src/worker/reconciler';
import type { EntityMessage } from '../src/queue/messages';
import { WriteExecutor } from '../src/write/write-executor';
import { EmployeeScenario, type ScenarioOp } from './support/employee-scenario';
import {
  deliverAll,
  expectConverged,
  foundIndexEntities,
  gate,
  hookedStore,
  hrWorld,
  pausedAfterFirstRead,
  RecordingSender,
  run,
  seededRng,
} from './support/fanout-fixtures';
import { emailAddress } from './support/write-fixtures';
import { uniquePrefix } from './support/harness';
import { testSeed } from './support/seed';
import { pause } from './support/wait';

const SEED = testSeed();
const DEPARTMENTS = ['ENG', 'OPS', 'R&D/2'];
const world = hrWorld(uniquePrefix());
const { model, store, sender } = world;

let pending = 0;
/** Delivers every recorded message not delivered by deliverPending yet, as if past its settle deadline. */
async function deliverPending(): Promise<void> {
  const { deliveries } = await deliverAll(sender.messages.slice(pending), { model, store, holdMs: 0, concurrency: 4 });
  pending = sender.messages.length;
  expect(deliveries.filter((d) => d.result?.kind !== 'done')).toEqual([]);
}

beforeAll(async () => {
  await world.ensureTables();
  for (const id of DEPARTMENTS) await run(world, 'createDepartment', { id, name: id });
  await deliverPending();
});
afterAll(() => world.dropTables());

/** What the write phase's early deliveries saw. */
interface Early {
  before: ReconcileResult[];
  held: Array<{ m: EntityMessage; r: ReconcileResult }>;
  background: Array<Promise<unknown>>;
  stalled: Array<Promise<ReconcileResult | Error>>;
  crashes: number;
}

describe('fan-out convergence', () => {
  jest.setTimeout(120_000);

  it(`150 seeded random writes converge under duplicated, shuffled, concurrent, early and interrupted delivery (seed ${SEED})`, async () => {
    console.log(`convergence seed ${SEED} — replay with TEST_SEED=${SEED}`);
    const rng = seededRng(SEED);
    const slots = DEPARTMENTS.flatMap((d, i) => Array.from({ length: [5, 4, 3][i] }, (_, n) => [d, String(n + 1)] as [string, string]));
    const scenario = new EmployeeScenario(rng, slots);
    const base: Omit<HandleOptions, 'settleMs'> = { model, store };
    const stall = gate();
    const early: Early = { before: [], held: [], background: [], stalled: [], crashes: 0 };
    const dying: Partial<HandleOptions> = {
      afterUpserts: () => {
        early.crashes++;
        throw new Error('worker died mid-message');
      },
    };
    let earlyDelivery = true;

    // (d) Deliveries at the moment of sending — before the write's reservations and EGT: at once (must defer),
    // held until the write shows (must then reconcile it), or an older, committed message with settleMs 0 run
    // alongside the writes that follow, some dying after their upserts, some stalling after them or between their
    // read and their writes until every other delivery is over (e).
    sender.onSend = async (m) => {
      if (!earlyDelivery) return;
      const roll = rng.int(100);
      if (roll < 15) early.before.push(await handleMessage(m, { ...base, holdMs: 0 }));
      else if (roll < 30) early.background.push(handleMessage(m, { ...base, holdMs: 3000 }).then((r) => early.held.push({ m, r })));
      else if (roll < 45 && sender.messages.length > 1) {
        const old = rng.pick(sender.messages.slice(0, -1));
        const how = rng.int(10);
        const opts = { ...base, settleMs: 0, holdMs: 0 };
        if (how < 3) early.background.push(handleMessage(old, { ...opts, ...dying }).catch(() => undefined));
        else if (how < 5) early.stalled.push(handleMessage(old, { ...opts, afterUpserts: () => stall.wait }).catch((e: Error) => e));
        else if (how < 7) early.stalled.push(handleMessage(old, { ...opts, store: pausedAfterFirstRead(store, stall.wait) }).catch((e: Error) => e));
        else early.background.push(handleMessage(old, opts));
      }
    };

    let delivered = 0;
    /** Every message so far delivered once after its write (writes are sequential), so released e-mails are free. */
    const checkpoint = async () => {
      await Promise.all(early.background.splice(0));
      const { deliveries } = await deliverAll(sender.messages.slice(delivered), { ...base, settleMs: 0, holdMs: 0, concurrency: 4 });
      delivered = sender.messages.length;
      expect(deliveries.filter((d) => d.error)).toEqual([]);
      scenario.checkpoint();
      earlyDelivery = false;
      for (const op of scenario.conflicts()) {
        const refused = await run(world, op.mutation, op.input).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(isTablegraphError(refused, ErrorCode.CONFLICT) && refused.details.reason).toBe('UniqueKeyTaken');
      }
      earlyDelivery = true;
    };

    const failures: Array<{ op: ScenarioOp; error: unknown }> = [];
    let quiet = 0;
    for (let i = 0; i < 150; i++) {
      if (i === 50 || i === 100) await checkpoint();
      const op = scenario.next();
      const sent = sender.messages.length;
      try {
        await run(world, op.mutation, op.input);
      } catch (error) {
        failures.push({ op, error });
        continue;
      }
      scenario.applied(op);
      if (op.quiet) {
        quiet++;
        expect(sender.messages.length).toBe(sent); // nothing an index derives changed: no message
      }
    }
    expect(failures).toEqual([]);
    await Promise.all(early.background.splice(0));
    earlyDelivery = false;

    // A last write nobody delivered yet: the indexes must now be behind (the check below is not vacuous).
    const [lastSlot, last] = [...scenario.live.entries()][0] ?? [];
    const finalOp: ScenarioOp = last
      ? { mutation: 'updateEmployee', slot: lastSlot, input: { departmentId: last.departmentId, id: last.id, lastName: 'LASTWRITE' } }
      : scenario.next(); // nobody is left: then it is a create
    await run(world, finalOp.mutation, finalOp.input);
    scenario.applied(finalOp);
    await expect(expectConverged(store, model)).rejects.toThrow(/missing/);

    // (a) 1–3 copies of each message, (b) shuffled, (c) 4 at a time, (e) some extra copies dying mid-message.
    const messages = sender.messages;
    const list: EntityMessage[] = [];
    const hooks: Array<Partial<HandleOptions> | undefined> = [];
    for (const m of messages) {
      for (let c = 1 + rng.int(3); c > 0; c--) list.push(m);
      if (rng.chance(0.15)) list.push({ ...m, id: `${m.id}:dying` });
    }
    const order = rng.shuffle(list.map((_, i) => i));
    const shuffled = order.map((i) => list[i]);
    for (const m of shuffled) hooks.push(m.id.endsWith(':dying') ? dying : undefined);
    const crashesBefore = early.crashes;
    const { deliveries, peak, deferred } = await deliverAll(shuffled, { ...base, holdMs: 0, concurrency: 4, hooks });
    const died = deliveries.filter((d) => d.error);
    expect(died.every((d) => d.message.id.endsWith(':dying') && (d.error as Error).message === 'worker died mid-message')).toBe(true);
    expect(died.length).toBe(early.crashes - crashesBefore);
    expect(deliveries.filter((d) => !d.error).every((d) => d.result?.kind === 'done')).toBe(true);
    expect(peak).toBeGreaterThan(1);
    expect(peak).toBeLessThanOrEqual(4);

    // Workers stalled since the write phase — after their upserts, or between their read and their writes — wake
    // up last, with what they read long ago, and must leave nothing stale behind.
    stall.open();
    const stalled = await Promise.all(early.stalled);
    expect(stalled.filter((r) => r instanceof Error)).toEqual([]);

    expect(early.before.every((r) => r.kind === 'retryLater')).toBe(true);
    // A held delivery reconciles its write once it shows — unless a later write of the same employee (a delete,
    // say) hid that version first; then it defers, and the later write's own message does the work.
    const overtaken = (m: EntityMessage) =>
      messages.slice(messages.indexOf(m) + 1).some((n) => n.primary.rowKey === m.primary.rowKey && n.primary.partitionKey === m.primary.partitionKey);
    expect(early.held.filter(({ m, r }) => r.kind !== 'done' && !overtaken(m))).toEqual([]);
    expect(early.held.some(({ r }) => r.kind === 'done')).toBe(true);

    pending = sender.messages.length;
    const report = await expectConverged(store, model);
    for (const slot of slots.map(([d, i]) => `${d}/${i}`)) {
      const want = scenario.live.get(slot);
      const [departmentId, id] = [slot.slice(0, slot.lastIndexOf('/')), slot.slice(slot.lastIndexOf('/') + 1)];
      const got = await store.getEntity(primaryAddress(model.entities.get('Employee')!, { departmentId, id }));
      expect(got && pick(got.properties)).toEqual(want ? pick(want) : null);
    }
    const emails = [...scenario.live.values()].map((v) => v.email);
    expect(new Set(emails).size).toBe(emails.length);
    const byEmail = report.indexes.find((d) => d.index === 'byEmail')!;
    expect(byEmail.found).toBe(scenario.live.size);

    // Late redelivery: every message once more, long past its settle time, shuffled — messages of earlier lives of
    // re-created employees among them (the scenario deletes and re-creates slots). Nothing changes.
    const recreated = messages.filter((m) => m.basedOn === null).map((m) => `${m.primary.partitionKey}/${m.primary.rowKey}`);
    expect(recreated.length).toBeGreaterThan(new Set(recreated).size);
    const lateOnes = rng.shuffle(messages);
    const late = await deliverAll(lateOnes, { ...base, holdMs: 0, concurrency: 4, hooks: lateOnes.map(() => ({ now: () => Date.now() + 30_001 })) });
    expect(late.deliveries.filter((d) => d.error || d.result?.kind !== 'done')).toEqual([]);
    await expectConverged(store, model);
    console.log(
      `seed ${SEED}: ${messages.length} messages, ${deliveries.length} deliveries (${died.length} died mid-message, ` +
        `${deferred} deferred to their settle deadline, peak ${peak} at once); early: ${early.before.length} before the EGT, ` +
        `${early.held.length} held until it, ${early.stalled.length} stalled, ${early.crashes} died in all; ${quiet} quiet writes; ` +
        `${scenario.live.size} employees live, ${foundIndexEntities(report)} inter-partition index entities`,
    );
  });

  it('a write that died between its reservation and its EGT is reconciled after the settle time: nothing derived stays, the e-mail is free', async () => {
    await run(world, 'createDepartment', { id: 'NEVER', name: 'NEVER' });
    const died = new RecordingSender();
    const dyingStore = hookedStore(store, { before: { submitTransaction: fail, deleteEntity: fail } });
    const dying = { model, executor: new WriteExecutor({ model, store: dyingStore, workQueue: died }) };
    const ghost = { departmentId: 'NEVER', id: '1', email: 'ghost@conv.example', lastName: 'GHOST', firstName: 'G', title: 'CLERK' };
    await expect(run(dying, 'createEmployee', ghost)).rejects.toThrow('process died');
    const [m] = died.messages;
    const reservation = emailAddress(model, ghost.email);
    expect(await store.getEntity(reservation)).toMatchObject({ properties: { departmentId: 'NEVER', id: '1' } });

    // Within the settle time the write may still commit: the message waits, the reservation stays.
    const early = await handleMessage(m, { model, store, holdMs: 0 });
    expect(early).toEqual({ kind: 'retryLater', afterMs: expect.any(Number) });
    expect((early as { afterMs: number }).afterMs).toBeGreaterThan(20_000);
    expect(await store.getEntity(reservation)).not.toBeNull();
    // Past it, the message is reconciled against what is there (no employee), but the reservation's lease still
    // runs — a slow writer could still commit — so it stays, and the message comes back when the lease ends.
    const leaseEnd = ((await store.getEntity(reservation))!.properties.ReservedUntil as Date).getTime();
    const settled = await handleMessage(m, { model, store, holdMs: 0, now: () => m.enqueuedAt + 30_001 });
    expect(settled).toEqual({ kind: 'retryLater', afterMs: expect.any(Number) });
    expect(await store.getEntity(reservation)).not.toBeNull();
    // After the lease, nothing derived remains.
    const late = await handleMessage(m, { model, store, holdMs: 0, now: () => leaseEnd + 1 });
    expect(late).toMatchObject({ kind: 'done', upserted: 0, deleted: 1 });
    expect(await store.getEntity(reservation)).toBeNull();

    // The address is free again, and an update that dies the same way leaves the current index entities alone.
    await run(world, 'createEmployee', { ...ghost, id: '2' });
    await expect(run(dying, 'updateEmployee', { departmentId: 'NEVER', id: '2', email: 'ghost2@conv.example', lastName: 'GONE' })).rejects.toThrow(
      'process died',
    );
    expect(await store.getEntity(emailAddress(model, 'ghost2@conv.example'))).not.toBeNull();
    await deliverPending();
    const leaseEnd2 = ((await store.getEntity(emailAddress(model, 'ghost2@conv.example')))!.properties.ReservedUntil as Date).getTime();
    expect(await handleMessage(died.messages[1], { model, store, holdMs: 0, now: () => leaseEnd2 + 1 })).toMatchObject({ kind: 'done', deleted: 1 });
    expect(await store.getEntity(emailAddress(model, 'ghost2@conv.example'))).toBeNull();
    expect(await store.getEntity(emailAddress(model, ghost.email))).toMatchObject({ properties: { id: '2' } });
    await expectConverged(store, model);
  });

  it('a worker acting on an old read never takes over an e-mail another employee reserved meanwhile', async () => {
    await run(world, 'createDepartment', { id: 'RACE', name: 'RACE' });
    const x = 'contested@conv.example';
    await run(world, 'createEmployee', { departmentId: 'RACE', id: '1', email: x, lastName: 'ONE', firstName: 'A' });
    const m1 = sender.messages.at(-1)!;
    await handleMessage(m1, { model, store, holdMs: 0 });
    // Between the worker's read of employee 1 (still holding x) and its writes: employee 1 moves to another
    // address and that is fully reconciled (x released); then, just after the worker found x free, employee 2
    // reserves x and commits.
    const slow = hookedStore(store, {
      after: {
        getEntity: async (args, result, n) => {
          if (n === 1) {
            await run(world, 'updateEmployee', { departmentId: 'RACE', id: '1', email: 'moved@conv.example' });
            await handleMessage(sender.messages.at(-1)!, { model, store, holdMs: 0 });
          } else if ((args[0] as { rowKey: string }).rowKey === x && result === null) {
            await run(world, 'createEmployee', { departmentId: 'RACE', id: '2', email: x, lastName: 'TWO', firstName: 'B' });
          }
        },
      },
    });
    expect(await handleMessage(m1, { model, store: slow, settleMs: 0, holdMs: 0 })).toMatchObject({ kind: 'done' });
    expect(await store.getEntity(emailAddress(model, x))).toMatchObject({ properties: { departmentId: 'RACE', id: '2' } });
    const third = await run(world, 'createEmployee', { departmentId: 'RACE', id: '3', email: x, lastName: 'THREE', firstName: 'C' }).catch((e: unknown) => e);
    expect(isTablegraphError(third, ErrorCode.CONFLICT) && third.details.reason).toBe('UniqueKeyTaken');
    await deliverPending();
    await expectConverged(store, model);
  });

  it('two writes of one employee racing to the same new e-mail: the second waits for the first, the e-mail stays reserved', async () => {
    await run(world, 'createDepartment', { id: 'TWIN', name: 'TWIN' });
    await run(world, 'createEmployee', { departmentId: 'TWIN', id: '1', email: 'twin-a@conv.example', lastName: 'TWIN', firstName: 'A' });
    const b = 'twin-b@conv.example';
    // Writer 1 (one process) reserves b; before its EGT, writer 2 (another process: its own executor) wants b for
    // the same employee. Both read the same state, so at most one can commit: writer 2 must not take b over from
    // a write that may still commit (if it then failed and released b, writer 1 would commit without it). It waits.
    let second: Promise<unknown> | undefined;
    const racing = hookedStore(store, {
      after: {
        createEntity: async (_a, _r, n) => {
          if (n !== 1) return;
          second = run(world, 'updateEmployee', { departmentId: 'TWIN', id: '1', email: b, lastName: 'W2' });
          // Writer 1's EGT goes out 50 ms later, so that writer 2 meets its reservation (a writer 2 later than that
          // updates after writer 1, which the assertions below hold for too).
          await pause(50, 'latency');
        },
      },
    });
    const writer1 = { model, executor: new WriteExecutor({ model, store: racing, workQueue: sender }) };
    await run(writer1, 'updateEmployee', { departmentId: 'TWIN', id: '1', email: b, firstName: 'W1' });
    await second;
    const employee = await store.getEntity({ table: `${world.prefix}Directory`, partitionKey: 'TWIN', rowKey: 'empid_00000001' });
    expect(employee?.properties).toMatchObject({ email: b, firstName: 'W1', lastName: 'W2' });
    expect(await store.getEntity(emailAddress(model, b))).toMatchObject({ properties: { departmentId: 'TWIN', id: '1' } });
    const other = await run(world, 'createEmployee', { departmentId: 'TWIN', id: '2', email: b, lastName: 'OTHER', firstName: 'B' }).catch((e: unknown) => e);
    expect(isTablegraphError(other, ErrorCode.CONFLICT) && other.details.reason).toBe('UniqueKeyTaken');
    await deliverPending();
    await expectConverged(store, model);
  });
});

describe('a taken-over index entity', () => {
  it('is never deleted by the attempt that took it over and then failed: the state that committed meanwhile needs it', async () => {
    await run(world, 'createDepartment', { id: 'TAKE', name: 'TAKE' });
    await run(world, 'createEmployee', { departmentId: 'TAKE', id: '1', email: 'take-a@conv.example', lastName: 'T', firstName: 'A' });
    const b = 'take-b@conv.example';
    const primary = { table: `${world.prefix}Directory`, partitionKey: 'TAKE', rowKey: 'empid_00000001' };
    // Writer 2 reads the employee (e-mail a); before it reads who holds b, writer 1 (another process) moves the
    // employee to b and commits — its reservation of b is now the plain index entity. Writer 2 finds b held for this
    // same employee, takes it over, and its EGT fails (the employee changed): it must not delete b on the way out.
    let once = true;
    const racing = hookedStore(store, {
      after: {
        getEntity: async (args) => {
          const a = args[0] as { rowKey: string; partitionKey: string };
          if (once && a.partitionKey === 'TAKE' && a.rowKey === 'empid_00000001') {
            once = false;
            await run(world, 'updateEmployee', { departmentId: 'TAKE', id: '1', email: b, firstName: 'W1' });
          }
        },
      },
    });
    const writer2 = { model, executor: new WriteExecutor({ model, store: racing, workQueue: sender }) };
    await run(writer2, 'updateEmployee', { departmentId: 'TAKE', id: '1', email: b, lastName: 'W2' });
    expect((await store.getEntity(primary))?.properties).toMatchObject({ email: b, firstName: 'W1', lastName: 'W2' });
    expect(await store.getEntity(emailAddress(model, b))).toMatchObject({ properties: { departmentId: 'TAKE', id: '1' } });
    const other = await run(world, 'createEmployee', { departmentId: 'TAKE', id: '2', email: b, lastName: 'O', firstName: 'B' }).catch((e: unknown) => e);
    expect(isTablegraphError(other, ErrorCode.CONFLICT) && other.details.reason).toBe('UniqueKeyTaken');
    await deliverPending();
    await expectConverged(store, model);
  });
});

/** A before-hook standing for a process that died before the call was sent. */
function fail(): never {
  throw new Error('process died');
}

/** The fields the indexes derive from. */
function pick(v: Record<string, unknown>): Record<string, unknown> {
  return { email: v.email, lastName: v.lastName, firstName: v.firstName, title: v.title ?? null };
}
