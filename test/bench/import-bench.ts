/**
 * Import benchmark: `npx tsx test/bench/import-bench.ts [concurrency]` (not part of `npm test`).
 *
 * On its own in-memory Azurite: importEmployees — the Chicago mapping on the generic loader (src/load/) — loads
 * the Chicago file into tables of prefix A (EGTs in parallel, default 8 in flight); then the baseline writes the
 * entities A holds, already built in memory (no file to read, nothing to check), into tables of prefix B with a
 * plain loop over the SDK, `TableClient.submitTransaction` with `['upsert', entity, 'Replace']` actions, one EGT
 * (grouped by planEgtBatches) at a time. Prints entities, EGTs, seconds, entities/s and storage round trips of each,
 * the ratio of wall times for the same stored content, and checks that both prefixes hold identical entities.
 */
import { createHash } from 'node:crypto';
import { TableClient, TableServiceClient, type TransactionAction } from '@azure/data-tables';
import { importEmployees } from '../../examples/hr/import/import-employees';
import type { TableWrite } from '../../src/model/entity-codec';
import { planEgtBatches } from '../../src/write/egt-batches';
import type { Model } from '../../src/model/types';
import { startAzurite } from '../../src/storage/azurite';
import { toSdkEntity } from '../../src/storage/edm';
import { TableStore } from '../../src/storage/table-store';
import type { StorageObserver } from '../../src/storage/storage-types';
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

/** Every entity of the model's tables, as writes into the same tables of another prefix. */
async function storedWrites(store: TableStore, from: Model, to: Model): Promise<TableWrite[]> {
  const writes: TableWrite[] = [];
  for (const [i, table] of from.tables.entries()) {
    for await (const page of store.scan(table)) {
      for (const e of page) {
        const properties = Object.fromEntries(Object.entries(e.properties).map(([k, v]) => [k, typed(v)]));
        writes.push({ table: to.tables[i], entity: { partitionKey: e.partitionKey, rowKey: e.rowKey, properties } });
      }
    }
  }
  return writes;
}

/** A stored property value with the EDM type it was read as. */
function typed(v: unknown): TableWrite['entity']['properties'][string] {
  if (typeof v === 'bigint') return { type: 'Int64', value: v };
  if (v instanceof Date) return { type: 'DateTime', value: v };
  if (typeof v === 'boolean') return { type: 'Boolean', value: v };
  if (typeof v === 'number') return Number.isInteger(v) ? { type: 'Int32', value: v } : { type: 'Double', value: v };
  return { type: 'String', value: String(v) };
}

async function baselineRun(connectionString: string, writes: TableWrite[]): Promise<Run> {
  const clients = new Map<string, TableClient>();
  const client = (table: string) => {
    let c = clients.get(table);
    if (!c) clients.set(table, (c = TableClient.fromConnectionString(connectionString, table, { allowInsecureConnection: true })));
    return c;
  };
  const started = performance.now();
  let entities = 0;
  let transactions = 0;
  for (const batch of planEgtBatches(writes, 'azurite')) {
    const actions: TransactionAction[] = batch.writes.map((w) => ['upsert', toSdkEntity(w.entity), 'Replace']);
    await client(batch.table).submitTransaction(actions);
    entities += actions.length;
    transactions++;
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
    const baseline = await baselineRun(azurite.connectionString, await storedWrites(store, a, b));
    const [da, db] = [await digest(store, a), await digest(store, b)];

    console.log(`Chicago file, in-memory Azurite 3.37, Node ${process.version}`);
    console.log(
      `${'run'.padEnd(46)} ${'entities'.padStart(8)} ${'EGTs'.padStart(6)} ${'seconds'.padStart(8)} ${'entities/s'.padStart(10)} ${'round trips'.padStart(11)}`,
    );
    console.log(row(imported));
    console.log(row(baseline));
    const ratio = baseline.seconds / imported.seconds;
    console.log(
      `ratio (baseline seconds / import seconds, same stored content): ${ratio.toFixed(2)}x; round trips ${imported.roundTrips} vs ${baseline.roundTrips} (+${a.tables.length} table creations each)`,
    );
    console.log(`stored: A ${da.entities} entities (${da.hash}), B ${db.entities} entities (${db.hash}): ${da.hash === db.hash ? 'identical' : 'DIFFERENT'}`);
    if (da.hash !== db.hash) process.exitCode = 1;
  } finally {
    await azurite.stop();
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
