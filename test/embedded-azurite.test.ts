/**
 * The embedded Azurite shared per data folder (src/storage/embedded-azurite.ts), in this process: attach or start,
 * one Azurite for concurrent starts, the last handle to detach stops it, dead processes are not counted, a lock or
 * state file left by a crash is no obstacle, an acknowledged write survives kill -9 of the process that started
 * Azurite, and a watcher starts Azurite again on the same ports after kill -9 of Azurite itself. Each test has its
 * own temporary data folder and Azurite processes, not the test run's.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { TableClient } from '@azure/data-tables';
import pino from 'pino';
import { createLogger } from '../src/log';
import { isProcessAlive } from '../src/storage/azurite';
import { ensureEmbeddedAzurite, type EmbeddedAzurite } from '../src/storage/embedded-azurite';
import { ROOT } from './support/harness';
import { until } from './support/wait';

jest.setTimeout(90_000);

const handles: EmbeddedAzurite[] = [];
const strayPids: number[] = [];
const dirs: string[] = [];
const quiet = createLogger({ level: 'silent' });

async function tempDataDir(): Promise<string> {
  const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablegraph-embedded-'));
  dirs.push(dir);
  return dir;
}

async function attach(dataDir: string): Promise<EmbeddedAzurite> {
  const h = await ensureEmbeddedAzurite(dataDir, { log: quiet });
  handles.push(h);
  strayPids.push(h.pid);
  return h;
}

/** The pid of a process that has exited: what a crashed tablegraph process leaves behind. */
async function deadPid(): Promise<number> {
  const p = spawn(process.execPath, ['-e', '']);
  await new Promise((resolve) => p.once('exit', resolve));
  return p.pid as number;
}

function tableClient(cs: string, table: string): TableClient {
  return TableClient.fromConnectionString(cs, table, { allowInsecureConnection: true });
}

afterAll(async () => {
  await Promise.allSettled(handles.map((h) => h.release()));
  for (const pid of strayPids) if (isProcessAlive(pid)) process.kill(pid, 'SIGKILL');
  await Promise.all(dirs.map((d) => fs.promises.rm(d, { recursive: true, force: true })));
}, 60_000);

test("starts one, attaches to it; the last handle to detach stops it; a crash's lock and state files are no obstacle", async () => {
  const dataDir = await tempDataDir();
  const dead = await deadPid();
  // What a process killed while starting Azurite leaves: a lock not refreshed for a minute, a state file of a dead pid.
  const lock = path.join(dataDir, 'azurite.lock');
  fs.mkdirSync(lock);
  const old = new Date(Date.now() - 60_000);
  fs.utimesSync(lock, old, old);
  fs.writeFileSync(
    path.join(dataDir, 'azurite.json'),
    JSON.stringify({ pid: dead, ports: { blob: 1, queue: 2, table: 3 }, connectionString: 'x', location: 'x' }),
  );

  const first = await attach(dataDir);
  expect(first.startedHere).toBe(true);
  expect(first.pid).not.toBe(dead);
  expect(JSON.parse(fs.readFileSync(path.join(dataDir, 'azurite.json'), 'utf8'))).toMatchObject({ pid: first.pid, ports: first.ports });
  expect(fs.existsSync(lock)).toBe(false);

  const second = await attach(dataDir);
  expect(second.startedHere).toBe(false);
  expect(second.pid).toBe(first.pid);
  expect(second.connectionString).toBe(first.connectionString);

  // The second detaches: the first still uses Azurite, which keeps running and answering.
  expect(await second.release()).toBe(false);
  expect(isProcessAlive(first.pid)).toBe(true);
  await tableClient(first.connectionString, 'stillhere').createTable();

  expect(await first.release()).toBe(true);
  expect(isProcessAlive(first.pid)).toBe(false);
  expect(fs.existsSync(path.join(dataDir, 'azurite.json'))).toBe(false);
  expect(fs.readdirSync(path.join(dataDir, 'azurite.users'))).toEqual([]);
});

test('two concurrent starts on one data folder start a single Azurite; it stops when both detached', async () => {
  const dataDir = await tempDataDir();
  const [a, b] = await Promise.all([attach(dataDir), attach(dataDir)]);
  expect(a.pid).toBe(b.pid);
  expect([a.startedHere, b.startedHere].sort()).toEqual([false, true]);
  expect(await a.release()).toBe(false);
  expect(await b.release()).toBe(true);
  expect(isProcessAlive(a.pid)).toBe(false);
});

test("whenAlone runs only while no other live process is attached; a dead process's handle does not count", async () => {
  const dataDir = await tempDataDir();
  const a = await attach(dataDir);
  const b = await attach(dataDir);
  let ran = 0;
  expect(await a.whenAlone(async () => ++ran)).toEqual({ ran: false, others: 1 });
  await b.release();
  expect(await a.whenAlone(async () => ++ran)).toEqual({ ran: true, value: 1 });

  // A process killed -9 while attached leaves its file: it is noticed as dead, removed, and not counted.
  const crashed = `${await deadPid()}.crashed`;
  fs.writeFileSync(path.join(dataDir, 'azurite.users', crashed), '1');
  expect(await a.whenAlone(async () => ++ran)).toEqual({ ran: true, value: 2 });
  expect(fs.readdirSync(path.join(dataDir, 'azurite.users'))).not.toContain(crashed);
  // A live pid whose start time differs is a pid reused by another program: not a user either.
  fs.writeFileSync(path.join(dataDir, 'azurite.users', `${process.pid}.reused`), 'not-this-start-time');
  expect(await a.whenAlone(async () => ++ran)).toEqual({ ran: true, value: 3 });
  expect(await a.release()).toBe(true);
});

test('an acknowledged write survives kill -9 of the process that started Azurite, and a restart', async () => {
  const dataDir = await tempDataDir();
  const table = `durable${Math.random().toString(36).slice(2, 8)}`;
  const writer: ChildProcess = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'test/fixtures/azurite-writer.ts'), dataDir, table, 'pk1', 'rk1'], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  strayPids.push(writer.pid as number);
  let stderr = '';
  writer.stderr?.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  const azuritePid = await new Promise<number>((resolve, reject) => {
    readline.createInterface({ input: writer.stdout! }).on('line', (line) => {
      const m = /^ACK (\d+)$/.exec(line);
      if (m) resolve(Number(m[1]));
    });
    writer.once('exit', (code) => reject(new Error(`writer exited (${code}) before ACK:\n${stderr}`)));
  });
  strayPids.push(azuritePid);
  const exited = new Promise((resolve) => writer.once('exit', resolve));
  writer.kill('SIGKILL');
  await exited;

  const attached = await attach(dataDir);
  expect(attached.startedHere).toBe(false);
  expect(attached.pid).toBe(azuritePid);
  expect((await tableClient(attached.connectionString, table).getEntity<{ written: string }>('pk1', 'rk1')).written).toBe('before kill -9');

  // The killed writer's handle is not counted: this release is the last, and stops Azurite (which saves its store).
  expect(await attached.release()).toBe(true);
  expect(isProcessAlive(azuritePid)).toBe(false);

  const restarted = await attach(dataDir);
  expect(restarted.startedHere).toBe(true);
  expect((await tableClient(restarted.connectionString, table).getEntity<{ written: string }>('pk1', 'rk1')).written).toBe('before kill -9');
  await restarted.release();
});

test('kill -9 of Azurite itself: a watching handle starts it again on the same ports; what its disk store saved is there', async () => {
  const dataDir = await tempDataDir();
  const h = await attach(dataDir);
  const { ports, connectionString } = h;
  const client = tableClient(connectionString, 'survivors');
  await client.createTable();
  await client.createEntity({ partitionKey: 'p', rowKey: 'saved', at: 'more than 5 s before the kill' });
  // Azurite's disk store saves within about 5 s: wait until its file holds the entity, then kill it without warning.
  const store = path.join(dataDir, 'azurite', '__azurite_db_table__.json');
  await until(
    'Azurite to save the entity to its disk store',
    () => fs.existsSync(store) && fs.readFileSync(store, 'utf8').includes('more than 5 s before the kill'),
  );
  const killed = h.pid;
  h.watch(quiet, 200);
  process.kill(killed, 'SIGKILL');
  await until('a new Azurite started on the same ports', () => h.pid !== killed && isProcessAlive(h.pid), { timeoutMs: 30_000 });
  strayPids.push(h.pid);
  expect(h.ports).toEqual(ports);
  expect(h.connectionString).toBe(connectionString);
  // The same client, on the same ports, carries on.
  expect((await client.getEntity<{ at: string }>('p', 'saved')).at).toBe('more than 5 s before the kill');
  await client.createEntity({ partitionKey: 'p', rowKey: 'after' });
  expect(await h.release()).toBe(true);
  expect(isProcessAlive(h.pid)).toBe(false);
});

/** The live processes whose command line names `location` (Azurite's workspace of a data folder). */
function azuritesOf(location: string): number[] {
  return fs
    .readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        return fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').includes(location) && isProcessAlive(Number(d));
      } catch {
        return false;
      }
    })
    .map(Number);
}

/** A logger that keeps each message it logs, for a test to wait for. */
function recordingLogger(): { log: ReturnType<typeof createLogger>; messages: string[] } {
  const messages: string[] = [];
  const stream = { write: (line: string) => void messages.push(String((JSON.parse(line) as { msg?: string }).msg)) };
  return { log: pino({ level: 'info' }, stream) as unknown as ReturnType<typeof createLogger>, messages };
}

test('a stopped Azurite (SIGSTOP) is waited for, never doubled: a command attaches once it answers, and one that waits too long fails clearly', async () => {
  const dataDir = await tempDataDir();
  const first = await attach(dataDir);
  const location = path.join(dataDir, 'azurite');
  const state = () => JSON.parse(fs.readFileSync(path.join(dataDir, 'azurite.json'), 'utf8')) as { pid: number };
  process.kill(first.pid, 'SIGSTOP');
  try {
    // A command starting meanwhile waits; once it says so, Azurite is let go on.
    const { log, messages } = recordingLogger();
    const waiting = ensureEmbeddedAzurite(dataDir, { log });
    await until('the log to say Azurite runs but does not answer', () => messages.some((m) => m.includes('runs but does not answer')), { timeoutMs: 30_000 });
    expect(azuritesOf(location)).toEqual([first.pid]);
    process.kill(first.pid, 'SIGCONT');
    const second = await waiting;
    handles.push(second);
    expect(second.pid).toBe(first.pid);
    expect(second.startedHere).toBe(false);
    expect(state().pid).toBe(first.pid);

    // Stopped for longer than a command waits: it fails, naming the pid, and starts nothing.
    process.kill(first.pid, 'SIGSTOP');
    await expect(ensureEmbeddedAzurite(dataDir, { log: quiet, startTimeoutMs: 2000 })).rejects.toThrow(
      new RegExp(`pid ${first.pid}\\) runs but has not answered`),
    );
    expect(azuritesOf(location)).toEqual([first.pid]);
    expect(state().pid).toBe(first.pid);
    process.kill(first.pid, 'SIGCONT');

    // The last to detach stops the one there is.
    expect(await second.release()).toBe(false);
    expect(await first.release()).toBe(true);
    expect(azuritesOf(location)).toEqual([]);
  } finally {
    if (isProcessAlive(first.pid)) process.kill(first.pid, 'SIGCONT');
  }
});
