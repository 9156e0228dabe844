/**
 * tablegraph against the server a user would write by hand (peer-server.ts: Apollo Server 5, one resolver, a
 * per-request DataLoader over `TableClient.getEntity`), on one in-memory Azurite, the same employee read by all: raw
 * `getEntity` calls (the floor), the ceiling of any server (ceiling-server.ts: node:http and one signed REST GET, no
 * GraphQL), the hand-written server and tablegraph (compiled, as `npm start` runs it, its request
 * log at info to /dev/null), each a process of its own, in interleaved rounds; the same on employees drawn at random
 * among 1,000 (two requests in flight then seldom read one entity, so tablegraph sends about one point query per
 * request, as the hand-written server does); and `{ __typename }` on both servers.
 *
 *   npx tsx test/bench/peer-bench.ts [--seconds 5] [--rounds 3] [--concurrency 16]
 *
 * Prints per kind: requests per second (median of the rounds), the ratio to the hand-written server's, the server's
 * CPU per request (ms, from /proc: user + system), Azurite's and the load generator's (on two cores all three share
 * them, so each one's CPU bounds the others' rate). The targets of tablegraph's read path: point queries at
 * least 1.25× the hand-written server's, at no more CPU per request; `{ __typename }` at least 1.25× too.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { TableClient } from '@azure/data-tables';
import { Pool } from 'undici';
import { startAzurite } from '../../src/storage/azurite';
import { freePort } from '../support/processes';
import { benchEnv, commandArgs, cpuMsOf, median, ROOT, startServerProcess, stopProcess } from './bench-process';
import { seedBenchEmployees } from './bench-employees';

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const SECONDS = arg('seconds', 5);
const ROUNDS = arg('rounds', 3);
const CONCURRENCY = arg('concurrency', 16);
const PREFIX = 'peerbench';
const DEPARTMENT = 'BENCH';

/** Runs `call` from CONCURRENCY loops for SECONDS (s); returns calls and calls per second. */
async function drive(call: () => Promise<void>): Promise<{ calls: number; perSecond: number }> {
  const end = performance.now() + SECONDS * 1000;
  let calls = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < end) {
        await call();
        calls++;
      }
    }),
  );
  return { calls, perSecond: calls / SECONDS };
}

/** A server of test/bench (the hand-written one, the ceiling), once it listens. */
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

async function main(): Promise<void> {
  const azurite = await startAzurite({ inMemory: true });
  const children: ChildProcess[] = [];
  const pools: Pool[] = [];
  try {
    await seedBenchEmployees(azurite.connectionString, PREFIX, DEPARTMENT, 1000);
    const [ours, theirs, bare] = [await freePort(), await freePort(), await freePort()];
    const tablegraph = (
      await startServerProcess(commandArgs('start', 'dist'), ours, {
        AZURE_STORAGE_CONNECTION_STRING: azurite.connectionString,
        TABLEGRAPH_TABLE_PREFIX: PREFIX,
        TABLEGRAPH_WORKER: 'off',
        TABLEGRAPH_CURSOR_SECRET: 'bench',
        TABLEGRAPH_RATE_LIMIT: '100000000',
      })
    ).child;
    children.push(tablegraph);
    const peer = await startPeer('peer-server.ts', azurite.connectionString, theirs);
    children.push(peer);
    const ceiling = await startPeer('ceiling-server.ts', azurite.connectionString, bare);
    children.push(ceiling);
    const raw = TableClient.fromConnectionString(azurite.connectionString, `${PREFIX}Directory`, { allowInsecureConnection: true });
    // undici's Pool, not fetch: fetch's WHATWG layers cost the load generator about twice the CPU per call.
    const poolOf = (port: number) => {
      const pool = new Pool(`http://127.0.0.1:${port}`, { connections: CONCURRENCY, pipelining: 1 });
      pools.push(pool);
      return async (urlPath: string, body: string) => {
        const res = await pool.request({ path: urlPath, method: 'POST', headers: { 'content-type': 'application/json' }, body });
        const json = (await res.body.json()) as { errors?: unknown; data?: { employee?: unknown } };
        if (res.statusCode !== 200 || json.errors) throw new Error(`${res.statusCode} ${JSON.stringify(json.errors)}`);
      };
    };
    const [toOurs, toTheirs, toBare] = [poolOf(ours), poolOf(theirs), poolOf(bare)];
    const point = JSON.stringify({
      query: 'query Point($d: ID!, $id: ID!) { employee(departmentId: $d, id: $id) { id firstName lastName title } }',
      variables: { d: DEPARTMENT, id: '7' },
    });
    const typename = '{"query":"{ __typename }"}';
    // The same query for an employee drawn at random among the 1,000 seeded: no two requests in flight share a read.
    const distinct = () =>
      JSON.stringify({
        query: 'query Point($d: ID!, $id: ID!) { employee(departmentId: $d, id: $id) { id firstName lastName title } }',
        variables: { d: DEPARTMENT, id: String(1 + Math.floor(Math.random() * 1000)) },
      });
    const kinds: Array<{ name: string; pid?: number; call: () => Promise<void> }> = [
      {
        name: 'raw getEntity',
        call: async () => void (await raw.getEntity(DEPARTMENT, 'empid_00000007', { queryOptions: { select: ['firstName', 'lastName', 'title'] } })),
      },
      { name: 'ceiling: HTTP + one REST GET, no GraphQL', pid: ceiling.pid, call: () => toBare('/', point) },
      { name: 'hand-written point query', pid: peer.pid, call: () => toTheirs('/', point) },
      { name: 'tablegraph point query', pid: tablegraph.pid, call: () => toOurs('/graphql', point) },
      { name: 'hand-written, distinct employees', pid: peer.pid, call: () => toTheirs('/', distinct()) },
      { name: 'tablegraph, distinct employees', pid: tablegraph.pid, call: () => toOurs('/graphql', distinct()) },
      { name: 'hand-written { __typename }', pid: peer.pid, call: () => toTheirs('/', typename) },
      { name: 'tablegraph { __typename }', pid: tablegraph.pid, call: () => toOurs('/graphql', typename) },
    ];
    const results = new Map<string, { perSecond: number[]; cpuMs: number[]; azuriteMs: number[]; clientMs: number[] }>();
    for (const k of kinds) await drive(k.call); // warm-up: JIT, connections
    for (let round = 0; round < ROUNDS; round++) {
      for (const k of kinds) {
        const cpu0 = k.pid ? cpuMsOf(k.pid) : 0;
        const azurite0 = cpuMsOf(azurite.pid);
        const client0 = process.cpuUsage();
        const { calls, perSecond } = await drive(k.call);
        const client = process.cpuUsage(client0);
        const r = results.get(k.name) ?? { perSecond: [], cpuMs: [], azuriteMs: [], clientMs: [] };
        r.perSecond.push(perSecond);
        if (k.pid) r.cpuMs.push((cpuMsOf(k.pid) - cpu0) / calls);
        r.azuriteMs.push((cpuMsOf(azurite.pid) - azurite0) / calls);
        r.clientMs.push((client.user + client.system) / 1000 / calls);
        results.set(k.name, r);
      }
    }
    const rate = (name: string) => median(results.get(name)!.perSecond);
    const cpu = (name: string) => median(results.get(name)!.cpuMs);
    console.log(
      `peer benchmark: ${ROUNDS} interleaved rounds of ${SECONDS} s per kind, ${CONCURRENCY} in flight, Azurite in memory, ${os.cpus().length} cores`,
    );
    console.log('kind | per second (median) | vs the hand-written server | server CPU per request, ms | Azurite CPU, ms | load generator CPU, ms');
    for (const k of kinds) {
      const base = k.name.includes('__typename')
        ? 'hand-written { __typename }'
        : k.name.includes('distinct')
          ? 'hand-written, distinct employees'
          : 'hand-written point query';
      const ratio = k.name === 'raw getEntity' ? '-' : `${(rate(k.name) / rate(base)).toFixed(2)}x`;
      const r = results.get(k.name)!;
      console.log(
        `${k.name} | ${rate(k.name).toFixed(0)} | ${ratio} | ${k.pid ? cpu(k.name).toFixed(3) : '-'} | ${median(r.azuriteMs).toFixed(3)} | ${median(r.clientMs).toFixed(3)}`,
      );
    }
    const pointRatio = rate('tablegraph point query') / rate('hand-written point query');
    const cpuRatio = cpu('tablegraph point query') / cpu('hand-written point query');
    const typenameRatio = rate('tablegraph { __typename }') / rate('hand-written { __typename }');
    const distinctRatio = rate('tablegraph, distinct employees') / rate('hand-written, distinct employees');
    console.log(
      `targets: point queries ${pointRatio.toFixed(2)}x the hand-written server's (≥ 1.25: ${pointRatio >= 1.25 ? 'met' : 'not met'}), ` +
        `CPU per point query ${cpuRatio.toFixed(2)}x its (≤ 1: ${cpuRatio <= 1 ? 'met' : 'not met'}), ` +
        `{ __typename } ${typenameRatio.toFixed(2)}x (≥ 1.25: ${typenameRatio >= 1.25 ? 'met' : 'not met'}); ` +
        `distinct employees ${distinctRatio.toFixed(2)}x (no target: reads seldom shared)`,
    );
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
