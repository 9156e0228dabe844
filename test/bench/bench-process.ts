/**
 * A tablegraph server as a benchmark runs it: its own process (so its CPU is its own, read from /proc), on a
 * connection string, with the benchmark's settings; and the per-process figures benchmarks print.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export const ROOT = path.resolve(__dirname, '../..');

/** How the server's code runs: compiled (`npm start`'s `node dist/…`) or from the sources through tsx (`npm run dev`). */
export type ServerCode = 'dist' | 'tsx';

/** The node arguments of `command` (start, worker) run as `code`. */
export function commandArgs(command: 'start' | 'worker' | 'verify', code: ServerCode): string[] {
  return code === 'dist' ? ['--enable-source-maps', `dist/src/cli/${command}.js`] : ['--import', 'tsx', `src/cli/${command}.ts`];
}

/** CPU time (ms) a process has used: utime + stime from /proc/<pid>/stat. */
export function cpuMsOf(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return (ticks * 1000) / 100; // USER_HZ is 100 on Linux
}

/** Resident set size (bytes). */
export function rssOf(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1]) * 1024;
}

/** The environment of a benchmark's process: no TABLEGRAPH_* of the caller, then `env`. */
export function benchEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = { ...process.env };
  for (const k of Object.keys(out)) if (k.startsWith('TABLEGRAPH_')) delete out[k];
  return { ...out, LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info', ...env };
}

/**
 * Starts `node <args>` in the repository with `env` and waits until `http://127.0.0.1:<port>/health` answers 200.
 * @returns the child and how long it took to serve (ms, from spawn)
 */
export async function startServerProcess(args: string[], port: number, env: Record<string, string>): Promise<{ child: ChildProcess; startMs: number }> {
  const started = performance.now();
  const child = spawn(process.execPath, args, { cwd: ROOT, env: benchEnv({ PORT: String(port), ...env }), stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString('utf8')));
  for (let i = 0; i < 1200; i++) {
    const up = await fetch(`http://127.0.0.1:${port}/health`).then(
      (r) => r.ok,
      () => false,
    );
    if (up) return { child, startMs: performance.now() - started };
    if (child.exitCode !== null) throw new Error(`the server exited:\n${err}`);
    await sleep(i < 100 ? 10 : 50);
  }
  throw new Error(`the server did not start:\n${err}`);
}

/** SIGTERM, and waits for the exit. */
export async function stopProcess(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

export const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** The p-th percentile (0–100) of `xs`, nearest rank. */
export function percentile(xs: number[], p: number): number {
  if (xs.length === 0) return 0;
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}
