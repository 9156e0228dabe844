/**
 * The repository is self-contained: a clone with nothing beside it runs the suite, the benchmarks and the README's
 * examples. No tracked file reads or links outside the repository, and every relative link of the README and of
 * `docs/` names a file the repository holds.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from '../support/harness';

/** The repository's own files (tracked, or new and not ignored), relative to its root. */
function repositoryFiles(): string[] {
  try {
    const out = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' });
    return out.split('\n').filter((f) => f !== '' && fs.existsSync(path.join(ROOT, f)));
  } catch {
    // Not a git checkout (an exported copy): every file but installed packages and run-time data.
    const walk = (dir: string): string[] =>
      fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
        const rel = path.join(dir, e.name);
        if (e.isDirectory()) return ['node_modules', '.git', '.data', 'dist'].includes(e.name) ? [] : walk(rel);
        return [rel];
      });
    return walk('');
  }
}

const TEXT = /\.(ts|js|mjs|cjs|json|md|graphql|ya?ml|sh|csv|ndjson)$|^\.ci\/|Dockerfile$/;

test('no file reaches outside the repository', () => {
  const outside: string[] = [];
  for (const file of repositoryFiles().filter((f) => TEXT.test(f) && f !== 'test/unit/self-contained.test.ts')) {
    const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
    text.split('\n').forEach((line, i) => {
      // A sibling folder of the repository, or a design document that is not in it.
      if (/\.\.\/shared\b|\bDESIGN\.md\b/.test(line)) outside.push(`${file}:${i + 1}: ${line.trim().slice(0, 120)}`);
    });
  }
  expect(outside).toEqual([]);
});

test('every relative link of the README and docs/ names a file of the repository', () => {
  const files = repositoryFiles();
  const broken: string[] = [];
  for (const doc of files.filter((f) => f === 'README.md' || (f.startsWith('docs/') && f.endsWith('.md')))) {
    const text = fs.readFileSync(path.join(ROOT, doc), 'utf8');
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target) || target.startsWith('#')) continue; // an address, or an anchor of the page
      const resolved = path.normalize(path.join(path.dirname(doc), target.split('#')[0]));
      if (resolved.startsWith('..') || !fs.existsSync(path.join(ROOT, resolved))) broken.push(`${doc}: ${target}`);
    }
  }
  expect(broken).toEqual([]);
});

test('the Chicago snapshot is in the repository, compressed', () => {
  const file = path.join(ROOT, 'examples/hr/data/chicago-employees.csv.gz');
  expect(fs.statSync(file).size).toBeLessThan(600 * 1024);
  expect(fs.readFileSync(file).subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b]));
});
