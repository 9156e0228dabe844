/**
 * The container image, without Docker: the final stage of the Dockerfile is rebuilt in a temporary folder from its
 * own COPY lines — `dist/` compiled as its build stage compiles it, `node_modules` installed as its
 * production-dependencies stage installs them (`npm ci --omit=dev`), the rest copied from the repository — then its
 * CMD starts with its ENV, against the test Azurite: it serves, its HEALTHCHECK command passes, it answers an
 * authenticated query, and SIGTERM stops it gracefully. Without storage configured it says, with CONFIG_INVALID,
 * that a production install has no embedded Azurite.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SignJWT } from 'jose';
import { connectionString, ROOT, uniquePrefix } from './support/harness';
import { freePort } from './support/processes';
import { until } from './support/wait';

interface Stage {
  name?: string;
  lines: string[];
}

/** The Dockerfile's stages: `FROM … AS name` and the instructions after it (comments and blank lines left out). */
function stages(): Stage[] {
  const out: Stage[] = [];
  for (const raw of fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8').split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const from = /^FROM\s+\S+(?:\s+AS\s+(\S+))?$/i.exec(line);
    if (from) out.push({ name: from[1], lines: [] });
    else out.at(-1)!.lines.push(line);
  }
  return out;
}

const SECRET = 'container-layout-test-secret-of-32-chars!';
let work: string;
let app: string;
let final: Stage;
let env: Record<string, string>;
const children: ChildProcess[] = [];

/** An instruction's JSON (exec) form, e.g. CMD ["node", "…"]. */
const execForm = (instruction: string) =>
  JSON.parse(final.lines.find((l) => l.startsWith(`${instruction} `))!.replace(/^\S+\s+(?:--\S+\s+)*(?:CMD\s+)?/, '')) as string[];

function run(command: string[], extraEnv: Record<string, string>): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
  const child = spawn(command[0] === 'node' ? process.execPath : command[0], command.slice(1), {
    cwd: app,
    env: { PATH: process.env.PATH, ...env, ...extraEnv },
  });
  children.push(child);
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString('utf8')));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString('utf8')));
  return { child, output: () => out, exited: new Promise((resolve) => child.once('exit', (code) => resolve(code))) };
}

beforeAll(() => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-image-'));
  const all = stages();
  final = all.at(-1)!;
  const build = all.find((s) => s.name === 'build')!;
  const deps = all.find((s) => s.name === 'production-dependencies')!;
  expect(build.lines).toContain('RUN npm run build');
  expect(deps.lines).toContain('RUN npm ci --omit=dev --no-audit --no-fund');

  // The build stage: `npm run build` (tsc -p tsconfig.build.json), into this folder instead of the repository's dist/.
  const buildDir = path.join(work, 'build');
  const tsc = spawnSync(
    process.execPath,
    [
      path.join(ROOT, 'node_modules/typescript/bin/tsc'),
      '-p',
      'tsconfig.build.json',
      '--outDir',
      path.join(buildDir, 'dist'),
      '--tsBuildInfoFile',
      path.join(buildDir, 'tsbuildinfo'),
    ],
    { cwd: ROOT, encoding: 'utf8' },
  );
  expect(tsc.stderr + tsc.stdout).toBe('');
  // The production-dependencies stage: its COPY, then its npm ci (from npm's cache when it holds the packages).
  const depsDir = path.join(work, 'deps');
  fs.mkdirSync(depsDir);
  for (const file of ['package.json', 'package-lock.json', '.npmrc']) fs.copyFileSync(path.join(ROOT, file), path.join(depsDir, file));
  const npm = spawnSync('npm', ['ci', '--omit=dev', '--no-audit', '--no-fund', '--prefer-offline'], { cwd: depsDir, encoding: 'utf8', timeout: 240_000 });
  expect(npm.status).toBe(0);

  // The final stage: each COPY, from a stage or from the repository.
  app = path.join(work, 'app');
  fs.mkdirSync(app);
  const stageRoot: Record<string, string> = { build: buildDir, 'production-dependencies': depsDir };
  for (const line of final.lines.filter((l) => l.startsWith('COPY '))) {
    const words = line.split(/\s+/).slice(1);
    const from = words[0].startsWith('--from=') ? words.shift()!.slice('--from='.length) : undefined;
    const target = words.pop()!;
    for (const source of words) {
      const src = from ? path.join(stageRoot[from], source.replace(/^\/app\//, '')) : path.join(ROOT, source);
      const dest = target.endsWith('/') ? path.join(app, target, path.basename(source)) : path.join(app, target);
      if (from === 'production-dependencies') fs.renameSync(src, dest);
      else fs.cpSync(src, dest, { recursive: true });
    }
  }
  env = Object.fromEntries(
    [
      ...final.lines
        .filter((l) => l.startsWith('ENV '))
        .join(' ')
        .matchAll(/(\w+)=(\S+)/g),
    ].map((m) => [m[1], m[2]]),
  );
}, 300_000);

afterAll(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  fs.rmSync(work, { recursive: true, force: true });
});

test('the image holds compiled code and production dependencies only, and runs as a user of no privilege', () => {
  expect(fs.existsSync(path.join(app, 'dist/src/cli/start.js'))).toBe(true);
  expect(fs.existsSync(path.join(app, 'dist/src/cli/worker.js'))).toBe(true);
  expect(fs.existsSync(path.join(app, 'src'))).toBe(false);
  for (const dev of ['typescript', 'tsx', 'jest', 'azurite', 'eslint']) expect(fs.existsSync(path.join(app, 'node_modules', dev))).toBe(false);
  expect(fs.existsSync(path.join(app, 'node_modules/@azure/identity'))).toBe(true);
  expect(final.lines).toContain('USER node');
  expect(env).toMatchObject({ NODE_ENV: 'production', HOST: '0.0.0.0' });
});

test('its CMD serves on all interfaces with authentication, passes its HEALTHCHECK, answers, and stops on SIGTERM', async () => {
  const port = await freePort();
  const server = run(execForm('CMD'), {
    PORT: String(port),
    AZURE_STORAGE_CONNECTION_STRING: connectionString(),
    TABLEGRAPH_TABLE_PREFIX: uniquePrefix(),
    TABLEGRAPH_JWT_SECRET: SECRET,
    TABLEGRAPH_CURSOR_SECRET: 'container-layout',
  });
  await until(
    () => `the image's CMD to serve:\n${server.output()}`,
    () => {
      if (server.child.exitCode !== null) throw new Error(`the image's CMD exited:\n${server.output()}`);
      return server.output().includes('tablegraph is serving');
    },
    { timeoutMs: 60_000, everyMs: 100 },
  );
  expect(server.output()).toMatch(/"storage":"azurite","embedded":false/);

  const health = run(execForm('HEALTHCHECK'), { PORT: String(port) });
  expect(await health.exited).toBe(0);

  const url = `http://127.0.0.1:${port}/graphql`;
  const query = JSON.stringify({ query: '{ department(id: "Marketing") { name } }' });
  const anonymous = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: query });
  expect(anonymous.status).toBe(401);
  const token = await new SignJWT({ sub: 'ops', roles: ['reader'], department: 'Marketing' })
    .setProtectedHeader({ alg: 'HS256' })
    .setIssuedAt()
    .setExpirationTime('5m')
    .sign(new TextEncoder().encode(SECRET));
  const answered = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: query });
  const answer = (await answered.json()) as any;
  expect(answer.data).toEqual({ department: { name: 'Marketing' } });
  // A stack trace names the TypeScript source (source maps on), not only the compiled file.
  expect(fs.existsSync(path.join(app, 'dist/src/cli/start.js.map'))).toBe(true);

  server.child.kill('SIGTERM');
  expect(await server.exited).toBe(0);
  expect(server.output()).toMatch(/"msg":"stopped"/);
}, 120_000);

test('with no storage configured, a production install says there is no embedded Azurite (CONFIG_INVALID)', async () => {
  const server = run(execForm('CMD'), { PORT: String(await freePort()), TABLEGRAPH_DATA_DIR: path.join(work, 'data'), TABLEGRAPH_JWT_SECRET: SECRET });
  expect(await server.exited).toBe(1);
  expect(server.output()).toMatch(/"code":"CONFIG_INVALID".*embedded Azurite is not installed.*TABLEGRAPH_STORAGE_ACCOUNT_URL/);
}, 60_000);
