/**
 * What an operator watches: one log line per GraphQL request (request id in and out, operation name, status,
 * duration, storage cost, error codes — refusals at the door included), and Prometheus metrics at /metrics
 * (prom-client), readable from this machine only by default.
 */
import os from 'node:os';
import { Writable } from 'node:stream';
import pino from 'pino';
import { startTestServer, type TestServer } from './support/harness';
import { until } from './support/wait';

const lines: any[] = [];
const sink = new Writable({
  write(chunk: Buffer, _enc, done) {
    for (const line of chunk.toString('utf8').split('\n')) if (line) lines.push(JSON.parse(line));
    done();
  },
});
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({}, { log: pino({ level: 'info' }, sink) });
});
afterAll(async () => server?.close());

const requestLines = (id: string) => lines.filter((l) => l.msg === 'request' && l.requestId === id);

async function post(body: string, requestId: string): Promise<Response> {
  return fetch(server.url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-request-id': requestId }, body });
}

/** The value of one sample of the exposition text, e.g. `tablegraph_requests_total{operation="X",code="OK"}`. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

test("one log line per request: its id (the client's, answered back), operation, status, duration, storage cost and error codes", async () => {
  const ok = await post(
    JSON.stringify({ query: 'query Marketing { department(id: "Marketing") { employeeCount employees { edges { node { id } } } } }' }),
    'obs-ok-1',
  );
  expect(ok.headers.get('x-request-id')).toBe('obs-ok-1');
  expect(((await ok.json()) as any).data.department.employeeCount).toBe(2);
  const invalid = await post(JSON.stringify({ query: 'query Broken { department(id: "Marketing") { nope } }' }), 'obs-invalid-1');
  expect(invalid.status).toBe(400);
  const huge = await post(JSON.stringify({ query: `{ __typename } # ${'x'.repeat(300_000)}` }), 'obs-huge-1');
  expect(huge.status).toBe(413);
  // Each line is written when its response has been sent.
  await until('the request lines', () => ['obs-ok-1', 'obs-invalid-1', 'obs-huge-1'].every((id) => requestLines(id).length > 0));

  const [okLine] = requestLines('obs-ok-1');
  expect(okLine).toMatchObject({ level: 30, operationName: 'Marketing', status: 200, errors: [], cost: { roundTrips: 2, entitiesRead: 3 } });
  expect(okLine.durationMs).toBeGreaterThan(0);
  expect(okLine.cost.storageMs).toBeGreaterThan(0);
  expect(requestLines('obs-ok-1')).toHaveLength(1);
  expect(requestLines('obs-invalid-1')).toEqual([expect.objectContaining({ operationName: 'Broken', status: 400, errors: ['GRAPHQL_VALIDATION_FAILED'] })]);
  expect(requestLines('obs-huge-1')).toEqual([expect.objectContaining({ operationName: null, status: 413, errors: ['PAYLOAD_TOO_LARGE'] })]);
});

test("Apollo's codeless refusals of a persisted query: 400 with a code of their own, logged as the client's error", async () => {
  const cases = [
    ['obs-pq-1', { query: '{ __typename }', extensions: { persistedQuery: { version: 1, sha256Hash: 'abc' } } }, 'PERSISTED_QUERY_HASH_MISMATCH'],
    ['obs-pq-2', { query: '{ __typename }', extensions: { persistedQuery: { version: 2, sha256Hash: 'abc' } } }, 'PERSISTED_QUERY_VERSION_UNSUPPORTED'],
  ] as const;
  for (const [id, body, code] of cases) {
    const res = await post(JSON.stringify(body), id);
    expect([res.status, ((await res.json()) as any).errors[0].extensions]).toEqual([400, { code, requestId: id }]);
  }
  await until('the request lines', () => cases.every(([id]) => requestLines(id).length > 0));
  for (const [id, , code] of cases) {
    expect(lines.filter((l) => l.requestId === id && l.level >= 50)).toEqual([]); // nothing at error level
    expect(requestLines(id)).toEqual([expect.objectContaining({ status: 400, errors: [code] })]);
  }
});

test('the audit line of a mutation names its keys, and for a move its destination too', async () => {
  const move = await server.query('mutation { moveEmployee(input: { departmentId: "Marketing", id: "1", toDepartmentId: "Sales" }) { employee { id } } }');
  expect(move.errors).toBeUndefined();
  await until('the audit line', () => lines.some((l) => l.audit && l.field === 'moveEmployee'));
  const audit = lines.filter((l) => l.audit && l.field === 'moveEmployee');
  expect(audit).toEqual([expect.objectContaining({ keys: { departmentId: 'Marketing', id: '1' }, to: { departmentId: 'Sales', id: '1' }, outcome: 'OK' })]);
});

test('/metrics: requests by operation and code, durations, storage calls by kind, entities read, queue and worker gauges, process metrics', async () => {
  for (let i = 0; i < 3; i++) await server.query('query Sales { department(id: "Sales") { employeeCount } }');
  await server.query('query Misspelt { nope }');
  const res = await fetch(new URL('/metrics', server.url));
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  expect(sample(text, 'tablegraph_requests_total{operation="Sales",code="OK"}')).toBe(3);
  expect(sample(text, 'tablegraph_requests_total{operation="Misspelt",code="GRAPHQL_VALIDATION_FAILED"}')).toBe(1);
  expect(sample(text, 'tablegraph_request_duration_seconds_count{operation="Sales"}')).toBe(3);
  expect(sample(text, 'tablegraph_storage_calls_total{kind="pointQuery"}')).toBeGreaterThanOrEqual(3);
  expect(sample(text, 'tablegraph_entities_read_total')).toBeGreaterThanOrEqual(3);
  expect(sample(text, 'tablegraph_fanout_queue_depth')).toBeGreaterThanOrEqual(0);
  expect(sample(text, 'tablegraph_fanout_poison_depth')).toBe(0);
  expect(sample(text, 'tablegraph_fanout_oldest_message_age_seconds')).toBeGreaterThanOrEqual(0);
  expect(sample(text, 'tablegraph_worker_lag_seconds{quantile="0.5"}')).toBeGreaterThanOrEqual(0);
  expect(sample(text, 'tablegraph_worker_messages_total{outcome="poisoned"}')).toBe(0);
  expect(sample(text, 'tablegraph_process_resident_memory_bytes')).toBeGreaterThan(10_000_000);

  // A client cannot create series at will: a name that is no GraphQL name is counted as "invalid".
  const unnamed = await post(JSON.stringify({ query: '{ __typename }', operationName: 'x'.repeat(200) }), 'obs-name');
  // The name matches no operation of the document: the client's mistake, not a 500.
  expect(unnamed.status).toBe(400);
  expect(((await unnamed.json()) as any).errors[0].extensions).toEqual({ code: 'OPERATION_RESOLUTION_FAILURE', requestId: 'obs-name' });
  expect(
    sample(await (await fetch(new URL('/metrics', server.url))).text(), `tablegraph_requests_total{operation="${'x'.repeat(200)}",code="OK"}`),
  ).toBeUndefined();
});

test('/metrics: operation names make at most 100 series, later names and names of no operation count apart', async () => {
  const names = Array.from({ length: 150 }, (_, i) => `Flood${i}`);
  for (const name of names) await server.query(`query ${name} { __typename }`);
  for (let i = 0; i < 20; i++) await post(JSON.stringify({ query: 'query Real { __typename }', operationName: `Ghost${i}` }), `obs-ghost-${i}`);
  const text = await (await fetch(new URL('/metrics', server.url))).text();
  const operations = new Set([...text.matchAll(/^tablegraph_requests_total\{operation="([^"]*)"/gm)].map((m) => m[1]));
  expect(operations.size).toBeLessThanOrEqual(100 + 3); // the bound, then other, anonymous and invalid
  expect(sample(text, 'tablegraph_requests_total{operation="other",code="OK"}')).toBeGreaterThanOrEqual(50);
  expect([...operations].filter((o) => o.startsWith('Ghost'))).toEqual([]);
  expect(sample(text, 'tablegraph_requests_total{operation="anonymous",code="OPERATION_RESOLUTION_FAILURE"}')).toBeGreaterThanOrEqual(20);
});

test('/metrics is for this machine by default, for everyone with TABLEGRAPH_METRICS=on, for nobody with off', async () => {
  const external = Object.values(os.networkInterfaces())
    .flat()
    .find((i) => i && i.family === 'IPv4' && !i.internal)?.address;
  if (!external) throw new Error('this test needs a non-loopback IPv4 address on the machine');
  const open = await startTestServer({ HOST: '0.0.0.0', TABLEGRAPH_AUTH: 'off' });
  const onForAll = await startTestServer({ HOST: '0.0.0.0', TABLEGRAPH_AUTH: 'off', TABLEGRAPH_METRICS: 'on' });
  const off = await startTestServer({ TABLEGRAPH_METRICS: 'off' });
  try {
    expect((await fetch(`http://127.0.0.1:${open.port}/metrics`)).status).toBe(200);
    expect((await fetch(`http://${external}:${open.port}/metrics`)).status).toBe(404);
    expect((await fetch(`http://${external}:${onForAll.port}/metrics`)).status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${off.port}/metrics`)).status).toBe(404);
  } finally {
    await Promise.all([open.close(), onForAll.close(), off.close()]);
  }
});

/** The sum of every series of `metric` (all its label sets). */
function total(text: string, metric: string): number {
  return text
    .split('\n')
    .filter((l) => l.startsWith(`${metric}{`) || l.startsWith(`${metric} `))
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
}

test("/metrics: the transaction and request-unit totals are the sums of the requests' extensions.cost; every storage call is timed by kind", async () => {
  // A server of its own: the other tests' operation names have used up the labels.
  const server = await startTestServer();
  try {
    await countedRequests(server);
  } finally {
    await server.close();
  }
});

async function countedRequests(server: TestServer): Promise<void> {
  const metrics = async () => (await fetch(new URL('/metrics', server.url))).text();
  const before = await metrics();
  const requests = [
    'query Costly { department(id: "Sales") { employeeCount employees(first: 5) { edges { node { id lastName } } } } }',
    'query Point { employee(departmentId: "Sales", id: "10") { id firstName } }',
    'mutation Edit { updateEmployee(input: { departmentId: "Sales", id: "10", title: "Director" }) { employee { id } } }',
    'query Costly { department(id: "Marketing") { employeeCount } }',
  ];
  let transactions = 0;
  let units = 0;
  for (const query of requests) {
    const answer = await server.query(query);
    expect(answer.errors).toBeUndefined();
    transactions += answer.extensions.cost.azureTransactions;
    units += answer.extensions.cost.cosmosRequestUnits;
  }
  expect(transactions).toBeGreaterThan(4);
  const after = await metrics();
  const delta = (metric: string) => total(after, metric) - total(before, metric);
  expect(delta('tablegraph_azure_transactions_total')).toBe(transactions);
  expect(delta('tablegraph_cosmos_request_units_total')).toBe(units);
  // The per-operation view: the two Costly requests under one name.
  expect(sample(after, 'tablegraph_azure_transactions_total{operation="Edit"}')).toBeGreaterThan(0);
  expect(total(after, 'tablegraph_azure_transactions_total{operation="Costly"}')).toBeGreaterThanOrEqual(2);
  for (const operation of ['point', 'range', 'egt', 'queue']) {
    expect(sample(after, `tablegraph_storage_duration_seconds_count{operation="${operation}"}`)).toBeGreaterThan(0);
  }
}
