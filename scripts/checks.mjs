#!/usr/bin/env node
/**
 * The static checks `npm test` runs before jest, side by side rather than one after another (each is mostly one
 * process on one core; on two cores the set takes about half as long): the generated types are current, the sources
 * and the web client type-check, ESLint, Prettier, and no import cycle in src/. Each one's output is printed once it is
 * done, under its name; the exit code is 1 when any failed.
 */
import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';

const CHECKS = [
  ['generated types current', 'graphql-codegen', ['--config', 'codegen.yml', '--check']],
  ['types', 'tsc', ['-p', '.']],
  ['web client types', 'tsc', ['-p', 'examples/web-client']],
  ['eslint', 'eslint', ['.']],
  ['prettier', 'prettier', ['--check', '.']],
  ['import cycles', 'dpdm', ['--no-warning', '--no-tree', '--exit-code', 'circular:1', 'src/**/*.ts']],
];

/** Runs one check; resolves with its name, exit code, output and seconds. */
function run([name, command, args]) {
  const started = performance.now();
  return new Promise((resolve) => {
    const child = spawn('npx', ['--no-install', command, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, FORCE_COLOR: '0' } });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.on('close', (code) => resolve({ name, code: code ?? 1, output, seconds: (performance.now() - started) / 1000 }));
    child.on('error', (e) => resolve({ name, code: 1, output: String(e), seconds: 0 }));
  });
}

const results = await Promise.all(CHECKS.map(run));
for (const r of results) {
  const failed = r.code !== 0;
  process.stdout.write(`${failed ? '✗' : '✓'} ${r.name} (${r.seconds.toFixed(1)} s)\n`);
  if (failed) process.stdout.write(`${r.output.trimEnd()}\n\n`);
}
const failures = results.filter((r) => r.code !== 0).map((r) => r.name);
if (failures.length > 0) {
  process.stdout.write(`static checks failed: ${failures.join(', ')}\n`);
  process.exit(1);
}
