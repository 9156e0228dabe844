/**
 * One Azurite process: started (as a child process, from its bin script — `require('azurite')` fails) on loopback
 * ports, which it reports on stdout, and stopped. The tests and benchmarks start theirs in memory; the embedded
 * default that every command shares per data folder is embedded-azurite.ts.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import type { Socket } from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ErrorCode, TablegraphError } from '../errors';
import { devConnectionString } from './connection';

/** A running Azurite. */
export interface AzuriteHandle {
  pid: number;
  /** Development-account connection string for all three services. */
  connectionString: string;
  ports: AzuritePorts;
  /** SIGTERM (Azurite flushes its disk store), wait for exit (timeoutMs, default 10000, then SIGKILL). */
  stop(opts?: { timeoutMs?: number }): Promise<void>;
}

/** The loopback ports of Azurite's three services. */
export interface AzuritePorts {
  blob: number;
  queue: number;
  table: number;
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
  /** Listen on these ports (a restart where clients already point); default: free ports chosen by the system. */
  ports?: AzuritePorts;
  /**
   * Serve https with this certificate and key (PEM files) and accept OAuth bearer tokens beside the account key
   * (`--oauth basic`: Azurite checks a token's issuer, audience and lifetime, not its signature) — the Microsoft
   * Entra ID path's stand-in. The handle's connection string then uses https.
   */
  oauth?: { certPath: string; keyPath: string };
}

type Ports = AzuritePorts;
const READY = /Azurite (Blob|Queue|Table) service is successfully listening at https?:\/\/[^\s:]+:(\d+)/g;

/**
 * Azurite's entry script, from the `azurite` package — a development dependency, so a production install
 * (`npm ci --omit=dev`, the container image) has none.
 * @throws TablegraphError CONFIG_INVALID when the package is not installed
 */
function azuriteBin(): string {
  let manifest: string;
  try {
    manifest = require.resolve('azurite/package.json');
  } catch (cause) {
    throw new TablegraphError(
      ErrorCode.CONFIG_INVALID,
      'No storage is configured and the embedded Azurite is not installed (a production install leaves it out): set AZURE_STORAGE_CONNECTION_STRING or TABLEGRAPH_STORAGE_ACCOUNT_URL.',
      { errors: { AZURE_STORAGE_CONNECTION_STRING: 'not set', TABLEGRAPH_STORAGE_ACCOUNT_URL: 'not set' } },
      { cause },
    );
  }
  return path.join(path.dirname(manifest), 'dist', 'src', 'azurite.js');
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
 * Stops the process `pid` as Azurite wants to be stopped: SIGTERM (it saves its disk store), then SIGKILL after
 * `timeoutMs` (ms). Works for a process this one did not start.
 */
export async function stopProcess(pid: number, timeoutMs = 10000): Promise<void> {
  signal(pid, 'SIGTERM');
  if (!(await waitForExit(pid, undefined, timeoutMs))) {
    signal(pid, 'SIGKILL');
    await waitForExit(pid, undefined, 5000);
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
function signal(pid: number, sig: NodeJS.Signals): boolean {
  try {
    return process.kill(pid, sig);
  } catch {
    return false;
  }
}

/** Builds the handle for a process at `pid`; `child` is set when it is this process's child. */
function makeHandle(pid: number, ports: Ports, child?: ChildProcess, onStop?: () => unknown, protocol: 'http' | 'https' = 'http') {
  let stopping: Promise<void> | undefined;
  const handle: AzuriteHandle = {
    pid,
    ports,
    connectionString: devConnectionString(ports, '127.0.0.1', protocol),
    stop({ timeoutMs = 10000 } = {}) {
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
 * Returns once all three services listen. A non-detached Azurite is SIGTERMed when this
 * process exits. Throws TablegraphError(CONFIG_INVALID) when `location` is missing but needed, and
 * TablegraphError(STORAGE_UNAVAILABLE) — with the tail of Azurite's output — when it exits or is not
 * listening within `startTimeoutMs` (it is killed then).
 */
export async function startAzurite(opts: StartAzuriteOptions): Promise<AzuriteHandle> {
  const { inMemory = false, location, detached = false, startTimeoutMs = 30000, ports: wanted } = opts;
  if (!location && (detached || !inMemory)) {
    throw new TablegraphError(ErrorCode.CONFIG_INVALID, 'startAzurite needs a location unless it runs in memory.');
  }
  const args = [azuriteBin()];
  for (const svc of ['blob', 'queue', 'table'] as const) args.push(`--${svc}Host`, '127.0.0.1', `--${svc}Port`, String(wanted?.[svc] ?? 0));
  args.push('--disableTelemetry', '--skipApiVersionCheck', '--loose', '--silent');
  if (inMemory) args.push('--inMemoryPersistence');
  if (opts.oauth) args.push('--oauth', 'basic', '--cert', opts.oauth.certPath, '--key', opts.oauth.keyPath);
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
  const onStop = () => {
    if (onExit) process.removeListener('exit', onExit);
  };
  return makeHandle(child.pid as number, ports, child, onStop, opts.oauth ? 'https' : 'http');
}
