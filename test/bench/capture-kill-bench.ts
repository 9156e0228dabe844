/**
 * The RPO while the capturing worker is killed: `npx tsx test/bench/capture-kill-bench.ts [--seconds 90] [--rate 10]
 * [--kills 4] [--within 75] [--seed N] [--held]` (`npm run bench -- capture-kills`; not part of `npm test`). On its own
 * in-memory Azurite: the 32,928 Chicago employees imported under the HR schema; then updates at `--rate` writes/s for
 * `--seconds`, captured by `npm run worker` processes (a capture pass every 10 s, the default), one at a time: `--kills`
 * times in the first `--within` s the worker is killed (SIGKILL) at a moment drawn from the seed, and a new one started
 * at once. `--held`, the worst case: each time a worker is first started that holds its first capture pass after the
 * pass's first segment (the test hook `capture@1`: the pass's blob lease held, its manifest not written) and is killed
 * there, then one in its place. A lease a killed worker held lapses within 15 s. Each write's RPO: from its acknowledgement to the end of the first pass that started after
 * it (`changes/latest.json`, read every 100 ms). Prints the RPO p50, p99 and max against the target — the lease plus
 * two intervals, 35 s — and when each worker was killed.
 */
import { importEmployees } from '../../examples/hr/import/import-employees';
import { readJsonBlob } from '../../src/backup/backup-blobs';
import { LATEST_PASS, type LatestPass } from '../../src/backup/change-format';
import { Catalogue } from '../../src/evolution/catalogue';
import { deploySchema, schemaLayout } from '../../src/evolution/deployment';
import { ensureWorkQueues, queueSender, workQueueNames } from '../../src/queue/sender';
import { loadConfig } from '../../src/runtime/config';
import { compileConfiguredSchema } from '../../src/runtime/configured-schema';
import { startAzurite } from '../../src/storage/azurite';
import { BlobStore } from '../../src/storage/blob-store';
import { QueueStore } from '../../src/storage/queue-store';
import { TableStore } from '../../src/storage/table-store';
import { WriteExecutor } from '../../src/write/write-executor';
import { CHICAGO_CSV, SCHEMA_DIR } from '../support/harness';
import { killedAt, runCommand, type CommandProcess } from '../support/processes';
import { until } from '../support/wait';
import { seededRng } from '../support/fanout-fixtures';
import { percentile } from './capture-load';

const PREFIX = 'ck';

function option(name: string, fallback: number): number {
  const i = process.argv.indexOf(name);
  return i < 0 ? fallback : Number(process.argv[i + 1]);
}

/** Each distinct pass `changes/latest.json` named while `stop()` was not called: its start and end (ms since 1970). */
function passWatcher(blobs: BlobStore, container: string): { passes: Array<{ startedAt: number; finishedAt: number }>; stop(): Promise<void> } {
  const passes: Array<{ startedAt: number; finishedAt: number }> = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const latest = await readJsonBlob<LatestPass>(blobs, container, LATEST_PASS).catch(() => undefined);
      const startedAt = latest ? Date.parse(latest.startedAt) : NaN;
      if (latest && !passes.some((p) => p.startedAt === startedAt)) passes.push({ startedAt, finishedAt: Date.parse(latest.finishedAt) });
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  return {
    passes,
    async stop() {
      running = false;
      await loop;
    },
  };
}

/**
 * The workers' schedule over `withinMs`: `kills` times, the running worker killed (SIGKILL) at a moment drawn from
 * `random` within its share of the time, a new one started at once. With `held`, each cycle's new worker is first one
 * held in its first pass (test hook capture@1: its lease held) and killed there, then one in its place: the worst case.
 * @returns the kill times (ms since 1970) and the worker running at the end
 */
async function killCycles(
  env: Record<string, string>,
  schedule: { kills: number; withinMs: number; held: boolean; random: () => number },
): Promise<{ killed: number[]; last: CommandProcess }> {
  const { kills, withinMs, held, random } = schedule;
  const killed: number[] = [];
  const start = Date.now();
  const share = withinMs / kills;
  let worker = held ? undefined : runCommand('worker', [], undefined, env);
  for (let k = 0; k < kills; k++) {
    if (held) {
      await killedAt(runCommand('worker', [], undefined, { ...env, TABLEGRAPH_TEST_BUILD_HOLD: 'capture@1' }), 'test hook: capture held', 120_000);
      killed.push(Date.now());
      worker = runCommand('worker', [], undefined, env);
    }
    const at = start + k * share + (held ? share : random() * share);
    if (at > Date.now()) await new Promise((r) => setTimeout(r, at - Date.now()));
    if (!held || k < kills - 1) {
      worker!.child.kill('SIGKILL');
      await worker!.exited;
      killed.push(Date.now());
      if (!held) worker = runCommand('worker', [], undefined, env);
    }
  }
  return { killed, last: worker! };
}

async function main(): Promise<void> {
  const seconds = option('--seconds', 90);
  const rate = option('--rate', 10);
  const kills = option('--kills', 4);
  const within = option('--within', 75);
  const held = process.argv.includes('--held');
  const seed = option('--seed', Date.now() % 1_000_000_007);
  const rng = seededRng(seed);
  const azurite = await startAzurite({ inMemory: true });
  const env = { AZURE_STORAGE_CONNECTION_STRING: azurite.connectionString, TABLEGRAPH_SCHEMA_DIR: SCHEMA_DIR, TABLEGRAPH_TABLE_PREFIX: PREFIX };
  let last: CommandProcess | undefined;
  try {
    const config = loadConfig(env);
    const compiled = compileConfiguredSchema(config);
    const store = new TableStore({ connectionString: azurite.connectionString, target: 'azurite', timeoutMs: 60_000 });
    for (const t of compiled.model.tables) await store.ensureTable(t);
    const imported = await importEmployees({ store, model: compiled.model, file: CHICAGO_CSV, concurrency: 8 });
    const layout = schemaLayout(compiled.model, compiled.schema);
    await deploySchema({ catalogue: new Catalogue(store, PREFIX), schema: layout, sdl: compiled.sdl });
    const queues = new QueueStore({ connectionString: azurite.connectionString });
    await ensureWorkQueues(queues, PREFIX);
    const blobs = new BlobStore({ connectionString: azurite.connectionString, timeoutMs: 60_000 });
    const { container } = config.backup;
    await blobs.ensureContainer(container);
    const employees: Array<{ departmentId: string; id: string }> = [];
    for await (const page of store.scan(`${PREFIX}Directory`, { entityType: 'Employee', select: ['departmentId', 'id'] }))
      for (const e of page) employees.push({ departmentId: String(e.properties.departmentId), id: String(e.properties.id) });

    const write = new WriteExecutor({
      ...{ model: compiled.model, store, workQueue: queueSender(queues, workQueueNames(PREFIX).queue) },
      ...{ capture: true, tablePrefix: PREFIX },
    });
    const watcher = passWatcher(blobs, container);
    const workers = killCycles(env, { kills, withinMs: within * 1000, held, random: () => rng.int(1_000_000) / 1_000_000 });
    const acks: number[] = [];
    let errors = 0;
    const started = Date.now();
    const writes: Array<Promise<void>> = [];
    for (let i = 0; i < rate * seconds; i++) {
      const due = started + (i * 1000) / rate;
      if (due > Date.now()) await new Promise((r) => setTimeout(r, due - Date.now()));
      const e = employees[(i * 7919) % employees.length];
      writes.push(
        write.execute(compiled.model.writes.get('Mutation.updateEmployee')!, { ...e, annualSalary: `${60_000 + i}` }).then(
          () => void acks.push(Date.now()),
          () => void errors++,
        ),
      );
    }
    await Promise.all(writes);
    const { killed, last: running } = await workers;
    last = running;
    const end = Math.max(...acks);
    await until('a pass started after the last write', () => watcher.passes.some((p) => p.startedAt >= end), { timeoutMs: 120_000, everyMs: 200 });
    await watcher.stop();
    const rpo = acks.map((ack) => watcher.passes.find((p) => p.startedAt >= ack)!.finishedAt - ack);
    const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
    console.log(`capture kills: ${imported.imported} employees; ${acks.length} updates at ${rate}/s over ${seconds} s (${errors} errors)`);
    const how = held ? 'each cycle one held in its pass, then the one in its place' : `at moments drawn from seed ${seed}`;
    console.log(`workers killed (SIGKILL) at ${killed.map((k) => s(k - started)).join(', ')} into the writes (${how})`);
    console.log(`passes seen: ${watcher.passes.length}`);
    console.log(
      `RPO (acknowledged → restorable): p50 ${s(percentile(rpo, 50))}, p99 ${s(percentile(rpo, 99))}, max ${s(Math.max(...rpo))} (target ≤ 35 s: the lease + 2 intervals)`,
    );
  } finally {
    last?.child.kill('SIGKILL');
    await azurite.stop();
  }
}

void main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
