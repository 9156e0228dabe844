/**
 * Backup benchmark: `npx tsx test/bench/backup-bench.ts` (not part of `npm test`; `npm run bench -- backup`).
 *
 * On its own in-memory Azurite: the 32,928 Chicago employees imported under the HR schema as shipped, then
 * (src/backup/) a snapshot of every primary entity into Blob segments, and a restore of its rows under a new table
 * prefix. The baselines, in the same run: for the snapshot, a raw loop of the same page reads (the SDK's pages,
 * filtered on EntityType) whose rows are gzip-compressed as NDJSON and uploaded, one blob per page; for the restore's
 * writes, a raw copy of the same entities — each page of the source read and written with the SDK's
 * `TableClient.submitTransaction` (upserts), 8 EGTs in flight. Then the restore's builds of every derived path and
 * `verify`. Prints each rate, the ratios, the storage calls and the bytes stored.
 */
import { gzipSync } from 'node:zlib';
import pLimit from 'p-limit';
import { TableClient, type TransactionAction } from '@azure/data-tables';
import { importEmployees } from '../../examples/hr/import/import-employees';
import { takeSnapshot } from '../../src/backup/snapshot';
import { restoreProgress, restoreRows } from '../../src/backup/restore';
import { Catalogue } from '../../src/evolution/catalogue';
import { deploySchema, schemaLayout } from '../../src/evolution/deployment';
import { runBuildsHere } from '../../src/evolution/run-builds';
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
    let copied = 0;
    const limit = pLimit(IN_FLIGHT);
    for (const entity of types) {
      const to = `rw${entity.layout.table.slice(2)}`;
      await plain.ensureTable(to);
      const client = TableClient.fromConnectionString(azurite.connectionString, to, { allowInsecureConnection: true });
      let token: string | undefined;
      do {
        const page = await plain.scanPage(entity.layout.table, token, { entityType: entity.entityType });
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
    const rawCopySeconds = (performance.now() - rawStarted) / 1000;

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
    started = performance.now();
    const catalogue = new Catalogue(plain, 'rs');
    const restoredLayout = schemaLayout(restored.model, restored.schema);
    await deploySchema({ catalogue, schema: restoredLayout, sdl: restored.sdl });
    const log = createLogger({ level: 'silent' });
    const paths = await runBuildsHere({ catalogue, store: plain, blobs, model: restored.model, layout: restoredLayout, config: target, log, command: 'bench' });
    const buildSeconds = (performance.now() - started) / 1000;
    const report = await verifyDerived({ store: plain, model: restored.model });

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
    console.log(
      `snapshot: ${manifest.segments.length} segments, ${(bytes / 1024 / 1024).toFixed(2)} MiB (${(bytes / manifest.rows).toFixed(0)} bytes per entity), ${snap.calls()} table round trips; restore: ${rest.calls()} table round trips`,
    );
    console.log(
      `restore's builds (no budget): ${paths.length} paths, ${paths.filter((p) => p.state === 'ready').length} ready, in ${buildSeconds.toFixed(1)} s; verify ${report.ok ? 'ok' : 'NOT ok'}`,
    );
  } finally {
    await azurite.stop();
  }
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
