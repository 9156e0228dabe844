/**
 * Fan-out benchmark: `npx tsx test/bench/fanout-bench.ts` (not part of `npm test`; about 2 minutes).
 *
 * On its own in-memory Azurite, a server in this process (its inline worker off) and message workers
 * (createMessageWorker, a QueueWorker) in this process too. 8 departments × 40 employees are created through the
 * real write path (GraphQL mutations), then, in one run:
 * 1. EGT-only writes — updateEmployee of annualSalary, which no inter-partition index holds: the employee and
 *    its department's payroll in one EGT ("Entity Group Transactions"), no fan-out message; 8 in flight, one
 *    department per lane so that the summary's If-Match never contends. The baseline.
 * 2. Fan-out writes — updateEmployee of lastName and title: the EGT plus a fan-out message that the worker
 *    reconciles into the byLastName / byTitle / byEmail index entities ("Eventually consistent transactions
 *    pattern"): unpaced at the same 8 in flight (interleaved with 1 in rounds, so that the machine's load weighs
 *    on both alike), then paced at 50 and 100 writes/s (open loop, timer-driven). Per message the fan-out lag
 *    (reconcile done − enqueue, the QueueWorker's LagStats), and the queue depth sampled every 250 ms.
 * 2c. Moves: fan-out writes paced at 50/s again, and a `moveEmployee` each second; per move, the time from its
 *    acknowledgement to the employee readable at its new address and gone from its old.
 * 3. Worker throughput: 1,000 fan-out writes with no worker running, then a fresh worker drains the backlog
 *    (worker concurrency 8, then 32): messages/s and the depth as it drains.
 * A watcher reports any point query over 1 s and its phase: Azurite's queue garbage collection (every 60 s) freezes
 * all of Azurite for seconds once thousands of messages have come and gone. Prints tables and rate ratios.
 */
import { cpus, loadavg } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig } from '../../src/runtime/config';
import { createLogger } from '../../src/log';
import { startServer, type RunningServer } from '../../src/runtime/start-server';
import { startAzurite } from '../../src/storage/azurite';
import { QueueStore } from '../../src/storage/queue-store';
import { TableStore } from '../../src/storage/table-store';
import { benchStorage } from './bench-storage';
import { createMessageWorker } from '../../src/worker/message-worker';
import { workQueueNames, queueSender } from '../../src/queue/sender';
import { WriteExecutor } from '../../src/write/write-executor';
import type { QueueWorker } from '../../src/worker/queue-worker';
import { compileHr, ROOT } from '../support/harness';

const PREFIX = 'fanbench';
const DEPARTMENTS = 8;
const PER_DEPARTMENT = 40;
const LANES = 8;
const CLOSED_LOOP_SECONDS = 12; // of each kind, split over ROUNDS alternating rounds
const ROUNDS = 4;
const PACED = [
  { rate: 50, seconds: 15 },
  { rate: 100, seconds: 10 }, // ≤ 1,000 messages per phase: LagStats keeps the last 1,000 lags
];
const BACKLOG = 1000;
/** Moves in the moves phase, one a second, between two departments of their own. */
const MOVES = 15;
const MOVE_DEPARTMENTS = ['BENCH-MOVE-A', 'BENCH-MOVE-B'];
const NAMES = ['WILLIAMS', 'JOHNSON', 'SMITH', 'BROWN', 'JONES', 'GARCIA'];
const TITLES = ['POLICE OFFICER', 'SERGEANT', 'ENGINEER I/II', 'CLERK III', 'LIEUTENANT'];

type Employee = { departmentId: string; id: string };
type Input = (e: Employee) => Record<string, unknown>;
const log = createLogger({ level: 'warn', destination: 'stderr' });
const UPDATE = 'mutation($input: UpdateEmployeeInput!) { updateEmployee(input: $input) { employee { etag } } }';
const department = (d: number) => `BENCH-${d}`;
const employees: Employee[] = Array.from({ length: DEPARTMENTS * PER_DEPARTMENT }, (_, i) => ({
  departmentId: department(i % DEPARTMENTS),
  id: String(i + 1),
}));
const inDepartment = (d: number) => employees.filter((e) => e.departmentId === department(d));
let server: RunningServer;
let phase = 'setup';

/** Nearest-rank percentile (ms). */
function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? 0 : sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)];
}

/** Mutation outcomes: latency per successful write (ms), table round trips (from extensions.cost), errors. */
class Writes {
  latencies: number[] = [];
  roundTrips = 0;
  errors: string[] = [];
  /** Wall time of the loops that wrote into this (ms). */
  busyMs = 0;
  get seconds(): number {
    return this.busyMs / 1000;
  }
  get rate(): number {
    return this.latencies.length / this.seconds;
  }
}

async function write(into: Writes, query: string, input: Record<string, unknown>): Promise<void> {
  const t0 = performance.now();
  const body = await fetch(server.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query, variables: { input } }),
  })
    .then((r) => r.json() as Promise<{ errors?: Array<{ message: string }>; extensions?: { cost?: { roundTrips: number } } }>)
    .catch((e: Error) => ({ errors: [{ message: e.message }], extensions: undefined }));
  if (body.errors) into.errors.push(String(body.errors[0]?.message));
  else into.latencies.push(performance.now() - t0);
  into.roundTrips += body.extensions?.cost?.roundTrips ?? 0;
}

/** `LANES` loops, lane l writing the employees of department l in turn, for `seconds` or `perLane` writes each. */
async function closedLoop(input: Input, limit: { seconds?: number; perLane?: number }, out = new Writes()): Promise<Writes> {
  const t0 = performance.now();
  const deadline = t0 + (limit.seconds ?? Infinity) * 1000;
  await Promise.all(
    Array.from({ length: LANES }, async (_, lane) => {
      const mine = inDepartment(lane % DEPARTMENTS);
      for (let i = 0; i < (limit.perLane ?? Infinity) && performance.now() < deadline; i++) await write(out, UPDATE, input(mine[i % mine.length]));
    }),
  );
  out.busyMs += performance.now() - t0;
  return out;
}

/** Open loop: one write every 1000/rate ms on a timer, whatever the latency, round robin over all employees. */
async function paced(rate: number, seconds: number, input: Input): Promise<Writes> {
  const out = new Writes();
  const inFlight = new Set<Promise<void>>();
  const t0 = performance.now();
  for (let i = 0; i < rate * seconds; i++) {
    const due = t0 + (i * 1000) / rate;
    if (due > performance.now()) await sleep(due - performance.now());
    const p: Promise<void> = write(out, UPDATE, input(employees[i % employees.length])).finally(() => inFlight.delete(p));
    inFlight.add(p);
  }
  await Promise.all(inFlight);
  out.busyMs = performance.now() - t0;
  return out;
}

/** Runs `probe` every `everyMs` until stopped, collecting what it returns. */
function sampler<T>(probe: (sinceMs: number) => Promise<T | undefined>, everyMs: number): { stop(): Promise<T[]> } {
  const samples: T[] = [];
  const t0 = performance.now();
  let running = true;
  const loop = (async () => {
    while (running) {
      const s = await probe(performance.now() - t0);
      if (s !== undefined) samples.push(s);
      await sleep(everyMs);
    }
  })();
  return { stop: async () => ((running = false), await loop, samples) };
}

/** The depth known at each whole second (the latest sample that had arrived), e.g. `0 14 22 9 0`. */
function perSecond(samples: Array<[number, number]>): string {
  const out: number[] = [];
  const end = samples.at(-1)?.[0] ?? 0;
  for (let s = 1; s * 1000 <= end; s++) out.push(samples.filter(([ms]) => ms <= s * 1000).at(-1)?.[1] ?? 0);
  return out.join(' ');
}

/** This process's event-loop delay p99 / max (ms) since the last call: a stall here is the bench's own, not Azurite's. */
const loopDelay = (() => {
  const h = monitorEventLoopDelay({ resolution: 10 });
  h.enable();
  return (): string => {
    const out = `${(h.percentile(99) / 1e6).toFixed(0)} / ${(h.max / 1e6).toFixed(0)}`;
    h.reset();
    return out;
  };
})();

/** Each call changes lastName and title of the employee (a fan-out message every time). */
const fanoutInput: Input = (() => {
  const writes = new Map<string, number>();
  return (e) => {
    const n = (writes.get(e.id) ?? 0) + 1;
    writes.set(e.id, n);
    return { ...e, lastName: NAMES[(Number(e.id) + n) % NAMES.length], title: TITLES[(Number(e.id) + n) % TITLES.length] };
  };
})();
let salary = 50_000;
const egtOnlyInput: Input = (e) => ({ ...e, annualSalary: ++salary });

async function main(): Promise<void> {
  const azurite = await startAzurite({ inMemory: true });
  const started = performance.now();
  const store = new TableStore({ connectionString: azurite.connectionString, target: 'azurite' });
  const queues = new QueueStore({ connectionString: azurite.connectionString });
  const { model } = compileHr(PREFIX);
  const queue = workQueueNames(PREFIX).queue;
  const env = {
    PORT: '0',
    AZURE_STORAGE_CONNECTION_STRING: azurite.connectionString,
    TABLEGRAPH_TABLE_PREFIX: PREFIX,
    TABLEGRAPH_WORKER: 'off',
    TABLEGRAPH_CURSOR_SECRET: 'b',
    TABLEGRAPH_RATE_LIMIT: '100000000',
  };
  server = await startServer(loadConfig(env, ROOT), benchStorage(azurite.connectionString, { store, queues }), log);
  // Table round trips the workers make: per message, what bounds their throughput on a shared Azurite.
  let workerTrips = 0;
  const workerObserver = { onCall: (r: { roundTrips: number }) => void (workerTrips += r.roundTrips) };
  // Moves are carried out through the write path, as `npm run worker` does it.
  const writer = new WriteExecutor({ model, store, workQueue: queueSender(queues, queue) });
  const worker = (concurrency = 8): QueueWorker =>
    createMessageWorker({ model, store, queues, tablePrefix: PREFIX, log, concurrency, observer: workerObserver, writer });
  const depth = () => queues.approximateDepth(queue);
  const depthSampler = () => sampler(async (ms) => [ms, await depth().catch(() => -1)] as [number, number], 250);
  const stalls = sampler(async () => {
    const t0 = performance.now();
    await store.getEntity({ table: `${PREFIX}Directory`, partitionKey: 'Marketing', rowKey: 'department' }, { timeoutMs: 60_000 }).catch(() => null);
    const ms = performance.now() - t0;
    return ms > 1000 ? `${(ms / 1000).toFixed(1)} s at t=${((t0 - started) / 1000).toFixed(0)} s, during ${phase}` : undefined;
  }, 100);
  const rows: string[] = [];
  const loadAtStart = loadavg()[0];
  const row = (name: string, w: Writes, extra: { enqueued: number; lag?: string; maxDepth?: number; loop: string }) =>
    rows.push(
      `${name} | ${w.latencies.length} | ${w.errors.length} | ${w.seconds.toFixed(1)} | ${w.rate.toFixed(0)} | ` +
        `${percentile(w.latencies, 50).toFixed(1)} / ${percentile(w.latencies, 99).toFixed(1)} | ` +
        `${(w.roundTrips / Math.max(1, w.latencies.length + w.errors.length)).toFixed(1)} | ${extra.enqueued} | ${extra.lag ?? '-'} | ${extra.maxDepth ?? '-'} | ${extra.loop}`,
    );
  const lagOf = (w: QueueWorker) => ((s) => `${s.lag.p50Ms} / ${s.lag.p99Ms} / ${s.lag.maxMs} (${s.handled} msgs)`)(w.stats());
  try {
    // Setup, through the real write path: departments, then employees (each create enqueues a fan-out message).
    const setup = new Writes();
    for (let d = 0; d < DEPARTMENTS; d++) {
      await write(setup, 'mutation($input: CreateDepartmentInput!) { createDepartment(input: $input) { department { id } } }', {
        id: department(d),
        name: department(d),
      });
    }
    await Promise.all(
      Array.from({ length: DEPARTMENTS }, async (_, d) => {
        for (const e of inDepartment(d)) {
          const values = {
            email: `e${e.id}@bench.example`,
            lastName: NAMES[Number(e.id) % NAMES.length],
            firstName: 'ANA',
            title: TITLES[0],
            annualSalary: salary,
          };
          await write(setup, 'mutation($input: CreateEmployeeInput!) { createEmployee(input: $input) { employee { id } } }', { ...e, ...values });
        }
      }),
    );
    // Employees the moves phase moves (none of the paced writes touches them), in a department of their own.
    for (const id of MOVE_DEPARTMENTS) {
      await write(setup, 'mutation($input: CreateDepartmentInput!) { createDepartment(input: $input) { department { id } } }', { id, name: id });
    }
    for (let k = 1; k <= MOVES; k++) {
      await write(setup, 'mutation($input: CreateEmployeeInput!) { createEmployee(input: $input) { employee { id } } }', {
        departmentId: MOVE_DEPARTMENTS[0],
        id: String(9000 + k),
        email: `m${k}@bench.example`,
        lastName: NAMES[k % NAMES.length],
        firstName: 'BO',
        title: TITLES[1],
        annualSalary: salary,
      });
    }
    if (setup.errors.length > 0) throw new Error(`setup failed: ${setup.errors[0]}`);
    const setupDrain = await worker().drain({ timeoutMs: 120_000 });
    process.stderr.write(`setup: ${DEPARTMENTS} departments, ${employees.length} employees, ${setupDrain.handled} fan-out messages reconciled\n`);
    // Warm-up, not measured: JIT, connection pools and Azurite's own warm-up would otherwise weigh on phase 1.
    phase = 'warm-up';
    await closedLoop(egtOnlyInput, { seconds: 2 });
    await closedLoop(fanoutInput, { seconds: 2 });
    await worker().drain({ timeoutMs: 120_000 });

    // 1 and 2a in alternating rounds: EGT-only writes (the worker running, idle: they enqueue nothing), then
    // fan-out writes with the worker reconciling alongside, then the worker drains the rest (untimed, lags kept).
    const [egt, unpaced, w0] = [new Writes(), new Writes(), worker()];
    w0.start();
    loopDelay();
    let [egtEnqueued, maxDepth] = [0, 0];
    for (let round = 0; round < ROUNDS; round++) {
      phase = `EGT-only round ${round + 1}`;
      const before = w0.stats().handled + (await depth());
      await closedLoop(egtOnlyInput, { seconds: CLOSED_LOOP_SECONDS / ROUNDS }, egt);
      egtEnqueued += w0.stats().handled + (await depth()) - before;
      phase = `fan-out round ${round + 1}`;
      const depths = depthSampler();
      await closedLoop(fanoutInput, { seconds: CLOSED_LOOP_SECONDS / ROUNDS }, unpaced);
      await w0.drain({ timeoutMs: 120_000 });
      maxDepth = Math.max(maxDepth, ...(await depths.stop()).map(([, d]) => d));
    }
    const roundsDelay = loopDelay();
    row(`EGT-only (annualSalary), ${LANES} in flight`, egt, { enqueued: egtEnqueued, loop: roundsDelay });
    row(`fan-out (lastName, title), ${LANES} in flight`, unpaced, { enqueued: w0.stats().handled, lag: lagOf(w0), maxDepth, loop: roundsDelay });
    await w0.stop();

    // 2b. Fan-out at a sustained target rate, a fresh worker running.
    const series: string[] = [];
    const pacedRuns: Array<{ rate: number; w: Writes }> = [];
    for (const { rate, seconds } of PACED) {
      phase = `paced ${rate}/s`;
      const wk = worker();
      wk.start();
      loopDelay();
      const depths = depthSampler();
      const w = await paced(rate, seconds, fanoutInput);
      const t0 = performance.now();
      await wk.drain({ timeoutMs: 120_000 });
      const tail = performance.now() - t0;
      const samples = await depths.stop();
      row(`fan-out paced at ${rate}/s`, w, {
        enqueued: wk.stats().handled,
        lag: lagOf(wk),
        maxDepth: Math.max(...samples.map(([, d]) => d)),
        loop: loopDelay(),
      });
      series.push(`paced ${rate}/s (${seconds} s, then drain ${tail.toFixed(0)} ms): ${perSecond(samples)}`);
      pacedRuns.push({ rate, w });
      await wk.stop();
    }

    // 2c. Moves while fan-out writes run at 50/s: from the move's acknowledgement to the employee readable at its new
    // address and gone from its old one (the worker carries a move out: copy, then delete, through the write path).
    phase = 'moves at 50/s';
    const mover = worker();
    mover.start();
    const moveMs: number[] = [];
    const moveErrors: string[] = [];
    const pollers: Array<Promise<void>> = [];
    const pointQuery = async (departmentId: string, id: string) => {
      const r = await fetch(server.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query: 'query($d: ID!, $id: ID!) { employee(departmentId: $d, id: $id) { id } }', variables: { d: departmentId, id } }),
      });
      return ((await r.json()) as { data?: { employee: unknown } }).data?.employee ?? null;
    };
    const moving = (async () => {
      for (let k = 1; k <= MOVES; k++) {
        const id = String(9000 + k);
        const t0 = performance.now();
        const moved = new Writes();
        await write(moved, 'mutation($input: MoveEmployeeInput!) { moveEmployee(input: $input) { employee { id } } }', {
          departmentId: MOVE_DEPARTMENTS[0],
          id,
          toDepartmentId: MOVE_DEPARTMENTS[1],
        });
        if (moved.errors.length > 0) moveErrors.push(moved.errors[0]);
        else {
          const acked = performance.now();
          pollers.push(
            (async () => {
              while (performance.now() - acked < 60_000) {
                const [there, gone] = await Promise.all([pointQuery(MOVE_DEPARTMENTS[1], id), pointQuery(MOVE_DEPARTMENTS[0], id)]);
                if (there && !gone) return void moveMs.push(performance.now() - acked);
                await sleep(25);
              }
            })().catch((e: Error) => void moveErrors.push(`poll: ${e.message}`)),
          );
        }
        await sleep(Math.max(0, 1000 - (performance.now() - t0)));
      }
    })();
    const duringMoves = await paced(50, MOVES, fanoutInput);
    await moving;
    await Promise.all(pollers);
    await mover.drain({ timeoutMs: 120_000 });
    await mover.stop();
    row('fan-out paced at 50/s, with a move each second', duringMoves, { enqueued: mover.stats().handled, lag: lagOf(mover), loop: loopDelay() });
    const movesLine =
      `moves at 50 writes/s: ${moveMs.length} of ${MOVES} carried out (${moveErrors.length} refused${moveErrors[0] ? `: ${moveErrors[0]}` : ''}); ` +
      `acknowledged → readable at the new address and gone from the old: p50 ${percentile(moveMs, 50).toFixed(0)} ms, p99 ${percentile(moveMs, 99).toFixed(0)} ms, max ${Math.max(0, ...moveMs).toFixed(0)} ms`;

    // 3. Worker throughput: a backlog enqueued with no worker running, then drained by a fresh worker.
    const [drains, backlogs]: [string[], Writes[]] = [[], []];
    for (const concurrency of [8, 32]) {
      phase = `backlog for concurrency ${concurrency}`;
      loopDelay();
      const backlog = await closedLoop(fanoutInput, { perLane: BACKLOG / LANES });
      const waiting = await depth();
      row(`fan-out, ${LANES} in flight, no worker (backlog)`, backlog, { enqueued: waiting, loop: loopDelay() });
      backlogs.push(backlog);
      phase = `drain at concurrency ${concurrency}`;
      const depths = depthSampler();
      const t0 = performance.now();
      workerTrips = 0;
      const drained = await worker(concurrency).drain({ timeoutMs: 180_000 });
      const s = (performance.now() - t0) / 1000;
      const samples = await depths.stop();
      const { handled, retried, poisoned } = drained;
      drains.push(
        `${waiting} | ${concurrency} | ${handled} | ${retried} | ${poisoned} | ${s.toFixed(1)} | ${(handled / s).toFixed(0)} | ${(workerTrips / Math.max(handled, 1)).toFixed(1)} | ${loopDelay()} | ${perSecond(samples)}`,
      );
    }
    const stalled = await stalls.stop();
    console.log(`fan-out benchmark: Azurite 3.37 in memory, ${DEPARTMENTS} departments × ${PER_DEPARTMENT} employees, server and workers in one process`);
    console.log(
      `machine: ${cpus().length} CPUs, 1-min load average ${loadAtStart.toFixed(1)} at start, ${loadavg()[0].toFixed(1)} at end (Azurite and this process share them)\n`,
    );
    const header = 'writes | ok | errors | s | writes/s | latency p50 / p99 ms | table round trips/write | msgs enqueued (EGT-only) or reconciled';
    console.log([`${header} | lag p50 / p99 / max ms | max queue depth | loop delay p99 / max ms`, ...rows].join('\n'));
    console.log('\nqueue depth at each second (approximate message count, sampled every 250 ms):');
    for (const s of series) console.log(`  ${s}`);
    console.log(
      '\nbacklog drain: depth before | worker concurrency | handled | retried | poisoned | s | messages/s | table round trips/message (plus a queue delete, and a share of a receive) | loop delay p99 / max ms | depth at each second',
    );
    for (const d of drains) console.log(d);
    console.log("loop delay: this process's event-loop delay (server, workers and load generator share it)");
    console.log(`Azurite stalls (a point query over 1 s): ${stalled.length === 0 ? 'none' : stalled.join('; ')}`);
    console.log(movesLine);
    console.log(`\nratios against the EGT-only rate (${egt.rate.toFixed(0)} writes/s):`);
    console.log(`  fan-out write rate, ${LANES} in flight, worker running: ${(unpaced.rate / egt.rate).toFixed(2)}`);
    const noWorker = backlogs.reduce((n, b) => n + b.latencies.length, 0) / backlogs.reduce((n, b) => n + b.seconds, 0);
    console.log(`  fan-out write rate, ${LANES} in flight, no worker running: ${(noWorker / egt.rate).toFixed(2)} (${noWorker.toFixed(0)} writes/s)`);
    for (const { rate, w } of pacedRuns)
      console.log(`  fan-out paced at ${rate}/s: achieved ${w.rate.toFixed(1)}/s = ${(w.rate / egt.rate).toFixed(2)} of the EGT-only rate`);
    const errors = [egt, unpaced, ...pacedRuns.map((p) => p.w), ...backlogs].flatMap((w) => w.errors);
    if (errors.length > 0) console.log(`\nfirst error: ${errors[0]}`);
    await server.close();
  } finally {
    await stalls.stop();
    await azurite.stop();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
