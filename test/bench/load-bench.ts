/**
 * Load benchmark over many small partitions: `npm run bench -- load [orders]` (not part of `npm test`).
 *
 * A schema of its own (shops' customers and orders, products held elsewhere): each order has an inter-partition
 * index entity per day and a contribution to its product's count, so its rows become entities in thousands of
 * small partitions — the shape on which the loader once ran at half a raw EGT loop. On one in-memory Azurite:
 * 1. a first load into prefix R, recording every EGT it sends (warm-up);
 * 2. the baseline: the same EGTs replayed into prefix A with a raw loop over TableStore.submitTransaction, 8 in
 *    flight, nothing read;
 * 3. a first load into prefix B (8 EGTs in flight), measured;
 * 4. the same files loaded into B again: a no-op, measured.
 * Prints each run's seconds, EGTs, storage round trips and reads, and the ratios: the first load against the raw
 * loop (target ≥ 0.8×), and the no-op reload against the first load (target ≤ 0.3×).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pLimit from 'p-limit';
import { loadEntities, type LoadSummary } from '../../src/load/load-entities';
import type { LoadRow } from '../../src/load/load-rows';
import { compileSchema } from '../../src/compiler/compile';
import { loadSchemaSources } from '../../src/compiler/load-schema';
import type { Model } from '../../src/model/types';
import { startAzurite } from '../../src/storage/azurite';
import { TableStore } from '../../src/storage/table-store';
import type { StorageObserver, TransactionOperation } from '../../src/storage/storage-types';
import { DIRECTIVES_FILE } from '../support/harness';

const ORDERS = Number(process.argv[2] ?? 12_000);
const CUSTOMERS = Math.ceil(ORDERS / 12);
const PRODUCTS = Math.ceil(ORDERS / 6);

const SDL = `
type Customer @entity(table: "Shops", partitionKey: "{customerId}", rowKey: "customer") {
  customerId: ID! name: String!
  orderCount: Int! @summary(of: "Order", via: "customer", count: true)
}
type Product @entity(table: "Products", partitionKey: "{productId}", rowKey: "product") {
  productId: ID! name: String!
  orderCount: Int! @summary(of: "Order", via: "product", count: true)
}
type Order @entity(table: "Shops", partitionKey: "{customerId}", rowKey: "order_{id}")
  @index(name: "byDay", table: "OrdersByDay", partitionKey: "{day}", rowKey: "{customerId}_{id}") {
  customerId: ID! id: ID! day: String! productId: ID! amount: Decimal
  customer: Customer! @point(partitionKey: "{customerId}", rowKey: "customer")
  product: Product! @point(partitionKey: "{productId}", rowKey: "product")
}
type Query { customer(customerId: ID!): Customer @point }`;

function compile(dir: string, prefix: string): Model {
  return compileSchema(loadSchemaSources(dir), { tablePrefix: prefix }).model;
}

async function* rows(values: Array<Record<string, unknown>>): AsyncIterable<LoadRow> {
  for (const [i, v] of values.entries()) yield { line: i + 2, values: v };
}

function steps() {
  const customers = Array.from({ length: CUSTOMERS }, (_, i) => ({ customerId: `c${i}`, name: `Customer ${i}` }));
  const products = Array.from({ length: PRODUCTS }, (_, i) => ({ productId: `p${i}`, name: `Product ${i}` }));
  const orders = Array.from({ length: ORDERS }, (_, i) => ({
    customerId: `c${i % CUSTOMERS}`,
    id: String(i),
    day: `2026-${String((i % 12) + 1).padStart(2, '0')}-${String((i % 28) + 1).padStart(2, '0')}`,
    productId: `p${(i * 7) % PRODUCTS}`,
    amount: `${(i % 500) + 0.5}`,
  }));
  return [
    { type: 'Customer', rows: rows(customers) },
    { type: 'Product', rows: rows(products) },
    { type: 'Order', rows: rows(orders) },
  ];
}

interface Counted {
  roundTrips: number;
  reads: number;
  observer: StorageObserver;
}
function counter(): Counted {
  const c: Counted = {
    roundTrips: 0,
    reads: 0,
    observer: { onCall: (r) => void ((c.roundTrips += r.roundTrips), r.kind !== 'transaction' && r.kind !== 'write' && (c.reads += r.roundTrips)) },
  };
  return c;
}

async function load(store: TableStore, model: Model, c: Counted): Promise<LoadSummary> {
  const s = await loadEntities({ store, model, steps: steps(), concurrency: 8, observer: c.observer });
  if (s.failed.length > 0 || s.steps.some((x) => x.skipped.length > 0))
    throw new Error(`the load did not write everything: ${JSON.stringify(s.steps.map((x) => x.skipped.slice(0, 2)))}`);
  return s;
}

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-load-bench-'));
  fs.copyFileSync(DIRECTIVES_FILE, path.join(dir, 'directives.graphql'));
  fs.writeFileSync(path.join(dir, 'orders.graphql'), SDL);
  const azurite = await startAzurite({ inMemory: true });
  try {
    const store = new TableStore({ connectionString: azurite.connectionString, target: 'azurite' });
    // 1. Warm-up, recording the EGTs a first load sends.
    const recorded: Array<{ table: string; ops: TransactionOperation[] }> = [];
    const submit = store.submitTransaction.bind(store);
    store.submitTransaction = (table, ops, opts) => (recorded.push({ table, ops }), submit(table, ops, opts));
    await load(store, compile(dir, 'R'), counter());
    store.submitTransaction = submit;
    const single = recorded.length;

    // 2. The raw loop: the same EGTs into prefix A, 8 in flight.
    const a = compile(dir, 'A');
    for (const t of a.tables) await store.ensureTable(t);
    const raw = counter();
    const limit = pLimit(8);
    const rawStart = performance.now();
    await Promise.all(recorded.map(({ table, ops }) => limit(() => submit(`A${table.slice(1)}`, ops, { observer: raw.observer }))));
    const rawSeconds = (performance.now() - rawStart) / 1000;

    // 3. and 4. The first load into prefix B, then the same again.
    const b = compile(dir, 'B');
    const first = counter();
    const firstRun = await load(store, b, first);
    const again = counter();
    const againRun = await load(store, b, again);
    const unchanged = againRun.steps.reduce((n, s) => n + s.unchanged, 0);

    console.log(`in-memory Azurite 3.37, Node ${process.version}; ${CUSTOMERS} customers, ${PRODUCTS} products, ${ORDERS} orders`);
    console.log(
      `${'run'.padEnd(36)} ${'seconds'.padStart(8)} ${'EGTs'.padStart(6)} ${'entities'.padStart(9)} ${'round trips'.padStart(12)} ${'reads'.padStart(6)}`,
    );
    const line = (name: string, seconds: number, egts: number, entities: number, c: Counted) =>
      console.log(
        `${name.padEnd(36)} ${seconds.toFixed(1).padStart(8)} ${String(egts).padStart(6)} ${String(entities).padStart(9)} ${String(c.roundTrips).padStart(12)} ${String(c.reads).padStart(6)}`,
      );
    line(
      'raw submitTransaction loop (8)',
      rawSeconds,
      single,
      recorded.reduce((n, r) => n + r.ops.length, 0),
      raw,
    );
    line('first load (8 EGTs in flight)', firstRun.seconds, firstRun.transactions, firstRun.entities, first);
    line('no-op reload', againRun.seconds, againRun.transactions, againRun.entities, again);
    console.log(`first load: ${(rawSeconds / firstRun.seconds).toFixed(2)}x the raw loop's throughput (target ≥ 0.8x)`);
    console.log(
      `no-op reload: ${(againRun.seconds / firstRun.seconds).toFixed(2)}x the first load's time (target ≤ 0.3x), ${unchanged} rows unchanged, ${againRun.entities} entities written`,
    );
  } finally {
    await azurite.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
