/**
 * `kill -9` of the server loses no acknowledged write. The real server runs as `npm start` runs it, on the
 * embedded default (no connection string: a detached Azurite kept under the data folder). A SIGKILLed server
 * leaves its Azurite running with every acknowledged write, the next start re-attaches to it; a SIGTERMed
 * server stops Azurite, which flushes to disk, and the start after that loads everything back from disk.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { entityWrites } from '../src/model/entity-codec';
import { TableStore } from '../src/storage/table-store';
import { planEgtBatches, writeEgtBatches } from '../src/write/egt-batches';
import { compileHr } from './support/harness';
import { isProcessAlive } from '../src/storage/azurite';
import {
  azuriteState as stateOf,
  freePort,
  killCommandProcesses,
  queryPort,
  startServerProcess as startServer,
  waitUntilGone,
  type CommandProcess,
} from './support/processes';

jest.setTimeout(120_000);

let dataDir: string;
let port: number;
const azuritePids = new Set<number>();

async function startServerProcess(): Promise<CommandProcess> {
  return startServer(dataDir, port);
}

function azuriteState(): { pid: number; connectionString: string } | undefined {
  const state = stateOf(dataDir);
  if (state) azuritePids.add(state.pid);
  return state;
}

const query = (q: string) => queryPort(port, q);

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
  killCommandProcesses();
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
    departmentId: 'Sales',
    id: '11',
    email: 'ada@contoso.com',
    firstName: 'Ada',
    lastName: 'Lovelace',
    title: 'ANALYST/PROGRAMMER',
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
