/**
 * Compiled against tsx: the server started as `npm start` runs it (`node dist/…`) and as `npm run dev` runs it
 * (`node --import tsx src/…`), in interleaved rounds of one run on one in-memory Azurite: time from spawn to a
 * 200 from /health (ms), the CPU the process used to get there (ms), its RSS once serving, and then — driven with
 * GraphQL point queries at 16 in flight — requests per second and the server's CPU per point query (ms).
 *
 *   npx tsx test/bench/build-bench.ts [--rounds 3] [--seconds 4]
 *
 * Needs `npm run build` first (`npm run bench` does it).
 */
import os from 'node:os';
import { Pool } from 'undici';
import { startAzurite } from '../../src/storage/azurite';
import { freePort } from '../support/processes';
import { commandArgs, cpuMsOf, median, rssOf, startServerProcess, stopProcess, type ServerCode } from './bench-process';

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const ROUNDS = arg('rounds', 3);
const SECONDS = arg('seconds', 4);
const CONCURRENCY = 16;
const QUERY = JSON.stringify({ query: '{ employee(departmentId: "Marketing", id: "1") { id firstName lastName } }' });

interface Sample {
  startMs: number;
  startCpuMs: number;
  rss: number;
  perSecond: number;
  cpuPerQueryMs: number;
}

async function round(code: ServerCode, connectionString: string, prefix: string): Promise<Sample> {
  const port = await freePort();
  const env = {
    AZURE_STORAGE_CONNECTION_STRING: connectionString,
    TABLEGRAPH_TABLE_PREFIX: prefix,
    TABLEGRAPH_RATE_LIMIT: '100000000',
    TABLEGRAPH_CURSOR_SECRET: 'bench',
  };
  const { child, startMs } = await startServerProcess(commandArgs('start', code), port, { ...env, LOG_LEVEL: 'warn' });
  const pid = child.pid!;
  const startCpuMs = cpuMsOf(pid);
  const rss = rssOf(pid);
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: CONCURRENCY });
  try {
    const post = async () => {
      const res = await pool.request({ path: '/graphql', method: 'POST', headers: { 'content-type': 'application/json' }, body: QUERY });
      const json = (await res.body.json()) as { errors?: unknown };
      if (res.statusCode !== 200 || json.errors) throw new Error(`${res.statusCode} ${JSON.stringify(json.errors)}`);
    };
    const drive = async (seconds: number) => {
      const end = performance.now() + seconds * 1000;
      let n = 0;
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (performance.now() < end) {
            await post();
            n++;
          }
        }),
      );
      return n;
    };
    await drive(1); // warm-up: JIT, connections
    const cpu0 = cpuMsOf(pid);
    const calls = await drive(SECONDS);
    return { startMs, startCpuMs, rss, perSecond: calls / SECONDS, cpuPerQueryMs: (cpuMsOf(pid) - cpu0) / calls };
  } finally {
    await pool.close();
    await stopProcess(child);
  }
}

async function main(): Promise<void> {
  const azurite = await startAzurite({ inMemory: true });
  const samples: Record<ServerCode, Sample[]> = { dist: [], tsx: [] };
  try {
    // One table prefix for all rounds: the first start seeds the store, the others find it seeded.
    const prefix = 'buildbench';
    await stopProcess(
      (
        await startServerProcess(commandArgs('start', 'dist'), await freePort(), {
          AZURE_STORAGE_CONNECTION_STRING: azurite.connectionString,
          TABLEGRAPH_TABLE_PREFIX: prefix,
          LOG_LEVEL: 'warn',
        })
      ).child,
    );
    for (let r = 0; r < ROUNDS; r++) {
      for (const code of ['dist', 'tsx'] as const) samples[code].push(await round(code, azurite.connectionString, prefix));
    }
  } finally {
    await azurite.stop();
  }
  const m = (code: ServerCode, key: keyof Sample) => median(samples[code].map((s) => s[key]));
  console.log(
    `compiled (node dist/) against tsx: ${ROUNDS} interleaved rounds, medians; point queries at ${CONCURRENCY} in flight for ${SECONDS} s, Azurite in memory, ${os.cpus().length} cores`,
  );
  console.log('server code | start-up to /health 200, ms | CPU to start, ms | RSS serving, MB | point queries/s | server CPU per point query, ms');
  for (const code of ['dist', 'tsx'] as const) {
    console.log(
      `${code === 'dist' ? 'compiled (npm start)' : 'tsx (npm run dev)'} | ${m(code, 'startMs').toFixed(0)} | ${m(code, 'startCpuMs').toFixed(0)} | ${(m(code, 'rss') / 1e6).toFixed(1)} | ${m(code, 'perSecond').toFixed(0)} | ${m(code, 'cpuPerQueryMs').toFixed(3)}`,
    );
  }
  console.log(
    `compiled / tsx: start-up ${(m('dist', 'startMs') / m('tsx', 'startMs')).toFixed(2)}x, CPU per point query ${(m('dist', 'cpuPerQueryMs') / m('tsx', 'cpuPerQueryMs')).toFixed(2)}x`,
  );
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
