/**
 * tablegraph commands as real processes, as a user runs them (`node --import tsx <the source of npm run <command>>`, one
 * process, so a signal reaches the command itself), on the embedded default: no connection string, a data folder
 * of the test's own. Their output is kept; a test waits for a line of it, signals them, and waits for their exit.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { isProcessAlive } from '../../src/storage/azurite';
import { ROOT } from './harness';
import { until } from './wait';

export interface CommandProcess {
  child: ChildProcess;
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves once the output contains `text` (rejects when the process exits first or after `timeoutMs`). */
  waitFor(text: string | RegExp, timeoutMs?: number): Promise<void>;
}

const children: ChildProcess[] = [];

/**
 * The source of the script `npm run <command>` runs (package.json: `node … dist/<file>.js`), e.g. `src/cli/start.ts`:
 * tests run the sources through tsx, so that they need no build; test/dist-layout.test.ts runs the build itself.
 */
function commandScript(command: string): string {
  const scripts = (JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
  const script = /^node (?:--\S+ )*dist\/(\S+)\.js$/.exec(scripts[command] ?? '')?.[1];
  if (!script) throw new Error(`package.json has no "node dist/<file>.js" script named ${command}`);
  return `${script}.ts`;
}

/**
 * Starts the script of `npm run <command>` with `args`, on `dataDir`, with `env` added (and no storage of the test
 * run's). A `dataDir` of undefined leaves TABLEGRAPH_DATA_DIR unset: the default folder under `cwd` (default: the
 * repository) is used, as by a user who sets nothing.
 */
export function runCommand(
  command: string,
  args: string[],
  dataDir: string | undefined,
  env: Record<string, string> = {},
  opts: { cwd?: string } = {},
): CommandProcess {
  const clean: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k !== 'AZURE_STORAGE_CONNECTION_STRING' && !k.startsWith('TABLEGRAPH_')) clean[k] = v;
  }
  Object.assign(clean, { ...(dataDir !== undefined && { TABLEGRAPH_DATA_DIR: dataDir }), LOG_LEVEL: 'info', ...env });
  // Absolute paths: the process may run in a folder of its own, where neither tsx nor the script is found by name.
  const tsx = pathToFileURL(path.join(ROOT, 'node_modules/tsx/dist/loader.mjs')).href;
  const script = path.join(ROOT, commandScript(command));
  const child = spawn(process.execPath, ['--import', tsx, script, ...args], { cwd: opts.cwd ?? ROOT, env: clean, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString('utf8')));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString('utf8')));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  let done = false;
  void exited.then(() => (done = true));
  return {
    child,
    output: () => out,
    exited,
    async waitFor(text, timeoutMs = 90_000) {
      const found = () => {
        if (typeof text === 'string' ? out.includes(text) : text.test(out)) return true;
        if (done) throw new Error(`${command} exited before printing ${text}:\n${out}`);
        return false;
      };
      await until(() => `${command} to print ${text}:\n${out}`, found, { timeoutMs });
    },
  };
}

/** `npm start` on `port`, once it serves (`dataDir` and `opts` as runCommand's). */
export async function startServerProcess(
  dataDir: string | undefined,
  port: number,
  env: Record<string, string> = {},
  opts: { cwd?: string } = {},
): Promise<CommandProcess> {
  const server = runCommand('start', [], dataDir, { PORT: String(port), ...env }, opts);
  await server.waitFor('tablegraph is serving');
  return server;
}

/** Kills every command process still running (afterAll). */
export function killCommandProcesses(): void {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null && child.pid) process.kill(child.pid, 'SIGKILL');
  }
}

/**
 * A free loopback port below the kernel's ephemeral range (Linux: 32768–60999), for a server started later: a port
 * the kernel hands out (an embedded Azurite's, listening on port 0, in the meantime) is never one of these.
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = 20000 + Math.floor(Math.random() * 12000);
    const probe = net.createServer();
    const free = await new Promise<boolean>((resolve) => {
      probe.once('error', () => resolve(false));
      probe.listen(port, '127.0.0.1', () => resolve(true));
    });
    if (free) {
      await new Promise<void>((resolve) => probe.close(() => resolve()));
      return port;
    }
  }
}

/** The data folder's running Azurite, as its state file says (undefined when none). */
export function azuriteState(dataDir: string): { pid: number; connectionString: string } | undefined {
  const file = path.join(dataDir, 'azurite.json');
  return fs.existsSync(file) ? (JSON.parse(fs.readFileSync(file, 'utf8')) as { pid: number; connectionString: string }) : undefined;
}

export async function waitUntilGone(pid: number, timeoutMs: number): Promise<boolean> {
  return until(`process ${pid} to end`, () => !isProcessAlive(pid), { timeoutMs }).then(
    () => true,
    () => false,
  );
}

/** POSTs a query to the server on `port`. */
export async function queryPort(port: number, query: string): Promise<any> {
  const res = await fetch(`http://127.0.0.1:${port}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query }),
  });
  return res.json();
}

/** Waits for `p` to exit, and expects exit code 0 (the failure shows its output's last 3,000 characters). @returns its output */
export async function exitedOk(p: CommandProcess): Promise<string> {
  const { code } = await p.exited;
  expect([code, p.output().slice(-3000)]).toEqual([0, expect.any(String)]);
  return p.output();
}

/** Kills `p` (SIGKILL) once it prints `text` — a named point, a test hook's hold — and waits for its exit. */
export async function killedAt(p: CommandProcess, text: string | RegExp, timeoutMs = 90_000): Promise<void> {
  await p.waitFor(text, timeoutMs);
  p.child.kill('SIGKILL');
  await p.exited;
}
