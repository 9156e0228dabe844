/**
 * `npm run bench [-- <name> …]`: runs the benchmarks one after another (each on its own in-memory Azurite) and prints
 * their tables — all of them by default (about 10 minutes on a 2-core machine), or the ones named: point, import, read,
 * fanout, partition, attack, overload, load, build, scaleout, memory, subscriptions, faults, migrate, peer, join, backup, scale, capture-kills, tenants. Not part of `npm test`: benchmarks print numbers, they assert nothing.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';

const BENCHMARKS: Record<string, string> = {
  point: 'point-bench.ts',
  import: 'import-bench.ts',
  read: 'read-bench.ts',
  fanout: 'fanout-bench.ts',
  partition: 'partition-bench.ts',
  attack: 'attack-bench.ts',
  overload: 'overload-bench.ts',
  load: 'load-bench.ts',
  build: 'build-bench.ts',
  scaleout: 'scaleout-bench.ts',
  memory: 'memory-bench.ts',
  subscriptions: 'subscription-bench.ts',
  faults: 'faults-bench.ts',
  migrate: 'migrate-bench.ts',
  peer: 'peer-bench.ts',
  join: 'join-bench.ts',
  backup: 'backup-bench.ts',
  scale: 'scale-bench.ts',
  'capture-kills': 'capture-kill-bench.ts',
  tenants: 'tenants-bench.ts',
};

const names = process.argv.slice(2);
const unknown = names.filter((n) => !BENCHMARKS[n]);
if (unknown.length > 0) {
  console.error(`Unknown benchmark ${unknown.join(', ')}. Benchmarks: ${Object.keys(BENCHMARKS).join(', ')}.`);
  process.exit(2);
}
// The servers of the benchmarks run compiled, as `npm start` runs them: build dist/ when a source changed.
const built = spawnSync(process.execPath, [path.join(__dirname, '../../scripts/build-if-stale.mjs')], { stdio: 'inherit' });
if (built.status !== 0) process.exit(1);
let failed = 0;
for (const name of names.length > 0 ? names : Object.keys(BENCHMARKS)) {
  console.log(`\n== ${name} ==`);
  const tsx = path.join(__dirname, '../../node_modules/tsx/dist/cli.mjs');
  const run = spawnSync(process.execPath, [tsx, path.join(__dirname, BENCHMARKS[name])], { stdio: 'inherit' });
  if (run.status !== 0) failed++;
}
process.exitCode = failed > 0 ? 1 : 0;
