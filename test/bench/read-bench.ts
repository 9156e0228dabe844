/**
 * Read benchmark: the storage cost and latency of representative queries over the real Chicago data, served by
 * tablegraph (DataLoaders, projection, access paths), next to the same answers fetched by naive resolvers — one
 * SDK call per parent, no batching, no projection — measured in the same run against the same Azurite.
 *
 *   npx tsx test/bench/read-bench.ts [--runs 20]
 *
 * Prints, per query: round trips, entities read, waves (tablegraph) and median / p90 latency in ms, and the ratio
 * of round trips and of median latency against the naive baseline.
 */
import path from 'node:path';
import { odata, TableClient } from '@azure/data-tables';
import { loadConfig } from '../../src/runtime/config';
import { createLogger } from '../../src/log';
import { compileSchema } from '../../src/compiler/compile';
import { loadSchemaSources } from '../../src/compiler/load-schema';
import { importEmployees } from '../../examples/hr/import/import-employees';
import { hashBucket } from '../../src/model/hash-bucket';
import { startServer } from '../../src/runtime/start-server';
import { startAzurite } from '../../src/storage/azurite';
import { QueueStore } from '../../src/storage/queue-store';
import { TableStore } from '../../src/storage/table-store';
import { benchStorage } from './bench-storage';

const ROOT = path.resolve(__dirname, '../..');
const CSV = path.join(ROOT, 'examples/hr/data/chicago-employees.csv.gz');
const PREFIX = 'bench';
const runsArg = process.argv.indexOf('--runs');
const RUNS = runsArg > 0 ? Number(process.argv[runsArg + 1]) : 20;

interface Measured {
  ms: number[];
  roundTrips: number;
  entities: number;
  waves?: number;
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** A TableClient that counts its round trips and the entities they return. */
class CountingTables {
  roundTrips = 0;
  entities = 0;
  private readonly clients = new Map<string, TableClient>();
  constructor(private readonly cs: string) {}
  client(table: string): TableClient {
    let c = this.clients.get(table);
    if (!c) this.clients.set(table, (c = TableClient.fromConnectionString(this.cs, PREFIX + table, { allowInsecureConnection: true })));
    return c;
  }
  async get(table: string, pk: string, rk: string): Promise<Record<string, unknown>> {
    this.roundTrips++;
    this.entities++;
    return this.client(table).getEntity(pk, rk);
  }
  async range(table: string, filter: string, top: number): Promise<Array<Record<string, unknown>>> {
    const out: Array<Record<string, unknown>> = [];
    for await (const page of this.client(table).listEntities({ queryOptions: { filter } }).byPage({ maxPageSize: top })) {
      this.roundTrips++;
      out.push(...page);
      if (out.length >= top) break;
    }
    this.entities += out.length;
    return out.slice(0, top);
  }
}

const QUERIES: Array<{ name: string; query: string; naive(t: CountingTables): Promise<unknown> }> = [
  {
    name: 'POLICE: count and first 5 employees',
    query: '{ department(id: "POLICE") { employeeCount employees(first: 5) { edges { node { id lastName title } } pageInfo { hasNextPage } } } }',
    async naive(t) {
      const d = await t.get('Directory', 'POLICE', 'department');
      const employees = await t.range('Directory', odata`PartitionKey eq ${'POLICE'} and RowKey ge ${'empid_'} and RowKey lt ${'empid`'}`, 6);
      return [d.employeeCount, employees.length];
    },
  },
  {
    name: 'WILLIAMS in POLICE, each with their department',
    query:
      '{ department(id: "POLICE") { employeesByLastName(lastName: "WILLIAMS", first: 100) { edges { node { id firstName annualSalary department { id employeeCount } } } } } }',
    async naive(t) {
      const index = await t.range(
        'Directory',
        odata`PartitionKey eq ${'POLICE'} and RowKey ge ${'lastname_WILLIAMS_'} and RowKey lt ${'lastname_WILLIAMS`'}`,
        101,
      );
      return Promise.all(
        index.map(async (e) => {
          const emp = await t.get('Directory', 'POLICE', `empid_${String(e.id).padStart(8, '0')}`);
          return t.get('Directory', String(emp.departmentId), 'department');
        }),
      );
    },
  },
  {
    name: '36 departments, 10 employees each, each employee with its department',
    query:
      '{ departments(first: 36) { edges { node { id employeeCount employees(first: 10) { edges { node { id lastName department { id payroll } } } } } } } }',
    async naive(t) {
      const all = await t.range('Departments', odata`PartitionKey eq ${'departments'}`, 36);
      return Promise.all(
        all.map(async (d) => {
          // The index entity's RowKey is the department's escaped id, which is also its PartitionKey.
          const pk = String(d.rowKey);
          await t.get('Directory', pk, 'department');
          const employees = await t.range('Directory', odata`PartitionKey eq ${pk} and RowKey ge ${'empid_'} and RowKey lt ${'empid`'}`, 10);
          return Promise.all(employees.map((e) => t.get('Directory', pk, 'department').then(() => e)));
        }),
      );
    },
  },
  {
    name: 'WILLIAMS across the city (inter-partition index), 100 per page',
    query: '{ employeesByLastName(lastName: "WILLIAMS", first: 100) { edges { node { id departmentId firstName title } } pageInfo { hasNextPage } } }',
    async naive(t) {
      const pk = `lastname_${hashBucket('WILLIAMS', 64)}`;
      return t.range('EmployeesByLastName', odata`PartitionKey eq ${pk} and RowKey ge ${'WILLIAMS_'} and RowKey lt ${'WILLIAMS`'}`, 101);
    },
  },
];

async function main(): Promise<void> {
  const azurite = await startAzurite({ inMemory: true });
  const log = createLogger({ level: 'warn', destination: 'stderr' });
  try {
    const store = new TableStore({ connectionString: azurite.connectionString, target: 'azurite' });
    const { model } = compileSchema(loadSchemaSources(path.join(ROOT, 'examples/hr')), { tablePrefix: PREFIX });
    for (const table of model.tables) await store.ensureTable(table);
    process.stderr.write('importing the Chicago file…\n');
    const summary = await importEmployees({ store, model, file: CSV });
    process.stderr.write(`imported ${summary.imported} employees, ${summary.entities} entities in ${summary.seconds.toFixed(1)} s\n`);
    const config = loadConfig(
      {
        PORT: '0',
        AZURE_STORAGE_CONNECTION_STRING: azurite.connectionString,
        TABLEGRAPH_TABLE_PREFIX: PREFIX,
        TABLEGRAPH_WORKER: 'off',
        TABLEGRAPH_CURSOR_SECRET: 'bench',
        TABLEGRAPH_RATE_LIMIT: '100000000',
      },
      ROOT,
    );
    const queues = new QueueStore({ connectionString: azurite.connectionString });
    const server = await startServer(config, benchStorage(azurite.connectionString, { store, queues }), log);
    const naive = new CountingTables(azurite.connectionString);
    console.log(`read benchmark: ${RUNS} runs per query, Azurite 3.37 in memory, median (p90) latency in ms\n`);
    console.log('query | tablegraph: round trips, entities, waves, ms | naive: round trips, entities, ms | round trips ratio | latency ratio');
    for (const q of QUERIES) {
      const tg: Measured = { ms: [], roundTrips: 0, entities: 0 };
      const nv: Measured = { ms: [], roundTrips: 0, entities: 0 };
      for (let i = 0; i < RUNS + 2; i++) {
        const t0 = performance.now();
        const res = await fetch(server.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: q.query }) });
        const body = (await res.json()) as { errors?: unknown; extensions: { cost: { roundTrips: number; entitiesRead: number; waves: number } } };
        const ms = performance.now() - t0;
        if (body.errors) throw new Error(`${q.name}: ${JSON.stringify(body.errors)}`);
        if (i >= 2) tg.ms.push(ms); // two warm-up runs
        Object.assign(tg, { roundTrips: body.extensions.cost.roundTrips, entities: body.extensions.cost.entitiesRead, waves: body.extensions.cost.waves });
        naive.roundTrips = 0;
        naive.entities = 0;
        const n0 = performance.now();
        await q.naive(naive);
        if (i >= 2) nv.ms.push(performance.now() - n0);
        Object.assign(nv, { roundTrips: naive.roundTrips, entities: naive.entities });
      }
      const fmt = (m: Measured) => `${percentile(m.ms, 50).toFixed(1)} (${percentile(m.ms, 90).toFixed(1)})`;
      console.log(
        `${q.name} | ${tg.roundTrips}, ${tg.entities}, ${tg.waves}, ${fmt(tg)} | ${nv.roundTrips}, ${nv.entities}, ${fmt(nv)} | ` +
          `${(nv.roundTrips / tg.roundTrips).toFixed(1)}x fewer | ${(percentile(nv.ms, 50) / percentile(tg.ms, 50)).toFixed(2)}x`,
      );
    }
    await server.close();
  } finally {
    await azurite.stop();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
