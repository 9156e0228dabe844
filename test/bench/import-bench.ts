/**
 * Import benchmark: `npx tsx test/bench/import-bench.ts [concurrency]` (not part of `npm test`).
 *
 * On its own in-memory Azurite: importEmployees loads the Chicago file into tables of prefix A (EGTs in
 * parallel, default 8 in flight); then the baseline writes the same entities — the same ImportPlan, so the same
 * EGT batches, typed the same way — into tables of prefix B with a plain loop over the SDK,
 * `TableClient.submitTransaction` with `['upsert', entity, 'Replace']` actions, one EGT at a time. Both include
 * reading and parsing the file. Prints entities, EGTs, seconds, entities/s and storage round trips of each, the
 * ratio, and checks that both prefixes hold identical entities.
 */
import { createHash } from 'node:crypto';
import { TableClient, TableServiceClient, type TransactionAction } from '@azure/data-tables';
import { ImportPlan, importEmployees } from '../../src/import/import-employees';
import type { Model } from '../../src/model/types';
import { startAzurite } from '../../src/storage/azurite';
import { toSdkEntity } from '../../src/storage/edm';
import { TableStore } from '../../src/storage/table-store';
import type { StorageObserver } from '../../src/storage/types';
import { CHICAGO_CSV, compileHr } from '../support/harness';

interface Run {
  name: string;
  entities: number;
  transactions: number;
  seconds: number;
  roundTrips: number;
}

/** Entity count and a hash of every entity's keys and properties (WriteId aside), over all of a model's tables. */
async function digest(store: TableStore, model: Model): Promise<{ entities: number; hash: string }> {
  const lines: string[] = [];
  for (const [i, table] of model.tables.entries()) {
    for await (const page of store.scan(table)) {
      // Without WriteId: every write has an id of its own, so the two sides never share it.
      for (const e of page) {
        const { WriteId: _w, ...properties } = e.properties;
        lines.push(JSON.stringify([i, e.partitionKey, e.rowKey, Object.entries(properties).sort()]));
      }
    }
  }
  lines.sort();
  return { entities: lines.length, hash: createHash('sha256').update(lines.join('\n')).digest('hex').slice(0, 16) };
}

async function importRun(store: TableStore, model: Model, concurrency: number): Promise<Run> {
  let roundTrips = 0;
  const observer: StorageObserver = { onCall: (r) => void (roundTrips += r.roundTrips) };
  const s = await importEmployees({ store, model, file: CHICAGO_CSV, concurrency, observer });
  return { name: `importEmployees (${concurrency} EGTs in flight)`, entities: s.entities, transactions: s.transactions, seconds: s.seconds, roundTrips };
}

async function baselineRun(connectionString: string, model: Model): Promise<Run> {
  const clients = new Map<string, TableClient>();
  const client = (table: string) => {
    let c = clients.get(table);
    if (!c) clients.set(table, (c = TableClient.fromConnectionString(connectionString, table, { allowInsecureConnection: true })));
    return c;
  };
  const started = performance.now();
  let entities = 0;
  let transactions = 0;
  for await (const { batches } of new ImportPlan(model, CHICAGO_CSV, 'azurite').batches()) {
    for (const batch of batches) {
      const actions: TransactionAction[] = batch.writes.map((w) => ['upsert', toSdkEntity(w.entity), 'Replace']);
      await client(batch.table).submitTransaction(actions);
      entities += actions.length;
      transactions++;
    }
  }
  const seconds = (performance.now() - started) / 1000;
  return { name: 'baseline: sequential SDK submitTransaction', entities, transactions, seconds, roundTrips: transactions };
}

function row(r: Run): string {
  const perSecond = Math.round(r.entities / r.seconds);
  return `${r.name.padEnd(46)} ${String(r.entities).padStart(8)} ${String(r.transactions).padStart(6)} ${r.seconds.toFixed(2).padStart(8)} ${String(perSecond).padStart(10)} ${String(r.roundTrips).padStart(11)}`;
}

async function main(): Promise<void> {
  const concurrency = Number(process.argv[2] ?? 8);
  const azurite = await startAzurite({ inMemory: true });
  try {
    const store = new TableStore({ connectionString: azurite.connectionString, target: 'azurite', timeoutMs: 60_000 });
    const a = compileHr('benchA').model;
    const b = compileHr('benchB').model;
    const service = TableServiceClient.fromConnectionString(azurite.connectionString, { allowInsecureConnection: true });
    // Tables first, on both sides, outside the timings: each is one round trip.
    for (const t of a.tables) await store.ensureTable(t);
    for (const t of b.tables) await service.createTable(t);

    const imported = await importRun(store, a, concurrency);
    const baseline = await baselineRun(azurite.connectionString, b);
    const [da, db] = [await digest(store, a), await digest(store, b)];

    console.log(`Chicago file, in-memory Azurite 3.37, Node ${process.version}`);
    console.log(`${'run'.padEnd(46)} ${'entities'.padStart(8)} ${'EGTs'.padStart(6)} ${'seconds'.padStart(8)} ${'entities/s'.padStart(10)} ${'round trips'.padStart(11)}`);
    console.log(row(imported));
    console.log(row(baseline));
    const ratio = imported.entities / imported.seconds / (baseline.entities / baseline.seconds);
    console.log(`ratio (import / baseline entities/s): ${ratio.toFixed(2)}x; round trips ${imported.roundTrips} vs ${baseline.roundTrips} (+${a.tables.length} table creations each)`);
    console.log(`stored: A ${da.entities} entities (${da.hash}), B ${db.entities} entities (${db.hash}): ${da.hash === db.hash ? 'identical' : 'DIFFERENT'}`);
    if (da.hash !== db.hash || imported.entities !== baseline.entities) process.exitCode = 1;
  } finally {
    await azurite.stop();
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
