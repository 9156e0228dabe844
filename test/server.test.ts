/**
 * The server as a whole: /health against live and dead storage, seeding an empty store once, refusing a schema
 * that cannot be served, and refusing bad queries before any storage call.
 */
import { spawnSync } from 'node:child_process';
import { expectNoRequestReads } from './support/request-reads';
import { until } from './support/wait';
import fs from 'node:fs';
import { createServer, type Server } from 'node:http';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { loadConfig } from '../src/runtime/config';
import { ErrorCode, TablegraphError } from '../src/errors';
import { createLogger } from '../src/log';
import { entityWrites } from '../src/model/entity-codec';
import { CursorCodec } from '../src/read/cursor';
import { attachResolvers } from '../src/resolvers/attach';
import { startServer } from '../src/runtime/start-server';
import { createGraphqlApp, MAX_QUERY_DEPTH } from '../src/server/app';
import { devConnectionString } from '../src/storage/connection';
import { TableStore } from '../src/storage/table-store';
import { QueueStore } from '../src/storage/queue-store';
import { QueueWorker } from '../src/worker/queue-worker';
import { planEgtBatches, writeEgtBatches } from '../src/write/egt-batches';
import {
  compileHr,
  connectionString,
  ROOT,
  DIRECTIVES_FILE,
  SCHEMA_DIR,
  startTestServer,
  testStore,
  uniquePrefix,
  type TestServer,
  testBlobs,
  testQueues,
} from './support/harness';

const silent = createLogger({ level: 'silent' });
const baseUrl = (graphqlUrl: string) => graphqlUrl.replace(/\/graphql$/, '');

/** A loopback port nothing listens on (taken from the system, then released). */
async function deadPort(): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

describe('/health', () => {
  test('200 when storage answers', async () => {
    const server = await startTestServer();
    try {
      const res = await fetch(`${baseUrl(server.url)}/health`);
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ status: 'ok', storage: { target: 'azurite', answers: true, latencyMs: expect.any(Number) } });
    } finally {
      await server.close();
    }
  });

  test('503 when storage does not answer, and queries fail with STORAGE_UNAVAILABLE', async () => {
    const port = await deadPort();
    const store = new TableStore({ connectionString: devConnectionString({ blob: port, queue: port, table: port }), target: 'azurite', timeoutMs: 2000 });
    const { schema, model } = compileHr(uniquePrefix());
    attachResolvers(schema, model);
    const { handler, apollo } = await createGraphqlApp({
      schema,
      model,
      store,
      cursors: new CursorCodec('x'),
      readConcurrency: 4,
      log: silent,
      storageTarget: 'azurite',
    });
    const http: Server = createServer(handler);
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
    try {
      const res = await fetch(`${base}/health`);
      expect(res.status).toBe(503);
      const health = await res.json();
      expect(health).toMatchObject({ status: 'unavailable', storage: { answers: false }, requestId: expect.any(String) });
      // What storage said (host, port, SDK text) stays in the log: /health answers anyone.
      expect(JSON.stringify(health)).not.toMatch(/127\.0\.0\.1|ECONNREFUSED|error/i);

      const q = await fetch(`${base}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query: '{ department(id: "Sales") { name } }' }),
      });
      const body = (await q.json()) as any;
      expect(body.data).toEqual({ department: null });
      expect(body.errors[0].extensions).toEqual({ code: 'STORAGE_UNAVAILABLE', reason: expect.any(String), requestId: q.headers.get('x-request-id') });
      expect(body.errors[0].message).not.toMatch(/127\.0\.0\.1|Directory|PartitionKey|ECONNREFUSED/);
      expect(body.extensions.cost).toMatchObject({ pointQueries: 1, entitiesRead: 0, waves: 1 });
    } finally {
      await new Promise<void>((resolve) => http.close(() => resolve()));
      await apollo.stop();
    }
  });
});

test("/health: a worker's failed receive shows as when and which code, never its text, and goes once the queue answers", async () => {
  const prefix = uniquePrefix();
  const live = testQueues();
  const dead = new QueueStore({
    connectionString: devConnectionString({ blob: 1, queue: await deadPort(), table: 1 }),
    retry: { maxTries: 1 },
    timeoutMs: 1000,
  });
  let outage = true;
  // The real queue service, or a port nothing answers on while the outage lasts.
  const queues = new Proxy(live, { get: (target, prop) => (prop === 'receive' && outage ? dead.receive.bind(dead) : Reflect.get(target, prop, target)) });
  const names = { queue: `${prefix}-health`, poison: `${prefix}-health-poison` };
  const worker = new QueueWorker({
    queues,
    queue: names.queue,
    poisonQueue: names.poison,
    idleBackoffMs: { min: 10, max: 50 },
    handle: async () => ({ kind: 'done' }),
  });
  const { schema, model } = compileHr(prefix);
  attachResolvers(schema, model);
  const { handler, apollo } = await createGraphqlApp({
    schema,
    model,
    store: testStore(),
    queues: live,
    queueNames: names,
    worker: () => worker,
    cursors: new CursorCodec('x'),
    readConcurrency: 4,
    log: silent,
    storageTarget: 'azurite',
  });
  const http: Server = createServer(handler);
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const health = async () => (await (await fetch(`http://127.0.0.1:${(http.address() as AddressInfo).port}/health`)).json()) as any;
  try {
    worker.start();
    await until('the worker to note the error', () => worker.stats().lastError !== undefined, { timeoutMs: 10_000, everyMs: 20 });
    const during = await health();
    expect(during.fanout.worker).toMatchObject({ lastErrorCode: 'STORAGE_UNAVAILABLE', lastErrorAt: expect.any(Number) });
    expect(JSON.stringify(during)).not.toMatch(/127\.0\.0\.1|ECONNREFUSED|Queue service|lastError"/);
    outage = false;
    await until('the worker to clear the error', () => worker.stats().lastError === undefined, { timeoutMs: 10_000, everyMs: 20 });
    expect((await health()).fanout.worker.lastErrorCode).toBeUndefined();
    // A message sent with a delay (a blob cleanup's) is counted apart: a drained queue shows none visible.
    await live.send(names.queue, 'later', { visibilityDelaySeconds: 60 });
    // /health checks the queue at most once a second (health.ts): asked until its next check sees the message.
    let fanout: any;
    await until('/health to count the message', async () => (fanout = (await health()).fanout).queueDepth === 1, { timeoutMs: 10_000, everyMs: 100 });
    expect(fanout).toMatchObject({ queueDepth: 1, visibleMessages: 0, hiddenMessages: 1 });
  } finally {
    await worker.stop();
    await new Promise<void>((resolve) => http.close(() => resolve()));
    await apollo.stop();
    await Promise.all([live.deleteQueue(names.queue), live.deleteQueue(names.poison)]);
  }
});

describe('seeding an empty store', () => {
  const SEED_QUERY = `{ departments { edges { node { id name employeeCount } } }
    marketing: department(id: "Marketing") { employees { edges { node { id firstName lastName } } } }
    sales: department(id: "Sales") { employees { edges { node { id firstName lastName } } } } }`;

  test("the first start writes the guide's rows; a second start on the same tables neither duplicates nor overwrites", async () => {
    const first = await startTestServer();
    const prefix = first.config.tablePrefix;
    let firstOpen = true;
    let second: TestServer | undefined;
    try {
      const r = await first.query(SEED_QUERY);
      expect(r.errors).toBeUndefined();
      expect(r.data).toEqual({
        departments: {
          edges: [{ node: { id: 'Marketing', name: 'Marketing', employeeCount: 2 } }, { node: { id: 'Sales', name: 'Sales', employeeCount: 1 } }],
        },
        marketing: {
          employees: { edges: [{ node: { id: '1', firstName: 'Don', lastName: 'Hall' } }, { node: { id: '2', firstName: 'Jun', lastName: 'Cao' } }] },
        },
        sales: { employees: { edges: [{ node: { id: '10', firstName: 'Ken', lastName: 'Kwok' } }] } },
      });

      // Change a seeded row, and remember the ETag of one left alone: a re-seed would undo or rewrite them.
      const { model } = compileHr(prefix);
      const renamed = entityWrites(model.entities.get('Department')!, { id: 'Marketing', name: 'Marketing & Comms', employeeCount: 2, payroll: 5 });
      await writeEgtBatches(first.store, planEgtBatches([renamed.primary, ...renamed.indexes], first.store.target), { concurrency: 1 });
      const directory = model.entities.get('Employee')!.layout.table;
      const donBefore = await first.store.getEntity({ table: directory, partitionKey: 'Marketing', rowKey: 'empid_00000001' });
      await first.close();
      firstOpen = false;

      second = await startTestServer({ TABLEGRAPH_TABLE_PREFIX: prefix });
      const again = await second.query(SEED_QUERY);
      expect(again.data.departments.edges.map((e: any) => e.node)).toEqual([
        { id: 'Marketing', name: 'Marketing & Comms', employeeCount: 2 },
        { id: 'Sales', name: 'Sales', employeeCount: 1 },
      ]);
      expect(again.data.marketing).toEqual(r.data.marketing);
      expect(again.data.sales).toEqual(r.data.sales);
      const donAfter = await second.store.getEntity({ table: directory, partitionKey: 'Marketing', rowKey: 'empid_00000001' });
      expect(donAfter?.etag).toBe(donBefore?.etag);
    } finally {
      if (firstOpen) await first.close();
      await second?.close();
    }
  });
});

describe('refusing to start', () => {
  test('npm start with a schema that is not valid GraphQL: SCHEMA_INVALID with file:line, before any Azurite is started', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-badsdl-'));
    try {
      fs.copyFileSync(DIRECTIVES_FILE, path.join(dir, 'directives.graphql'));
      fs.writeFileSync(path.join(dir, 'bad.graphql'), 'type Query {\n  x(id: ID! String\n}\n');
      const run = spawnSync(process.execPath, [path.join(ROOT, 'node_modules/tsx/dist/cli.mjs'), 'src/cli/start.ts'], {
        cwd: ROOT,
        encoding: 'utf8',
        env: { ...process.env, AZURE_STORAGE_CONNECTION_STRING: '', TABLEGRAPH_SCHEMA_DIR: dir, TABLEGRAPH_DATA_DIR: path.join(dir, 'data'), PORT: '0' },
        timeout: 30_000,
      });
      expect(run.status).toBe(1);
      expect(`${run.stdout}${run.stderr}`).toMatch(/SCHEMA_INVALID/);
      expect(`${run.stdout}${run.stderr}`).toMatch(/bad\.graphql:3:1\): Syntax Error/); // where the parser found `}`
      expect(fs.existsSync(path.join(dir, 'data'))).toBe(false); // no Azurite was started for it
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a schema with a field no point or range query serves throws SCHEMA_INVALID naming it', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-schema-'));
    try {
      fs.cpSync(SCHEMA_DIR, dir, { recursive: true });
      fs.writeFileSync(path.join(dir, 'zz-bad.graphql'), '# would need a scan\nextend type Query {\n  x: [Employee!]!\n}\n');
      const config = loadConfig(
        { PORT: '0', AZURE_STORAGE_CONNECTION_STRING: 'UseDevelopmentStorage=true', TABLEGRAPH_SCHEMA_DIR: dir, TABLEGRAPH_TABLE_PREFIX: uniquePrefix() },
        ROOT,
      );
      const store = testStore();
      const ensure = jest.spyOn(store, 'ensureTable');
      const storage = {
        store,
        queues: testQueues(),
        blobs: testBlobs(),
        access: { kind: 'connection-string' as const, connectionString: 'unused' },
        target: 'azurite' as const,
        close: async () => {},
      };
      const error = await startServer(config, storage, silent).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(TablegraphError);
      const e = error as TablegraphError;
      expect(e.code).toBe(ErrorCode.SCHEMA_INVALID);
      expect(e.message).toMatch(/Query\.x \(.*zz-bad\.graphql:3:3\)/);
      expect(e.details.problems).toEqual([expect.objectContaining({ coordinate: 'Query.x' })]);
      expect(ensure).not.toHaveBeenCalled();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('friendly failures', () => {
  test('a port in use: CONFIG_INVALID naming the port and how to choose another, no stack trace', async () => {
    const first = await startTestServer({ TABLEGRAPH_WORKER: 'off' });
    try {
      const config = loadConfig(
        {
          PORT: String(first.port),
          HOST: '127.0.0.1',
          AZURE_STORAGE_CONNECTION_STRING: 'UseDevelopmentStorage=true',
          TABLEGRAPH_SCHEMA_DIR: SCHEMA_DIR,
          TABLEGRAPH_TABLE_PREFIX: uniquePrefix(),
          TABLEGRAPH_WORKER: 'off',
        },
        ROOT,
      );
      const storage = {
        store: testStore(),
        queues: testQueues(),
        blobs: testBlobs(),
        access: { kind: 'connection-string' as const, connectionString: connectionString() },
        target: 'azurite' as const,
        close: async () => {},
      };
      const error = (await startServer(config, storage, silent).then(
        () => undefined,
        (e: unknown) => e,
      )) as TablegraphError;
      expect(error).toBeInstanceOf(TablegraphError);
      expect(error.code).toBe(ErrorCode.CONFIG_INVALID);
      expect(error.details).toMatchObject({ reason: 'PortInUse', port: first.port });
      expect(error.message).toContain(`Port ${first.port} on 127.0.0.1 is already in use`);
      expect(error.message).toContain(`PORT=${first.port + 1} npm start`);
    } finally {
      await first.close();
    }
  });

  test('LOG_LEVEL=verbose is refused by the configuration, naming it, not by the logger', () => {
    const run = spawnSync(process.execPath, [path.join(ROOT, 'node_modules/tsx/dist/cli.mjs'), 'src/cli/explain.ts'], {
      cwd: ROOT,
      encoding: 'utf8',
      env: { ...process.env, LOG_LEVEL: 'verbose' },
      timeout: 30_000,
    });
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('LOG_LEVEL');
    expect(run.stderr).toContain('CONFIG_INVALID');
    expect(run.stderr).not.toContain('at '); // no stack trace
  });
});

describe('refusing bad queries before storage', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server?.close();
  });
  afterEach(() => jest.restoreAllMocks());

  function spyStorage() {
    return [jest.spyOn(server.store, 'getEntity'), jest.spyOn(server.store, 'queryRange')];
  }

  test(`a query deeper than ${MAX_QUERY_DEPTH} levels is refused without a storage call`, async () => {
    let inner = 'id';
    for (let i = 0; i < 4; i++) inner = `department { employees { edges { node { ${inner} } } } }`;
    const deep = `{ employee(departmentId: "Sales", id: "10") { ${inner} } }`;
    const spies = spyStorage();
    const r = await server.query(deep);
    expect(r.data).toBeUndefined();
    expect(r.errors![0].extensions.code).toBe('GRAPHQL_VALIDATION_FAILED');
    expect(r.errors![0].message).toContain(`Query depth limit of ${MAX_QUERY_DEPTH} exceeded`);
    expectNoRequestReads(spies, server.config.tablePrefix);

    // The same shape within the limit is served.
    const shallow = await server.query(`{ employee(departmentId: "Sales", id: "10") { department { employees { edges { node { id } } } } } }`);
    expect(shallow.data.employee.department.employees.edges).toEqual([{ node: { id: '10' } }]);
  });

  test.each([
    ['a fragment cycle', '{ ...A } fragment A on Query { ...B } fragment B on Query { ...A }'],
    ['a fragment that spreads itself', '{ ...A } fragment A on Query { department(id: "Sales") { id } ...A }'],
    ['an unknown fragment', '{ ...Nowhere }'],
    ['31 aliases', `{ ${Array.from({ length: 31 }, (_, i) => `d${i}: department(id: "D${i}") { id }`).join(' ')} }`],
    ['1,000 aliases of distinct departments', `{ ${Array.from({ length: 1000 }, (_, i) => `d${i}: department(id: "D${i}") { id }`).join(' ')} }`],
    ['20,000 fields (over 5,000 tokens)', `{ ${'__typename '.repeat(20_000)}}`],
    ['51 directives', `{ ${Array.from({ length: 51 }, () => '__typename @include(if: true)').join(' ')} }`],
  ])('%s: refused with a code, no storage call, no 500', async (_name, query) => {
    const spies = spyStorage();
    const res = await fetch(server.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query }) });
    expect(res.status).toBeLessThan(500);
    const r = (await res.json()) as any;
    expect(r.data).toBeUndefined();
    expect(['GRAPHQL_VALIDATION_FAILED', 'GRAPHQL_PARSE_FAILED']).toContain(r.errors[0].extensions.code);
    expectNoRequestReads(spies, server.config.tablePrefix);
  });

  test('a 1 MB comment or a 150,000-field document: refused by size (413) before it is parsed', async () => {
    for (const query of [`# ${'x'.repeat(1024 * 1024)}\n{ __typename }`, `{ ${'__typename '.repeat(150_000)}}`]) {
      const res = await fetch(server.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query }) });
      expect(res.status).toBe(413);
      expect(((await res.json()) as any).errors[0].extensions.code).toBe('PAYLOAD_TOO_LARGE');
    }
    // A cheap query answers meanwhile.
    expect((await server.query('{ department(id: "Sales") { name } }')).data).toEqual({ department: { name: 'Sales' } });
  });

  test('a malformed query is GRAPHQL_PARSE_FAILED without a storage call', async () => {
    const spies = spyStorage();
    const r = await server.query('{ department(id: "Sales" { name }');
    expect(r.errors![0].extensions.code).toBe('GRAPHQL_PARSE_FAILED');
    expectNoRequestReads(spies, server.config.tablePrefix);
  });
});

describe('HTTP hardening', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ TABLEGRAPH_CORS_ORIGINS: 'https://app.example' });
  });
  afterAll(async () => {
    await server?.close();
  });
  afterEach(() => jest.restoreAllMocks());

  const post = (body: string | Buffer, headers: Record<string, string> = {}) =>
    fetch(server.url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });

  /** A JSON GraphQL error answer: status, code, the request id; no HTML, no stack, no path of this machine. */
  async function expectJsonError(res: Response, status: number, code: string) {
    expect(res.status).toBe(status);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const text = await res.text();
    expect(text).not.toMatch(/<html|<pre|\bat [\w.]+ \(|node_modules/i);
    expect(text).not.toContain(ROOT);
    const body = JSON.parse(text);
    expect(body.errors[0].extensions).toEqual({ code, requestId: res.headers.get('x-request-id') });
  }

  test('a body that is not JSON, too large, or in an unknown charset: JSON errors with a code, never HTML', async () => {
    await expectJsonError(await post('{"query": '), 400, 'BAD_REQUEST');
    await expectJsonError(await post(JSON.stringify({ query: `# ${'x'.repeat(1100 * 1024)}\n{ __typename }` })), 413, 'PAYLOAD_TOO_LARGE');
    await expectJsonError(await post('{}', { 'content-type': 'application/json; charset=klingon' }), 415, 'UNSUPPORTED_MEDIA_TYPE');
    await expectJsonError(await fetch(`${baseUrl(server.url)}/nothing-here`), 404, 'NOT_FOUND');
    // Headers over node:http's limit (a 20 KB token): refused by the HTTP parser itself, still as JSON with a code.
    await expectJsonError(await post('{ "query": "{ __typename }" }', { authorization: `Bearer ${'x'.repeat(20_000)}` }), 431, 'HEADERS_TOO_LARGE');
  });

  test('the request id: a plain one given is kept, anything else replaced; every error carries it', async () => {
    const kept = await post(JSON.stringify({ query: '{ nope }' }), { 'x-request-id': 'abc-123' });
    expect(kept.headers.get('x-request-id')).toBe('abc-123');
    expect(((await kept.json()) as any).errors[0].extensions).toMatchObject({ code: 'GRAPHQL_VALIDATION_FAILED', requestId: 'abc-123' });
    const replaced = await post(JSON.stringify({ query: '{ __typename }' }), { 'x-request-id': 'bad id <script>' });
    expect(replaced.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  test('what storage said stays in the log: the client gets the code, a plain message and the request id', async () => {
    jest.spyOn(server.store, 'getEntity').mockRejectedValue(
      new TablegraphError(
        ErrorCode.STORAGE_UNAVAILABLE,
        "getEntity on entity (PartitionKey 'Sales', RowKey 'department') in table 'tX1Directory' got no answer: connect ECONNREFUSED 10.1.2.3:10002",
        {
          operation: 'getEntity',
          table: 'tX1Directory',
          partitionKey: 'Sales',
          rowKey: 'department',
          storageMessage: 'connect ECONNREFUSED 10.1.2.3:10002',
          reason: 'network',
        },
      ),
    );
    const r = await server.query('{ department(id: "Sales") { name } }');
    expect(r.errors![0].extensions).toEqual({ code: 'STORAGE_UNAVAILABLE', reason: 'network', requestId: expect.any(String) });
    expect(JSON.stringify(r.errors)).not.toMatch(/tX1Directory|ECONNREFUSED|10\.1\.2\.3|PartitionKey/);
  });

  test('JSON POSTs (served before Express) and what Express serves (a gzip body, a GET) answer alike', async () => {
    const query = '{ department(id: "Sales") { name } }';
    const headers = { origin: 'https://app.example', 'x-request-id': 'same-1' };
    const json = await post(JSON.stringify({ query }), headers);
    const gzip = await post(gzipSync(JSON.stringify({ query })), { ...headers, 'content-encoding': 'gzip' });
    const get = await fetch(`${server.url}?query=${encodeURIComponent(query)}`, { headers: { ...headers, 'apollo-require-preflight': 'true' } });
    for (const res of [json, gzip, get]) {
      expect(res.status).toBe(200);
      expect(res.headers.get('x-request-id')).toBe('same-1');
      expect(res.headers.get('access-control-allow-origin')).toBe('https://app.example');
      expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
      const body = (await res.json()) as any;
      expect(body.data).toEqual({ department: { name: 'Sales' } });
      expect(body.extensions.cost).toMatchObject({ pointQueries: 1, roundTrips: 1 });
    }
    // Another origin gets no CORS header on either door.
    for (const res of [
      await post(JSON.stringify({ query }), { origin: 'https://evil.example' }),
      await post(gzipSync(JSON.stringify({ query })), { origin: 'https://evil.example', 'content-encoding': 'gzip' }),
    ]) {
      expect(res.headers.get('access-control-allow-origin')).toBeNull();
    }
    // A byte order mark and text beyond ASCII read alike at both doors: the BOM dropped, UTF-8 decoded.
    const named = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify({ query: '{ department(id: "Salés ☃") { name } }' }))]);
    const answers = [await post(named), await post(gzipSync(named), { 'content-encoding': 'gzip' })];
    for (const res of answers) {
      expect(res.status).toBe(200);
      expect(((await res.json()) as any).data).toEqual({ department: null });
    }
    // The strict JSON of both doors: a JSON string is no request body.
    await expectJsonError(await post('"{ __typename }"'), 400, 'BAD_REQUEST');
    await expectJsonError(await post(gzipSync('"{ __typename }"'), { 'content-encoding': 'gzip' }), 400, 'BAD_REQUEST');
  });

  test('CORS: the allowed origin only; a server without TABLEGRAPH_CORS_ORIGINS allows none', async () => {
    const preflight = (url: string, origin: string) =>
      fetch(url, { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' } });
    expect((await preflight(server.url, 'https://app.example')).headers.get('access-control-allow-origin')).toBe('https://app.example');
    expect((await preflight(server.url, 'https://evil.example')).headers.get('access-control-allow-origin')).toBeNull();
    const closed = await startTestServer();
    try {
      expect((await preflight(closed.url, 'https://app.example')).headers.get('access-control-allow-origin')).toBeNull();
    } finally {
      await closed.close();
    }
    expect(() => loadConfig({ TABLEGRAPH_CORS_ORIGINS: 'https://app.example/path' }, ROOT)).toThrow(/TABLEGRAPH_CORS_ORIGINS.*not an origin/);
  });
});

describe('TABLEGRAPH_INTROSPECTION=false', () => {
  test('no introspection, no IDE page, and no field suggestions that would spell the schema out', async () => {
    const server = await startTestServer({ TABLEGRAPH_INTROSPECTION: 'false' });
    const open = await startTestServer();
    try {
      const schema = await server.query('{ __schema { types { name } } }');
      expect(schema.errors?.[0].extensions.code).toBe('GRAPHQL_VALIDATION_FAILED');
      const typo = await server.query('{ departmnt(id: "Sales") { id } }');
      expect(typo.errors?.[0].message).not.toMatch(/Did you mean|department/);
      // Nor enum values, in a literal or in a variable, nor argument and input field names.
      const enumTypos = [
        await server.query(
          'mutation { createEmployee(input: { departmentId: "Sales", id: "9", email: "e@x.test", fullOrPartTime: FULL_TIM }) { employee { id } } }',
        ),
        await server.query('mutation($input: CreateEmployeeInput!) { createEmployee(input: $input) { employee { id } } }', {
          input: { departmentId: 'Sales', id: '9', email: 'e@x.test', fullOrPartTime: 'FULL_TIM' },
        }),
        await server.query('{ department(idd: "Sales") { id } }'),
      ];
      for (const r of enumTypos) {
        expect(r.errors?.length).toBeGreaterThan(0);
        for (const e of r.errors!) expect(e.message).not.toMatch(/Did you mean|FULL_TIME/);
      }
      const page = await fetch(server.url, { headers: { accept: 'text/html' } });
      expect(await page.text()).not.toMatch(/<html/i);
      // With it on (the default): both answer, and the typo is explained.
      expect((await open.query('{ __schema { queryType { name } } }')).data).toEqual({ __schema: { queryType: { name: 'Query' } } });
      expect((await open.query('{ departmnt(id: "Sales") { id } }')).errors?.[0].message).toMatch(/Did you mean "department"/);
      const openEnum = await open.query(
        'mutation { createEmployee(input: { departmentId: "Sales", id: "9", email: "e@x.test", fullOrPartTime: FULL_TIM }) { employee { id } } }',
      );
      expect(openEnum.errors?.map((e: { message: string }) => e.message).join('\n')).toMatch(/Did you mean the enum value "FULL_TIME"/);
    } finally {
      await server.close();
      await open.close();
    }
  });
});
