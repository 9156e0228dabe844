/**
 * A graceful stop, as a rolling update makes it: `npm start` as a real process (NODE_ENV=production, so that nothing
 * of a test setting changes its signal handling) serving a storm of queries and creates from keep-alive clients,
 * then SIGTERM. Every request it took is answered — data, or for those after the stop began SHUTTING_DOWN (503,
 * Retry-After) — never INTERNAL_SERVER_ERROR and never a connection cut under a request; every create answered is
 * stored, and only those; it exits 0.
 */
import { Agent, fetch as undiciFetch } from 'undici';
import fs from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { ErrorCode } from '../src/errors';
import { compileHr, connectionString, testStore, uniquePrefix } from './support/harness';
import { killCommandProcesses, runCommand } from './support/processes';
import { primaryAddress } from '../src/model/entity-codec';
import { until } from './support/wait';

afterAll(killCommandProcesses);

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

type Outcome = { kind: 'answered'; created?: string } | { kind: 'refused' } | { kind: 'not connected' } | { kind: 'broken'; what: string };

test('SIGTERM under a storm: what was taken is answered, the rest refused with SHUTTING_DOWN; no 500, no cut connection', async () => {
  const prefix = uniquePrefix();
  const port = await freePort();
  const server = runCommand('start', [], fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-stop-')), {
    AZURE_STORAGE_CONNECTION_STRING: connectionString(),
    TABLEGRAPH_TABLE_PREFIX: prefix,
    TABLEGRAPH_RATE_LIMIT: '1000000',
    PORT: String(port),
    NODE_ENV: 'production',
  });
  await server.waitFor('tablegraph is serving');
  const url = `http://127.0.0.1:${port}/graphql`;
  const agent = new Agent({ keepAliveTimeout: 60_000, connections: 8 });
  const outcomes: Outcome[] = [];
  let next = 0;

  const one = async (): Promise<Outcome> => {
    const n = next++;
    const create = n % 2 === 0;
    const body = create
      ? {
          query: 'mutation($i: CreateEmployeeInput!) { createEmployee(input: $i) { employee { id } } }',
          variables: { i: { departmentId: 'Marketing', id: String(1000 + n), email: `e${n}@x.test`, firstName: 'F', lastName: 'L' } },
        }
      : { query: '{ department(id: "Marketing") { employeeCount employees(first: 5) { edges { node { id } } } } }' };
    try {
      const res = await undiciFetch(url, { method: 'POST', dispatcher: agent, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      const json = (await res.json()) as { data?: unknown; errors?: Array<{ extensions?: { code?: string } }> };
      if (res.status === 503 && json.errors?.[0].extensions?.code === ErrorCode.SHUTTING_DOWN && res.headers.get('retry-after')) return { kind: 'refused' };
      if (res.status === 200 && !json.errors) return { kind: 'answered', ...(create && { created: String(1000 + n) }) };
      return { kind: 'broken', what: `${res.status} ${JSON.stringify(json.errors)}` };
    } catch (e) {
      const code = (e as { cause?: { code?: string } }).cause?.code;
      // Never connected (the listening socket is closed): the request was never taken.
      if (code === 'ECONNREFUSED') return { kind: 'not connected' };
      return { kind: 'broken', what: `${code ?? ''} ${(e as Error).message} ${String((e as { cause?: unknown }).cause)}` };
    }
  };

  let exited = false;
  void server.exited.then(() => (exited = true));
  const clients = Array.from({ length: 8 }, async () => {
    while (!exited) outcomes.push(await one());
  });
  // The stop comes once the storm is under way (an event, not a time): 100 answers in.
  await until('100 answers', () => outcomes.filter((o) => o.kind === 'answered').length >= 100, { everyMs: 20 });
  server.child.kill('SIGTERM');
  const { code } = await server.exited;
  await Promise.all(clients);
  await agent.close();

  const count = (kind: Outcome['kind']) => outcomes.filter((o) => o.kind === kind).length;
  console.log(
    `graceful stop: ${count('answered')} answered, ${count('refused')} refused (SHUTTING_DOWN), ${count('not connected')} not connected, ${count('broken')} broken`,
  );
  const broken = outcomes.filter((o) => o.kind === 'broken');
  expect(broken).toEqual([]);
  expect(code).toBe(0);
  expect(server.output()).not.toContain('INTERNAL_SERVER_ERROR');
  expect(count('refused') + count('not connected')).toBeGreaterThan(0);

  // Acknowledged if and only if stored.
  const employee = compileHr(prefix).model.entities.get('Employee')!;
  const acknowledged = new Set(outcomes.flatMap((o) => (o.kind === 'answered' && o.created ? [o.created] : [])));
  const stored = new Set<string>();
  for (let n = 0; n < next; n += 2) {
    const id = String(1000 + n);
    const address = primaryAddress(employee, { departmentId: 'Marketing', id });
    if (await testStore().getEntity(address)) stored.add(id);
  }
  expect([...stored].sort()).toEqual([...acknowledged].sort());
}, 120_000);
