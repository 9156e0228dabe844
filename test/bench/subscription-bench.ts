/**
 * Subscription benchmark: `npm run bench -- subscriptions` (not part of `npm test`; about 1 minute).
 *
 * On its own in-memory Azurite, a server in this process (the HR example, auth off on loopback, the default poll
 * interval of 500 ms) and 1,000 subscribers of `employeeChanged` on 100 departments (10 each), over 50 WebSockets
 * (graphql-ws's client, 20 subscriptions each) in this process too. Then creates paced at 20 a second for 30 s,
 * spread over the departments: each is reported to the 10 subscribers of its department. Per event, the latency
 * from the mutation's acknowledgement to its arrival at a subscriber (p50/p99/max; an event that arrives before the
 * acknowledgement itself counts as 0), whether every subscriber got exactly its department's creates, and the
 * storage calls per second of the polling (range queries on the change log, point queries of changed entities),
 * from the server's own counters.
 *
 * Baseline, measured in the same run: what polling cannot go below — half the poll interval (a change waits that
 * long on average for the next poll) plus a raw range query's latency (sequential `queryRange` calls on one
 * partition's change log with the SDK) — and the range queries per second the design predicts (partitions ÷
 * interval).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig } from '../../src/runtime/config';
import { createLogger } from '../../src/log';
import { CHANGE_ROW_KEY_PREFIX, changesSinceBound } from '../../src/model/change-log';
import { startServer } from '../../src/runtime/start-server';
import { startAzurite } from '../../src/storage/azurite';
import { TableStore } from '../../src/storage/table-store';
import { wsClient, wsSubscribe, type Collected } from '../support/subscription-clients';
import { compileHr, ROOT } from '../support/harness';
import { benchStorage } from './bench-storage';
import { percentile } from './bench-process';

const PREFIX = 'subbench';
const PARTITIONS = 100;
const PER_PARTITION = 10;
const PER_CONNECTION = 20;
const RATE = 20; // creates per second
const SECONDS = 30;
const POLL_MS = 500;
const log = createLogger({ level: 'warn', destination: 'stderr' });
const department = (d: number) => `SUB-${d}`;

async function main(): Promise<void> {
  const azurite = await startAzurite({ inMemory: true });
  const store = new TableStore({ connectionString: azurite.connectionString, target: 'azurite' });
  const env = {
    PORT: '0',
    AZURE_STORAGE_CONNECTION_STRING: azurite.connectionString,
    TABLEGRAPH_TABLE_PREFIX: PREFIX,
    TABLEGRAPH_CURSOR_SECRET: 'b',
    TABLEGRAPH_RATE_LIMIT: '100000000',
    TABLEGRAPH_SUBSCRIPTION_POLL_MS: String(POLL_MS),
    TABLEGRAPH_MAX_SUBSCRIPTIONS: '5000',
  };
  const server = await startServer(loadConfig(env, ROOT), benchStorage(azurite.connectionString, { store }), log);
  const post = async (query: string, variables: Record<string, unknown>) => {
    const res = await fetch(server.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query, variables }) });
    const body = (await res.json()) as { errors?: Array<{ message: string }> };
    if (body.errors) throw new Error(body.errors[0].message);
  };
  for (let d = 0; d < PARTITIONS; d++) {
    await post('mutation($input: CreateDepartmentInput!) { createDepartment(input: $input) { department { id } } }', {
      input: { id: department(d), name: department(d) },
    });
  }

  // 1,000 subscribers: 10 per department, over 50 WebSockets of 20 subscriptions each.
  const clients = Array.from({ length: (PARTITIONS * PER_PARTITION) / PER_CONNECTION }, () => wsClient(server.url));
  const query = 'subscription($d: ID!) { employeeChanged(departmentId: $d) { kind id departmentId } }';
  const subscribers: Array<{ d: number; sub: Collected; arrivals: Map<string, number> }> = [];
  for (let i = 0; i < PARTITIONS * PER_PARTITION; i++) {
    const d = i % PARTITIONS;
    const arrivals = new Map<string, number>();
    const sub = wsSubscribe(clients[Math.floor(i / PER_CONNECTION)], query, { d: department(d) });
    subscribers.push({ d, sub, arrivals });
  }
  // Each event's arrival, stamped as it comes (Collected keeps the data only).
  const stamp = setInterval(() => {
    const now = performance.now();
    for (const s of subscribers) for (const e of s.sub.events.splice(0)) s.arrivals.set(e.employeeChanged.id, now);
  }, 5);
  await sleep(3000);

  const metrics = async () => {
    const text = await (await fetch(server.url.replace(/\/graphql$/, '/metrics'))).text();
    const value = (kind: string) => Number(new RegExp(`tablegraph_subscription_calls_total\\{kind="${kind}"\\} (\\d+)`).exec(text)?.[1] ?? NaN);
    return { polls: value('poll'), reads: value('read') };
  };
  const acks = new Map<string, { d: number; at: number }>();
  const before = await metrics();
  const started = performance.now();
  const writes: Array<Promise<void>> = [];
  for (let n = 0; n < RATE * SECONDS; n++) {
    const due = started + (n * 1000) / RATE;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    const d = n % PARTITIONS;
    const id = String(1_000_000 + n);
    const input = { departmentId: department(d), id, firstName: 'Sub', lastName: `Scriber${n}`, email: `sub.${n}@bench.test` };
    writes.push(
      post('mutation($input: CreateEmployeeInput!) { createEmployee(input: $input) { employee { id } } }', { input }).then(() => {
        acks.set(id, { d, at: performance.now() });
      }),
    );
  }
  await Promise.all(writes);
  const writeSeconds = (performance.now() - started) / 1000;
  await sleep(3000);
  clearInterval(stamp);
  const after = await metrics();
  const elapsed = (performance.now() - started) / 1000;

  // Latency of every event; every subscriber has exactly its department's creates.
  const latencies: number[] = [];
  let wrong = 0;
  for (const s of subscribers) {
    const expected = [...acks].filter(([, a]) => a.d === s.d).map(([id]) => id);
    if (s.arrivals.size !== expected.length || expected.some((id) => !s.arrivals.has(id))) wrong++;
    for (const [id, at] of s.arrivals) {
      const ack = acks.get(id);
      if (ack) latencies.push(Math.max(0, at - ack.at));
    }
  }

  // Baseline: a raw range query on one partition's change log, sequentially.
  const { model } = compileHr(PREFIX);
  const table = model.entities.get('Employee')!.layout.table;
  const raw: number[] = [];
  for (let i = 0; i < 200; i++) {
    const t = performance.now();
    await store.queryRange({
      table,
      partitionKey: department(i % PARTITIONS),
      rowKeyFrom: CHANGE_ROW_KEY_PREFIX,
      rowKeyTo: changesSinceBound(Date.now() - 11_000),
      limit: 1000,
    });
    raw.push(performance.now() - t);
  }
  const floor = POLL_MS / 2 + percentile(raw, 50);
  const pollsPerSecond = (after.polls - before.polls) / elapsed;
  const readsPerSecond = (after.reads - before.reads) / elapsed;
  const predicted = PARTITIONS / (POLL_MS / 1000);
  console.log(`subscribers ${subscribers.length} on ${PARTITIONS} partitions; ${acks.size} creates in ${writeSeconds.toFixed(1)} s (${RATE}/s paced)`);
  console.log(`events ${latencies.length} (expected ${acks.size * PER_PARTITION}); subscribers with a missing or extra event: ${wrong}`);
  console.log(
    `event latency after the acknowledgement: p50 ${percentile(latencies, 50).toFixed(0)} ms, p99 ${percentile(latencies, 99).toFixed(0)} ms, max ${Math.max(...latencies).toFixed(0)} ms`,
  );
  console.log(
    `baseline (poll interval / 2 + raw range query p50 ${percentile(raw, 50).toFixed(1)} ms): ${floor.toFixed(0)} ms; ratio p50 / baseline ${(percentile(latencies, 50) / floor).toFixed(2)}`,
  );
  console.log(
    `polling: ${pollsPerSecond.toFixed(1)} range queries/s (predicted ${predicted}: ratio ${(pollsPerSecond / predicted).toFixed(2)}), ${readsPerSecond.toFixed(1)} point queries/s of changed entities`,
  );
  await Promise.all(clients.map((c) => c.dispose()));
  await server.close();
  await azurite.stop();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
