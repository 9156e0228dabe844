/**
 * tablegraph against the servers a user would write by hand, on one in-memory Azurite holding one department of
 * 1,000 employees (Azurite answers a range query by scanning its whole table, so a larger table would measure
 * Azurite, not the servers): Apollo Server 5 (peer-server.ts) and the fastest one in Node, Fastify + Mercurius with graphql-jit
 * at `jit: 1` (mercurius-server.ts), both with per-request DataLoaders over `getEntity` and `listEntities`
 * (peer-schema.ts); tablegraph compiled, as `npm start` runs it, its request log at info to /dev/null. Each is a
 * process of its own, driven in interleaved rounds, 16 requests in flight, over four workloads:
 * - hot: one employee, every request (with raw `getEntity` calls, the floor, and the ceiling of any server:
 *   ceiling-server.ts, node:http and one signed REST GET, no GraphQL);
 * - variables: a different employee each request, ids as variables;
 * - text: a different employee each request, ids written in the query text (a document the server has not seen);
 * - page: a department's first 10 employees: the department's point query, then one range query (the hand-written
 *   servers read the department too, so that `department` is null when there is none, as tablegraph answers).
 *
 *   npx tsx test/bench/peer-bench.ts [--seconds 5] [--rounds 3] [--concurrency 16] [--only text,page] [--profile hot|variables|text|page]
 *
 * `--only` drives the workloads named, and prints the targets of those alone.
 *
 * `--profile <workload>` drives only tablegraph on that workload, under `node --cpu-prof`, and prints where its CPU
 * went (cpu-profile.ts; KEEP_PROFILE=1 keeps the file).
 *
 * Prints per kind: requests per second (median of the rounds), the ratio to Apollo's, the server's CPU per request
 * (ms, from /proc: user + system), Azurite's and the load generator's (on two cores all of them share the cores, so
 * each one's CPU bounds the others' rate); then each target, met or not: hot ≥ 1.25× Apollo's req/s at no more CPU per
 * request than Mercurius; variables at no more CPU than Mercurius; text at Apollo's req/s or more and no more CPU
 * than Apollo; a page at Apollo's req/s or more and no more CPU than Mercurius.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TableClient } from '@azure/data-tables';
import { Pool } from 'undici';
import { startAzurite } from '../../src/storage/azurite';
import { freePort } from '../support/processes';
import { benchEnv, commandArgs, cpuMsOf, median, ROOT, startServerProcess, stopProcess } from './bench-process';
import { seedBenchEmployees } from './bench-employees';
import { topSelfTime, topTotalTime } from './cpu-profile';

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const SECONDS = arg('seconds', 5);
const ROUNDS = arg('rounds', 3);
const CONCURRENCY = arg('concurrency', 16);
const PROFILE = process.argv.includes('--profile') ? (process.argv[process.argv.indexOf('--profile') + 1] as Workload) : undefined;
const ONLY = process.argv.includes('--only') ? process.argv[process.argv.indexOf('--only') + 1].split(',') : undefined;
const PREFIX = 'peerbench';
const DEPARTMENT = 'BENCH';
/** Employees seeded. */
const EMPLOYEES = 1_000;

/** Runs `call` from CONCURRENCY loops for `seconds` (s); returns calls and calls per second. */
async function drive(call: () => Promise<void>, seconds = SECONDS): Promise<{ calls: number; perSecond: number }> {
  const end = performance.now() + seconds * 1000;
  let calls = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < end) {
        await call();
        calls++;
      }
    }),
  );
  return { calls, perSecond: calls / seconds };
}

/** A server of test/bench (a hand-written one, the ceiling), once it listens. */
async function startPeer(script: string, connectionString: string, port: number): Promise<ChildProcess> {
  // One process (tsx as a loader, not its CLI, which runs the script in a child): its CPU is the server's.
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(__dirname, script)], {
    cwd: ROOT,
    env: benchEnv({ PORT: String(port), PEER_CONNECTION_STRING: connectionString, PEER_TABLE: `${PREFIX}Directory`, NODE_ENV: 'production' }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  await new Promise<void>((resolve, reject) => {
    const seen = (d: Buffer) => {
      out += d.toString('utf8');
      if (out.includes('peer serving on')) resolve();
    };
    child.stdout!.on('data', seen);
    child.stderr!.on('data', seen);
    child.once('exit', () => reject(new Error(`${script} exited:\n${out}`)));
  });
  return child;
}

const POINT = 'query Point($d: ID!, $id: ID!) { employee(departmentId: $d, id: $id) { id firstName lastName title } }';
const PAGE = 'query Page($d: ID!) { department(id: $d) { employees(first: 10) { edges { node { id firstName lastName title } } pageInfo { hasNextPage } } } }';
const randomId = () => String(1 + Math.floor(Math.random() * EMPLOYEES));
/** The employees in a shuffled order, taken in turn. */
const shuffled = Array.from({ length: EMPLOYEES }, (_, i) => String(i + 1));
for (let i = shuffled.length - 1; i > 0; i--) {
  const j = Math.floor(Math.random() * (i + 1));
  [shuffled[i], shuffled[j]] = [shuffled[j], shuffled[i]];
}
let turn = 0;
const nextId = () => shuffled[turn++ % EMPLOYEES];
/**
 * A document no server has seen: an employee's id in its text, and a comment that numbers it — 1,000 employees give
 * 1,000 texts, which a server's document cache (Apollo's holds about 30 MiB of them) would otherwise soon hold.
 */
let written = 0;
const unseenText = () => `{ employee(departmentId: "${DEPARTMENT}", id: "${nextId()}") { id firstName lastName title } }\n# request ${++written}`;

/** The request bodies of each workload. */
const WORKLOADS: Record<'hot' | 'variables' | 'text' | 'page', () => string> = {
  hot: () => JSON.stringify({ query: POINT, variables: { d: DEPARTMENT, id: '7' } }),
  variables: () => JSON.stringify({ query: POINT, variables: { d: DEPARTMENT, id: randomId() } }),
  text: () => JSON.stringify({ query: unseenText() }),
  page: () => JSON.stringify({ query: PAGE, variables: { d: DEPARTMENT } }),
};
type Workload = keyof typeof WORKLOADS;

/** What a workload's answer must hold: an employee, or a page of 10. */
function checkAnswer(workload: Workload, data: { employee?: { id?: string } | null; department?: { employees?: { edges?: unknown[] } } }): void {
  const ok = workload === 'page' ? data.department?.employees?.edges?.length === 10 : typeof data.employee?.id === 'string';
  if (!ok) throw new Error(`${workload}: unexpected answer ${JSON.stringify(data)}`);
}

interface Kind {
  name: string;
  workload: Workload;
  server?: 'tablegraph' | 'apollo' | 'mercurius';
  pid?: number;
  call: () => Promise<void>;
}

/** Per kind: requests per second, server CPU per request (ms), Azurite's and the load generator's, per round. */
type Results = Map<string, { perSecond: number[]; cpuMs: number[]; azuriteMs: number[]; clientMs: number[] }>;

async function measure(kinds: Kind[], azuritePid: number): Promise<Results> {
  const results: Results = new Map();
  for (const k of kinds) await drive(k.call); // a round to warm up: JIT, connections, caches
  for (let round = 0; round < ROUNDS; round++) {
    for (const k of kinds) {
      const cpu0 = k.pid ? cpuMsOf(k.pid) : 0;
      const azurite0 = cpuMsOf(azuritePid);
      const client0 = process.cpuUsage();
      const { calls, perSecond } = await drive(k.call);
      const client = process.cpuUsage(client0);
      const r = results.get(k.name) ?? { perSecond: [], cpuMs: [], azuriteMs: [], clientMs: [] };
      r.perSecond.push(perSecond);
      if (k.pid) r.cpuMs.push((cpuMsOf(k.pid) - cpu0) / calls);
      r.azuriteMs.push((cpuMsOf(azuritePid) - azurite0) / calls);
      r.clientMs.push((client.user + client.system) / 1000 / calls);
      results.set(k.name, r);
    }
  }
  return results;
}

function report(kinds: Kind[], results: Results): void {
  const rate = (name: string) => median(results.get(name)!.perSecond);
  const cpu = (name: string) => median(results.get(name)!.cpuMs);
  const of = (server: string, workload: Workload) => kinds.find((k) => k.server === server && k.workload === workload)!.name;
  console.log(`peer benchmark: ${ROUNDS} interleaved rounds of ${SECONDS} s per kind, ${CONCURRENCY} in flight, Azurite in memory, ${os.cpus().length} cores`);
  console.log('kind | per second (median) | vs Apollo | server CPU per request, ms | Azurite CPU, ms | load generator CPU, ms');
  for (const k of kinds) {
    const base = of('apollo', k.workload);
    const ratio = k.pid === undefined ? '-' : `${(rate(k.name) / rate(base)).toFixed(2)}x`;
    const r = results.get(k.name)!;
    const rounds = process.env.BENCH_ROUNDS ? ` | rounds: ${r.cpuMs.map((c) => c.toFixed(2)).join(' ')}` : '';
    console.log(
      `${k.name} | ${rate(k.name).toFixed(0)} | ${ratio} | ${k.pid ? cpu(k.name).toFixed(3) : '-'} | ${median(r.azuriteMs).toFixed(3)} | ${median(r.clientMs).toFixed(3)}${rounds}`,
    );
  }
  const met = (ok: boolean) => (ok ? 'met' : 'NOT MET');
  const lines: string[] = [];
  const vsApollo = (w: Workload) => rate(of('tablegraph', w)) / rate(of('apollo', w));
  const cpuVs = (w: Workload, server: string) => cpu(of('tablegraph', w)) / cpu(of(server, w));
  const has = (w: Workload) => kinds.some((k) => k.workload === w);
  const target = (text: string, value: () => number, goal: (v: number) => boolean) => {
    if (!has(text.split(':')[0] as Workload)) return;
    const v = value();
    lines.push(`  ${text}: ${v.toFixed(2)} — ${met(goal(v))}`);
  };
  const atLeast = (goal: number) => (v: number) => v >= goal;
  const atMost = (goal: number) => (v: number) => v <= goal;
  target("hot: req/s vs Apollo's (≥ 1.25)", () => vsApollo('hot'), atLeast(1.25));
  target("hot: CPU per request vs Mercurius's (≤ 1)", () => cpuVs('hot', 'mercurius'), atMost(1));
  target("variables: CPU per request vs Mercurius's (≤ 1)", () => cpuVs('variables', 'mercurius'), atMost(1));
  target("text: req/s vs Apollo's (≥ 1)", () => vsApollo('text'), atLeast(1));
  target("text: CPU per request vs Apollo's (≤ 1)", () => cpuVs('text', 'apollo'), atMost(1));
  target("page: req/s vs Apollo's (≥ 1)", () => vsApollo('page'), atLeast(1));
  target("page: CPU per request vs Mercurius's (≤ 1)", () => cpuVs('page', 'mercurius'), atMost(1));
  const all = lines.every((l) => l.endsWith('— met'));
  console.log(`targets (${all ? 'all met' : 'not all met'}):\n${lines.join('\n')}`);
}

function printProfile(dir: string): void {
  const file = fs.readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
  if (!file) throw new Error('no CPU profile was written');
  console.log(`tablegraph's CPU profile on ${PROFILE}, top self time:`);
  for (const row of topSelfTime(path.join(dir, file), 25)) console.log(row);
  console.log("\ntop total time of the project's and its libraries' functions:");
  for (const row of topTotalTime(path.join(dir, file), 50, /\/(src|node_modules)\//)) console.log(row);
  if (process.env.KEEP_PROFILE) console.log(`profile kept: ${path.join(dir, file)}`);
  else fs.rmSync(dir, { recursive: true, force: true });
}

async function main(): Promise<void> {
  const azurite = await startAzurite({ inMemory: true });
  const children: ChildProcess[] = [];
  const pools: Pool[] = [];
  try {
    await seedBenchEmployees(azurite.connectionString, PREFIX, DEPARTMENT, EMPLOYEES);
    const ports = { tablegraph: await freePort(), apollo: await freePort(), mercurius: await freePort(), ceiling: await freePort() };
    if (PROFILE && !(PROFILE in WORKLOADS)) throw new Error(`--profile takes one of ${Object.keys(WORKLOADS).join(', ')}`);
    const profileDir = PROFILE ? fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-profile-')) : undefined;
    const tablegraph = (
      await startServerProcess([...(profileDir ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : []), ...commandArgs('start', 'dist')], ports.tablegraph, {
        AZURE_STORAGE_CONNECTION_STRING: azurite.connectionString,
        TABLEGRAPH_TABLE_PREFIX: PREFIX,
        TABLEGRAPH_WORKER: 'off',
        TABLEGRAPH_CURSOR_SECRET: 'bench',
        TABLEGRAPH_RATE_LIMIT: '100000000',
      })
    ).child;
    children.push(tablegraph);
    const apollo = await startPeer('peer-server.ts', azurite.connectionString, ports.apollo);
    children.push(apollo);
    const mercurius = await startPeer('mercurius-server.ts', azurite.connectionString, ports.mercurius);
    children.push(mercurius);
    const ceiling = await startPeer('ceiling-server.ts', azurite.connectionString, ports.ceiling);
    children.push(ceiling);
    const raw = TableClient.fromConnectionString(azurite.connectionString, `${PREFIX}Directory`, { allowInsecureConnection: true });
    // undici's Pool, not fetch: fetch's WHATWG layers cost the load generator about twice the CPU per call.
    const poolOf = (port: number, urlPath: string, workload: Workload) => {
      const pool = new Pool(`http://127.0.0.1:${port}`, { connections: CONCURRENCY, pipelining: 1 });
      pools.push(pool);
      return async () => {
        const res = await pool.request({ path: urlPath, method: 'POST', headers: { 'content-type': 'application/json' }, body: WORKLOADS[workload]() });
        const json = (await res.body.json()) as { errors?: unknown; data?: Parameters<typeof checkAnswer>[1] };
        if (res.statusCode !== 200 || json.errors) throw new Error(`${res.statusCode} ${JSON.stringify(json.errors)}`);
        checkAnswer(workload, json.data ?? {});
      };
    };
    const servers = [
      { server: 'apollo' as const, label: 'Apollo + DataLoader', pid: apollo.pid, port: ports.apollo, path: '/' },
      { server: 'mercurius' as const, label: 'Mercurius + graphql-jit', pid: mercurius.pid, port: ports.mercurius, path: '/graphql' },
      { server: 'tablegraph' as const, label: 'tablegraph', pid: tablegraph.pid, port: ports.tablegraph, path: '/graphql' },
    ];
    const kinds: Kind[] =
      ONLY && !ONLY.includes('hot')
        ? []
        : [
            {
              name: 'hot: raw getEntity',
              workload: 'hot',
              call: async () => void (await raw.getEntity(DEPARTMENT, 'empid_00000007', { queryOptions: { select: ['firstName', 'lastName', 'title'] } })),
            },
            { name: 'hot: ceiling, HTTP + one REST GET, no GraphQL', workload: 'hot', pid: ceiling.pid, call: poolOf(ports.ceiling, '/', 'hot') },
          ];
    for (const workload of (ONLY ?? Object.keys(WORKLOADS)) as Workload[]) {
      for (const s of servers) kinds.push({ name: `${workload}: ${s.label}`, workload, server: s.server, pid: s.pid, call: poolOf(s.port, s.path, workload) });
    }
    if (profileDir) {
      const profiled = await measure(
        kinds.filter((k) => k.server === 'tablegraph' && k.workload === PROFILE),
        azurite.pid,
      );
      for (const [name, r] of profiled) console.log(`${name}: ${median(r.perSecond).toFixed(0)} per second, ${median(r.cpuMs).toFixed(3)} ms CPU per request`);
      await stopProcess(tablegraph);
      printProfile(profileDir);
    } else report(kinds, await measure(kinds, azurite.pid));
  } finally {
    await Promise.all(pools.map((p) => p.close()));
    for (const c of children) await stopProcess(c);
    await azurite.stop();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
