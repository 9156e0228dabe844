/**
 * The embedded default: one Azurite per data folder, shared by every tablegraph process that uses the folder — a
 * server, a second server on another port, an import, `verify`, a worker. Each attaches to it, or starts it when
 * none runs, and detaches when done; the last to detach stops it. Nothing ever stops an Azurite another live
 * process uses, and a process that dies without detaching (kill -9) is noticed as dead and no longer counted.
 *
 * On disk, under the data folder:
 * - `azurite/`            Azurite's own workspace (its disk store);
 * - `azurite.json`        the running Azurite: pid, ports, connection string;
 * - `azurite.users/`      one file per attached handle, named `<pid>.<token>`, holding the process's start time
 *                         (so a pid reused by another program is not mistaken for a user);
 * - `azurite.lock`        proper-lockfile's lock, held while attaching, detaching and starting.
 *
 * A kill -9 of Azurite itself loses what its disk store had not saved yet (it saves about every 5 s). A process
 * that watches (the server does) notices the death within a second and starts Azurite again on the same ports,
 * so its clients carry on. An Azurite whose process lives but does not answer (a busy machine, SIGSTOP) is waited for,
 * never replaced: two on one folder would write the same files and diverge.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import lockfile from 'proper-lockfile';
import { ErrorCode, TablegraphError } from '../errors';
import type { Logger } from '../log';
import { isProcessAlive, startAzurite, stopProcess, type AzuritePorts } from './azurite';
import { devConnectionString } from './connection';

/** This process's handle on the data folder's Azurite. */
export interface EmbeddedAzurite {
  /** The Azurite process now serving (changes when a watcher restarts it). */
  readonly pid: number;
  readonly ports: AzuritePorts;
  /** Development-account connection string for the three services. */
  readonly connectionString: string;
  /** Whether this call started Azurite (false: attached to a running one). */
  readonly startedHere: boolean;
  /**
   * Runs `fn` while holding the data folder's lock, if no other live process is attached — so that no other
   * command can attach meanwhile (e.g. seeding an empty store). Otherwise `fn` does not run.
   * @returns `{ ran: true, value }`, or `{ ran: false, others }` with the number of other handles attached
   */
  whenAlone<T>(fn: () => Promise<T>): Promise<{ ran: true; value: T } | { ran: false; others: number }>;
  /**
   * Watches Azurite every `intervalMs` (ms, default 1000) and starts it again on the same ports when it died.
   * Stopped by release().
   */
  watch(log: Logger, intervalMs?: number): void;
  /**
   * Detaches this handle; stops Azurite (SIGTERM: it saves its disk store; SIGKILL after 10 s) when no other live
   * process is attached. Idempotent.
   * @returns whether it stopped Azurite
   */
  release(): Promise<boolean>;
}

/** The state file's content. */
interface AzuriteState {
  pid: number;
  ports: AzuritePorts;
  connectionString: string;
  location: string;
  startedAt: string;
  /** The process's start time (processStartTime): a pid reused by another program since is not taken for it. */
  startTime?: string;
}

const LOCK_STALE_MS = 10_000;

/**
 * Runs `fn` under the data folder's lock (proper-lockfile: a lock whose holder died is broken after 10 s).
 * @throws TablegraphError STORAGE_UNAVAILABLE when the lock is not had within `waitMs` (ms)
 */
async function withLock<T>(dataDir: string, waitMs: number, fn: () => Promise<T>, log?: Logger): Promise<T> {
  let release: () => Promise<void>;
  try {
    release = await lockfile.lock(dataDir, {
      lockfilePath: path.join(dataDir, 'azurite.lock'),
      realpath: false,
      stale: LOCK_STALE_MS,
      retries: { retries: Math.ceil(waitMs / 100), factor: 1, minTimeout: 100, maxTimeout: 100 },
      onCompromised: (e) => log?.warn({ err: e }, "the embedded Azurite's lock was taken over while held"),
    });
  } catch (e) {
    throw new TablegraphError(
      ErrorCode.STORAGE_UNAVAILABLE,
      `Timed out waiting for the lock of ${dataDir} (another tablegraph command is starting or stopping its Azurite): ${(e as Error).message}`,
      { dataDir },
    );
  }
  try {
    return await fn();
  } finally {
    await release().catch(() => undefined);
  }
}

/** The start time of process `pid` (clock ticks since boot, /proc/<pid>/stat field 22); undefined without procfs. */
function processStartTime(pid: number): string | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

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

/** The folder's files. */
function files(dataDir: string) {
  return { state: path.join(dataDir, 'azurite.json'), users: path.join(dataDir, 'azurite.users'), location: path.join(dataDir, 'azurite') };
}

async function readState(statePath: string): Promise<AzuriteState | undefined> {
  const s = await fs.promises.readFile(statePath, 'utf8').then(
    (t) => JSON.parse(t) as AzuriteState,
    () => undefined,
  );
  return s && Number.isInteger(s.pid) && s.ports?.table ? s : undefined;
}

async function writeState(statePath: string, state: AzuriteState): Promise<void> {
  const tmp = `${statePath}.${process.pid}.tmp`;
  await fs.promises.writeFile(tmp, JSON.stringify(state, null, 2));
  await fs.promises.rename(tmp, statePath); // atomic: a reader never sees half a state file
}

/**
 * Whether the state file's process is still that Azurite: alive, and the same process — its start time as recorded,
 * or (a state file of before start times were recorded) a command line naming azurite.
 */
function recordedProcessLives(s: AzuriteState): boolean {
  if (!isProcessAlive(s.pid)) return false;
  const startTime = processStartTime(s.pid);
  if (s.startTime !== undefined && startTime !== undefined) return startTime === s.startTime;
  try {
    return fs.readFileSync(`/proc/${s.pid}/cmdline`, 'utf8').includes('azurite');
  } catch {
    return true; // no procfs: alive is the best answer available
  }
}

/**
 * The Azurite of the state file, if its process lives. One that does not answer (a busy machine, a process stopped
 * with SIGSTOP, a long save of its store) is waited for — a second Azurite on the same folder would write the same
 * files and diverge from it — for at most `waitMs` (ms).
 * @returns the Azurite once it answers; undefined when none is recorded or its process is gone
 * @throws TablegraphError STORAGE_UNAVAILABLE when its process lives and has not answered in `waitMs`
 */
async function runningAzurite(statePath: string, waitMs: number, log?: Logger): Promise<AzuriteState | undefined> {
  const s = await readState(statePath);
  if (!s || !recordedProcessLives(s)) return undefined;
  if (await tableServiceAnswers(s.ports.table)) return s;
  const since = Date.now();
  log?.warn(
    { azuritePid: s.pid, ports: s.ports, waitMs },
    'the embedded Azurite runs but does not answer (a busy machine, or the process is stopped): waiting for it, never starting a second one on the same folder',
  );
  while (Date.now() - since < waitMs) {
    await new Promise((r) => setTimeout(r, 250));
    if (!recordedProcessLives(s)) return undefined;
    if (await tableServiceAnswers(s.ports.table)) {
      log?.info({ azuritePid: s.pid, waitedMs: Date.now() - since }, 'the embedded Azurite answers again');
      return s;
    }
  }
  throw new TablegraphError(
    ErrorCode.STORAGE_UNAVAILABLE,
    `The embedded Azurite of ${path.dirname(statePath)} (pid ${s.pid}) runs but has not answered for ${Math.round(waitMs / 1000)} s. A second one on the same folder would corrupt it, so none is started: wait for it, or stop it (kill ${s.pid}) and run the command again.`,
    { azuritePid: s.pid },
  );
}

/**
 * The handles attached to the folder, by live processes only: files of dead processes (or of pids reused since)
 * are removed on the way.
 */
async function liveUsers(usersDir: string): Promise<string[]> {
  const names = await fs.promises.readdir(usersDir).catch(() => [] as string[]);
  const live: string[] = [];
  for (const name of names) {
    const pid = Number(name.split('.')[0]);
    const recorded = await fs.promises.readFile(path.join(usersDir, name), 'utf8').catch(() => '');
    const startTime = processStartTime(pid);
    const alive = Number.isInteger(pid) && isProcessAlive(pid) && (startTime === undefined || recorded === '' || recorded === startTime);
    if (alive) live.push(name);
    else await fs.promises.rm(path.join(usersDir, name), { force: true });
  }
  return live;
}

async function startState(dataDir: string, startTimeoutMs: number, ports?: AzuritePorts): Promise<AzuriteState> {
  const { location, state: statePath } = files(dataDir);
  const h = await startAzurite({ location, detached: true, startTimeoutMs, ports });
  const state: AzuriteState = {
    pid: h.pid,
    ports: h.ports,
    connectionString: h.connectionString,
    location,
    startedAt: new Date().toISOString(),
    startTime: processStartTime(h.pid),
  };
  await writeState(statePath, state);
  return state;
}

/**
 * Attaches to the data folder's Azurite, starting it (detached: it outlives this process, with its log in
 * `<dataDir>/azurite/azurite.log`) when none runs. Two commands that start at once start one Azurite.
 * @param dataDir the data folder (created if missing)
 * @param opts.startTimeoutMs how long Azurite may take to listen (ms, default 30000)
 * @throws TablegraphError STORAGE_UNAVAILABLE when Azurite does not start, or the folder's lock is not had in time
 */
export async function ensureEmbeddedAzurite(dataDir: string, opts: { log?: Logger; startTimeoutMs?: number } = {}): Promise<EmbeddedAzurite> {
  const startTimeoutMs = opts.startTimeoutMs ?? 30000;
  const waitMs = startTimeoutMs + 10000;
  await fs.promises.mkdir(dataDir, { recursive: true });
  const paths = files(dataDir);
  await fs.promises.mkdir(paths.users, { recursive: true });
  const userFile = path.join(paths.users, `${process.pid}.${crypto.randomUUID()}`);

  let startedHere = false;
  const state = await withLock(
    dataDir,
    waitMs,
    async () => {
      let s = await runningAzurite(paths.state, startTimeoutMs, opts.log);
      if (s) {
        opts.log?.info({ azuritePid: s.pid, ports: s.ports }, 'attached to the running embedded Azurite');
      } else {
        s = await startState(dataDir, startTimeoutMs);
        startedHere = true;
        opts.log?.info({ azuritePid: s.pid, ports: s.ports, location: s.location }, 'started the embedded Azurite');
      }
      await fs.promises.writeFile(userFile, processStartTime(process.pid) ?? '');
      return s;
    },
    opts.log,
  );
  return new AttachedAzurite({ dataDir, userFile, startTimeoutMs, log: opts.log }, state, startedHere);
}

/** This process's handle on the data folder's Azurite, once attached (its user file written). */
class AttachedAzurite implements EmbeddedAzurite {
  private released: Promise<boolean> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private restarting = false;
  private readonly paths: ReturnType<typeof files>;
  /** How long to wait for the folder's lock (ms). */
  private readonly waitMs: number;

  constructor(
    private readonly at: { dataDir: string; userFile: string; startTimeoutMs: number; log?: Logger },
    private state: AzuriteState,
    readonly startedHere: boolean,
  ) {
    this.paths = files(at.dataDir);
    this.waitMs = at.startTimeoutMs + 10000;
  }

  get pid(): number {
    return this.state.pid;
  }

  get ports(): AzuritePorts {
    return this.state.ports;
  }

  get connectionString(): string {
    return devConnectionString(this.state.ports);
  }

  whenAlone<T>(fn: () => Promise<T>): Promise<{ ran: true; value: T } | { ran: false; others: number }> {
    return withLock(
      this.at.dataDir,
      this.waitMs,
      async () => {
        const n = await this.others();
        return n > 0 ? { ran: false as const, others: n } : { ran: true as const, value: await fn() };
      },
      this.at.log,
    );
  }

  watch(log: Logger, intervalMs = 1000): void {
    if (this.timer || this.released) return;
    this.timer = setInterval(() => void this.revive(log), intervalMs);
    this.timer.unref();
  }

  release(): Promise<boolean> {
    this.released ??= (async () => {
      if (this.timer) clearInterval(this.timer);
      return withLock(this.at.dataDir, this.waitMs, () => this.stopIfLast(), this.at.log);
    })();
    return this.released;
  }

  /** Under the lock: removes this process's user file, and stops Azurite when no other live process uses it. */
  private async stopIfLast(): Promise<boolean> {
    const { paths } = this;
    await fs.promises.rm(this.at.userFile, { force: true });
    if ((await liveUsers(paths.users)).length > 0) return false;
    const s = await readState(paths.state);
    // Only the Azurite the state file records, while its process is that one: never a pid reused since.
    if (!s || !recordedProcessLives(s)) return false;
    await stopProcess(s.pid);
    if ((await readState(paths.state))?.pid === s.pid) await fs.promises.rm(paths.state, { force: true });
    this.at.log?.info({ azuritePid: s.pid }, 'stopped the embedded Azurite: no other process uses it');
    return true;
  }

  /** Live processes attached besides this one. */
  private async others(): Promise<number> {
    return (await liveUsers(this.paths.users)).filter((u) => path.join(this.paths.users, u) !== this.at.userFile).length;
  }

  /** Starts Azurite again on the same ports when it died (under the lock: one process restarts it). */
  private async revive(log: Logger): Promise<void> {
    if (isProcessAlive(this.state.pid) || this.released || this.restarting) return;
    this.restarting = true;
    try {
      await withLock(this.at.dataDir, this.waitMs, () => this.restartUnderLock(log), log);
    } catch (e) {
      log.error({ err: e }, 'the embedded Azurite died and could not be started again; trying again in a moment');
    } finally {
      this.restarting = false;
    }
  }

  private async restartUnderLock(log: Logger): Promise<void> {
    const current = await runningAzurite(this.paths.state, this.at.startTimeoutMs, log);
    if (current) {
      // Another process restarted it. Never a second Azurite on one folder, even when this process's clients,
      // bound to the old ports, cannot follow it to new ones.
      if (current.ports.table !== this.state.ports.table)
        log.error(
          { azuritePid: current.pid, ports: current.ports },
          'the embedded Azurite was restarted by another process on other ports: restart this process to reach it',
        );
      this.state = current;
      return;
    }
    const dead = this.state.pid;
    this.state = await startState(this.at.dataDir, this.at.startTimeoutMs, this.state.ports);
    log.warn(
      { deadPid: dead, azuritePid: this.state.pid, ports: this.state.ports },
      'the embedded Azurite had died: started it again on the same ports (writes of its last seconds may be lost: its disk store saves about every 5 s)',
    );
  }
}
