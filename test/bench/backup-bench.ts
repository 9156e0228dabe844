/**
 * Backup benchmark: `npx tsx test/bench/backup-bench.ts` (not part of `npm test`; `npm run bench -- backup`).
 *
 * On its own in-memory Azurite: the 32,928 Chicago employees imported under the HR schema as shipped, then
 * (src/backup/) a snapshot of every primary entity into Blob segments, and a restore of its rows under a new table
 * prefix. The baselines, in the same run: for the snapshot, a raw loop of the same page reads (the SDK's pages,
 * filtered on EntityType) whose rows are gzip-compressed as NDJSON and uploaded, one blob per page; for the restore's
 * writes, a raw copy of the same entities — each page of the source read and written with the SDK's
 * `TableClient.submitTransaction` (upserts), 8 EGTs in flight. Then continuous backup (capture-load.ts): what capture
 * costs a write (transactions and entities written, capture off and on), and its lag at 50 writes/s for 60 s with
 * the passes every 10 s; then a restore to T (half the load acknowledged) of every entity, its builds of every
 * derived path and `verify`; and — after one department and its employees are deleted — a restore to T of that
 * department's partition alone, while the source keeps taking writes. Prints each rate, the ratios, the storage calls
 * and the bytes stored.
 */
import { gzipSync } from 'node:zlib';
import pLimit from 'p-limit';
import { TableClient, type TransactionAction } from '@azure/data-tables';
import { importEmployees } from '../../examples/hr/import/import-employees';
import { takeSnapshot } from '../../src/backup/snapshot';
import { restoreProgress, restoreRows } from '../../src/backup/restore';
import { Catalogue } from '../../src/evolution/catalogue';
import { deploySchema, schemaLayout } from '../../src/evolution/deployment';
import { runBuildsHere, UNSERVED_PREFIX_BUILDS } from '../../src/evolution/run-builds';
import { createLogger } from '../../src/log';
import { verifyDerived } from '../../src/maintenance/verify-derived';
import { loadConfig } from '../../src/runtime/config';
import { compileConfiguredSchema } from '../../src/runtime/configured-schema';
import { startAzurite } from '../../src/storage/azurite';
import { BlobStore } from '../../src/storage/blob-store';
import { toSdkEntity } from '../../src/storage/edm';
import { TableStore } from '../../src/storage/table-store';
import type { StorageCallRecord } from '../../src/storage/storage-types';
import { planEgtBatches } from '../../src/write/egt-batches';
import { CHICAGO_CSV, SCHEMA_DIR } from '../support/harness';
import { changesAsOf, pointInTime } from '../../src/backup/change-replay';
import { runCapturePass } from '../../src/backup/capture-pass';
import { ensureWorkQueues, queueSender, workQueueNames } from '../../src/queue/sender';
import { QueueStore } from '../../src/storage/queue-store';
import { WriteExecutor } from '../../src/write/write-executor';
import type { Config } from '../../src/runtime/config';
import { captureLags, captureUnderLoad, percentile, writeCost, type CaptureBenchDeps, type CostWrite, type EmployeeKey } from './capture-load';

const IN_FLIGHT = 8;
const CONTAINER = 'bench-backup';

/** An observer counting table round trips. */
function counter(): { observer: { onCall(r: StorageCallRecord): void }; calls: () => number } {
  let calls = 0;
  return { observer: { onCall: (r) => (calls += r.roundTrips) }, calls: () => calls };
}

async function main(): Promise<void> {
  const azurite = await startAzurite({ inMemory: true });
  try {
    const env = { AZURE_STORAGE_CONNECTION_STRING: azurite.connectionString, TABLEGRAPH_SCHEMA_DIR: SCHEMA_DIR };
    const source = loadConfig({ ...env, TABLEGRAPH_TABLE_PREFIX: 'bk' });
    const target = loadConfig({ ...env, TABLEGRAPH_TABLE_PREFIX: 'rs', TABLEGRAPH_BUILD_ENTITIES_PER_SECOND: '0' });
    const compiled = compileConfiguredSchema(source);
    const restored = compileConfiguredSchema(target);
    const plain = new TableStore({ connectionString: azurite.connectionString, target: 'azurite', timeoutMs: 60_000 });
    for (const t of compiled.model.tables) await plain.ensureTable(t);
    const imported = await importEmployees({ store: plain, model: compiled.model, file: CHICAGO_CSV, concurrency: IN_FLIGHT });
    const layout = schemaLayout(compiled.model, compiled.schema);
    await deploySchema({ catalogue: new Catalogue(plain, 'bk'), schema: layout, sdl: compiled.sdl });
    const blobs = new BlobStore({ connectionString: azurite.connectionString, timeoutMs: 60_000 });
    await blobs.ensureContainer(CONTAINER);
    const queues = new QueueStore({ connectionString: azurite.connectionString });
    await ensureWorkQueues(queues, 'bk');
    const capture: CaptureBenchDeps = {
      ...{ store: plain, queues, queue: workQueueNames('bk').queue, blobs, container: CONTAINER },
      ...{ model: compiled.model, tablePrefix: 'bk', schemaHash: layout.hash },
    };
    // Capture begins before the snapshot (a restore to a time uses a snapshot taken since): its first pass.
    await runCapturePass({ ...capture, subscriptionRetentionMs: 3_600_000 });
    const types = [...compiled.model.entities.values()].filter((e) => !e.implementations && !e.layout.tableTemplate);

    // Baseline 1: the same pages read, each as gzip NDJSON uploaded.
    let rawStarted = performance.now();
    let rawRows = 0;
    for (const entity of types) {
      let token: string | undefined;
      let n = 0;
      do {
        const page = await plain.scanPage(entity.layout.table, token, { entityType: entity.entityType });
        const text = page.entities.map((e) => JSON.stringify(e, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v))).join('\n');
        if (page.entities.length > 0) await blobs.upload(CONTAINER, `raw/${entity.entityType}-${n++}.ndjson.gz`, gzipSync(text), 'application/gzip');
        rawRows += page.entities.length;
        token = page.continuationToken;
      } while (token);
    }
    const rawSnapshotSeconds = (performance.now() - rawStarted) / 1000;

    const snap = counter();
    let started = performance.now();
    const manifest = await takeSnapshot({
      ...{ store: plain, observer: snap.observer, blobs, entityBlobs: blobs, container: CONTAINER, model: compiled.model, tablePrefix: 'bk' },
      ...{ schemaHash: layout.hash, sdl: compiled.sdl, entitiesPerSecond: 0 },
    });
    const snapshotSeconds = (performance.now() - started) / 1000;

    // Baseline 2: a raw copy of the same entities, page by page, SDK EGTs of upserts, 8 in flight.
    rawStarted = performance.now();
    const copied = await rawCopy(
      plain,
      azurite.connectionString,
      'rw',
      types.map((e) => ({ table: e.layout.table, entityType: e.entityType })),
    );
    const rawCopySeconds = (performance.now() - rawStarted) / 1000;
    // Baseline 3: a raw copy of every table of the deployment, derived entities included: what a whole restore makes.
    rawStarted = performance.now();
    const copiedAll = await rawCopy(
      plain,
      azurite.connectionString,
      'ra',
      compiled.model.tables.map((table) => ({ table })),
    );
    const rawAllSeconds = (performance.now() - rawStarted) / 1000;

    const rest = counter();
    started = performance.now();
    const progress = await restoreProgress({ blobs, container: CONTAINER, manifest, targetPrefix: 'rs' });
    await restoreRows(
      {
        ...{ target: plain, observer: rest.observer, model: restored.model, blobs, entityBlobs: blobs, container: CONTAINER, manifest },
        ...{ targetPrefix: 'rs', concurrency: IN_FLIGHT },
      },
      progress,
    );
    const restoreSeconds = (performance.now() - started) / 1000;
    // The rest of the whole restore, as `npm run restore` runs it: the schema recorded, every derived path built, verify.
    const whole = await buildAndVerify(plain, blobs, target);

    const rate = (n: number, s: number) => Math.round(n / s).toLocaleString('en-US');
    const row = (name: string, n: number, s: number) =>
      console.log(`${name.padEnd(58)} ${String(n).padStart(8)} ${s.toFixed(2).padStart(8)} ${rate(n, s).padStart(10)}`);
    const bytes = manifest.segments.reduce((n, s) => n + s.bytes, 0);
    console.log(`Chicago file (${imported.entities} entities imported), in-memory Azurite, Node ${process.version}`);
    console.log(`${'run'.padEnd(58)} ${'entities'.padStart(8)} ${'seconds'.padStart(8)} ${'entities/s'.padStart(10)}`);
    row('raw: page reads, gzip NDJSON uploaded per page', rawRows, rawSnapshotSeconds);
    row('snapshot (no budget)', manifest.rows, snapshotSeconds);
    row('raw: page reads + SDK EGT upserts, 8 in flight', copied, rawCopySeconds);
    row('restore: segments read, checked, EGT upserts, 8 in flight', progress.rows, restoreSeconds);
    console.log(`ratio snapshot / raw (raw seconds / snapshot seconds): ${(rawSnapshotSeconds / snapshotSeconds).toFixed(2)}x`);
    console.log(`ratio restore / raw copy (raw seconds / restore seconds): ${(rawCopySeconds / restoreSeconds).toFixed(2)}x`);
    row('raw: every table of the deployment copied, 8 in flight', copiedAll, rawAllSeconds);
    const wholeSeconds = restoreSeconds + whole.seconds + whole.verifySeconds;
    console.log(
      `whole restore: rows ${restoreSeconds.toFixed(1)} s + builds (${whole.ready}, ${UNSERVED_PREFIX_BUILDS.runners} at once, no budget) ${whole.seconds.toFixed(1)} s + verify ${whole.verifySeconds.toFixed(1)} s (${whole.ok ? 'ok' : 'NOT ok'}) = ${wholeSeconds.toFixed(1)} s`,
    );
    console.log(`ratio whole restore / raw copy of every table (raw seconds / restore seconds): ${(rawAllSeconds / wholeSeconds).toFixed(2)}x`);
    console.log(
      `snapshot: ${manifest.segments.length} segments, ${(bytes / 1024 / 1024).toFixed(2)} MiB (${(bytes / manifest.rows).toFixed(0)} bytes per entity), ${snap.calls()} table round trips; restore: ${rest.calls()} table round trips`,
    );
    await continuous(capture, { plain, blobs, rawCopySeconds, copied, env });
  } finally {
    await azurite.stop();
  }
}

/** Every imported employee's keys (one scan of the Directory table). */
async function employeeKeys(store: TableStore, table: string): Promise<EmployeeKey[]> {
  const keys: EmployeeKey[] = [];
  for await (const page of store.scan(table, { entityType: 'Employee', select: ['departmentId', 'id'] }))
    for (const e of page) keys.push({ departmentId: String(e.properties.departmentId), id: String(e.properties.id) });
  return keys;
}

/** A prefix's schema recorded over what a restore wrote, its derived paths built here, and verify: seconds and outcome. */
async function buildAndVerify(
  store: TableStore,
  blobs: BlobStore,
  config: Config,
): Promise<{ seconds: number; verifySeconds: number; ready: string; ok: boolean }> {
  const started = performance.now();
  const compiled = compileConfiguredSchema(config);
  const catalogue = new Catalogue(store, config.tablePrefix);
  const layout = schemaLayout(compiled.model, compiled.schema);
  await deploySchema({ catalogue, schema: layout, sdl: compiled.sdl });
  const log = createLogger({ level: 'silent' });
  const paths = await runBuildsHere({ catalogue, store, blobs, model: compiled.model, layout, config, log, command: 'bench', ...UNSERVED_PREFIX_BUILDS });
  const seconds = (performance.now() - started) / 1000;
  const verifyStarted = performance.now();
  const report = await verifyDerived({ store, model: compiled.model });
  const verifySeconds = (performance.now() - verifyStarted) / 1000;
  return { seconds, verifySeconds, ready: `${paths.filter((p) => p.state === 'ready').length} of ${paths.length} paths ready`, ok: report.ok };
}

/**
 * The raw baseline: every entity of `sources` (of one EntityType, or all) read page by page and written under the
 * table name with `prefix` for its first two letters, with the SDK's EGTs of upserts, 8 in flight. @returns entities copied
 */
async function rawCopy(plain: TableStore, connectionString: string, prefix: string, sources: Array<{ table: string; entityType?: string }>): Promise<number> {
  let copied = 0;
  const limit = pLimit(IN_FLIGHT);
  for (const { table, entityType } of sources) {
    const to = `${prefix}${table.slice(2)}`;
    await plain.ensureTable(to);
    const client = TableClient.fromConnectionString(connectionString, to, { allowInsecureConnection: true });
    let token: string | undefined;
    do {
      const page = await plain.scanPage(table, token, entityType ? { entityType } : {});
      const writes = page.entities.map((e) => ({ table: to, entity: { partitionKey: e.partitionKey, rowKey: e.rowKey, properties: typed(e.properties) } }));
      await Promise.all(
        planEgtBatches(writes, 'azurite').map((b) =>
          limit(async () => {
            const actions: TransactionAction[] = b.writes.map((w) => ['upsert', toSdkEntity(w.entity), 'Replace']);
            await client.submitTransaction(actions);
            copied += actions.length;
          }),
        ),
      );
      token = page.continuationToken;
    } while (token);
  }
  return copied;
}

/** Continuous backup: capture's cost, its lag at 50 writes/s, a restore to T, and one deleted department brought back. */
async function continuous(
  deps: CaptureBenchDeps,
  run: { plain: TableStore; blobs: BlobStore; rawCopySeconds: number; copied: number; env: Record<string, string> },
): Promise<void> {
  const employees = await employeeKeys(run.plain, 'bkDirectory');
  // Employees are followed by a subscription (their writes keep a change entity already: capture adds its image);
  // departments are not (capture adds a change entity).
  const salaries = (from: number): CostWrite[] =>
    employees.slice(from, from + 200).map((e, i) => ['Mutation.updateEmployee', { ...e, annualSalary: `${50_000 + i}` }]);
  const departments = [...new Set(employees.map((e) => e.departmentId))];
  const names: CostWrite[] = departments.map((id) => ['Mutation.updateDepartment', { id, name: id }]);
  for (const [type, off, on] of [
    ['Employee (followed by a subscription)', await writeCost(deps, salaries(0), false), await writeCost(deps, salaries(200), true)],
    ['Department', await writeCost(deps, names, false), await writeCost(deps, names, true)],
  ] as const) {
    console.log(
      `capture's cost per update of ${type}, one at a time: entities written ${off.entitiesWritten.toFixed(2)} off, ${on.entitiesWritten.toFixed(2)} on ` +
        `(+${(on.entitiesWritten - off.entitiesWritten).toFixed(2)}, in the same EGT); transactions ${off.transactions.toFixed(2)} off, ${on.transactions.toFixed(2)} on; ` +
        `round trips ${off.roundTrips.toFixed(2)} off, ${on.roundTrips.toFixed(2)} on`,
    );
  }
  const load = await captureUnderLoad(deps, employees, { perSecond: 50, seconds: 60, intervalMs: 10_000 });
  const lags = captureLags(load);
  console.log(
    `capture under load: ${load.acks.length} writes in ${load.seconds.toFixed(1)} s (${(load.acks.length / load.seconds).toFixed(1)}/s, ${load.errors} errors), ${load.passes.length} passes; ` +
      `lag acknowledged → durable segment: p50 ${(percentile(lags, 50) / 1000).toFixed(1)} s, p99 ${(percentile(lags, 99) / 1000).toFixed(1)} s, max ${(Math.max(...lags) / 1000).toFixed(1)} s`,
  );

  // One department deleted after T, its employees first (through the write path: captured).
  const counts = new Map<string, EmployeeKey[]>();
  for (const e of employees) counts.set(e.departmentId, [...(counts.get(e.departmentId) ?? []), e]);
  const [dept, staff] = [...counts].filter(([, list]) => list.length >= 5).sort((a, b) => a[1].length - b[1].length)[0];
  const w = new WriteExecutor({
    model: deps.model,
    store: deps.store,
    workQueue: queueSender(deps.queues, deps.queue),
    capture: true,
    tablePrefix: deps.tablePrefix,
  });
  for (const e of staff) await w.execute(deps.model.writes.get('Mutation.deleteEmployee')!, { ...e });
  await w.execute(deps.model.writes.get('Mutation.deleteDepartment')!, { id: dept });
  await runCapturePass({ ...deps, subscriptionRetentionMs: 3_600_000 });
  const at = new Date(load.t).toISOString();

  // A restore to T of every entity: the snapshot's rows, and of each entity changed since, its last change by T.
  const target = loadConfig({ ...run.env, TABLEGRAPH_TABLE_PREFIX: 'pt', TABLEGRAPH_BUILD_ENTITIES_PER_SECOND: '0' });
  const pit = await pointInTime(run.blobs, CONTAINER, at);
  let started = performance.now();
  const changes = await changesAsOf(run.blobs, CONTAINER, pit);
  const progress = await restoreProgress({ blobs: run.blobs, container: CONTAINER, manifest: pit.snapshot, targetPrefix: 'pt', at });
  await restoreRows(
    {
      ...{ target: run.plain, model: compileConfiguredSchema(target).model, blobs: run.blobs, entityBlobs: run.blobs, container: CONTAINER },
      ...{ manifest: pit.snapshot, targetPrefix: 'pt', concurrency: IN_FLIGHT, pointInTime: { at, changes } },
    },
    progress,
  );
  const pitSeconds = (performance.now() - started) / 1000;
  const built = await buildAndVerify(run.plain, run.blobs, target);
  console.log(
    `restore to T (${pit.passes.length} passes, ${changes.size} entities changed since the snapshot): ${progress.rows} entities in ${pitSeconds.toFixed(2)} s ` +
      `(${Math.round(progress.rows / pitSeconds)}/s; ratio to the raw copy: ${(run.rawCopySeconds / run.copied / (pitSeconds / progress.rows)).toFixed(2)}x); ` +
      `builds ${built.ready} in ${built.seconds.toFixed(1)} s; verify ${built.ok ? 'ok' : 'NOT ok'}`,
  );

  // The deleted department brought back alone, while writes go on at the source.
  const one = loadConfig({ ...run.env, TABLEGRAPH_TABLE_PREFIX: 'dp', TABLEGRAPH_BUILD_ENTITIES_PER_SECOND: '0' });
  const filter = { partitions: [dept] };
  let writing = true;
  let sourceWrites = 0;
  const others = employees.filter((e) => e.departmentId !== dept);
  const background = (async () => {
    for (let i = 0; writing; i++) {
      await w.execute(deps.model.writes.get('Mutation.updateEmployee')!, { ...others[i % others.length], annualSalary: `${70_000 + i}` });
      sourceWrites++;
    }
  })();
  started = performance.now();
  const deptChanges = await changesAsOf(run.blobs, CONTAINER, pit, filter);
  const deptProgress = await restoreProgress({ blobs: run.blobs, container: CONTAINER, manifest: pit.snapshot, targetPrefix: 'dp', filter, at });
  await restoreRows(
    {
      ...{ target: run.plain, model: compileConfiguredSchema(one).model, blobs: run.blobs, entityBlobs: run.blobs, container: CONTAINER },
      ...{ manifest: pit.snapshot, targetPrefix: 'dp', filter, concurrency: IN_FLIGHT, pointInTime: { at, changes: deptChanges } },
    },
    deptProgress,
  );
  const deptBuilt = await buildAndVerify(run.plain, run.blobs, one);
  writing = false;
  await background;
  const back = await employeeKeys(run.plain, 'dpDirectory');
  const head = await run.plain.getEntity({ table: 'dpDirectory', partitionKey: dept, rowKey: 'department' });
  console.log(
    `department ${dept} (${staff.length} employees) deleted after T, restored to T alone: ${back.length} employees and the department ${head ? 'back' : 'MISSING'} ` +
      `in ${((performance.now() - started) / 1000).toFixed(1)} s (builds ${deptBuilt.ready}; verify ${deptBuilt.ok ? 'ok' : 'NOT ok'}); the source took ${sourceWrites} writes meanwhile`,
  );
}

/** A read entity's properties typed back for the SDK (the raw loop's own, simple mapping). */
function typed(properties: Record<string, unknown>) {
  const out: Record<string, { type: 'String' | 'Int32' | 'Int64' | 'Double' | 'Boolean' | 'DateTime' | 'Binary'; value: never }> = {};
  for (const [k, v] of Object.entries(properties)) {
    const type =
      typeof v === 'bigint'
        ? 'Int64'
        : typeof v === 'boolean'
          ? 'Boolean'
          : v instanceof Date
            ? 'DateTime'
            : v instanceof Uint8Array
              ? 'Binary'
              : typeof v === 'number'
                ? Number.isInteger(v)
                  ? 'Int32'
                  : 'Double'
                : 'String';
    out[k] = { type, value: v as never };
  }
  return out;
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
