/**
 * One embedded Azurite per data folder, shared by real command processes as a user runs them: two servers, a
 * server and an import in both orders, and kill -9 of any of them. Nothing stops an Azurite another live process
 * uses; the last process to stop stops it; a server seeds only an empty store nobody else uses.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isProcessAlive } from '../src/storage/azurite';
import { chicagoCsvText } from './support/harness';
import { azuriteState, freePort, killCommandProcesses, queryPort, runCommand, startServerProcess, waitUntilGone } from './support/processes';

jest.setTimeout(180_000);

const ROWS = 8000; // an import of this many rows at --concurrency 1 lasts several seconds: time for a server to start
let tmp: string;
let slice: string;
const azuritePids = new Set<number>();

function dataDir(name: string): string {
  return path.join(tmp, name);
}

function runningAzurite(dir: string): number {
  const state = azuriteState(dir);
  if (!state) throw new Error(`no Azurite state in ${dir}`);
  azuritePids.add(state.pid);
  expect(isProcessAlive(state.pid)).toBe(true);
  return state.pid;
}

const COUNT = (id: string) => `{ department(id: ${JSON.stringify(id)}) { employeeCount } }`;

beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-shared-'));
  slice = path.join(tmp, 'slice.csv');
  const lines = chicagoCsvText().split('\n');
  fs.writeFileSync(slice, `${lines.slice(0, ROWS + 1).join('\n')}\n`);
});

afterAll(async () => {
  killCommandProcesses();
  for (const pid of azuritePids) if (isProcessAlive(pid)) process.kill(pid, 'SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});

test('two servers on one data folder: stopping or killing one leaves the other serving; the last one stops Azurite', async () => {
  const dir = dataDir('two-servers');
  const [portA, portB] = [await freePort(), await freePort()];
  const a = await startServerProcess(dir, portA);
  expect(a.output()).toContain('started the embedded Azurite');
  expect(a.output()).toContain('empty store');
  const azurite = runningAzurite(dir);

  const b = await startServerProcess(dir, portB);
  expect(b.output()).toContain('attached to the running embedded Azurite');
  expect(b.output()).not.toContain('empty store');
  expect((await queryPort(portB, COUNT('Marketing'))).data.department.employeeCount).toBe(2);

  // Ctrl-C on B: B stops, A's Azurite does not.
  b.child.kill('SIGINT');
  expect(await b.exited).toEqual({ code: 0, signal: null });
  expect(b.output()).not.toContain('stopped the embedded Azurite');
  expect(isProcessAlive(azurite)).toBe(true);
  expect((await queryPort(portA, COUNT('Marketing'))).data.department.employeeCount).toBe(2);
  expect((await fetch(`http://127.0.0.1:${portA}/health`)).status).toBe(200);

  // kill -9 of A while B (again) runs: B serves on; B's stop is then the last, and stops Azurite.
  const b2 = await startServerProcess(dir, portB);
  a.child.kill('SIGKILL');
  expect(await a.exited).toEqual({ code: null, signal: 'SIGKILL' });
  expect((await queryPort(portB, COUNT('Sales'))).data.department.employeeCount).toBe(1);
  b2.child.kill('SIGTERM');
  expect(await b2.exited).toEqual({ code: 0, signal: null });
  expect(b2.output()).toContain('stopped the embedded Azurite');
  expect(await waitUntilGone(azurite, 15_000)).toBe(true);
  expect(azuriteState(dir)).toBeUndefined();
});

test("a server, then an import: the import attaches and its end leaves the server's Azurite; an import killed -9 harms nothing", async () => {
  const dir = dataDir('server-then-import');
  const port = await freePort();
  const server = await startServerProcess(dir, port);
  const azurite = runningAzurite(dir);

  const load = runCommand('import', ['--file', slice, '--concurrency', '4'], dir);
  expect(await load.exited).toEqual({ code: 0, signal: null });
  expect(load.output()).toContain('attached to the running embedded Azurite');
  expect(isProcessAlive(azurite)).toBe(true);
  const police = (await queryPort(port, COUNT('POLICE'))).data.department.employeeCount;
  expect(police).toBeGreaterThan(0);
  expect((await queryPort(port, COUNT('Marketing'))).data.department.employeeCount).toBe(2); // the seed, untouched

  const killed = runCommand('import', ['--file', slice, '--concurrency', '1'], dir);
  await killed.waitFor('importing');
  killed.child.kill('SIGKILL');
  await killed.exited;
  expect(isProcessAlive(azurite)).toBe(true);
  expect((await queryPort(port, COUNT('POLICE'))).data.department.employeeCount).toBe(police);

  server.child.kill('SIGTERM');
  expect(await server.exited).toEqual({ code: 0, signal: null });
  expect(await waitUntilGone(azurite, 15_000)).toBe(true);
});

test("an import, then a server: the server attaches, seeds nothing into the import's store, and keeps Azurite when the import ends", async () => {
  const dir = dataDir('import-then-server');
  const port = await freePort();
  const load = runCommand('import', ['--file', slice, '--concurrency', '1'], dir);
  await load.waitFor('started the embedded Azurite');
  const azurite = runningAzurite(dir);
  const server = await startServerProcess(dir, port);
  // The point of the test: the server started while the import ran.
  expect(load.child.exitCode).toBeNull();
  expect(server.output()).toContain('attached to the running embedded Azurite');
  expect(server.output()).not.toContain('empty store');

  expect(await load.exited).toEqual({ code: 0, signal: null });
  expect(load.output()).not.toContain('stopped the embedded Azurite');
  expect(isProcessAlive(azurite)).toBe(true);
  expect((await queryPort(port, COUNT('POLICE'))).data.department.employeeCount).toBeGreaterThan(0);
  expect((await queryPort(port, COUNT('Marketing'))).data.department).toBeNull(); // not seeded

  server.child.kill('SIGTERM');
  expect(await server.exited).toEqual({ code: 0, signal: null });
  expect(await waitUntilGone(azurite, 15_000)).toBe(true);
});
