/**
 * Scale-out on one storage account: 1, 2 and 3 servers (`npm start`, compiled, their inline worker off) behind a
 * round-robin client, and 1, 2 and 3 workers (`npm run worker`), all processes of their own on one in-memory Azurite,
 * the HR schema. In one run:
 * 1. Reads: GraphQL point queries, 32 in flight, spread over the first 1, 2, 3 servers: requests per second.
 * 2. Writes into many partitions (creates with a unique e-mail into 30 departments) and into one (one department),
 *    32 in flight: acknowledged writes per second. Their fan-out messages wait in the queue (no worker runs yet).
 * 3. Workers: the backlog drained by 1, then 2, then 3 workers, 10 s each (messages per second); then, with the queue
 *    empty, creates paced at 50 per second with 1, 2, 3 workers: the fan-out lag a client sees — from the create's
 *    acknowledgement to the employee answering `employeesByLastName` (an inter-partition index only the worker writes),
 *    polled every 50 ms — p50 and p99.
 * 4. A server killed: reads and creates on 3 servers with 2 workers; after 4 s one server gets SIGKILL. Failed
 *    requests are counted against the requests that were in flight on it; the client then leaves it out (as a load
 *    balancer's health probe would). Every acknowledged create is read back, and `verify` runs once the queue drained.
 * Each phase prints each process's CPU (cores used: CPU seconds per second): on a 2-core machine the figures are bounded
 * by the cores all processes share, Azurite's among them; the CPU columns show where they went.
 *
 *   npx tsx test/bench/scaleout-bench.ts [--seconds 5]
 *
 * Needs `npm run build` first (`npm run bench` does it).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';
import { workQueueNames } from '../../src/queue/sender';
import { startAzurite } from '../../src/storage/azurite';
import { QueueStore } from '../../src/storage/queue-store';
import { leaseMs } from '../../src/write/reservations';
import { freePort } from '../support/processes';
import { benchEnv, commandArgs, cpuMsOf, percentile, ROOT, startServerProcess, stopProcess } from './bench-process';

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const SECONDS = arg('seconds', 5);
const IN_FLIGHT = 32;
const DEPARTMENTS = 30;
const PREFIX = 'scaleout';
const CREATE = 'mutation($input: CreateEmployeeInput!) { createEmployee(input: $input) { employee { id } } }';
const READ = '{ employee(departmentId: "Marketing", id: "1") { id firstName lastName } }';

interface Server {
  name: string;
  child: ChildProcess;
  pool: Pool;
  alive: boolean;
  inFlight: number;
}

interface Outcome {
  ok: boolean;
  /** The error code of a failed answer. */
  code?: string;
  /** The request never got an answer (connection refused or reset): the server died under it. */
  lost?: boolean;
  server: Server;
  ms: number;
}

/** One GraphQL POST to `server`: its status and JSON body. */
async function ask(server: Server, query: string, variables?: Record<string, unknown>): Promise<{ status: number; json: { data?: any; errors?: unknown[] } }> {
  const res = await server.pool.request({
    path: '/graphql',
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query, variables }),
  });
  return { status: res.statusCode, json: (await res.body.json()) as { data?: any; errors?: unknown[] } };
}

/** One GraphQL POST to `server`; an answer with errors counts as a failure, a dropped connection as lost. */
async function post(server: Server, query: string, variables?: Record<string, unknown>): Promise<Outcome> {
  const t0 = performance.now();
  server.inFlight++;
  try {
    const { status, json } = await ask(server, query, variables);
    const code = (json.errors?.[0] as { extensions?: { code?: string } } | undefined)?.extensions?.code ?? (status === 200 ? undefined : String(status));
    return { ok: status === 200 && !json.errors, code, server, ms: performance.now() - t0 };
  } catch {
    return { ok: false, lost: true, server, ms: performance.now() - t0 };
  } finally {
    server.inFlight--;
  }
}

/** CPU of each process over a phase, as cores used (CPU s per s). */
class CpuMeter {
  private readonly start = new Map<string, number>();
  private t0 = 0;
  constructor(private readonly processes: () => Array<[string, number]>) {}
  begin(): void {
    this.t0 = performance.now();
    for (const [name, pid] of this.processes()) this.start.set(name, cpuMsOf(pid));
    this.start.set('client', process.cpuUsage().user / 1000 + process.cpuUsage().system / 1000);
  }
  end(): string {
    const s = (performance.now() - this.t0) / 1000;
    const parts: string[] = [];
    for (const [name, pid] of this.processes()) {
      const before = this.start.get(name);
      if (before === undefined) continue;
      try {
        parts.push(`${name} ${((cpuMsOf(pid) - before) / 1000 / s).toFixed(2)}`);
      } catch {
        parts.push(`${name} (killed)`);
      }
    }
    const client = process.cpuUsage().user / 1000 + process.cpuUsage().system / 1000;
    parts.push(`client ${((client - this.start.get('client')!) / 1000 / s).toFixed(2)}`);
    this.start.clear();
    return parts.join(', ');
  }
}

async function main(): Promise<void> {
  const azurite = await startAzurite({ inMemory: true });
  const servers: Server[] = [];
  const workers: ChildProcess[] = [];
  // A long timeout: Azurite's queue garbage collection freezes it for seconds once thousands of messages came and went.
  const queues = new QueueStore({ connectionString: azurite.connectionString, timeoutMs: 60_000 });
  const depth = () => queues.approximateDepth(queue);
  const drained = async () => {
    while ((await depth()) > 0) await sleep(500);
  };
  const queue = workQueueNames(PREFIX).queue;
  const env = {
    AZURE_STORAGE_CONNECTION_STRING: azurite.connectionString,
    TABLEGRAPH_TABLE_PREFIX: PREFIX,
    TABLEGRAPH_CURSOR_SECRET: 'scaleout',
    TABLEGRAPH_RATE_LIMIT: '100000000',
    TABLEGRAPH_WORKER: 'off',
    LOG_LEVEL: 'warn',
  };
  const meter = new CpuMeter(() => [
    ['azurite', azurite.pid],
    ...servers.filter((s) => s.alive).map((s): [string, number] => [s.name, s.child.pid!]),
    ...workers.map((w, i): [string, number] => [`worker${i + 1}`, w.pid!]),
  ]);
  const startWorker = () => {
    const child = spawn(process.execPath, commandArgs('worker', 'dist'), { cwd: ROOT, env: benchEnv(env), stdio: 'ignore' });
    workers.push(child);
  };
  // Printed as they come: a run cut short still shows what it measured.
  const rows = { push: (...lines: string[]) => lines.forEach((l) => console.log(l)) };
  let serial = 0;
  const newEmployee = (department: string) => {
    const id = String(100_000 + ++serial);
    return { departmentId: department, id, email: `s${id}@scale.example`, firstName: 'SCALE', lastName: `OUT${id}` };
  };
  console.log(
    `scale-out benchmark: one in-memory Azurite, ${IN_FLIGHT} requests in flight, ${SECONDS} s per run, ${os.cpus().length} cores shared by every process`,
  );
  try {
    // The first server seeds the store; the others start on it.
    for (let i = 1; i <= 3; i++) {
      const port = await freePort();
      const { child } = await startServerProcess(commandArgs('start', 'dist'), port, env);
      servers.push({ name: `server${i}`, child, pool: new Pool(`http://127.0.0.1:${port}`, { connections: IN_FLIGHT }), alive: true, inFlight: 0 });
    }
    for (let d = 0; d < DEPARTMENTS; d++) {
      const r = await post(servers[0], 'mutation($input: CreateDepartmentInput!) { createDepartment(input: $input) { department { id } } }', {
        input: { id: `D${d}`, name: `D${d}` },
      });
      if (!r.ok) throw new Error('could not create the departments');
    }
    await post(servers[0], 'mutation($input: CreateDepartmentInput!) { createDepartment(input: $input) { department { id } } }', {
      input: { id: 'HOT', name: 'HOT' },
    });

    /** `IN_FLIGHT` loops for SECONDS over the first `n` servers, round robin; returns outcomes and the CPU line. */
    const drive = async (n: number, request: (s: Server) => Promise<Outcome>, seconds = SECONDS) => {
      const outcomes: Outcome[] = [];
      let next = 0;
      meter.begin();
      const end = performance.now() + seconds * 1000;
      await Promise.all(
        Array.from({ length: IN_FLIGHT }, async () => {
          while (performance.now() < end) {
            const live = servers.slice(0, n).filter((s) => s.alive);
            outcomes.push(await request(live[next++ % live.length]));
          }
        }),
      );
      return { outcomes, cpu: meter.end(), perSecond: outcomes.filter((o) => o.ok).length / seconds };
    };

    rows.push('\n1-2. servers | kind | acknowledged per second | failed | p50 / p99 ms | cores used per process');
    for (const [kind, request] of [
      ['point query', (s: Server) => post(s, READ)],
      ['create, 30 partitions', (s: Server) => post(s, CREATE, { input: newEmployee(`D${serial % DEPARTMENTS}`) })],
      ['create, 1 partition', (s: Server) => post(s, CREATE, { input: newEmployee('HOT') })],
    ] as const) {
      for (let n = 1; n <= 3; n++) {
        const { outcomes, cpu, perSecond } = await drive(n, request);
        const ms = outcomes.filter((o) => o.ok).map((o) => o.ms);
        rows.push(
          `${n} | ${kind} | ${perSecond.toFixed(0)} | ${outcomes.filter((o) => !o.ok).length} | ${percentile(ms, 50).toFixed(1)} / ${percentile(ms, 99).toFixed(1)} | ${cpu}`,
        );
      }
    }

    // 3a. The backlog the creates left, drained by 1, 2, 3 workers for 10 s each.
    rows.push('\n3a. workers | backlog at start | messages handled per second | cores used per process');
    for (let k = 1; k <= 3; k++) {
      startWorker();
      const before = await depth();
      meter.begin();
      await sleep(10_000);
      const after = await depth();
      rows.push(`${k} | ${before} | ${((before - after) / 10).toFixed(0)} | ${meter.end()}`);
    }
    const drainStart = performance.now();
    await drained();
    rows.push(`(the rest drained by 3 workers in ${((performance.now() - drainStart) / 1000).toFixed(0)} s)`);

    // 3b. Paced creates, the lag a client sees, with 1, 2, 3 workers (the extra ones stopped first).
    rows.push('\n3b. workers | creates paced at 50/s | lag p50 / p99 / max ms (acknowledged → found by last name) | cores used per process');
    for (let k = 1; k <= 3; k++) {
      while (workers.length > k) await stopProcess(workers.pop());
      while (workers.length < k) startWorker();
      await sleep(1000);
      const lags: number[] = [];
      const pending: Array<Promise<void>> = [];
      meter.begin();
      const t0 = performance.now();
      for (let i = 0; i < 50 * SECONDS * 2; i++) {
        const due = t0 + i * 20;
        const wait = due - performance.now();
        if (wait > 0) await sleep(wait);
        const server = servers[i % 3];
        const input = newEmployee(`D${i % DEPARTMENTS}`);
        pending.push(
          (async () => {
            const r = await post(server, CREATE, { input });
            if (!r.ok) return;
            const acked = performance.now();
            const byLastName = 'query($n: String!) { employeesByLastName(lastName: $n, first: 1) { edges { node { id } } } }';
            while (!(await ask(server, byLastName, { n: input.lastName })).json.data?.employeesByLastName.edges.length) await sleep(50);
            lags.push(performance.now() - acked);
          })(),
        );
      }
      await Promise.all(pending);
      rows.push(
        `${k} | ${lags.length} | ${percentile(lags, 50).toFixed(0)} / ${percentile(lags, 99).toFixed(0)} / ${Math.max(...lags).toFixed(0)} | ${meter.end()}`,
      );
    }

    // 4. One server killed mid-run.
    while (workers.length > 2) await stopProcess(workers.pop());
    const acknowledged: Array<ReturnType<typeof newEmployee>> = [];
    const victim = servers[2];
    let inFlightAtKill = -1;
    const killer = (async () => {
      await sleep(4000);
      inFlightAtKill = victim.inFlight;
      victim.child.kill('SIGKILL');
    })();
    const mixed = await drive(
      3,
      async (s) => {
        const input = newEmployee(`D${serial % DEPARTMENTS}`);
        const create = serial % 2 === 0;
        const r = create ? await post(s, CREATE, { input }) : await post(s, READ);
        if (r.lost) s.alive = false; // the load balancer's probe: a server that drops connections gets no more requests
        if (r.ok && create) acknowledged.push(input);
        return r;
      },
      12,
    );
    await killer;
    const failedOnVictim = mixed.outcomes.filter((o) => !o.ok && o.server === victim).length;
    const elsewhere = mixed.outcomes.filter((o) => !o.ok && o.server !== victim);
    const codes = new Map<string, number>();
    for (const o of elsewhere) codes.set(o.code ?? 'lost', (codes.get(o.code ?? 'lost') ?? 0) + 1);
    const failedElsewhere = `${elsewhere.length}${codes.size ? ` (${[...codes].map(([c, n]) => `${c} ${n}`).join(', ')})` : ''}`;
    let missing = 0;
    for (const e of acknowledged) {
      const { json } = await ask(servers[0], 'query($d: ID!, $id: ID!) { employee(departmentId: $d, id: $id) { email } }', { d: e.departmentId, id: e.id });
      if (json.data?.employee?.email !== e.email) missing++;
    }
    // A create in flight on the killed server may have left its reservation and its message; the worker retries that
    // message, hidden, until the reservation's lease is over (2 × the storage timeout + 5 s), then removes it.
    await drained();
    await sleep(leaseMs(10_000) + 2000);
    await drained();
    const verify = spawn(process.execPath, commandArgs('verify', 'dist'), {
      cwd: ROOT,
      env: benchEnv(env),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let verifyOut = '';
    verify.stdout!.on('data', (d: Buffer) => (verifyOut += d.toString('utf8')));
    const verifyCode = await new Promise<number | null>((resolve) => verify.once('exit', resolve));
    rows.push(
      '\n4. server killed (SIGKILL) at 4 s of 12, 3 servers, 2 workers, half creates, half point queries',
      `requests acknowledged ${mixed.outcomes.filter((o) => o.ok).length}; failed on the killed server ${failedOnVictim} (in flight on it when killed: ${inFlightAtKill}); failed on the others ${failedElsewhere}`,
      `acknowledged creates ${acknowledged.length}, read back ${acknowledged.length - missing}, lost ${missing}`,
      `verify after the queue drained: exit code ${verifyCode} ${verifyCode === 0 ? '(clean)' : `\n${verifyOut.slice(0, 2000)}`}`,
      `cores used per process: ${mixed.cpu}`,
    );
  } finally {
    for (const w of workers) await stopProcess(w);
    for (const s of servers) {
      await s.pool.close().catch(() => undefined);
      await stopProcess(s.child);
    }
    await azurite.stop();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
