#!/usr/bin/env node
// Runs before every command that starts from dist/ (the `pre…` scripts of package.json): compiles the TypeScript
// (`npm run build`) when a source file, a tsconfig or package-lock.json is newer than the last build, and does
// nothing otherwise (about 50 ms). Where there is no source to compile — the container image holds dist/ only —
// there is nothing to check.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const stamp = path.join(root, 'dist', '.tsbuildinfo');
const SOURCES = ['src', 'examples'];
const CONFIGS = ['tsconfig.json', 'tsconfig.build.json', 'package-lock.json'];

/** The newest modification time (ms) of the TypeScript files under `dir`, 0 when there are none. */
function newest(dir) {
  let latest = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) latest = Math.max(latest, newest(file));
    else if (entry.name.endsWith('.ts')) latest = Math.max(latest, fs.statSync(file).mtimeMs);
  }
  return latest;
}

const present = SOURCES.map((d) => path.join(root, d)).filter((d) => fs.existsSync(d));
if (present.length > 0 && fs.existsSync(path.join(root, 'tsconfig.build.json'))) {
  let sources = Math.max(0, ...present.map(newest));
  for (const config of CONFIGS) {
    const file = path.join(root, config);
    if (fs.existsSync(file)) sources = Math.max(sources, fs.statSync(file).mtimeMs);
  }
  const built = fs.existsSync(stamp) ? fs.statSync(stamp).mtimeMs : 0;
  if (sources > built) {
    process.stderr.write(built === 0 ? 'building dist/ (first start)…\n' : 'sources changed since the last build: building dist/…\n');
    const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
    const run = spawnSync(process.execPath, [tsc, '-p', path.join(root, 'tsconfig.build.json')], { stdio: 'inherit' });
    if (run.status !== 0) {
      process.stderr.write('the build failed: the errors above say where; `npm run dev` runs the sources without building.\n');
      process.exit(run.status ?? 1);
    }
    // tsc leaves the build info untouched when it had nothing to emit; its time is what the next check compares.
    const now = new Date();
    fs.utimesSync(stamp, now, now);
  }
}
