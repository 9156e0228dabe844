/**
 * Schema change benchmark: `npx tsx test/bench/migrate-bench.ts` (not part of `npm test`; `npm run bench -- migrate`).
 *
 * On its own in-memory Azurite: the 32,928 Chicago employees imported under the HR schema as shipped (version 1),
 * then version 2 — the same schema with an organisation-wide index by first name — deployed, and its index built
 * online (src/evolution/) by a build runner with no budget while a server serves point queries (8 in flight). The
 * baseline, in the same run under the same query load: a raw loop of the same work — each page of employees read
 * (the same $select), the same index entities derived and inserted into a table of its own with the SDK's
 * `TableClient.submitTransaction`, 8 EGTs in flight, one page after another. Prints the rates and their ratio, the build's storage calls,
 * and the point queries' p50/p99 before, during the raw loop and during the build; then `verify` of the index.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pLimit from 'p-limit';
import { Pool } from 'undici';
import { TableClient, type TransactionAction } from '@azure/data-tables';
import { importEmployees } from '../../examples/hr/import/import-employees';
import { loadConfig } from '../../src/runtime/config';
import { createLogger } from '../../src/log';
import { indexWrites, valuesOf } from '../../src/model/entity-codec';
import { BuildRunner } from '../../src/evolution/build-runner';
import { Catalogue } from '../../src/evolution/catalogue';
import { CatalogueRowsBoard } from '../../src/evolution/presence';
import { deploySchema, schemaLayout } from '../../src/evolution/deployment';
import { verifyDerived } from '../../src/maintenance/verify-derived';
import { compileConfiguredSchema } from '../../src/runtime/configured-schema';
import { startServer } from '../../src/runtime/start-server';
import { startAzurite } from '../../src/storage/azurite';
import { toSdkEntity } from '../../src/storage/edm';
import { TableStore } from '../../src/storage/table-store';
import type { StorageCallRecord } from '../../src/storage/storage-types';
import { planEgtBatches } from '../../src/write/egt-batches';
import { CHICAGO_CSV, DIRECTIVES_FILE, SCHEMA_DIR } from '../support/harness';
import { benchStorage } from './bench-storage';

const PREFIX = 'mig';
const IN_FLIGHT = 8;
const NEW_INDEX =
  '  @index(name: "byFirstName", table: "EmployeesByFirstName", partitionKey: "fn_{firstName:hash16}", rowKey: "{firstName}_{departmentId}_{id:08}", include: ["firstName", "lastName", "title", "email"])\n';

/** The HR schema with `indexes` added on Employee, in a folder of its own. */
function schemaWithNewIndex(indexes = NEW_INDEX): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-migrate-bench-'));
  for (const f of fs.readdirSync(SCHEMA_DIR)) {
    const from = path.join(SCHEMA_DIR, f);
    if (fs.statSync(from).isFile() && f.endsWith('.graphql')) fs.copyFileSync(from, path.join(dir, f));
  }
  fs.copyFileSync(DIRECTIVES_FILE, path.join(dir, 'directives.graphql'));
  const file = path.join(dir, 'hr.graphql');
  const sdl = fs.readFileSync(file, 'utf8');
  const anchor = sdl.indexOf('  @index(name: "byTitle"');
  if (anchor < 0) throw new Error('the HR schema no longer has the byTitle index this benchmark inserts after');
  const lineEnd = sdl.indexOf('\n', anchor) + 1;
  fs.writeFileSync(file, sdl.slice(0, lineEnd) + indexes + sdl.slice(lineEnd));
  return dir;
}

/** Point queries at `in flight` until `done` resolves: each one's latency (ms). */
async function pointLoad(url: string, employee: { departmentId: string; id: string }, done: Promise<unknown>): Promise<number[]> {
  const pool = new Pool(url, { connections: IN_FLIGHT });
  const body = JSON.stringify({
    query: 'query($d: ID!, $id: ID!) { employee(departmentId: $d, id: $id) { id firstName lastName title } }',
    variables: { d: employee.departmentId, id: employee.id },
  });
  const latencies: number[] = [];
  let running = true;
  void done.finally(() => (running = false));
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (running) {
        const t = performance.now();
        const res = await pool.request({ path: '/graphql', method: 'POST', headers: { 'content-type': 'application/json' }, body });
        const json = (await res.body.json()) as { errors?: unknown };
        if (json.errors) throw new Error(JSON.stringify(json.errors));
        latencies.push(performance.now() - t);
      }
    }),
  );
  await pool.close();
  return latencies;
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
};

async function main(): Promise<void> {
  const azurite = await startAzurite({ inMemory: true });
  const dir = schemaWithNewIndex();
  try {
    let calls = 0;
    let entitiesRead = 0;
    const store = new TableStore({ connectionString: azurite.connectionString, target: 'azurite', timeoutMs: 60_000 });
    const v1 = loadConfig({ AZURE_STORAGE_CONNECTION_STRING: azurite.connectionString, TABLEGRAPH_TABLE_PREFIX: PREFIX, TABLEGRAPH_SCHEMA_DIR: SCHEMA_DIR });
    const v2 = loadConfig({
      AZURE_STORAGE_CONNECTION_STRING: azurite.connectionString,
      TABLEGRAPH_TABLE_PREFIX: PREFIX,
      TABLEGRAPH_SCHEMA_DIR: dir,
      TABLEGRAPH_WORKER: 'off',
      TABLEGRAPH_RATE_LIMIT: '100000000',
      TABLEGRAPH_CURSOR_SECRET: 'bench',
      PORT: '0',
    });
    const before = compileConfiguredSchema(v1);
    const after = compileConfiguredSchema(v2);
    for (const t of before.model.tables) await store.ensureTable(t);
    // Version 1 recorded before its first entity, as `npm run import` records it: over entities written by no
    // recorded schema, every derived path would be built again (none is assumed built), not only the new index.
    const catalogue = new Catalogue(store, PREFIX);
    await deploySchema({ catalogue, schema: schemaLayout(before.model, before.schema), sdl: before.sdl });
    const imported = await importEmployees({ store, model: before.model, file: CHICAGO_CSV, concurrency: 8 });
    const stale = (await catalogue.paths()).filter((p) => p.state !== 'ready').map((p) => p.id);
    if (stale.length > 0) throw new Error(`version 1 has paths not ready before the change: ${stale.join(', ')}`);
    const deployed = await deploySchema({ catalogue, schema: schemaLayout(after.model, after.schema), sdl: after.sdl });
    const index = after.model.entities.get('Employee')!.indexes.get('byFirstName')!;
    const server = await startServer(v2, benchStorage(azurite.connectionString), createLogger({ level: 'silent' }));
    const url = server.url.replace('/graphql', '');
    const first = (await store.scanPage(index.entity.layout.table, undefined, { entityType: index.entity.entityType, pageSize: 1 })).entities[0];
    const employee = { departmentId: String(first.properties.departmentId), id: String(first.properties.id) };

    // Before: point queries alone.
    const idle = await pointLoad(url, employee, new Promise((r) => setTimeout(r, 5000)));

    // The baseline: the same pages read, the same index entities inserted, with the SDK and nothing else.
    const rawTable = `${PREFIX}RawByFirstName`;
    await store.ensureTable(rawTable);
    const client = TableClient.fromConnectionString(azurite.connectionString, rawTable, { allowInsecureConnection: true });
    // The same $select the build uses: only what the index entity is made of.
    const select = [
      ...new Set(['EntityType', ...index.entity.keyFields, ...index.layout.partitionKey.fields, ...index.layout.rowKey.fields, ...index.projection]),
    ];
    const raw = (async () => {
      const started = performance.now();
      let written = 0;
      const limit = pLimit(IN_FLIGHT);
      let token: string | undefined;
      do {
        const page = await store.scanPage(index.entity.layout.table, token, { entityType: index.entity.entityType, select });
        const writes = page.entities.flatMap((e) => {
          return indexWrites(index, valuesOf(index.entity, e.properties)).map((w) => ({ ...w, table: rawTable }));
        });
        await Promise.all(
          planEgtBatches(writes, 'azurite').map((b) =>
            limit(async () => {
              const actions: TransactionAction[] = b.writes.map((w) => ['create', toSdkEntity(w.entity)]);
              await client.submitTransaction(actions);
              written += actions.length;
            }),
          ),
        );
        token = page.continuationToken;
      } while (token);
      return { seconds: (performance.now() - started) / 1000, written };
    })();
    const duringRaw = await pointLoad(url, employee, raw);
    const rawRun = await raw;

    // The build, with no budget, observed by a store of its own to count its calls.
    const observer = {
      onCall(r: StorageCallRecord) {
        calls += r.roundTrips;
        if (r.kind === 'tableScan') entitiesRead += r.entities;
      },
    };
    const runner = new BuildRunner({
      catalogue,
      store,
      observer,
      model: after.model,
      layout: schemaLayout(after.model, after.schema).layout,
      instance: 'bench',
      entitiesPerSecond: 0,
      concurrency: IN_FLIGHT,
      presence: new CatalogueRowsBoard(catalogue),
    });
    const build = (async () => {
      const started = performance.now();
      await runner.runOnce();
      return (performance.now() - started) / 1000;
    })();
    const duringBuild = await pointLoad(url, employee, build);
    const buildSeconds = await build;
    const row = (await catalogue.path('index:Employee.byFirstName'))!;

    // Version 3, one more index, built at the default budget (500 entities/s) for 10 s: what serving notices of it.
    const dir3 = schemaWithNewIndex(
      NEW_INDEX + NEW_INDEX.replaceAll('byFirstName', 'byFirstNameAgain').replace('EmployeesByFirstName', 'EmployeesByFirstNameAgain'),
    );
    const v3 = compileConfiguredSchema({ ...v2, schemaDir: dir3 });
    fs.rmSync(dir3, { recursive: true, force: true });
    await deploySchema({ catalogue, schema: schemaLayout(v3.model, v3.schema), sdl: v3.sdl });
    const budgeted = new BuildRunner({
      catalogue,
      store,
      model: v3.model,
      layout: schemaLayout(v3.model, v3.schema).layout,
      instance: 'bench-budget',
      pollMs: 200,
      presence: new CatalogueRowsBoard(catalogue),
    });
    budgeted.start();
    const duringBudgeted = await pointLoad(url, employee, new Promise((r) => setTimeout(r, 10_000)));
    await budgeted.stop();
    const budgetedRow = (await catalogue.path('index:Employee.byFirstNameAgain'))!;
    await server.close();
    const report = await verifyDerived({ store, model: after.model, types: ['Employee'] });
    const byFirstName = report.indexes.find((d) => d.index === 'byFirstName')!;

    const rate = (n: number, s: number) => Math.round(n / s).toLocaleString('en-US');
    console.log(
      `Chicago file (${imported.entities} entities imported), in-memory Azurite, Node ${process.version}; version ${deployed.version}: ${deployed.changes.map((c) => `${c.class} ${c.pathId ?? c.coordinate}`).join(', ')}`,
    );
    console.log(`${'run'.padEnd(52)} ${'written'.padStart(8)} ${'seconds'.padStart(8)} ${'entities/s'.padStart(10)}`);
    console.log(
      `${'raw loop: page reads ($select) + SDK EGT inserts'.padEnd(52)} ${String(rawRun.written).padStart(8)} ${rawRun.seconds.toFixed(2).padStart(8)} ${rate(rawRun.written, rawRun.seconds).padStart(10)}`,
    );
    console.log(
      `${'online build (no budget, 8 EGTs in flight)'.padEnd(52)} ${String(row.written).padStart(8)} ${buildSeconds.toFixed(2).padStart(8)} ${rate(row.written, buildSeconds).padStart(10)}`,
    );
    console.log(`ratio (raw seconds / build seconds, same index entities): ${(rawRun.seconds / buildSeconds).toFixed(2)}x`);
    console.log(
      `build: ${row.read} employees read (${entitiesRead} with the pages' second reads), ${calls} storage calls for its pages plus one checkpoint per page, state ${row.state}`,
    );
    const line = (name: string, xs: number[]) =>
      console.log(
        `${name.padEnd(28)} ${String(xs.length).padStart(7)} queries  p50 ${pct(xs, 50).toFixed(1).padStart(6)} ms  p99 ${pct(xs, 99).toFixed(1).padStart(6)} ms`,
      );
    console.log(`point queries, ${IN_FLIGHT} in flight:`);
    line('  before', idle);
    line('  during the raw loop', duringRaw);
    line('  during the build', duringBuild);
    line('  during a budgeted build', duringBudgeted);
    console.log(`p99 during the build / before: ${(pct(duringBuild, 99) / pct(idle, 99)).toFixed(2)}x`);
    console.log(
      `p99 during the build at the default budget (500 entities/s; ${budgetedRow.written} written in its 10 s) / before: ${(pct(duringBudgeted, 99) / pct(idle, 99)).toFixed(2)}x`,
    );
    console.log(
      `verify byFirstName: ${byFirstName.expected} expected, ${byFirstName.found} found; ${byFirstName.missing.length} missing, ${byFirstName.different.length} different, ${byFirstName.orphaned.length} orphaned`,
    );
    if (row.state !== 'ready' || byFirstName.missing.length + byFirstName.different.length + byFirstName.orphaned.length > 0) process.exitCode = 1;
  } finally {
    await azurite.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
