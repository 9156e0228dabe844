/**
 * Point-query benchmark: GraphQL point queries through the server against raw `getEntity` calls of the Azure SDK,
 * at the same concurrency, on the same machine and Azurite, in interleaved rounds of one run; plus `{ __typename }`
 * (the GraphQL layer with no storage at all). The server runs as `npm start` runs it — its own process, request log
 * at info to /dev/null — so its CPU is its own: read from /proc before and after each round.
 *
 *   npx tsx test/bench/point-bench.ts [--seconds 5] [--rounds 3] [--concurrency 16] [--profile]
 *
 * Prints per kind: requests per second (median of the rounds), the ratio of GraphQL point queries to raw getEntity,
 * the server's CPU per request (ms) and the raw client's CPU per getEntity (ms), and the server's RSS (bytes)
 * after all rounds. `--profile` runs the server with a V8 CPU profile during the GraphQL rounds and prints the
 * functions with the most self and total time. `BENCH_LOG_LEVEL=warn` leaves the request log line out. The server runs
 * compiled, as `npm start` runs it: run `npm run build` first.
 */
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TableClient } from '@azure/data-tables';
import { Pool } from 'undici';
import { compileSchema } from '../../src/compiler/compile';
import { entityWrites } from '../../src/model/entity-codec';
import { loadSchemaSources } from '../../src/compiler/load-schema';
import { startAzurite } from '../../src/storage/azurite';
import { TableStore } from '../../src/storage/table-store';
import { planEgtBatches, writeEgtBatches } from '../../src/write/egt-batches';
import { freePort } from '../support/processes';
import { topSelfTime, topTotalTime } from './cpu-profile';
import { commandArgs, cpuMsOf, median, ROOT, rssOf, startServerProcess, stopProcess } from './bench-process';

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const SECONDS = arg('seconds', 5);
const ROUNDS = arg('rounds', 3);
const CONCURRENCY = arg('concurrency', 16);
const PROFILE = process.argv.includes('--profile');
const PREFIX = 'pointbench';
const DEPARTMENT = 'BENCH';
const EMPLOYEES = 1000;

/** Runs `call` from `CONCURRENCY` loops for SECONDS; returns calls per second. */
async function drive(call: (i: number) => Promise<void>): Promise<{ calls: number; perSecond: number }> {
  const end = performance.now() + SECONDS * 1000;
  let calls = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async (_, loop) => {
      let i = loop;
      while (performance.now() < end) {
        await call(i);
        calls++;
        i += CONCURRENCY;
      }
    }),
  );
  return { calls, perSecond: calls / SECONDS };
}

/** The server as `npm start` runs it (compiled), request log at info to /dev/null, optionally with a CPU profile. */
async function startServer(connectionString: string, port: number, profileDir?: string): Promise<ChildProcess> {
  const args = [...(profileDir ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : []), ...commandArgs('start', 'dist')];
  const env = {
    AZURE_STORAGE_CONNECTION_STRING: connectionString,
    TABLEGRAPH_TABLE_PREFIX: PREFIX,
    TABLEGRAPH_WORKER: 'off',
    TABLEGRAPH_CURSOR_SECRET: 'bench',
    TABLEGRAPH_RATE_LIMIT: '100000000',
  };
  return (await startServerProcess(args, port, env)).child;
}

async function main(): Promise<void> {
  const azurite = await startAzurite({ inMemory: true });
  const profileDir = PROFILE ? fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-profile-')) : undefined;
  let server: ChildProcess | undefined;
  let pool: Pool | undefined;
  try {
    const store = new TableStore({ connectionString: azurite.connectionString, target: 'azurite' });
    const { model } = compileSchema(loadSchemaSources(path.join(ROOT, 'examples/hr')), { tablePrefix: PREFIX });
    for (const table of model.tables) await store.ensureTable(table);
    const employee = model.entities.get('Employee')!;
    const department = model.entities.get('Department')!;
    const writes = [entityWrites(department, { id: DEPARTMENT, name: DEPARTMENT, employeeCount: EMPLOYEES, payroll: '0' }).primary];
    for (let id = 1; id <= EMPLOYEES; id++) {
      writes.push(
        entityWrites(employee, {
          departmentId: DEPARTMENT,
          id: String(id),
          email: `e${id}@bench.example`,
          firstName: `First${id}`,
          lastName: `Last${id}`,
          title: 'CLERK',
        }).primary,
      );
    }
    await writeEgtBatches(store, planEgtBatches(writes, 'azurite'), { concurrency: 4 });

    const port = await freePort();
    server = await startServer(azurite.connectionString, port, profileDir);
    const pid = server.pid!;
    const raw = TableClient.fromConnectionString(azurite.connectionString, `${PREFIX}Directory`, { allowInsecureConnection: true });
    const rowKey = (i: number) => `empid_${String((i % EMPLOYEES) + 1).padStart(8, '0')}`;
    // undici's Pool, not fetch: fetch's WHATWG layers cost the load generator about twice the CPU per call, and on a
    // machine whose cores the load generator shares with the server and Azurite, that CPU is taken from them.
    pool = new Pool(`http://127.0.0.1:${port}`, { connections: CONCURRENCY, pipelining: 1 });
    const post = async (body: string) => {
      const res = await pool!.request({ path: '/graphql', method: 'POST', headers: { 'content-type': 'application/json' }, body });
      const json = (await res.body.json()) as { errors?: unknown };
      if (res.statusCode !== 200 || json.errors) throw new Error(`${res.statusCode} ${JSON.stringify(json.errors)}`);
    };
    const pointQuery = 'query Point($d: ID!, $id: ID!) { employee(departmentId: $d, id: $id) { id firstName lastName title } }';
    const kinds = {
      'raw getEntity': async (i: number) => void (await raw.getEntity(DEPARTMENT, rowKey(i), { queryOptions: { select: ['firstName', 'lastName', 'title'] } })),
      'GraphQL point query': (i: number) => post(JSON.stringify({ query: pointQuery, variables: { d: DEPARTMENT, id: String((i % EMPLOYEES) + 1) } })),
      'GraphQL { __typename }': () => post('{"query":"{ __typename }"}'),
    };
    type Kind = keyof typeof kinds;
    const results = new Map<Kind, { perSecond: number[]; serverCpuMs: number[]; clientCpuMs: number[] }>();
    let served = 0;
    const rss0 = rssOf(pid);
    // Warm-up: JIT, connections, DataLoader paths.
    for (const [kind, call] of Object.entries(kinds)) served += kind === 'raw getEntity' ? 0 : (await drive(call)).calls;
    for (let round = 0; round < ROUNDS; round++) {
      for (const [kind, call] of Object.entries(kinds) as Array<[Kind, (i: number) => Promise<void>]>) {
        const server0 = cpuMsOf(pid);
        const client0 = process.cpuUsage();
        const { calls, perSecond } = await drive(call);
        const client = process.cpuUsage(client0);
        if (kind !== 'raw getEntity') served += calls;
        const r = results.get(kind) ?? { perSecond: [], serverCpuMs: [], clientCpuMs: [] };
        r.perSecond.push(perSecond);
        r.serverCpuMs.push((cpuMsOf(pid) - server0) / calls);
        r.clientCpuMs.push((client.user + client.system) / 1000 / calls);
        results.set(kind, r);
      }
    }
    const rss = rssOf(pid);
    const rawRate = median(results.get('raw getEntity')!.perSecond);
    console.log(
      `point-query benchmark: ${ROUNDS} interleaved rounds of ${SECONDS} s per kind, ${CONCURRENCY} in flight, Azurite in memory, ${os.cpus().length} cores`,
    );
    console.log('kind | per second (median) | ratio to raw getEntity | server CPU per request, ms | load generator CPU per call, ms');
    for (const [kind, r] of results) {
      const server = kind === 'raw getEntity' ? '-' : median(r.serverCpuMs).toFixed(3);
      console.log(
        `${kind} | ${median(r.perSecond).toFixed(0)} | ${(median(r.perSecond) / rawRate).toFixed(2)}x | ${server} | ${median(r.clientCpuMs).toFixed(3)}`,
      );
    }
    const point = results.get('GraphQL point query')!;
    const rawCpu = median(results.get('raw getEntity')!.clientCpuMs);
    console.log(`server CPU per point query / raw client CPU per getEntity: ${(median(point.serverCpuMs) / rawCpu).toFixed(2)}x`);
    console.log(`server RSS: ${(rss0 / 1e6).toFixed(1)} MB after start-up, ${(rss / 1e6).toFixed(1)} MB after ${served} GraphQL requests`);
  } finally {
    await pool?.close();
    await stopProcess(server);
    await azurite.stop();
  }
  if (profileDir) {
    const file = fs.readdirSync(profileDir).find((f) => f.endsWith('.cpuprofile'));
    if (!file) throw new Error('no CPU profile was written');
    console.log('\nserver CPU profile, top self time (all rounds):');
    for (const row of topSelfTime(path.join(profileDir, file), 20)) console.log(row);
    console.log("\nserver CPU profile, top total time of the project's and its libraries' functions:");
    for (const row of topTotalTime(path.join(profileDir, file), 45, /\/(src|node_modules)\//)) console.log(row);
    if (process.env.KEEP_PROFILE) console.log(`profile kept: ${path.join(profileDir, file)}`);
    else fs.rmSync(profileDir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
