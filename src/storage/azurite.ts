/**
 * The embedded Azurite: the storage the project starts by itself when no connection string is configured, and
 * the one the tests run against. Azurite runs as a child process (its bin script; `require('azurite')` fails),
 * always on free loopback ports, which it reports on stdout.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { Socket } from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ErrorCode, TablegraphError } from '../errors';
import type { Logger } from '../log';
import { devConnectionString } from './connection';

/** A running Azurite. */
export interface AzuriteHandle {
  pid: number;
  /** Development-account connection string for all three services. */
  connectionString: string;
  ports: { blob: number; queue: number; table: number };
  /** whether this process started it (vs attached to one already running) */
  owned: boolean;
  /** SIGTERM (Azurite flushes its disk store), wait for exit (timeoutMs, default 10000, then SIGKILL);
   *  no-op if !owned unless force. */
  stop(opts?: { force?: boolean; timeoutMs?: number }): Promise<void>;
}

/** Options of {@link startAzurite}. */
export interface StartAzuriteOptions {
  /** Keep everything in memory (`--inMemoryPersistence`); nothing is written to disk. */
  inMemory?: boolean;
  /** Azurite's workspace folder (created if missing). Required unless inMemory; always required when detached. */
  location?: string;
  /** Outlive this process: own process group, stdout/stderr appended to `<location>/azurite.log`, unref'd. */
  detached?: boolean;
  /** Give up when the three services are not listening after this many ms (default 30000). */
  startTimeoutMs?: number;
}

type Ports = AzuriteHandle['ports'];
const READY = /Azurite (Blob|Queue|Table) service is successfully listening at http:\/\/[^\s:]+:(\d+)/g;

function azuriteBin(): string {
  return path.join(path.dirname(require.resolve('azurite/package.json')), 'dist', 'src', 'azurite.js');
}

function parsePorts(output: string): Ports | undefined {
  const found: Record<string, number> = {};
  for (const m of output.matchAll(READY)) found[m[1].toLowerCase()] = Number(m[2]);
  const { blob, queue, table } = found;
  return blob && queue && table ? { blob, queue, table } : undefined;
}

/** Alive = signal 0 succeeds and it is not a zombie (an orphan whose reaper has not collected it yet). */
export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return true; // no procfs (macOS): signal 0 is the best answer available
  }
}

/**
 * Takes `lockPath` by exclusive create, waiting up to `waitMs` (ms) while a live process holds it; a stale
 * lock is broken. Returns the release function. Throws TablegraphError(STORAGE_UNAVAILABLE) on timeout.
 */
async function acquireFileLock(lockPath: string, waitMs: number): Promise<() => Promise<void>> {
  const token = `${process.pid}:${Date.now()}:${Math.random().toString(36).slice(2)}`;
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      await fs.promises.writeFile(lockPath, JSON.stringify({ pid: process.pid, token }), { flag: 'wx' });
      return async () => {
        const held = await fs.promises.readFile(lockPath, 'utf8').catch(() => '');
        if (held.includes(token)) await fs.promises.rm(lockPath, { force: true });
      };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    const seen = await fs.promises.readFile(lockPath, 'utf8').catch(() => undefined);
    // No pid yet: its writer is between create and write, or died there (the age check below).
    const holder = Number(/"pid":(\d+)/.exec(seen ?? '')?.[1]) || undefined;
    const ageMs = Date.now() - ((await fs.promises.stat(lockPath).catch(() => undefined))?.mtimeMs ?? Date.now());
    // Dead holder, a holder pid recycled since (no start takes 2 min), or a writer that died mid-create.
    if (seen !== undefined && (holder ? !isProcessAlive(holder) || ageMs > 120000 : ageMs > 5000)) {
      // Move it aside before deleting, so a lock another process just re-created is put back rather than lost.
      const aside = `${lockPath}.${token}.stale`;
      if (await fs.promises.rename(lockPath, aside).then(() => true, () => false)) {
        if ((await fs.promises.readFile(aside, 'utf8').catch(() => '')) !== seen) {
          await fs.promises.link(aside, lockPath).catch(() => undefined);
        }
        await fs.promises.rm(aside, { force: true });
      }
      continue;
    }
    if (Date.now() >= deadline) {
      throw new TablegraphError(ErrorCode.STORAGE_UNAVAILABLE, `Timed out waiting for ${lockPath}.`, { holder });
    }
    await sleep(100);
  }
}

/** Waits until `pid` is gone (polling; works for processes that are not our children), at most `timeoutMs`. */
async function waitForExit(pid: number, child: ChildProcess | undefined, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  const gone = () => (child ? child.exitCode !== null || child.signalCode !== null : !isProcessAlive(pid));
  while (!gone()) {
    if (Date.now() >= deadline) return false;
    await sleep(25);
  }
  return true;
}

/** Sends `sig`; false when the process is already gone (which is what stopping wanted). */
const signal = (pid: number, sig: NodeJS.Signals): boolean => {
  try {
    return process.kill(pid, sig);
  } catch {
    return false;
  }
};

/** Builds the handle for a process at `pid`; `child` is set when it is this process's child. */
function makeHandle(pid: number, ports: Ports, owned: boolean, child?: ChildProcess, onStop?: () => unknown) {
  let stopping: Promise<void> | undefined;
  const handle: AzuriteHandle = {
    pid, ports, owned,
    connectionString: devConnectionString(ports),
    stop({ force = false, timeoutMs = 10000 } = {}) {
      if (!owned && !force) return Promise.resolve();
      stopping ??= (async () => {
        signal(pid, 'SIGTERM');
        if (!(await waitForExit(pid, child, timeoutMs))) {
          signal(pid, 'SIGKILL');
          await waitForExit(pid, child, 5000);
        }
        await onStop?.();
      })();
      return stopping;
    },
  };
  return handle;
}

/**
 * Starts an Azurite child process (blob, queue and table services) on free loopback ports, with the
 * development account, telemetry off, `--loose`, `--skipApiVersionCheck` and no access log.
 * Returns once all three services listen (owned = true). A non-detached Azurite is SIGTERMed when this
 * process exits. Throws TablegraphError(CONFIG_INVALID) when `location` is missing but needed, and
 * TablegraphError(STORAGE_UNAVAILABLE) — with the tail of Azurite's output — when it exits or is not
 * listening within `startTimeoutMs` (it is killed then).
 */
export async function startAzurite(opts: StartAzuriteOptions): Promise<AzuriteHandle> {
  const { inMemory = false, location, detached = false, startTimeoutMs = 30000 } = opts;
  if (!location && (detached || !inMemory)) {
    throw new TablegraphError(ErrorCode.CONFIG_INVALID, 'startAzurite needs a location unless it runs in memory.');
  }
  const args = [azuriteBin()];
  for (const svc of ['blob', 'queue', 'table']) args.push(`--${svc}Host`, '127.0.0.1', `--${svc}Port`, '0');
  args.push('--disableTelemetry', '--skipApiVersionCheck', '--loose', '--silent');
  if (inMemory) args.push('--inMemoryPersistence');
  if (location) {
    fs.mkdirSync(location, { recursive: true });
    args.push('--location', location);
  }

  let child: ChildProcess;
  let output: () => string;
  if (detached) {
    // A file, not a pipe: a pipe would break (EPIPE) when this process dies, and Azurite must outlive it.
    const logPath = path.join(location as string, 'azurite.log');
    const fd = fs.openSync(logPath, 'a');
    const from = fs.fstatSync(fd).size;
    try {
      child = spawn(process.execPath, args, { detached: true, stdio: ['ignore', fd, fd], cwd: location });
    } finally {
      fs.closeSync(fd);
    }
    output = () => (fs.existsSync(logPath) ? fs.readFileSync(logPath).subarray(from).toString('utf8') : '');
  } else {
    child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout?.on('data', (d: Buffer) => (out = (out + d.toString('utf8')).slice(-4000)));
    child.stderr?.on('data', (d: Buffer) => (err = (err + d.toString('utf8')).slice(-4000)));
    output = () => `${out}\n${err}`;
  }
  let spawnError: Error | undefined;
  child.on('error', (e) => (spawnError = e));

  const fail = (why: string): never => {
    child.kill('SIGKILL');
    const tail = output().trim().slice(-1500);
    throw new TablegraphError(ErrorCode.STORAGE_UNAVAILABLE, `Azurite did not start: ${why}.\n${tail}`, { args });
  };
  const deadline = Date.now() + startTimeoutMs;
  let ports: Ports | undefined;
  while (!(ports = parsePorts(output()))) {
    if (spawnError) fail(spawnError.message);
    if (child.exitCode !== null || child.signalCode !== null) fail(`it exited (${child.exitCode ?? child.signalCode})`);
    if (Date.now() >= deadline) fail(`no listening ports after ${startTimeoutMs} ms`);
    await sleep(25);
  }

  // Neither the child nor its pipes keep this process alive: callers stop it, or the exit hook below does.
  child.unref();
  for (const s of [child.stdout, child.stderr]) (s as Socket | null)?.unref();
  let onExit: (() => void) | undefined;
  if (!detached) {
    onExit = () => signal(child.pid as number, 'SIGTERM');
    process.once('exit', onExit);
  }
  return makeHandle(child.pid as number, ports, true, child, () => {
    if (onExit) process.removeListener('exit', onExit);
  });
}

/** The state file another tablegraph process leaves next to the Azurite it started. */
type AzuriteState = Pick<AzuriteHandle, 'pid' | 'ports' | 'connectionString'> & { location: string; startedAt: string };

/** True when something answers HTTP on `port` as Azurite's Table service (guards against a reused pid/port). */
function tableServiceAnswers(port: number, timeoutMs = 2000): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/', agent: false, timeout: timeoutMs }, (res) => {
      res.resume();
      resolve(String(res.headers.server ?? '').startsWith('Azurite-Table'));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
  });
}

async function readState(statePath: string): Promise<AzuriteState | undefined> {
  const read = fs.promises.readFile(statePath, 'utf8');
  const s = await read.then((t) => JSON.parse(t) as AzuriteState).catch(() => undefined);
  return s && Number.isInteger(s.pid) && s.ports?.table ? s : undefined;
}

async function removeStateIfOurs(statePath: string, pid: number): Promise<void> {
  if ((await readState(statePath))?.pid === pid) await fs.promises.rm(statePath, { force: true });
}

/**
 * The embedded default: attach to the Azurite that another tablegraph process started on this data folder
 * (state file `<dataDir>/azurite.json` with pid + ports + connection string; attached only if the pid is alive
 * AND the table endpoint answers as Azurite), else start a detached one with location `<dataDir>/azurite` and
 * write the state file. A server killed with kill -9 therefore leaves Azurite running with every acknowledged
 * write, and the next start re-attaches. The start is guarded by an exclusive-create lock
 * `<dataDir>/azurite.lock` (stale locks of dead processes are broken), so two commands starting at once start
 * one Azurite. The handle is owned either way (the server that attaches takes over: its graceful shutdown
 * stops Azurite); `startedHere` tells the caller whether this call started it. Stopping removes the state file.
 * Throws TablegraphError(STORAGE_UNAVAILABLE) when Azurite does not start or the lock is not released in time.
 */
export async function ensureEmbeddedAzurite(
  dataDir: string,
  opts: { log?: Logger; startTimeoutMs?: number } = {},
): Promise<AzuriteHandle & { startedHere: boolean }> {
  const startTimeoutMs = opts.startTimeoutMs ?? 30000;
  await fs.promises.mkdir(dataDir, { recursive: true });
  const statePath = path.join(dataDir, 'azurite.json');
  const attach = async (): Promise<(AzuriteHandle & { startedHere: boolean }) | undefined> => {
    const s = await readState(statePath);
    if (!s || !isProcessAlive(s.pid) || !(await tableServiceAnswers(s.ports.table))) return undefined;
    opts.log?.info({ azuritePid: s.pid, ports: s.ports }, 'attached to the running embedded Azurite');
    const h = makeHandle(s.pid, s.ports, true, undefined, () => removeStateIfOurs(statePath, s.pid));
    return { ...h, startedHere: false };
  };

  const first = await attach();
  if (first) return first;
  const release = await acquireFileLock(path.join(dataDir, 'azurite.lock'), startTimeoutMs + 10000);
  try {
    // Whoever held the lock while this call waited may have started it.
    const again = await attach();
    if (again) return again;
    const location = path.join(dataDir, 'azurite');
    const h = await startAzurite({ location, detached: true, startTimeoutMs });
    const { pid, ports, connectionString } = h;
    const state: AzuriteState = { pid, ports, connectionString, location, startedAt: new Date().toISOString() };
    const tmp = `${statePath}.${process.pid}.tmp`;
    await fs.promises.writeFile(tmp, JSON.stringify(state, null, 2));
    await fs.promises.rename(tmp, statePath); // atomic: a reader never sees half a state file
    opts.log?.info({ azuritePid: h.pid, ports: h.ports, location }, 'started the embedded Azurite');
    const stop: AzuriteHandle['stop'] = async (o) => {
      await h.stop(o);
      await removeStateIfOurs(statePath, h.pid);
    };
    return { ...h, stop, startedHere: true };
  } finally {
    await release();
  }
}
