/**
 * The HTTP and WebSocket surface of subscriptions, as a client and an attacker meet it, with authentication on and
 * introspection off — each over the transport a client uses (graphql-sse's and graphql-ws's own clients, or raw
 * HTTP where a client would never send it):
 * - a body larger than the server accepts is refused with 413 before it is read whole;
 * - graphql-sse's own refusals and a 429 carry codes, request ids and `Retry-After`;
 * - on a WebSocket, a refused subscription and an event's field error are said on that subscription alone;
 * - a subscription ends at its token's `exp` with a coded error; one subject holds a bounded number;
 * - upgrades and requests from another origin, or naming another host, are refused;
 * - errors say no "Did you mean …?" when introspection is off;
 * - a reader's cursors tell nothing of the entities its scope leaves out.
 * On a schema written for this test.
 */
import http from 'node:http';
import { SignJWT } from 'jose';
import WebSocket from 'ws';
import { startSdlServer } from './support/harness';
import { sseSubscribe, subscribers, wsClient, wsSubscribe } from './support/subscription-clients';
import { pause, until } from './support/wait';

const SDL = `
type Beacon @entity(table: "Harbours", partitionKey: "{harbour}", rowKey: "beacon_{id}")
  @index(name: "byLight", table: "BeaconsByLight", partitionKey: "{light}", rowKey: "{light}_{harbour}_{id}", include: ["light"])
  @auth(rules: [{ roles: ["keeper"] }, { roles: ["watcher"], scope: [{ field: "harbour", claim: "harbour" }] }]) {
  harbour: ID!
  id: ID!
  light: String!
  neighbours(first: Int, after: String): BeaconConnection! @range(partitionKey: "{harbour}", rowKeyPrefix: "beacon_")
}
type Query {
  beacon(harbour: ID!, id: ID!): Beacon @point
  beaconsByLight(light: String!, first: Int, after: String): BeaconConnection! @range(index: "byLight", partitionKey: "{light}", rowKeyPrefix: "{light}_")
}
type Mutation {
  createBeacon(input: CreateBeaconInput!): BeaconPayload! @write(entity: "Beacon", action: CREATE) @auth(rules: [{ roles: ["keeper"] }])
}
type Subscription {
  beaconChanged(harbour: ID!, after: String): BeaconChange! @subscribe(entity: "Beacon")
}
`;

const SECRET = 'a-test-secret-of-at-least-32-characters';
const token = (sub: string, roles: string[], claims: Record<string, unknown> = {}, expires: string | number = '10m') =>
  new SignJWT({ sub, roles, ...claims }).setProtectedHeader({ alg: 'HS256' }).setExpirationTime(expires).sign(new TextEncoder().encode(SECRET));
const CHANGED = 'subscription ($harbour: ID!, $after: String) { beaconChanged(harbour: $harbour, after: $after) { kind id cursor node { light } } }';

let ctx: Awaited<ReturnType<typeof startSdlServer>>;
let keeper: string;
let streamUrl: string;
beforeAll(async () => {
  ctx = await startSdlServer(SDL, {
    TABLEGRAPH_JWT_SECRET: SECRET,
    TABLEGRAPH_INTROSPECTION: 'false',
    TABLEGRAPH_SUBSCRIPTION_POLL_MS: '100',
    TABLEGRAPH_SUBSCRIPTIONS_PER_SUBJECT: '3',
    TABLEGRAPH_RATE_LIMIT: '100000',
    TABLEGRAPH_CORS_ORIGINS: 'http://app.example.test',
  });
  keeper = await token('keeper', ['keeper']);
  streamUrl = `${ctx.server.url}/stream`;
});
afterAll(() => ctx?.close());

async function write(query: string) {
  const res = await fetch(ctx.server.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${keeper}` },
    body: JSON.stringify({ query }),
  });
  const json = (await res.json()) as any;
  expect(json.errors).toBeUndefined();
}
const create = (harbour: string, id: string, light = 'red') =>
  `mutation { createBeacon(input: { harbour: "${harbour}", id: "${id}", light: "${light}" }) { beacon { id } } }`;

/** A raw HTTP request (no client would send it): its status, headers and parsed body. */
function rawRequest(url: string, opts: { method?: string; headers?: Record<string, string>; body?: string | Buffer }) {
  return new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: any }>((resolve, reject) => {
    const req = http.request(url, { method: opts.method ?? 'POST', headers: opts.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {
          // not JSON: kept as text, and the test says so
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
      });
    });
    // A refused body is not read to its end: the server may close while it is still being sent.
    req.on('error', reject);
    req.end(opts.body);
  });
}

test('SSE: a body over the limit is refused with 413 before it is read whole; the server goes on', async () => {
  const query = JSON.stringify({ query: `subscription { beaconChanged(harbour: "a") { kind } }`, padding: 'x'.repeat(2_000_000) });
  const r = await rawRequest(streamUrl, {
    headers: { 'content-type': 'application/json', accept: 'text/event-stream', authorization: `Bearer ${keeper}` },
    body: query,
  });
  expect(r.status).toBe(413);
  expect(r.body.errors[0].extensions).toEqual({ code: 'PAYLOAD_TOO_LARGE', requestId: expect.any(String) });
  // A length announced far over the limit is refused without waiting for the body.
  const announced = await new Promise<number>((resolve, reject) => {
    const req = http.request(streamUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', 'content-length': String(600_000_000) },
    });
    req.on('response', (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
      req.destroy();
    });
    req.on('error', reject);
    req.write('{"query":"');
  });
  expect(announced).toBe(413);
  const health = await fetch(ctx.server.url.replace(/\/graphql$/, '/health'));
  expect(health.status).toBe(200);
});

test("SSE: graphql-sse's own refusals and a rate limit's carry codes, request ids and Retry-After", async () => {
  const headers = { 'content-type': 'application/json', accept: 'text/event-stream', authorization: `Bearer ${keeper}` };
  const cases: Array<[string, number, string]> = [
    ['{not json', 400, 'BAD_REQUEST'],
    ['{"variables":{}}', 400, 'BAD_REQUEST'],
    ['{"query":"subscription { x }","variables":[1]}', 400, 'BAD_REQUEST'],
  ];
  for (const [body, status, code] of cases) {
    const r = await rawRequest(streamUrl, { headers, body });
    expect({ body, status: r.status }).toEqual({ body, status });
    expect(r.body.errors.length).toBeGreaterThan(0);
    for (const e of r.body.errors) expect(e.extensions).toMatchObject({ code, requestId: r.headers['x-request-id'] });
  }
  const wrongType = await rawRequest(streamUrl, { headers: { ...headers, 'content-type': 'text/plain' }, body: '{}' });
  expect(wrongType.status).toBe(415);
  expect(wrongType.body.errors[0].extensions.code).toBe('UNSUPPORTED_MEDIA_TYPE');
  // A rate limit: its own server, one request a minute.
  const limited = await startSdlServer(SDL, { TABLEGRAPH_JWT_SECRET: SECRET, TABLEGRAPH_RATE_LIMIT: '1' });
  try {
    const body = JSON.stringify({ query: 'subscription { beaconChanged(harbour: "a") { kind } }' });
    const url = `${limited.server.url}/stream`;
    const first = await rawRequest(url, { headers: { ...headers, authorization: 'Bearer nonsense' }, body });
    expect(first.status).toBe(401);
    const second = await rawRequest(url, { headers: { ...headers, authorization: 'Bearer nonsense' }, body });
    expect(second.status).toBe(429);
    expect(Number(second.headers['retry-after'])).toBeGreaterThan(0);
    expect(second.body.errors[0].extensions).toMatchObject({ code: 'RATE_LIMITED', requestId: second.headers['x-request-id'] });
  } finally {
    await limited.close();
  }
});

test('WebSocket: a refused subscription and an event with a field error end that subscription alone', async () => {
  const watcher = await token('w1', ['watcher'], { harbour: 'north' });
  const client = wsClient(ctx.server.url, watcher);
  const kept = wsSubscribe(client, CHANGED, { harbour: 'north' });
  // Out of the watcher's scope: FORBIDDEN, on that subscription only.
  const forbidden = wsSubscribe(client, CHANGED, { harbour: 'south' });
  // A cursor that is not one: each event's node has a field error (BAD_USER_INPUT) when its list is read.
  const broken = wsSubscribe(
    client,
    'subscription { beaconChanged(harbour: "north") { kind id node { light neighbours(after: "x") { edges { node { id } } } } } }',
  );
  await until('the forbidden one refused', () => forbidden.done);
  await subscribers(ctx.server.url, 2); // kept and broken
  expect((forbidden.error as any[])[0].extensions.code).toBe('FORBIDDEN');
  await write(create('north', '1'));
  expect((await kept.waitFor(1))[0].beaconChanged.id).toBe('1');
  await until('the broken one told of its field error', () => broken.error);
  expect((broken.error as any[])[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', argument: 'after' });
  await write(create('north', '2'));
  expect((await kept.waitFor(2))[1].beaconChanged.id).toBe('2');
  expect(broken.done).toBe(false);
  // The socket is still open: a new subscription on it works (past the second before its start it also reports).
  await pause(1200, 'clock');
  const again = wsSubscribe(client, CHANGED, { harbour: 'north' });
  await subscribers(ctx.server.url, 3);
  await write(create('north', '3'));
  expect((await again.waitFor(1))[0].beaconChanged.id).toBe('3');
  expect((await kept.waitFor(3))[2].beaconChanged.id).toBe('3');
  await client.dispose();
});

test('a subscription ends at its token’s exp with UNAUTHENTICATED (TokenExpired), over SSE and WebSocket', async () => {
  const soon = Math.floor(Date.now() / 1000) + 2;
  const expiring = await token('short', ['keeper'], {}, soon);
  const sse = sseSubscribe(ctx.server.url, CHANGED, { harbour: 'east' }, expiring);
  const ws = wsSubscribe(wsClient(ctx.server.url, expiring), CHANGED, { harbour: 'east' });
  await Promise.all([sse.started, subscribers(ctx.server.url, 2)]);
  await write(create('east', '1'));
  await sse.waitFor(1);
  await ws.waitFor(1);
  await until('both ended at the exp', () => sse.done && ws.done, { timeoutMs: 10_000 });
  expect(Date.now()).toBeGreaterThanOrEqual(soon * 1000);
  for (const sub of [sse, ws]) {
    expect((sub.error as any[])[0].extensions).toMatchObject({ code: 'UNAUTHENTICATED', reason: 'TokenExpired' });
  }
  await write(create('east', '2'));
  await pause(500, 'quiet'); // an ended subscription hears nothing more
  expect(sse.events).toHaveLength(1);
  expect(ws.events).toHaveLength(1);
}, 20_000);

test('one subject holds a bounded number of subscriptions, all its connections together', async () => {
  const one = await token('greedy', ['keeper']);
  const subs = [0, 1].map((i) => sseSubscribe(ctx.server.url, CHANGED, { harbour: `made-up-${i}` }, one));
  const client = wsClient(ctx.server.url, one);
  const ws = [2, 3].map((i) => wsSubscribe(client, CHANGED, { harbour: `made-up-${i}` }));
  await until('one of the four refused', () => [...subs, ...ws].some((s) => s.done));
  await subscribers(ctx.server.url, 3);
  const refused = [...subs, ...ws].filter((s) => s.done);
  expect(refused).toHaveLength(1);
  expect((refused[0].error as any[])[0].extensions).toMatchObject({ code: 'OVERLOADED', reason: 'TooManyForSubject' });
  // Another subject is not held back.
  const other = sseSubscribe(ctx.server.url, CHANGED, { harbour: 'made-up-9' }, await token('modest', ['keeper']));
  await other.started;
  expect(other.done).toBe(false);
  // One ends: room for another.
  subs[0].stop();
  await subscribers(ctx.server.url, 3);
  const more = sseSubscribe(ctx.server.url, CHANGED, { harbour: 'made-up-5' }, one);
  await more.started;
  expect(more.done).toBe(false);
  [...subs, ...ws, other, more].forEach((s) => s.stop());
  await client.dispose();
});

test('another origin, or another host name, is refused: WebSocket upgrades and requests', async () => {
  const wsUrl = ctx.server.url.replace(/^http/, 'ws');
  const upgrade = (headers: Record<string, string>) =>
    new Promise<number>((resolve) => {
      const socket = new WebSocket(wsUrl, 'graphql-transport-ws', { headers });
      socket.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      socket.on('open', () => {
        socket.close();
        resolve(101);
      });
      socket.on('error', () => resolve(-1));
    });
  expect(await upgrade({ origin: 'http://evil.example' })).toBe(403);
  expect(await upgrade({ host: 'attacker.example' })).toBe(421);
  expect(await upgrade({ origin: 'http://app.example.test' })).toBe(101);
  expect(await upgrade({})).toBe(101);
  const port = new URL(ctx.server.url).port;
  expect(await upgrade({ origin: `http://127.0.0.1:${port}` })).toBe(101);
  const post = (headers: Record<string, string>) =>
    rawRequest(ctx.server.url, {
      headers: { 'content-type': 'application/json', authorization: `Bearer ${keeper}`, ...headers },
      body: '{"query":"{ __typename }"}',
    });
  const evil = await post({ origin: 'http://evil.example' });
  expect(evil.status).toBe(403);
  expect(evil.body.errors[0].extensions).toMatchObject({ code: 'ORIGIN_NOT_ALLOWED' });
  const rebound = await post({ host: `attacker.example:${port}` });
  expect(rebound.status).toBe(421);
  expect(rebound.body.errors[0].extensions).toMatchObject({ code: 'HOST_NOT_ALLOWED' });
  const stream = await rawRequest(streamUrl, { headers: { 'content-type': 'application/json', accept: 'text/event-stream', origin: 'null' }, body: '{}' });
  expect(stream.status).toBe(403);
  expect((await post({ origin: 'http://app.example.test' })).status).toBe(200);
  expect((await post({ host: `localhost:${port}` })).status).toBe(200);
});

test('with introspection off, subscription errors suggest no field names', async () => {
  const typo = 'subscription { beaconChanged(harbour: "a") { kinf } }';
  const sse = sseSubscribe(ctx.server.url, typo, {}, keeper);
  const ws = wsSubscribe(wsClient(ctx.server.url, keeper), typo);
  await until('both refused', () => sse.done && ws.done);
  expect(sse.refusal?.status).toBe(400);
  const sseErrors = JSON.parse(sse.refusal!.body).errors;
  const wsErrors = ws.error as any[];
  for (const errors of [sseErrors, wsErrors]) {
    expect(errors[0].extensions.code).toBe('GRAPHQL_VALIDATION_FAILED');
    expect(errors[0].message).toContain('kinf');
    expect(errors[0].message).not.toMatch(/Did you mean/);
  }
});

test("a scoped reader's cursors tell nothing of the entities its scope leaves out", async () => {
  await Promise.all([create('west', '1', 'green'), create('west', '2', 'green'), create('harbourmaster', '3', 'green')].map(write));
  const watcher = await token('w2', ['watcher'], { harbour: 'harbourmaster' });
  const LIST =
    'query ($after: String) { beaconsByLight(light: "green", first: 1, after: $after) { edges { node { harbour } } pageInfo { hasNextPage endCursor } } }';
  // The index is kept by the worker: wait until the keeper sees all three.
  await until('the index to hold all three', async () => {
    const res = await fetch(ctx.server.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${keeper}` },
      body: JSON.stringify({ query: LIST.replace('first: 1', 'first: 10') }),
    });
    return ((await res.json()) as any).data.beaconsByLight.edges.length === 3;
  });
  const seen: string[] = [];
  let after: string | null = null;
  for (let i = 0; i < 5; i++) {
    const res = await fetch(ctx.server.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${watcher}` },
      body: JSON.stringify({ query: LIST, variables: { after } }),
    });
    const conn = ((await res.json()) as any).data.beaconsByLight;
    seen.push(...conn.edges.map((e: any) => e.node.harbour));
    after = conn.pageInfo.endCursor;
    if (after) {
      const bytes = Buffer.from(after, 'base64url');
      for (const text of [after, bytes.toString('utf8'), bytes.toString('latin1')]) expect(text).not.toMatch(/west|green_/);
    }
    if (!conn.pageInfo.hasNextPage) break;
  }
  expect(seen).toEqual(['harbourmaster']);
});
