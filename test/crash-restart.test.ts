/**
 * `kill -9` of the server loses no acknowledged write. The real server runs as `npm start` runs it, on the
 * embedded default (no connection string: a detached Azurite kept under the data folder). A SIGKILLed server
 * leaves its Azurite running with every acknowledged write, the next start re-attaches to it; a SIGTERMed
 * server stops Azurite, which flushes to disk, and the start after that loads everything back from disk.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { entityWrites } from '../src/model/entity-codec';
import { TableStore } from '../src/storage/table-store';
import { planEgtBatches, writeEgtBatches } from '../src/write/egt-batches';
import { compileHr, ROOT } from './support/harness';
import { isProcessAlive } from '../src/storage/azurite';

jest.setTimeout(120_000);

let dataDir: string;
let port: number;
const children: ChildProcess[] = [];
const azuritePids = new Set<number>();

interface Started {
  child: ChildProcess;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

async function freePort(): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const found = (probe.address() as AddressInfo).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return found;
}

/** Starts `node --import tsx src/cli/start.ts` (one process, so a signal reaches the server itself). */
async function startServerProcess(): Promise<Started> {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k !== 'AZURE_STORAGE_CONNECTION_STRING' && !k.startsWith('TABLEGRAPH_')) env[k] = v;
  }
  Object.assign(env, { TABLEGRAPH_DATA_DIR: dataDir, PORT: String(port), LOG_LEVEL: 'info' });
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/start.ts'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString('utf8')));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString('utf8')));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  let done = false;
  void exited.then(() => (done = true));
  const deadline = Date.now() + 90_000;
  while (!out.includes('tablegraph is serving')) {
    if (done) throw new Error(`the server exited before serving:\n${out}`);
    if (Date.now() > deadline) throw new Error(`the server did not serve within 90 s:\n${out}`);
    await sleep(50);
  }
  return { child, output: () => out, exited };
}

function azuriteState(): { pid: number; connectionString: string } | undefined {
  const file = path.join(dataDir, 'azurite.json');
  if (!fs.existsSync(file)) return undefined;
  const state = JSON.parse(fs.readFileSync(file, 'utf8')) as { pid: number; connectionString: string };
  azuritePids.add(state.pid);
  return state;
}

async function waitUntilGone(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (isProcessAlive(pid)) {
    if (Date.now() > deadline) return false;
    await sleep(50);
  }
  return true;
}

async function query(q: string): Promise<any> {
  const res = await fetch(`http://127.0.0.1:${port}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query: q }),
  });
  return res.json();
}

const EVERYTHING = `{
  departments { edges { node { id employeeCount } } }
  marketing: department(id: "Marketing") { employees { edges { node { id firstName lastName } } } }
  sales: department(id: "Sales") { employees { edges { node { id firstName lastName title } } } } }`;

const EXPECTED = {
  departments: { edges: [{ node: { id: 'Marketing', employeeCount: 2 } }, { node: { id: 'Sales', employeeCount: 1 } }] },
  marketing: { employees: { edges: [{ node: { id: '1', firstName: 'Don', lastName: 'Hall' } }, { node: { id: '2', firstName: 'Jun', lastName: 'Cao' } }] } },
  sales: {
    employees: {
      edges: [
        { node: { id: '10', firstName: 'Ken', lastName: 'Kwok', title: null } },
        { node: { id: '11', firstName: 'Ada', lastName: 'Lovelace', title: 'ANALYST/PROGRAMMER' } },
      ],
    },
  },
};

beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-crash-'));
  port = await freePort();
});

afterAll(async () => {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null && child.pid) process.kill(child.pid, 'SIGKILL');
  }
  azuriteState();
  for (const pid of azuritePids) {
    if (isProcessAlive(pid)) {
      process.kill(pid, 'SIGKILL');
      await waitUntilGone(pid, 5000);
    }
  }
  fs.rmSync(dataDir, { recursive: true, force: true });
});

test('kill -9, restart, graceful stop, cold start: every acknowledged write is still there', async () => {
  // 1. First start on an empty data folder: Azurite is started, the seed rows are written before serving.
  const first = await startServerProcess();
  expect(first.output()).toContain('started the embedded Azurite');
  expect(first.output()).toContain('empty store');
  const state1 = azuriteState()!;
  expect(isProcessAlive(state1.pid)).toBe(true);
  const seeded = await query(EVERYTHING);
  expect(seeded.data.departments).toEqual(EXPECTED.departments);
  expect(seeded.data.marketing).toEqual(EXPECTED.marketing);
  expect(seeded.data.sales.employees.edges).toEqual([EXPECTED.sales.employees.edges[0]]);

  // One more write, straight through the SDK on Azurite's connection string: acknowledged once the EGT returns.
  const { model } = compileHr('');
  const ada = entityWrites(model.entities.get('Employee')!, {
    departmentId: 'Sales', id: '11', email: 'ada@contoso.com', firstName: 'Ada', lastName: 'Lovelace', title: 'ANALYST/PROGRAMMER',
  });
  const store = new TableStore({ connectionString: state1.connectionString, target: 'azurite' });
  await writeEgtBatches(store, planEgtBatches([ada.primary, ...ada.indexes], 'azurite'), { concurrency: 1 });
  expect((await query(EVERYTHING)).data.sales).toEqual(EXPECTED.sales);

  // 2. kill -9: the server dies, its detached Azurite keeps every acknowledged write in memory.
  first.child.kill('SIGKILL');
  expect(await first.exited).toEqual({ code: null, signal: 'SIGKILL' });
  expect(isProcessAlive(state1.pid)).toBe(true);

  // 3. The next start re-attaches to the same Azurite.
  const second = await startServerProcess();
  expect(second.output()).toContain('attached to the running embedded Azurite');
  expect(azuriteState()!.pid).toBe(state1.pid);
  const afterKill = await query(EVERYTHING);
  expect(afterKill.errors).toBeUndefined();
  expect(afterKill.data).toEqual(EXPECTED);

  // 4. SIGTERM: in-flight requests finish, Azurite is stopped (it flushes to disk), the server exits 0.
  second.child.kill('SIGTERM');
  expect(await second.exited).toEqual({ code: 0, signal: null });
  expect(await waitUntilGone(state1.pid, 15_000)).toBe(true);
  expect(azuriteState()).toBeUndefined();

  // 5. Cold start: a fresh Azurite loads the data folder; nothing is re-seeded, nothing is lost.
  const third = await startServerProcess();
  expect(third.output()).toContain('started the embedded Azurite');
  expect(third.output()).not.toContain('empty store');
  const state3 = azuriteState()!;
  expect(state3.pid).not.toBe(state1.pid);
  const cold = await query(EVERYTHING);
  expect(cold.errors).toBeUndefined();
  expect(cold.data).toEqual(EXPECTED);

  third.child.kill('SIGTERM');
  expect(await third.exited).toEqual({ code: 0, signal: null });
  expect(await waitUntilGone(state3.pid, 15_000)).toBe(true);
});
