/**
 * Memory under a long run: the server (compiled, as `npm start` runs it, its inline worker on) serves 100,000 mixed
 * requests — point queries, a page of a range, `{ __typename }`, and an update with fan-out every 20th request — at
 * 16 in flight, on the seeded HR example over an in-memory Azurite. Every 10,000 requests its RSS (from /proc) and
 * its V8 heap (used and total, from its own /metrics: prom-client's default metrics) are sampled; the figure is RSS
 * after 100,000 against RSS after 10,000. A heap whose used size stays flat while RSS grows is V8 sizing its heap,
 * not a leak. With `--heap-snapshots` the server also writes a heap snapshot (live objects only, after a full
 * collection) after 10,000 requests and at the end; the two are compared by constructor, and the live heap's growth
 * printed. Writing a snapshot takes the server hundreds of MB of RSS it keeps: RSS figures of such a run are not
 * comparable.
 *
 *   npx tsx test/bench/memory-bench.ts [--requests 100000] [--heap-snapshots]
 *
 * Needs `npm run build` first (`npm run bench` does it).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';
import { compareHeaps } from './heap-snapshot';
import { startAzurite } from '../../src/storage/azurite';
import { freePort } from '../support/processes';
import { commandArgs, rssOf, startServerProcess, stopProcess } from './bench-process';

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const REQUESTS = arg('requests', 100_000);
/** Heap snapshots inflate the server's RSS (and pause it) from the first one on: only when asked. */
const HEAP_SNAPSHOTS = process.argv.includes('--heap-snapshots');
const IN_FLIGHT = 16;
const BODIES = [
  { query: '{ employee(departmentId: "Marketing", id: "1") { id firstName lastName } }' },
  { query: '{ department(id: "Marketing") { name employeeCount employees(first: 10) { edges { cursor node { id lastName } } } } }' },
  { query: '{ __typename }' },
];
const UPDATE = 'mutation($input: UpdateEmployeeInput!) { updateEmployee(input: $input) { employee { id title } } }';

async function main(): Promise<void> {
  const azurite = await startAzurite({ inMemory: true });
  const port = await freePort();
  const env = {
    AZURE_STORAGE_CONNECTION_STRING: azurite.connectionString,
    TABLEGRAPH_TABLE_PREFIX: 'membench',
    TABLEGRAPH_RATE_LIMIT: '100000000',
    LOG_LEVEL: 'warn',
  };
  const snapshots = fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-heap-'));
  const args = commandArgs('start', 'dist');
  // The signal makes the server write a heap snapshot into its working directory (a Node.js option).
  const { child } = await startServerProcess(['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${snapshots}`, ...args], port, env);
  const pid = child.pid!;
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: IN_FLIGHT });
  /** The server's V8 heap, used and total (bytes), as its /metrics reports it. */
  const heap = async (): Promise<{ used: number; total: number }> => {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const metric = (name: string) => Number(new RegExp(`^tablegraph_${name} (\\d+(?:\\.\\d+)?(?:e\\+\\d+)?)$`, 'm').exec(text)?.[1]);
    return { used: metric('nodejs_heap_size_used_bytes'), total: metric('nodejs_heap_size_total_bytes') };
  };
  const samples: Array<[number, number, { used: number; total: number }]> = [[0, rssOf(pid), await heap()]];
  /** Asks for a heap snapshot and waits until the file is complete (its size stops changing). */
  const snapshot = async (): Promise<string> => {
    const before = new Set(fs.readdirSync(snapshots));
    child.kill('SIGUSR2');
    for (let last = -1; ; await sleep(500)) {
      const file = fs.readdirSync(snapshots).find((f) => !before.has(f) && f.endsWith('.heapsnapshot'));
      const size = file ? fs.statSync(path.join(snapshots, file)).size : -1;
      if (file && size > 0 && size === last) return path.join(snapshots, file);
      last = size;
    }
  };
  const heapFiles: string[] = [];
  const pendingSamples: Array<Promise<void>> = [];
  let sent = 0;
  let failed = 0;
  const started = performance.now();
  try {
    await Promise.all(
      Array.from({ length: IN_FLIGHT }, async () => {
        while (sent < REQUESTS) {
          const n = ++sent;
          const body =
            n % 20 === 0
              ? { query: UPDATE, variables: { input: { departmentId: 'Marketing', id: String(1 + (n % 2)), title: `T${n % 7}` } } }
              : BODIES[n % BODIES.length];
          const res = await pool.request({ path: '/graphql', method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
          const json = (await res.body.json()) as { errors?: unknown };
          if (res.statusCode !== 200 || json.errors) failed++;
          if (n % 10_000 === 0) {
            const rss = rssOf(pid);
            pendingSamples.push(heap().then((h) => void samples.push([n, rss, h])));
            if (HEAP_SNAPSHOTS && n === 10_000) heapFiles.push(await snapshot());
          }
        }
      }),
    );
    await Promise.all(pendingSamples);
    if (HEAP_SNAPSHOTS) heapFiles.push(await snapshot());
  } finally {
    await pool.close();
    await stopProcess(child);
    await azurite.stop();
  }
  const s = (performance.now() - started) / 1000;
  console.log(
    `memory benchmark: ${REQUESTS} mixed requests at ${IN_FLIGHT} in flight in ${s.toFixed(0)} s (${failed} failed), server compiled, inline worker on`,
  );
  console.log('requests | server RSS, MB | V8 heap used, MB | V8 heap total, MB');
  samples.sort((a, b) => a[0] - b[0]);
  for (const [n, rss, h] of samples) console.log(`${n} | ${(rss / 1e6).toFixed(1)} | ${(h.used / 1e6).toFixed(1)} | ${(h.total / 1e6).toFixed(1)}`);
  const at = (n: number) => samples.find(([k]) => k === n)?.[1];
  const first = at(10_000);
  const last = samples.at(-1)![1];
  if (first) console.log(`RSS after ${samples.at(-1)![0]} / after 10000: ${(last / first).toFixed(2)}x`);
  if (heapFiles.length === 2) {
    const { totals, rows } = compareHeaps(heapFiles[0], heapFiles[1], 12);
    console.log(
      `live heap (snapshots, after a full collection): ${(totals[0] / 1e6).toFixed(1)} MB after 10000, ${(totals[1] / 1e6).toFixed(1)} MB at the end`,
    );
    console.log('grew most (live bytes, objects):');
    for (const row of rows) console.log(`  ${row}`);
  }
  fs.rmSync(snapshots, { recursive: true, force: true });
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
