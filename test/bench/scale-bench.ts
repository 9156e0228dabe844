/**
 * Background work at size: `npx tsx test/bench/scale-bench.ts [--seconds 60] [--rate 10] [--copies 1]` (`npm run bench
 * -- scale`; not part of `npm test`). On its own in-memory Azurite: the 32,928 Chicago employees imported under the HR
 * schema as shipped — `--copies 10`: the file's rows ten times over, each copy its own employees (ids by position,
 * e-mails made unique), 329,280 employees and some 1.6M entities with their index entities; then, through a counting proxy in front of the Table service (test/support/storage-proxy.ts), updates at
 * `--rate` writes/s for `--seconds` while a capture loop runs its passes every 10 s (the default) and a reader sends
 * point queries of employees without pause. Prints: the queries of the tables of the data without a PartitionKey
 * (whole-table reads; the target is 0), the change entities a pass read per change it copied, pass time, the RPO as
 * the writes met it (a write's acknowledgement → the end of the first pass that started after it: p50, p99, max),
 * the point queries' p50 inside a pass and outside, and their ratio (the target is at most 1.25), and how late this
 * process's event loop ran inside a pass and outside (the reader, the writer and the capture loop share it).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { importEmployees } from '../../examples/hr/import/import-employees';
import { runCapturePass } from '../../src/backup/capture-pass';
import { Catalogue } from '../../src/evolution/catalogue';
import { deploySchema, schemaLayout } from '../../src/evolution/deployment';
import { loadConfig } from '../../src/runtime/config';
import { compileConfiguredSchema } from '../../src/runtime/configured-schema';
import { startAzurite } from '../../src/storage/azurite';
import { BlobStore } from '../../src/storage/blob-store';
import { QueueStore } from '../../src/storage/queue-store';
import { TableStore } from '../../src/storage/table-store';
import { ensureWorkQueues, workQueueNames } from '../../src/queue/sender';
import { CHICAGO_CSV, SCHEMA_DIR } from '../support/harness';
import { startStorageProxy } from '../support/storage-proxy';
import { captureLags, captureUnderLoad, percentile, type CaptureBenchDeps, type EmployeeKey } from './capture-load';

const PREFIX = 'sc';

/**
 * The Chicago file with its data rows `copies` times over, gzipped, in a folder of its own (the file itself for 1):
 * each row's id is its position, so every copy's employees are new ones.
 */
function chicagoTimes(copies: number): string {
  if (copies === 1) return CHICAGO_CSV;
  const [header, ...rows] = zlib.gunzipSync(fs.readFileSync(CHICAGO_CSV)).toString('utf8').trimEnd().split('\n');
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'scale-bench-')), 'chicago-times.csv.gz');
  const body = [header, ...Array.from({ length: copies }, () => rows).flat()].join('\n') + '\n';
  fs.writeFileSync(file, zlib.gzipSync(body));
  return file;
}
const CONTAINER = 'bench-scale';

function option(name: string, fallback: number): number {
  const i = process.argv.indexOf(name);
  return i < 0 ? fallback : Number(process.argv[i + 1]);
}

/** Point queries of random employees, one after another, until `stop()`: each one's start and time (ms). */
function pointReader(store: TableStore, employees: Array<EmployeeKey & { rowKey: string }>): { stop(): Promise<Array<{ at: number; ms: number }>> } {
  const reads: Array<{ at: number; ms: number }> = [];
  let running = true;
  const loop = (async () => {
    for (let i = 0; running; i++) {
      const e = employees[(i * 104_729) % employees.length];
      const at = Date.now();
      const began = performance.now();
      await store.getEntity({ table: `${PREFIX}Directory`, partitionKey: e.departmentId, rowKey: e.rowKey }).catch(() => undefined);
      reads.push({ at, ms: performance.now() - began });
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return reads;
    },
  };
}

/** This process's event loop, ticked every 5 ms until `stop()`: each tick's time and how late it came (ms). */
function loopTicker(): { stop(): Array<{ at: number; late: number }> } {
  const ticks: Array<{ at: number; late: number }> = [];
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    ticks.push({ at: Date.now(), late: Math.max(0, now - last - 5) });
    last = now;
  }, 5);
  return {
    stop() {
      clearInterval(timer);
      return ticks;
    },
  };
}

async function main(): Promise<void> {
  const seconds = option('--seconds', 60);
  const rate = option('--rate', 10);
  const copies = option('--copies', 1);
  const azurite = await startAzurite({ inMemory: true });
  const proxy = await startStorageProxy(azurite.connectionString);
  try {
    const config = loadConfig({
      AZURE_STORAGE_CONNECTION_STRING: azurite.connectionString,
      TABLEGRAPH_SCHEMA_DIR: SCHEMA_DIR,
      TABLEGRAPH_TABLE_PREFIX: PREFIX,
    });
    const compiled = compileConfiguredSchema(config);
    const plain = new TableStore({ connectionString: azurite.connectionString, target: 'azurite', timeoutMs: 60_000 });
    for (const t of compiled.model.tables) await plain.ensureTable(t);
    const importing = performance.now();
    const file = chicagoTimes(copies);
    const imported = await importEmployees({ store: plain, model: compiled.model, file, concurrency: 8 });
    if (file !== CHICAGO_CSV) fs.rmSync(path.dirname(file), { recursive: true, force: true });
    console.log(`imported ${imported.imported} employees, ${imported.entities} entities, in ${((performance.now() - importing) / 1000).toFixed(0)} s`);
    const layout = schemaLayout(compiled.model, compiled.schema);
    await deploySchema({ catalogue: new Catalogue(plain, PREFIX), schema: layout, sdl: compiled.sdl });
    const counted = new TableStore({ connectionString: proxy.connectionString, target: 'azurite', timeoutMs: 60_000 });
    const blobs = new BlobStore({ connectionString: azurite.connectionString, timeoutMs: 60_000 });
    await blobs.ensureContainer(CONTAINER);
    const queues = new QueueStore({ connectionString: azurite.connectionString });
    await ensureWorkQueues(queues, PREFIX);
    const deps: CaptureBenchDeps = {
      ...{ store: counted, queues, queue: workQueueNames(PREFIX).queue, blobs, container: CONTAINER },
      ...{ model: compiled.model, tablePrefix: PREFIX, schemaHash: layout.hash },
    };
    await runCapturePass({ ...deps, subscriptionRetentionMs: 3_600_000 });
    const employees: Array<EmployeeKey & { rowKey: string }> = [];
    for await (const page of plain.scan(`${PREFIX}Directory`, { entityType: 'Employee', select: ['departmentId', 'id'] }))
      for (const e of page) employees.push({ departmentId: String(e.properties.departmentId), id: String(e.properties.id), rowKey: e.rowKey });

    const from = proxy.forwarded().length;
    const reader = pointReader(counted, employees);
    const ticker = loopTicker();
    const load = await captureUnderLoad(
      deps,
      employees.map(({ departmentId, id }) => ({ departmentId, id })),
      { perSecond: rate, seconds, intervalMs: 10_000 },
    );
    const reads = await reader.stop();
    const ticks = ticker.stop();
    const data = compiled.model.tables;
    const whole = proxy
      .forwarded()
      .slice(from)
      .filter((f) => f.method === 'GET' && data.some((t) => f.path.includes(`/${t}(`) || f.path.includes(`/${t}()`)))
      .map((f) => decodeURIComponent(f.path))
      .filter((p) => !/PartitionKey eq '/.test(p) && !/\(PartitionKey='/.test(p));
    const lags = captureLags(load);
    const inPass = (at: number) => load.passes.some((p) => at >= p.startedAt && at <= p.finishedAt);
    const inside = reads.filter((r) => inPass(r.at)).map((r) => r.ms);
    const outside = reads.filter((r) => !inPass(r.at)).map((r) => r.ms);
    const changes = load.passes.reduce((n, p) => n + p.changes, 0);
    const rows = load.passes.reduce((n, p) => n + p.rows, 0);
    const passMs = load.passes.map((p) => p.finishedAt - p.startedAt);
    console.log(
      `scale: ${imported.imported} employees imported; ${load.acks.length} updates at ${rate}/s over ${load.seconds.toFixed(0)} s (${load.errors} errors), ${load.passes.length} passes every 10 s`,
    );
    console.log(
      `whole-table reads of the tables of the data by the passes and the writers: ${whole.length}${whole.length > 0 ? ` (${whole.slice(0, 3).join('; ')})` : ''}`,
    );
    console.log(`change entities read per change copied: ${(rows / Math.max(1, changes)).toFixed(2)} (${rows} rows for ${changes} changes)`);
    console.log(`pass time: p50 ${percentile(passMs, 50)} ms, max ${Math.max(...passMs)} ms`);
    console.log(
      `RPO (acknowledged → restorable): p50 ${(percentile(lags, 50) / 1000).toFixed(1)} s, p99 ${(percentile(lags, 99) / 1000).toFixed(1)} s, max ${(Math.max(...lags) / 1000).toFixed(1)} s (target p99 ≤ 20 s)`,
    );
    const late = (within: boolean) => ticks.filter((t) => inPass(t.at) === within).map((t) => t.late);
    console.log(
      `this process's event loop, late by (ms): p50 ${percentile(late(true), 50).toFixed(1)}, p99 ${percentile(late(true), 99).toFixed(1)} inside a pass; ` +
        `p50 ${percentile(late(false), 50).toFixed(1)}, p99 ${percentile(late(false), 99).toFixed(1)} outside (the reader, the writer and the capture loop share it)`,
    );
    const [pin, pout] = [percentile(inside, 50), percentile(outside, 50)];
    console.log(
      `point query p50: ${pin.toFixed(2)} ms inside a pass (${inside.length} reads), ${pout.toFixed(2)} ms outside (${outside.length}); ratio ${(pin / pout).toFixed(2)} (target ≤ 1.25)`,
    );
  } finally {
    await proxy.close();
    await azurite.stop();
  }
}

void main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
