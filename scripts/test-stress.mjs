#!/usr/bin/env node
/**
 * The flake detector: `npm run test:stress -- [--runs N] [--busy N] [--workers N] <file or pattern>…` runs the test
 * files given (every storage and long file when none is) N times (default 5), each time with N processes (default 2)
 * spinning the CPU beside them — what a busy CI machine does to timing — and reports a table: file, runs, failures,
 * seconds (the mean of its runs). A run's files share one jest invocation (`--workers` at once, default jest.config.js's); each run
 * has a TEST_SEED of its own (test/support/seed.ts), printed with a failure so that `TEST_SEED=<seed> npx jest <file>`
 * replays its choices. Exit code 1 when any run of any file failed.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const i = args.indexOf(name);
  if (i < 0) return fallback;
  const value = Number(args[i + 1]);
  if (!Number.isInteger(value) || value < 0) {
    console.error(`${name} takes a whole number`);
    process.exit(2);
  }
  args.splice(i, 2);
  return value;
};
const runs = option('--runs', 5);
const busy = option('--busy', 2);
const workers = option('--workers', 0);
const files = args;

/** One process spinning a CPU until it is killed. */
function spinner() {
  return spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' });
}

/** One jest run of `files` (every storage and long file when none): per file, whether it passed and its seconds. */
function jestRun(seed, out) {
  const projects = ['--selectProjects', 'storage', 'long', 'unit'];
  const argv = ['jest', ...projects, ...(workers > 0 ? ['--maxWorkers', String(workers)] : []), '--json', '--outputFile', out, ...files];
  return new Promise((resolve) => {
    const child = spawn('npx', argv, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, TEST_SEED: String(seed) } });
    let log = '';
    child.stdout.on('data', (d) => (log += d));
    child.stderr.on('data', (d) => (log += d));
    child.on('exit', () => {
      let report;
      try {
        report = JSON.parse(fs.readFileSync(out, 'utf8'));
      } catch {
        console.error(`run with TEST_SEED=${seed} wrote no report:\n${log.slice(-4000)}`);
        resolve([]);
        return;
      }
      resolve(
        report.testResults.map((t) => ({
          file: path.relative(process.cwd(), t.name),
          passed: t.status === 'passed',
          seconds: (t.endTime - t.startTime) / 1000,
          failures: t.assertionResults.filter((a) => a.status === 'failed').map((a) => a.fullName),
          message: t.message,
        })),
      );
    });
  });
}

const spinners = Array.from({ length: busy }, spinner);
const stop = () => spinners.forEach((s) => s.kill('SIGKILL'));
process.on('exit', stop);
process.on('SIGINT', () => process.exit(130));

const results = new Map();
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-stress-'));
for (let run = 1; run <= runs; run++) {
  const seed = 1 + Math.floor(Math.random() * (2 ** 31 - 2));
  const started = Date.now();
  const files = await jestRun(seed, path.join(tmp, `run-${run}.json`));
  console.log(`run ${run} of ${runs} (TEST_SEED=${seed}, ${busy} busy processes): ${files.length} files in ${Math.round((Date.now() - started) / 1000)} s`);
  for (const f of files) {
    const r = results.get(f.file) ?? { runs: 0, failures: 0, seconds: 0 };
    r.runs++;
    r.seconds += f.seconds;
    if (!f.passed) {
      r.failures++;
      console.log(`  FAILED ${f.file} with TEST_SEED=${seed}: ${f.failures.join('; ') || f.message.split('\n')[0]}`);
      console.log(`    replay: TEST_SEED=${seed} npx jest ${f.file}`);
    }
    results.set(f.file, r);
  }
}
stop();
fs.rmSync(tmp, { recursive: true, force: true });

const rows = [...results].sort(([a], [b]) => (a < b ? -1 : 1));
console.log('\n| file | runs | failures | seconds (mean) |\n| --- | --- | --- | --- |');
for (const [file, r] of rows) console.log(`| ${file} | ${r.runs} | ${r.failures} | ${(r.seconds / r.runs).toFixed(1)} |`);
const failed = rows.filter(([, r]) => r.failures > 0);
console.log(failed.length === 0 ? `\nno failure in ${runs} runs of ${rows.length} files` : `\n${failed.length} file(s) failed at least once`);
process.exitCode = failed.length === 0 ? 0 : 1;
