/**
 * Noisy-neighbour benchmark: `npm run bench -- tenants [--seconds S] [--budget N]` (not part of `npm test`).
 *
 * On its own in-memory Azurite, a server process (compiled, as `npm start` runs it) over a tenant-scoped schema
 * written for this benchmark (`@tenancy`, docs/tenancy.md), six tenants of 200 profiles each, and a budget of N
 * storage calls a second per tenant (TABLEGRAPH_TENANT_TRANSACTIONS_PER_SECOND, default 50). Five quiet tenants each
 * send point queries one at a time at 80% of their budget, alone (idle, before and after) and while the noisy tenant
 * sends point queries paced at 10× its budget (autocannon, from a thread of its own), without waiting for answers. Prints the quiet
 * tenants' p50 and p99 (pooled), the ratio of their p99 under the noise to their p99 idle (the target: ≤ 1.5×), the
 * server's CPU per request, and what the noisy tenant got: answered, refused with RATE_LIMITED and a `Retry-After`;
 * then the same noise against a server without a budget to speak of, for comparison. The machine bounds the noise
 * it can take: on 2 cores, at a budget of 100 (a noisy tenant at 1,000 requests a second beside 800 quiet ones) the
 * quiet tenants no longer keep their pace, with a budget or without.
 */
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { SignJWT } from 'jose';
import { startAzurite } from '../../src/storage/azurite';
import { freePort } from '../support/processes';
import { commandArgs, cpuMsOf, percentile, startServerProcess, stopProcess } from './bench-process';

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const SECONDS = arg('seconds', 20);
const BUDGET = arg('budget', 50);
/** The quiet tenant's pace: within its budget (requests/s). */
const QUIET_RATE = Math.max(1, Math.floor(BUDGET * 0.8));
const PROFILES = 200;
/** Quiet tenants, each within its budget: their latencies pooled, so that a p99 rests on thousands of requests. */
const QUIET_TENANTS = 10;
const SECRET = 'a-benchmark-secret-of-32-characters-at-least';
const TARGET = 1.5;

const SDL = `
extend schema @tenancy(claim: "tid")
type Profile @entity(table: "Profiles", partitionKey: "team_{team}", rowKey: "p_{id}") {
  team: ID!
  id: ID!
  name: String!
}
type Query {
  profile(team: ID!, id: ID!): Profile @point
}
type Mutation {
  createProfile(input: CreateProfileInput!): ProfilePayload! @write(entity: "Profile", action: CREATE)
}
`;
const POINT = 'query($id: ID!) { profile(team: "a", id: $id) { id name } }';

const sign = (tid: string) =>
  new SignJWT({ sub: `someone@${tid}.test`, tid }).setProtectedHeader({ alg: 'HS256' }).setExpirationTime('2h').sign(new TextEncoder().encode(SECRET));

async function post(
  url: string,
  token: string,
  query: string,
  variables: Record<string, unknown>,
): Promise<{ status: number; code?: string; retryAfter: string | null }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await res.json()) as { errors?: Array<{ extensions?: { code?: string } }> };
  return { status: res.status, code: body.errors?.[0]?.extensions?.code, retryAfter: res.headers.get('retry-after') };
}

/**
 * A quiet tenant's point queries, one at a time, paced at QUIET_RATE (within its budget), for SECONDS from `offsetMs`
 * on: their latencies (ms).
 */
async function quiet(url: string, token: string, offsetMs = 0): Promise<number[]> {
  const latencies: number[] = [];
  const start = performance.now() + offsetMs;
  // Never faster than its pace, even after a slow answer: it stays within its budget.
  for (let i = 0, next = start; performance.now() - start < SECONDS * 1000; i++, next = Math.max(next + 1000 / QUIET_RATE, performance.now())) {
    const wait = next - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    const t = performance.now();
    const r = await post(url, token, POINT, { id: String(i % PROFILES) });
    if (r.code) throw new Error(`the quiet tenant was refused: ${r.code}`);
    latencies.push(performance.now() - t);
  }
  return latencies;
}

/**
 * The noisy tenant: point queries paced at `perSecond` over 4 connections for SECONDS, none waiting for another, sent
 * by autocannon from a worker thread (its HTTP client costs a fraction of fetch's, so the noise is the server's to
 * bear, not the machine's). @returns the answers by HTTP status
 */
async function noisy(url: string, token: string, perSecond: number): Promise<Map<string, number>> {
  const result = await autocannon({
    url,
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ query: POINT, variables: { id: '1' } }),
    connections: 4,
    overallRate: perSecond,
    duration: SECONDS,
    workers: 1,
  });
  const byStatus = Object.entries(result.statusCodeStats as Record<string, { count: number }>);
  return new Map(byStatus.map(([status, { count }]) => [status === '200' ? 'answered' : status === '429' ? 'RATE_LIMITED (429)' : `HTTP ${status}`, count]));
}

const ms = (x: number) => `${x.toFixed(2)} ms`;

async function main(): Promise<void> {
  const azurite = await startAzurite({ inMemory: true });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-tenants-bench-'));
  let server: ChildProcess | undefined;
  try {
    fs.writeFileSync(path.join(dir, 'schema.graphql'), SDL);
    const port = await freePort();
    const start = async (budget: number) =>
      (
        await startServerProcess(commandArgs('start', 'dist'), port, {
          AZURE_STORAGE_CONNECTION_STRING: azurite.connectionString,
          TABLEGRAPH_SCHEMA_DIR: dir,
          TABLEGRAPH_TABLE_PREFIX: 'tenantsbench',
          TABLEGRAPH_WORKER: 'off',
          TABLEGRAPH_JWT_SECRET: SECRET,
          TABLEGRAPH_RATE_LIMIT: '100000000',
          TABLEGRAPH_TENANT_TRANSACTIONS_PER_SECOND: String(budget),
          LOG_LEVEL: 'warn',
        })
      ).child;
    const url = `http://127.0.0.1:${port}/graphql`;
    const quietTokens = await Promise.all(Array.from({ length: QUIET_TENANTS }, (_, i) => sign(`quiet${i}`)));
    const noisyToken = await sign('noisy');
    // Loaded through a server without a budget to speak of (a create is estimated at 8 calls), then served with one.
    server = await start(1_000_000);
    for (const token of [...quietTokens, noisyToken]) {
      for (let i = 0; i < PROFILES; i++) {
        const r = await post(url, token, 'mutation($i: CreateProfileInput!) { createProfile(input: $i) { profile { id } } }', {
          i: { team: 'a', id: String(i), name: `profile ${i}` },
        });
        if (r.code !== undefined) throw new Error(`a create failed: ${r.code}`);
      }
    }
    await stopProcess(server);
    server = await start(BUDGET);
    // Spread over each pace's interval, not all at once: the quiet tenants do not queue behind one another.
    const quietAll = async () => (await Promise.all(quietTokens.map((t, i) => quiet(url, t, (i * 1000) / QUIET_RATE / QUIET_TENANTS)))).flat();
    await quietAll(); // warm-up: the first documents compiled, connections open
    const cpu0 = cpuMsOf(server.pid!);
    const idleBefore = await quietAll();
    const cpu1 = cpuMsOf(server.pid!);
    const [underNoise, outcomes] = await Promise.all([quietAll(), noisy(url, noisyToken, BUDGET * 10)]);
    const cpu2 = cpuMsOf(server.pid!);
    const idleAfter = await quietAll();
    const idleP99 = (percentile(idleBefore, 99) + percentile(idleAfter, 99)) / 2;
    const ratio = percentile(underNoise, 99) / idleP99;
    console.log(
      `in-memory Azurite, Node ${process.version}; budget ${BUDGET} storage calls/s per tenant; ${QUIET_TENANTS} quiet tenants at ${QUIET_RATE} requests/s each, the noisy one at ${BUDGET * 10}; ${SECONDS} s per phase`,
    );
    console.log('| quiet tenants | requests | p50 | p99 |');
    console.log('| --- | --- | --- | --- |');
    for (const [name, xs] of [
      ['idle, before', idleBefore],
      ['beside the noisy tenant', underNoise],
      ['idle, after', idleAfter],
    ] as const) {
      console.log(`| ${name} | ${xs.length} | ${ms(percentile(xs, 50))} | ${ms(percentile(xs, 99))} |`);
    }
    const noisyRequests = [...outcomes.values()].reduce((a, b) => a + b, 0);
    console.log(
      `server CPU: ${((cpu1 - cpu0) / idleBefore.length).toFixed(2)} ms per quiet request idle (the server's own timers included); ${((cpu2 - cpu1 - (cpu1 - cpu0)) / noisyRequests).toFixed(2)} ms per noisy request (the noisy phase's CPU less the idle phase's, over its requests)`,
    );
    console.log(`noisy tenant: ${[...outcomes].map(([k, n]) => `${n} ${k}`).join(', ')}`);
    console.log(`quiet tenants' p99 beside the noisy tenant / idle p99: ${ratio.toFixed(2)}× — target ≤ ${TARGET}×: ${ratio <= TARGET ? 'met' : 'NOT met'}`);
    // The same noise with no budget to speak of: what the budget spares the quiet tenants.
    await stopProcess(server);
    server = await start(1_000_000);
    await quietAll();
    const unbudgetedIdle = await quietAll();
    const [unbudgeted, served] = await Promise.all([quietAll(), noisy(url, noisyToken, BUDGET * 10)]);
    console.log(
      `without a budget: quiet p99 ${ms(percentile(unbudgetedIdle, 99))} idle, ${ms(percentile(unbudgeted, 99))} beside the noisy tenant (${(percentile(unbudgeted, 99) / percentile(unbudgetedIdle, 99)).toFixed(2)}×); noisy tenant: ${[...served].map(([k, n]) => `${n} ${k}`).join(', ')}`,
    );
  } finally {
    await stopProcess(server);
    await azurite.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
