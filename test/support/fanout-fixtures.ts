/**
 * Helpers for the fan-out tests (convergence, poison, the worker process): a seeded random source, a fan-out sender
 * that records every message (so a test can deliver it as often, as late and as concurrently as it likes), delivery
 * loops over `reconcile` (in order, or twice by two workers that get killed), a store with hooks between the steps of a
 * writer or a worker (to make a race happen exactly), an HR world with its own tables, and the check that every
 * inter-partition index entity equals what its primary derives — the "Done when" of the guide's "Eventually consistent
 * transactions pattern" and "Inter-partition secondary index pattern" (docs/architecture.md, "Fan-out and
 * reconciliation").
 */
import fc from 'fast-check';
import { ErrorCode, isTablegraphError } from '../../src/errors';
import pLimit from 'p-limit';
import { formatVerifyReport, verifyDerived, type VerifyOptions, type VerifyReport } from '../../src/maintenance/verify-derived';
import { until } from './wait';
import type { Model } from '../../src/model/types';
import type { QueueStore } from '../../src/storage/queue-store';
import type { TableStore } from '../../src/storage/table-store';
import { handleMessage, type HandleOptions } from './handle-message';
import type { ReconcileResult } from '../../src/worker/reconciler';
import { randomUUID } from 'node:crypto';
import { decodeEntityMessages, type EntityMessage } from '../../src/queue/messages';
import type { WorkQueueSender, SentMessage } from '../../src/queue/sender';
import { WriteExecutor } from '../../src/write/write-executor';
import { queueSender, workQueueNames } from '../../src/queue/sender';
import { compileHr, startSdlServer, testQueues, testStore, type TestServer } from './harness';
import { receiveFanout } from './write-fixtures';

/** A reproducible random source: the same seed gives the same sequence of choices. */
export interface Rng {
  readonly seed: number;
  /** An integer in [0, n). */
  int(n: number): number;
  /** True with probability p (0..1). */
  chance(p: number): boolean;
  pick<T>(items: readonly T[]): T;
  /** A shuffled copy (Fisher–Yates). */
  shuffle<T>(items: readonly T[]): T[];
}

/**
 * A random source drawn from fast-check's seeded generator (unbiased 31-bit integers).
 * @param seed e.g. `Number(process.env.SEED) || Date.now() % 2 ** 31`; print it so a failure can be replayed
 */
export function seededRng(seed: number): Rng {
  const stream = fc.sample(fc.infiniteStream(fc.noBias(fc.integer({ min: 0, max: 0x7fffffff }))), { seed, numRuns: 1 })[0];
  const it = stream[Symbol.iterator]();
  const next = (): number => it.next().value as number;
  const rng: Rng = {
    seed,
    int: (n) => next() % n,
    chance: (p) => next() / 0x80000000 < p,
    pick: (items) => items[rng.int(items.length)],
    shuffle(items) {
      const out = [...items];
      for (let i = out.length - 1; i > 0; i--) {
        const j = rng.int(i + 1);
        [out[i], out[j]] = [out[j], out[i]];
      }
      return out;
    },
  };
  return rng;
}

/**
 * A WorkQueueSender that keeps every message it is given (decoded, in send order) instead of queueing it, and lets
 * the test act at the moment of sending — which is before the write's reservations and EGT (write-executor.ts).
 */
export class RecordingSender implements WorkQueueSender {
  readonly messages: EntityMessage[] = [];
  /**
   * Ids of messages withdrawn by attempts that could not commit (a storage timeout under load, say). They stay in
   * `messages`, as a queue may have delivered them already; a count of committed writes leaves them out.
   */
  readonly withdrawn = new Set<string>();
  /** Called with each message after it is recorded (each of a batch's, in order); the write waits for it. */
  onSend?: (m: EntityMessage) => void | Promise<void>;
  /** The write messages each queue message sent carried (one, or a group commit's batch), by its reference id. */
  private readonly carried = new Map<string, EntityMessage[]>();

  async send(text: string): Promise<SentMessage> {
    const items = decodeEntityMessages(text);
    const id = randomUUID();
    this.carried.set(id, items);
    for (const m of items) {
      this.messages.push(m);
      await this.onSend?.(m);
    }
    return { id, popReceipt: '' };
  }

  async withdraw(sent: SentMessage): Promise<void> {
    for (const m of this.carried.get(sent.id) ?? []) this.withdrawn.add(m.id);
  }

  /** The messages no attempt withdrew: one per committed write that changed something derived. */
  kept(): EntityMessage[] {
    return this.messages.filter((m) => !this.withdrawn.has(m.id));
  }
}

/** The HR schema with tables of its own, a store, and a write executor over a recording sender. */
export interface HrWorld {
  prefix: string;
  model: Model;
  store: TableStore;
  sender: RecordingSender;
  executor: WriteExecutor;
  /** Creates every table of the model. */
  ensureTables(): Promise<void>;
  /** Deletes every table of the model (afterAll). */
  dropTables(): Promise<void>;
}

/** @param prefix a table prefix of the test file's own (harness.uniquePrefix()) */
export function hrWorld(prefix: string): HrWorld {
  const { model } = compileHr(prefix);
  const store = testStore();
  const sender = new RecordingSender();
  return {
    prefix,
    model,
    store,
    sender,
    executor: new WriteExecutor({ model, store, workQueue: sender }),
    ensureTables: async () => {
      for (const t of model.tables) await store.ensureTable(t);
    },
    dropTables: async () => {
      await Promise.all(model.tables.map((t) => store.deleteTable(t).catch(() => undefined)));
    },
  };
}

/** Runs one mutation (`Mutation.<name>`) through the executor. @throws what WriteExecutor.execute throws */
export function run(world: Pick<HrWorld, 'model' | 'executor'>, mutation: string, input: Record<string, unknown>) {
  const write = world.model.writes.get(`Mutation.${mutation}`);
  if (!write) throw new Error(`no mutation ${mutation}`);
  return world.executor.execute(write, input);
}

/**
 * Reads every primary and index entity (verifyDerived, a maintenance scan) and throws with the readable report
 * unless every derived entity equals `derive(primary)` and no index entity is an orphan or a duplicate.
 * @returns the report (to assert on counts)
 */
export async function expectConverged(store: TableStore, model: Model): Promise<VerifyReport> {
  const report = await verifyDerived({ store, model });
  if (!report.ok) throw new Error(`derived entities do not match their primaries:\n${formatVerifyReport(report, 20)}`);
  return report;
}

/**
 * verifyDerived run until it is clean, for a test whose writes end while the worker still holds messages (index
 * entities that include a changed value are its, eventually): the last report is in the error at the deadline.
 * @param timeoutMs how long to try (ms)
 * @returns the clean report (to assert on counts)
 */
export async function untilConverged(opts: VerifyOptions, timeoutMs = 90_000): Promise<VerifyReport> {
  let report = await verifyDerived(opts);
  await until(
    () => `verify clean, last:\n${formatVerifyReport(report)}`,
    async () => (report = await verifyDerived(opts)).ok,
    { timeoutMs, everyMs: 500 },
  );
  return report;
}

/** Index entities (all indexes) that verify found: a count to show a test was not vacuous. */
export function foundIndexEntities(report: VerifyReport, scope: 'interPartition' | 'intraPartition' = 'interPartition'): number {
  return report.indexes.filter((d) => d.scope === scope).reduce((n, d) => n + d.found, 0);
}

/** What one delivery did: the reconcile's result, or the error it ended with. */
export type Delivery = { message: EntityMessage; result?: ReconcileResult; error?: unknown };

/**
 * Delivers messages through `reconcile`, `concurrency` at a time, the way a worker would: a `retryLater` answer
 * is delivered again as if its settle deadline had passed (`now` moved past `settleMs`) — the message stays on the
 * queue until then. A thrown error is recorded, not rethrown (the message would come back).
 * @param opts.hooks per-delivery options (e.g. an afterUpserts that throws: a worker dying mid-message)
 * @returns every delivery in completion order, and the peak number of reconciles running at once
 */
export async function deliverAll(
  messages: EntityMessage[],
  opts: Omit<HandleOptions, 'now'> & { concurrency: number; hooks?: Array<Partial<HandleOptions> | undefined> },
): Promise<{ deliveries: Delivery[]; peak: number; deferred: number }> {
  const limit = pLimit(opts.concurrency);
  const deliveries: Delivery[] = [];
  let running = 0;
  let peak = 0;
  let deferred = 0;
  const settleMs = opts.settleMs ?? 30_000;
  await Promise.all(
    messages.map((message, i) =>
      limit(async () => {
        running++;
        peak = Math.max(peak, running);
        try {
          let result = await handleMessage(message, { ...opts, ...opts.hooks?.[i] });
          if (result.kind === 'retryLater') {
            deferred++;
            result = await handleMessage(message, { ...opts, ...opts.hooks?.[i], now: () => Date.now() + settleMs + 1 });
          }
          deliveries.push({ message, result });
        } catch (error) {
          deliveries.push({ message, error });
        } finally {
          running--;
        }
      }),
    ),
  );
  return { deliveries, peak, deferred };
}

type Hooked = 'getEntity' | 'createEntity' | 'deleteEntity' | 'submitTransaction' | 'upsertEntity' | 'updateEntity';
/** A hook on one TableStore method: `args` of the call, its `result` (after-hooks), `n` = 1 for the first call. */
type StoreHook = (args: unknown[], result: unknown, n: number) => void | Promise<void>;

/**
 * The real store with hooks around some methods, so a test can make the world change exactly between two steps
 * of a writer or a worker: a `before` hook runs first (a throw stands for a process that died before the call —
 * the call is never sent); an `after` hook runs once the call answered and before the caller sees the answer.
 * Every other method goes straight through.
 */
export function hookedStore(store: TableStore, hooks: { before?: Partial<Record<Hooked, StoreHook>>; after?: Partial<Record<Hooked, StoreHook>> }): TableStore {
  const calls = new Map<string, number>();
  return new Proxy(store, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target) as unknown;
      if (typeof value !== 'function') return value;
      const before = hooks.before?.[prop as Hooked];
      const after = hooks.after?.[prop as Hooked];
      if (!before && !after) return value.bind(target);
      return async (...args: unknown[]) => {
        const n = (calls.get(String(prop)) ?? 0) + 1;
        calls.set(String(prop), n);
        await before?.(args, undefined, n);
        const result = await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        await after?.(args, result, n);
        return result;
      };
    },
  });
}

/**
 * The store as seen by a worker that pauses between its first read and everything after it (a long GC pause, a
 * slow network): the first point query reads at once but answers only when `wait` resolves, so what the worker
 * then writes rests on a read that may be long out of date.
 */
export function pausedAfterFirstRead(store: TableStore, wait: Promise<void>): TableStore {
  return hookedStore(store, { after: { getEntity: (_a, _r, n) => (n === 1 ? wait : undefined) } });
}

/** A promise with its resolve function: a gate a test opens when it chooses. */
export function gate(): { wait: Promise<void>; open(): void } {
  let open!: () => void;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

/**
 * Delivers every message twice, shuffled, to two workers (or `workers`) running at once; one delivery in five dies
 * after its upserts (a worker killed mid-message) and is left for a later delivery. A delivery refused because its
 * entity kept changing under another worker (STORAGE_UNAVAILABLE, reason Contention) comes back, as the queue brings
 * back a message that failed: once every worker is done, it is handled again.
 * @returns deliveries made and deliveries killed
 */
export async function deliverTwiceByTwoWorkers(
  messages: EntityMessage[],
  opts: HandleOptions,
  random: () => number,
  workers = 2,
): Promise<{ deliveries: number; killed: number }> {
  const all = [...messages, ...messages].sort(() => random() - 0.5);
  let killed = 0;
  const again: EntityMessage[] = [];
  const worker = async (share: EntityMessage[]) => {
    for (const m of share) {
      const dies = random() < 0.2;
      const afterUpserts = dies
        ? () => {
            killed++;
            throw new Error('worker killed mid-message');
          }
        : undefined;
      await handleMessage(m, { ...opts, afterUpserts }).catch((e: Error) => {
        if (isTablegraphError(e, ErrorCode.STORAGE_UNAVAILABLE) && e.details.reason === 'Contention') return void again.push(m);
        if (e.message !== 'worker killed mid-message') throw e;
      });
    }
  };
  await Promise.all(Array.from({ length: workers }, (_, w) => worker(all.filter((_, i) => i % workers === w))));
  for (const m of again) await handleMessage(m, opts);
  return { deliveries: all.length + again.length, killed };
}

/** How long drainWithRedelivery hides what it received while it delivers it (s). */
const ROUND_HIDDEN_SECONDS = 600;

/**
 * Every message on `tablePrefix`'s work queue, delivered until none is left (moves send messages of their own
 * writes): each batch twice, in random order, by two workers (or `opts.workers`) that die mid-message one time in five
 * (deliverTwiceByTwoWorkers), then everything seen so far again, late and in reverse (that many at a time).
 * @returns messages received, deliveries killed, and every message received (to deliver again later)
 */
export async function drainWithRedelivery(
  opts: { model: Model; store: TableStore; writer: WriteExecutor; queues: QueueStore; tablePrefix: string; workers?: number },
  random: () => number,
): Promise<{ messages: number; killed: number; seen: EntityMessage[] }> {
  const reconcileOpts = { model: opts.model, store: opts.store, settleMs: 0, holdMs: 0, writer: opts.writer };
  let messages = 0;
  let killed = 0;
  const seen: EntityMessage[] = [];
  for (let round = 0; round < 10; round++) {
    // Hidden while the round lasts, deleted after it as a worker deletes what it handled: else a round longer than
    // the hiding would receive its own messages again.
    const received = await receiveFanout(opts.queues, opts.tablePrefix, ROUND_HIDDEN_SECONDS);
    const batch = received.map((r) => r.message);
    if (batch.length === 0) break;
    messages += batch.length;
    seen.push(...batch);
    killed += (await deliverTwiceByTwoWorkers(batch, reconcileOpts, random, opts.workers)).killed;
    // Late, in reverse, as many at a time as there are workers: one that met contention comes back after them.
    const late = pLimit(opts.workers ?? 1);
    const again: EntityMessage[] = [];
    const notDone = new Set<EntityMessage>();
    const handled = (m: EntityMessage) => (r: ReconcileResult) => void (r.kind === 'done' ? notDone.delete(m) : notDone.add(m));
    const contended = (m: EntityMessage) => (e: unknown) => {
      if (!(isTablegraphError(e, ErrorCode.STORAGE_UNAVAILABLE) && e.details.reason === 'Contention')) throw e;
      again.push(m);
    };
    await Promise.all([...seen].reverse().map((m) => late(() => handleMessage(m, reconcileOpts).then(handled(m), contended(m)))));
    for (const m of again) handled(m)(await handleMessage(m, reconcileOpts));
    // A queue message goes once every write's message it carries is done, as the worker deletes it.
    const { queue } = workQueueNames(opts.tablePrefix);
    const refs = new Map(received.map(({ ref }) => [ref.id, ref]));
    for (const { message, ref } of received) if (notDone.has(message)) refs.delete(ref.id);
    await Promise.all([...refs.values()].map((ref) => opts.queues.delete(queue, ref)));
  }
  return { messages, killed, seen };
}

/**
 * A write path whose fan-out goes to the test server's queue: for the worker's own writes (a move's copy, a join
 * entity's delete) in tests that drive the worker by hand.
 */
export function queueWriter(model: Model, server: Pick<TestServer, 'store' | 'config'>): WriteExecutor {
  return new WriteExecutor({ model, store: server.store, workQueue: queueSender(testQueues(), workQueueNames(server.config.tablePrefix).queue) });
}

/** Runs one mutation of a test schema and expects no error (the mutation and its input named if one comes). */
export async function expectMutation(server: Pick<TestServer, 'query'>, mutation: string, inputType: string, input: Record<string, unknown>): Promise<void> {
  const r = await server.query(`mutation($input: ${inputType}!) { ${mutation}(input: $input) { __typename } }`, { input });
  expect([mutation, input, r.errors]).toEqual([mutation, input, undefined]);
}

/** A server on a schema of the test's own, with the worker off, and what a test drives it with. */
export interface SdlWorld {
  server: TestServer;
  model: Model;
  /** The worker's write path (queueWriter). */
  writer: WriteExecutor;
  close(): Promise<void>;
  /** Runs one mutation and expects no error (expectMutation). */
  ok(mutation: string, inputType: string, input: Record<string, unknown>): Promise<void>;
  /** The worker by hand until the queue is empty: every message twice, late, by two workers that die (drainWithRedelivery). */
  drain(random: () => number): ReturnType<typeof drainWithRedelivery>;
}

/**
 * Starts a server on `sdl` before the file's tests (`TABLEGRAPH_WORKER: 'off'`) and closes it after them.
 * @returns the world, filled in once `beforeAll` has run
 */
export function useSdlWorld(sdl: string): SdlWorld {
  const world = {
    ok: (mutation: string, inputType: string, input: Record<string, unknown>) => expectMutation(world.server, mutation, inputType, input),
    drain: (random: () => number) =>
      drainWithRedelivery(
        { model: world.model, store: world.server.store, writer: world.writer, queues: testQueues(), tablePrefix: world.server.config.tablePrefix },
        random,
      ),
  } as SdlWorld;
  beforeAll(async () => {
    const { server, model, close } = await startSdlServer(sdl, { TABLEGRAPH_WORKER: 'off' });
    Object.assign(world, { server, model, close, writer: queueWriter(model, server) });
  }, 60_000);
  afterAll(() => world.close?.());
  return world;
}
