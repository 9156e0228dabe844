/**
 * Attack benchmark: `npx tsx test/bench/attack-bench.ts [seconds]` (not part of `npm test`).
 *
 * On its own in-memory Azurite, a server in this process with the test fixtures. A cheap query
 * (`department(id) { employeeCount }`, one point query) runs 4 at a time, first alone (the baseline), then while 4
 * attackers send, round robin, the documents that once hurt the server: three nested lists of 100 (it exhausted
 * the heap), 1,000 aliases of distinct departments, a fragment cycle, a 1 MB comment, a 150,000-field document.
 * Prints, per attack: the HTTP status and code it got, and the storage calls it caused (all calls the store made,
 * less those the cheap queries report); and the cheap query's rate and latency p50/p99 alone and under attack.
 * Then 50 clients send a heavy but allowed query (every department with 10 employees and their department, about
 * 70 storage calls each) without pause, and the cheap query's latency is measured again: the server-wide admission
 * of storage reads serves requests round-robin, so the cheap query's one call does not wait behind thousands.
 */
import { loadConfig } from '../../src/runtime/config';
import { createLogger } from '../../src/log';
import { startServer } from '../../src/runtime/start-server';
import { startAzurite } from '../../src/storage/azurite';
import { QueueStore } from '../../src/storage/queue-store';
import { TableStore } from '../../src/storage/table-store';
import { benchStorage } from './bench-storage';
import { compileHr, ROOT, SCHEMA_DIR } from '../support/harness';
import { writeFixtures } from '../support/read-fixtures';

const SECONDS = Number(process.argv[2] ?? 8);
const CHEAP = '{ department(id: "FINANCE") { employeeCount } }';
const HEAVY = '{ departments(first: 36) { edges { node { id employees(first: 10) { edges { node { id department { name } } } } } } } }';
const ATTACKS: Record<string, string> = {
  'three nested lists of 100': `{ departments(first: 100) { edges { node { employees(first: 100) { edges { node {
    department { employees(first: 100) { edges { node { id firstName } } } } } } } } } } }`,
  '1,000 distinct aliases': `{ ${Array.from({ length: 1000 }, (_, i) => `d${i}: department(id: "D${i}") { id }`).join(' ')} }`,
  'a fragment cycle': '{ ...A } fragment A on Query { ...B } fragment B on Query { ...A }',
  'a 1 MB comment': `# ${'x'.repeat(1024 * 1024)}\n{ __typename }`,
  'a 150,000-field document': `{ ${'__typename '.repeat(150_000)}}`,
};

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? 0 : sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)];
}

async function post(url: string, query: string): Promise<{ status: number; body: any }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query }) });
  return { status: res.status, body: await res.json() };
}

async function main(): Promise<void> {
  const azurite = await startAzurite({ inMemory: true });
  try {
    const prefix = 'attack';
    const config = loadConfig(
      {
        PORT: '0',
        AZURE_STORAGE_CONNECTION_STRING: azurite.connectionString,
        TABLEGRAPH_SCHEMA_DIR: SCHEMA_DIR,
        TABLEGRAPH_TABLE_PREFIX: prefix,
        TABLEGRAPH_WORKER: 'off',
        TABLEGRAPH_RATE_LIMIT: '100000000',
        ...(process.env.INFLIGHT && { TABLEGRAPH_MAX_STORAGE_INFLIGHT: process.env.INFLIGHT }),
      },
      ROOT,
    );
    const store = new TableStore({ connectionString: azurite.connectionString, target: 'azurite' });
    let calls = 0;
    for (const method of ['getEntity', 'queryRange'] as const) {
      const original = store[method].bind(store) as (...a: unknown[]) => Promise<unknown>;
      (store as unknown as Record<string, unknown>)[method] = (...a: unknown[]) => ((calls += 1), original(...a));
    }
    const queues = new QueueStore({ connectionString: azurite.connectionString });
    const server = await startServer(config, benchStorage(azurite.connectionString, { store, queues }), createLogger({ level: 'silent' }));
    await writeFixtures(store, compileHr(prefix).model);

    let cheapCalls = 0;
    const cheapLoop = async (until: number, latencies: number[]) => {
      while (Date.now() < until) {
        const t = performance.now();
        const r = await post(server.url, CHEAP);
        latencies.push(performance.now() - t);
        cheapCalls += r.body.extensions?.cost?.roundTrips ?? 0;
        if (r.body.errors) throw new Error(`the cheap query failed: ${JSON.stringify(r.body.errors)}`);
      }
    };
    const alone: number[] = [];
    await Promise.all(Array.from({ length: 4 }, () => cheapLoop(Date.now() + SECONDS * 1000, alone)));

    const outcomes = new Map<string, { sent: number; answers: Set<string>; ms: number[] }>();
    const attacked: number[] = [];
    calls = 0;
    cheapCalls = 0;
    const until = Date.now() + SECONDS * 1000;
    const names = Object.keys(ATTACKS);
    let next = 0;
    const attacker = async () => {
      while (Date.now() < until) {
        const name = names[next++ % names.length];
        const t = performance.now();
        const r = await post(server.url, ATTACKS[name]);
        const o = outcomes.get(name) ?? { sent: 0, answers: new Set<string>(), ms: [] };
        o.sent++;
        o.ms.push(performance.now() - t);
        o.answers.add(`${r.status} ${r.body.errors?.[0]?.extensions?.code ?? 'no error'}`);
        outcomes.set(name, o);
      }
    };
    await Promise.all([...Array.from({ length: 4 }, () => cheapLoop(until, attacked)), ...Array.from({ length: 4 }, attacker)]);
    const attackCalls = calls - cheapCalls;

    console.log(`in-memory Azurite 3.37, Node ${process.version}, ${SECONDS} s per phase, 4 cheap clients, 4 attackers`);
    console.log(`${'attack'.padEnd(28)} ${'sent'.padStart(6)} ${'answer'.padEnd(34)} ${'p50 ms'.padStart(8)}`);
    for (const [name, o] of outcomes)
      console.log(`${name.padEnd(28)} ${String(o.sent).padStart(6)} ${[...o.answers].join(', ').padEnd(34)} ${percentile(o.ms, 50).toFixed(1).padStart(8)}`);
    console.log(`storage calls the attacks caused: ${attackCalls}`);
    const rate = (l: number[]) => (l.length / SECONDS).toFixed(0);
    console.log(`cheap query alone:        ${rate(alone)}/s, p50 ${percentile(alone, 50).toFixed(1)} ms, p99 ${percentile(alone, 99).toFixed(1)} ms`);
    console.log(
      `cheap query under attack: ${rate(attacked)}/s, p50 ${percentile(attacked, 50).toFixed(1)} ms, p99 ${percentile(attacked, 99).toFixed(1)} ms (${(percentile(attacked, 99) / percentile(alone, 99)).toFixed(2)}x the p99 alone)`,
    );

    // 50 heavy but allowed queries at once, without pause, next to 4 cheap clients.
    const loaded: number[] = [];
    let heavyDone = 0;
    let heavyCalls = 0;
    const heavyUntil = Date.now() + SECONDS * 1000;
    const heavyClient = async () => {
      while (Date.now() < heavyUntil) {
        const r = await post(server.url, HEAVY);
        if (r.body.errors) throw new Error(`the heavy query failed: ${JSON.stringify(r.body.errors[0])}`);
        heavyDone++;
        heavyCalls += r.body.extensions.cost.roundTrips;
      }
    };
    await Promise.all([...Array.from({ length: 4 }, () => cheapLoop(heavyUntil, loaded)), ...Array.from({ length: 50 }, heavyClient)]);
    console.log(`50 heavy queries in flight: ${(heavyDone / SECONDS).toFixed(0)}/s, ${(heavyCalls / Math.max(heavyDone, 1)).toFixed(0)} storage calls each`);
    console.log(
      `cheap query next to them:  ${rate(loaded)}/s, p50 ${percentile(loaded, 50).toFixed(1)} ms, p99 ${percentile(loaded, 99).toFixed(1)} ms (${(percentile(loaded, 99) / percentile(alone, 99)).toFixed(2)}x the p99 alone)`,
    );
    await server.close();
  } finally {
    await azurite.stop();
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
