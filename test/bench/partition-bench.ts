/**
 * Hot-partition benchmark: `npm run bench -- partition`, or `npx tsx test/bench/partition-bench.ts [writesPerRun]` after
 * `npm run build` (not part of `npm test`).
 *
 * On its own in-memory Azurite, creates of employees into ONE department — every one of them changing the
 * department's employeeCount and payroll, the summaries kept in the same EGT — through the real write path
 * (WriteExecutor: group commit, reservations of the unique e-mail, fan-out messages on a real queue), at 8, 32 and
 * 128 writes in flight, run compiled as `npm start` runs it. Next to each, in the same run and the same partition
 * layout, the EGT-only baseline: raw SDK `submitTransaction` of each write's own entities (the employee and its index
 * entity in the department's partition, one EGT per write, no summary, nothing else), at the same concurrency — what
 * the partition takes when nobody keeps a summary. Each concurrency runs both in three rounds on fresh tables, each in
 * turn first; the median run of each is printed, with every round's ratio (on a busy machine one run of either swings
 * by a third). Prints writes/s, latency p50/p99, EGTs and Table round trips per write, storage calls per write (Table
 * round trips plus queue calls: what Azure bills, target ≤ 2.5 at 32 in flight), fan-out messages sent per
 * acknowledged write, failures, and the ratio of the median rates; then the targets: at most 0.2 queue messages per
 * acknowledged create at 32 in flight, creates at 0.5× the baseline or more at 8, at 32 and at 128 in flight. The
 * department's summaries are checked against the writes at the end of each run.
 */
import path from 'node:path';
import { TableClient, type TransactionAction } from '@azure/data-tables';
import pLimit from 'p-limit';
import type { QueueStore } from '../../src/storage/queue-store';
import type { TableStore } from '../../src/storage/table-store';
import type { StorageObserver } from '../../src/storage/storage-types';
import { type WorkQueueSender } from '../../src/queue/sender';
import { cpuMsOf } from './bench-process';

const WRITES = Number(process.argv[2] ?? 1000);
const CONCURRENCY = [8, 32, 128];
/** Rounds per concurrency, each a run of both, in turn first (the rates compared: each one's median). */
const ROUNDS = 3;

/**
 * The write path as `npm start` runs it: compiled (dist/, which `npm run bench` builds when a source changed), not
 * through tsx, whose transform adds a call to every function it makes (esbuild's keepNames) — as the other
 * benchmarks' servers run (run.ts).
 */
const DIST = path.join(__dirname, '../../dist/src');
const load = <T>(module: string): Promise<T> => import(path.join(DIST, `${module}.js`)) as Promise<T>;

/** The modules the benchmark drives, compiled; `compileHr` compiles the HR example's schema. */
async function writePath() {
  const { entityWrites } = await load<typeof import('../../src/model/entity-codec')>('model/entity-codec');
  const { startAzurite } = await load<typeof import('../../src/storage/azurite')>('storage/azurite');
  const { toSdkEntity } = await load<typeof import('../../src/storage/edm')>('storage/edm');
  const { QueueStore, queueName } = await load<typeof import('../../src/storage/queue-store')>('storage/queue-store');
  const { TableStore } = await load<typeof import('../../src/storage/table-store')>('storage/table-store');
  const { WriteExecutor } = await load<typeof import('../../src/write/write-executor')>('write/write-executor');
  const { compileSchema } = await load<typeof import('../../src/compiler/compile')>('compiler/compile');
  const { loadSchemaSources } = await load<typeof import('../../src/compiler/load-schema')>('compiler/load-schema');
  const compileHr = (tablePrefix: string) => compileSchema(loadSchemaSources(path.join(__dirname, '../../examples/hr')), { tablePrefix });
  return { entityWrites, startAzurite, toSdkEntity, QueueStore, queueName, TableStore, WriteExecutor, compileHr };
}

/** What a run needs: the compiled modules, the Azurite and its stores. */
interface Bench {
  modules: Awaited<ReturnType<typeof writePath>>;
  azurite: { pid: number; connectionString: string };
  store: TableStore;
  queues: QueueStore;
}

interface Result {
  name: string;
  writes: number;
  failed: number;
  seconds: number;
  p50: number;
  p99: number;
  egts: number;
  roundTrips: number;
  messages?: number;
  /** Queue calls: messages sent and withdrawn. */
  queueCalls?: number;
  /** CPU time (ms) of Azurite and of this process (the writer) during the run. */
  azuriteMs: number;
  writerMs: number;
}

/** Runs `run`, measuring Azurite's CPU and this process's (ms). */
async function withCpu<T>(azuritePid: number, run: () => Promise<T>): Promise<T & { azuriteMs: number; writerMs: number }> {
  const azurite0 = cpuMsOf(azuritePid);
  const own0 = process.cpuUsage();
  const result = await run();
  const own = process.cpuUsage(own0);
  return { ...result, azuriteMs: cpuMsOf(azuritePid) - azurite0, writerMs: (own.user + own.system) / 1000 };
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? 0 : sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)];
}

/** Runs `n` writes, `concurrency` at a time; each write's latency in ms. */
async function timed(n: number, concurrency: number, write: (i: number) => Promise<void>): Promise<{ seconds: number; latencies: number[]; failed: number }> {
  const limit = pLimit(concurrency);
  const latencies: number[] = [];
  let failed = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: n }, (_, i) =>
      limit(async () => {
        const t = performance.now();
        try {
          await write(i);
          latencies.push(performance.now() - t);
        } catch (e) {
          failed++;
          if (failed <= 3) console.error(`write ${i} failed:`, (e as Error).message);
        }
      }),
    ),
  );
  return { seconds: (performance.now() - started) / 1000, latencies, failed };
}

/** Acknowledged writes per second. */
function rateOf(r: Result): number {
  return (r.writes - r.failed) / r.seconds;
}

function row(r: Result, baseline?: Result): string {
  const rate = rateOf(r);
  const cells = [
    r.name.padEnd(44),
    rate.toFixed(0).padStart(8),
    `${r.p50.toFixed(1)} / ${r.p99.toFixed(1)}`.padStart(16),
    (r.egts / r.writes).toFixed(3).padStart(8),
    (r.roundTrips / r.writes).toFixed(2).padStart(10),
    ((r.roundTrips + (r.queueCalls ?? 0)) / r.writes).toFixed(2).padStart(9),
    (r.messages === undefined ? '—' : (r.messages / (r.writes - r.failed)).toFixed(2)).padStart(9),
    String(r.failed).padStart(7),
    (r.azuriteMs / r.writes).toFixed(2).padStart(11),
    (r.writerMs / r.writes).toFixed(2).padStart(10),
    (baseline ? `${(rate / rateOf(baseline)).toFixed(2)}x` : '').padStart(7),
  ];
  return cells.join(' ');
}

/** The i-th create's input: employees of the department HOT, each with an e-mail of its own. */
function input(i: number) {
  return {
    departmentId: 'HOT',
    id: String(i + 1),
    email: `e${i + 1}@hot.example`,
    lastName: 'SMITH',
    firstName: 'ANA',
    fullOrPartTime: 'FULL_TIME',
    salaryOrHourly: 'SALARY',
    annualSalary: `${50000 + i}.25`,
  };
}

/** tablegraph: group commit, summaries, reservations, fan-out messages — on tables of `prefix`. */
async function runOurs(b: Bench, prefix: string, concurrency: number): Promise<Result> {
  const { store, queues, azurite } = b;
  const { model } = b.modules.compileHr(prefix);
  for (const t of model.tables) await store.ensureTable(t);
  const queue = b.modules.queueName(prefix, 'fanout');
  await queues.ensureQueue(queue);
  let messages = 0;
  let withdrawn = 0;
  const sender: WorkQueueSender = {
    send: (text) => ((messages += 1), queues.send(queue, text)),
    withdraw: (sent) => ((withdrawn += 1), queues.delete(queue, sent)),
  };
  let egts = 0;
  let roundTrips = 0;
  const observer: StorageObserver = { onCall: (r) => void ((roundTrips += r.roundTrips), r.kind === 'transaction' && egts++) };
  const executor = new b.modules.WriteExecutor({ model, store, workQueue: sender });
  const create = model.writes.get('Mutation.createEmployee')!;
  await executor.execute(model.writes.get('Mutation.createDepartment')!, { id: 'HOT', name: 'HOT' });
  messages = 0;
  const ours = await withCpu(azurite.pid, () => timed(WRITES, concurrency, async (i) => void (await executor.execute(create, input(i), observer))));
  const hot = await store.getEntity({ table: `${prefix}Directory`, partitionKey: 'HOT', rowKey: 'department' });
  const done = WRITES - ours.failed;
  if (hot?.properties.employeeCount !== done) console.error(`employeeCount ${String(hot?.properties.employeeCount)} after ${done} creates`);
  return {
    name: `tablegraph createEmployee, ${concurrency} in flight`,
    writes: WRITES,
    failed: ours.failed,
    seconds: ours.seconds,
    p50: percentile(ours.latencies, 50),
    p99: percentile(ours.latencies, 99),
    egts,
    roundTrips,
    messages,
    queueCalls: messages + withdrawn,
    azuriteMs: ours.azuriteMs,
    writerMs: ours.writerMs,
  };
}

/** Baseline: each write's own entities as one EGT of upserts, raw SDK, no summary, nothing else — on tables of `prefix`. */
async function runBaseline(b: Bench, prefix: string, concurrency: number): Promise<Result> {
  const { entityWrites, toSdkEntity, compileHr } = b.modules;
  const employee = compileHr(prefix).model.entities.get('Employee')!;
  const directory = TableClient.fromConnectionString(b.azurite.connectionString, employee.layout.table, { allowInsecureConnection: true });
  await b.store.ensureTable(employee.layout.table);
  const base = await withCpu(b.azurite.pid, () =>
    timed(WRITES, concurrency, async (i) => {
      const w = entityWrites(employee, input(i));
      const own = [w.primary, ...w.indexes.filter((x) => x.table === employee.layout.table)];
      const actions: TransactionAction[] = own.map((x) => ['upsert', toSdkEntity(x.entity), 'Replace']);
      await directory.submitTransaction(actions);
    }),
  );
  return {
    name: `baseline: raw EGT per write, ${concurrency} in flight`,
    writes: WRITES,
    failed: base.failed,
    seconds: base.seconds,
    p50: percentile(base.latencies, 50),
    p99: percentile(base.latencies, 99),
    egts: WRITES,
    roundTrips: WRITES,
    azuriteMs: base.azuriteMs,
    writerMs: base.writerMs,
  };
}

/** The run of median rate (of an odd number of runs). */
function medianRun(runs: Result[]): Result {
  return [...runs].sort((x, y) => rateOf(x) - rateOf(y))[Math.floor(runs.length / 2)];
}

/**
 * ROUNDS rounds at `concurrency`, each on fresh tables, tablegraph first in the even ones and the baseline first in
 * the odd ones; prints each round's ratio and the median runs. @returns the median rates' ratio, and the median run's
 * queue messages per acknowledged create
 */
async function compare(b: Bench, concurrency: number): Promise<{ ratio: number; messages: number }> {
  const ours: Result[] = [];
  const base: Result[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const prefix = `pb${concurrency}r${round}`;
    if (round % 2 === 0) ours.push(await runOurs(b, prefix, concurrency));
    base.push(await runBaseline(b, `${prefix}b`, concurrency));
    if (round % 2 === 1) ours.push(await runOurs(b, prefix, concurrency));
  }
  const [tablegraph, baseline] = [medianRun(ours), medianRun(base)];
  console.log(row(baseline));
  console.log(row(tablegraph, baseline));
  console.log(`  rounds at ${concurrency} in flight: ${ours.map((r, i) => `${(rateOf(r) / rateOf(base[i])).toFixed(2)}x`).join(', ')}`);
  return { ratio: rateOf(tablegraph) / rateOf(baseline), messages: tablegraph.messages! / (tablegraph.writes - tablegraph.failed) };
}

async function main(): Promise<void> {
  const modules = await writePath();
  const azurite = await modules.startAzurite({ inMemory: true });
  try {
    const store = new modules.TableStore({ connectionString: azurite.connectionString, target: 'azurite', timeoutMs: 60_000 });
    const queues = new modules.QueueStore({ connectionString: azurite.connectionString, timeoutMs: 60_000 });
    const bench: Bench = { modules, azurite, store, queues };
    console.log(`one department, ${WRITES} creates per run, ${ROUNDS} rounds (the median run shown), in-memory Azurite 3.37, Node ${process.version}`);
    console.log(
      `${'run'.padEnd(44)} ${'writes/s'.padStart(8)} ${'p50 / p99 ms'.padStart(16)} ${'EGTs/w'.padStart(8)} ${'trips/w'.padStart(10)} ${'calls/w'.padStart(9)} ${'msgs/ack'.padStart(9)} ${'failed'.padStart(7)} ${'Azurite ms/w'.padStart(11)} ${'writer ms/w'.padStart(10)} ${'ratio'.padStart(7)}`,
    );
    /** Per concurrency: tablegraph's creates/s against the baseline's, and its queue messages per acknowledged create. */
    const targets = new Map<number, { ratio: number; messages: number }>();
    for (const concurrency of CONCURRENCY) targets.set(concurrency, await compare(bench, concurrency));
    const met = (ok: boolean) => (ok ? 'met' : 'not met');
    const at = (c: number) => targets.get(c)!;
    console.log(
      `targets: queue messages per acknowledged create at 32 in flight ${at(32).messages.toFixed(2)} (≤ 0.2: ${met(at(32).messages <= 0.2)}); ` +
        `creates ${at(8).ratio.toFixed(2)}x the baseline at 8 in flight (≥ 0.5: ${met(at(8).ratio >= 0.5)}), ` +
        `${at(32).ratio.toFixed(2)}x at 32 (≥ 0.5: ${met(at(32).ratio >= 0.5)}) and ${at(128).ratio.toFixed(2)}x at 128 (≥ 0.5: ${met(at(128).ratio >= 0.5)})`,
    );
  } finally {
    await azurite.stop();
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
