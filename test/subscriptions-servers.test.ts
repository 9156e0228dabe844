/**
 * Subscriptions across servers, with `@auth`: each change checked against its subscriber's token before it is sent;
 * a server restarted while writes go on elsewhere, its client resuming from its last cursor without missing one;
 * two servers sharing the subscribers and the writes, many subscribers on many partitions, each getting exactly its
 * own changes; what `/metrics` counts. On a schema written for this test.
 */
import { SignJWT } from 'jose';
import { startSdlServer, uniquePrefix } from './support/harness';
import { sseSubscribe, subscribers, wsClient, wsSubscribe } from './support/subscription-clients';
import { pause, until } from './support/wait';

const SDL = `
type Buoy @entity(table: "Buoys", partitionKey: "{bay}", rowKey: "buoy_{id}")
  @auth(rules: [{ roles: ["keeper"] }, { roles: ["watcher"], scope: [{ field: "bay", claim: "bay" }] }, { roles: ["owner"], scope: [{ field: "owner", claim: "sub" }] }]) {
  bay: ID!
  id: ID!
  owner: String!
  colour: String!
}
type Query {
  buoy(bay: ID!, id: ID!): Buoy @point
}
type Mutation {
  createBuoy(input: CreateBuoyInput!): BuoyPayload! @write(entity: "Buoy", action: CREATE) @auth(rules: [{ roles: ["keeper"] }])
  updateBuoy(input: UpdateBuoyInput!): BuoyPayload! @write(entity: "Buoy", action: UPDATE) @auth(rules: [{ roles: ["keeper"] }])
  deleteBuoy(input: DeleteBuoyInput!): BuoyPayload! @write(entity: "Buoy", action: DELETE) @auth(rules: [{ roles: ["keeper"] }])
}
type Subscription {
  buoyChanged(bay: ID!, after: String): BuoyChange! @subscribe(entity: "Buoy")
}
`;

const SECRET = 'a-test-secret-of-at-least-32-characters';
const token = (sub: string, roles: string[], claims: Record<string, unknown> = {}) =>
  new SignJWT({ sub, roles, ...claims }).setProtectedHeader({ alg: 'HS256' }).setExpirationTime('10m').sign(new TextEncoder().encode(SECRET));
const CHANGED = 'subscription ($bay: ID!, $after: String) { buoyChanged(bay: $bay, after: $after) { kind bay id cursor node { owner colour } } }';

type Server = Awaited<ReturnType<typeof startSdlServer>>;
const prefix = uniquePrefix();
const env = { TABLEGRAPH_JWT_SECRET: SECRET, TABLEGRAPH_TABLE_PREFIX: prefix, TABLEGRAPH_SUBSCRIPTION_POLL_MS: '100', TABLEGRAPH_RATE_LIMIT: '100000' };
let a: Server;
let b: Server;
let keeper: string;
beforeAll(async () => {
  [a, b] = await Promise.all([startSdlServer(SDL, env), startSdlServer(SDL, env)]);
  keeper = await token('k@example.test', ['keeper']);
});
afterAll(async () => {
  await a?.close();
  await b?.close();
});

async function write(server: Server, query: string) {
  const res = await fetch(server.server.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${keeper}` },
    body: JSON.stringify({ query }),
  });
  const json = (await res.json()) as any;
  expect(json.errors).toBeUndefined();
}
const create = (bay: string, id: string, owner: string, colour = 'red') =>
  `mutation { createBuoy(input: { bay: "${bay}", id: "${id}", owner: "${owner}", colour: "${colour}" }) { buoy { id } } }`;

test('@auth: each change is checked for its subscriber before it is sent', async () => {
  const all = sseSubscribe(a.server.url, CHANGED, { bay: 'A' }, keeper);
  const watcher = sseSubscribe(a.server.url, CHANGED, { bay: 'A' }, await token('w@example.test', ['watcher'], { bay: 'A' }));
  const elsewhere = sseSubscribe(a.server.url, CHANGED, { bay: 'B' }, await token('w@example.test', ['watcher'], { bay: 'A' }));
  const owner = wsSubscribe(wsClient(a.server.url, await token('o1', ['owner'])), CHANGED, { bay: 'A' });
  const anonymous = sseSubscribe(a.server.url, CHANGED, { bay: 'A' });
  const anonymousWs = wsSubscribe(wsClient(a.server.url), CHANGED, { bay: 'A' });
  await subscribers(a.server.url, 3); // all, watcher and owner; the others are refused
  await write(a, create('A', '1', 'o1'));
  await write(a, create('A', '2', 'o2'));
  await write(a, 'mutation { updateBuoy(input: { bay: "A", id: "1", colour: "green" }) { buoy { id } } }');
  await write(a, 'mutation { deleteBuoy(input: { bay: "A", id: "2" }) { buoy { id } } }');
  expect((await all.waitFor(4)).map((e) => `${e.buoyChanged.kind} ${e.buoyChanged.id}`)).toEqual(['CREATED 1', 'CREATED 2', 'UPDATED 1', 'DELETED 2']);
  expect(await watcher.waitFor(4)).toHaveLength(4);
  // The owner's scope is a field that only the entity tells: its own buoy's changes, none of another's — its
  // delete included, decided on the owner its change entity kept (buoy 2's delete, another owner's, is not sent).
  await write(a, 'mutation { deleteBuoy(input: { bay: "A", id: "1" }) { buoy { id } } }');
  await owner.waitFor(3);
  await pause(500, 'quiet'); // nothing of another's buoy
  expect(owner.events.map((e) => `${e.buoyChanged.kind} ${e.buoyChanged.id} ${e.buoyChanged.node?.owner ?? '-'}`)).toEqual([
    'CREATED 1 o1',
    'UPDATED 1 o1',
    'DELETED 1 -',
  ]);
  // Out of scope by the keys: refused when it subscribes, before anything is read.
  await expect(elsewhere.waitFor(1, 3000)).rejects.toThrow(/ended/);
  expect(JSON.stringify(elsewhere.error)).toMatch(/FORBIDDEN/);
  // No token: refused at the door (SSE 401; the WebSocket closed with 4401).
  await expect(anonymous.waitFor(1, 3000)).rejects.toThrow(/ended/);
  expect(anonymous.refusal?.status).toBe(401);
  expect(JSON.parse(anonymous.refusal!.body).errors[0].extensions.code).toBe('UNAUTHENTICATED');
  await expect(anonymousWs.waitFor(1, 3000)).rejects.toThrow(/ended/);
  expect((anonymousWs.error as { code?: number }).code).toBe(4401);
  for (const s of [all, watcher, owner]) s.stop();
});

test('a server restarts while writes go on elsewhere: its client resumes from its last cursor and misses none', async () => {
  let restarted: Server | undefined = await startSdlServer(SDL, env);
  try {
    const first = sseSubscribe(restarted.server.url, CHANGED, { bay: 'R' }, keeper);
    await first.started;
    await write(restarted, create('R', '1', 'o1'));
    const [e1] = await first.waitFor(1);
    await restarted.close();
    restarted = undefined;
    await expect(first.waitFor(2, 3000)).rejects.toThrow(/ended|events after/);
    // Acknowledged by the other server while this one is down.
    await write(b, create('R', '2', 'o1'));
    await write(b, create('R', '3', 'o1'));
    restarted = await startSdlServer(SDL, env);
    const resumed = sseSubscribe(restarted.server.url, CHANGED, { bay: 'R', after: e1.buoyChanged.cursor }, keeper);
    expect((await resumed.waitFor(2)).map((e) => e.buoyChanged.id)).toEqual(['2', '3']);
    await write(restarted, create('R', '4', 'o1'));
    await resumed.waitFor(3);
    await pause(500, 'quiet'); // none twice
    // The catch-up and the shared polls that follow it give each change once; the cursor's own is not repeated.
    expect(resumed.events.map((e) => e.buoyChanged.id)).toEqual(['2', '3', '4']);
    resumed.stop();
  } finally {
    await restarted?.close();
  }
});

/** Server A's subscription gauges: subscribers and partitions watched. */
async function gauges(): Promise<{ subscribers: number; partitions: number; polls: number }> {
  const text = await (await fetch(a.server.url.replace(/\/graphql$/, '/metrics'))).text();
  const value = (re: RegExp) => Number(re.exec(text)?.[1] ?? NaN);
  return {
    subscribers: value(/tablegraph_subscriptions\{of="subscribers"\} (\d+)/),
    partitions: value(/tablegraph_subscriptions\{of="partitions"\} (\d+)/),
    polls: value(/tablegraph_subscription_calls_total\{kind="poll"\} (\d+)/),
  };
}

test('two servers share 100 subscribers on 20 partitions and the writes: each subscriber gets exactly its own', async () => {
  const before = await gauges();
  // The first test's subscribers have gone: a client that leaves ends its subscriptions on the server.
  expect(before.subscribers).toBe(0);
  const bays = Array.from({ length: 20 }, (_, i) => `S${i}`);
  const clients = Array.from({ length: 10 }, (_, i) => wsClient((i % 2 === 0 ? a : b).server.url, keeper));
  const subs = Array.from({ length: 100 }, (_, i) => ({ bay: bays[i % 20], sub: wsSubscribe(clients[i % 10], CHANGED, { bay: bays[i % 20] }) }));
  await Promise.all([subscribers(a.server.url, 50), subscribers(b.server.url, 50)]);
  // One write per partition, through either server.
  await Promise.all(bays.map((bay, i) => write(i % 2 === 0 ? a : b, create(bay, 'x', 'o1'))));
  for (const { bay, sub } of subs) {
    const [event] = await sub.waitFor(1);
    expect(event.buoyChanged.bay).toBe(bay);
  }
  await pause(500, 'quiet'); // none of another partition, none twice
  expect(subs.every(({ sub }) => sub.events.length === 1)).toBe(true);
  // Server A has the even clients: 50 subscribers, on the 10 even partitions. Each partition it watches is one
  // range query per interval, shared by its 5 subscribers there.
  const during = await gauges();
  expect(during.subscribers - before.subscribers).toBe(50);
  expect(during.partitions - before.partitions).toBe(10);
  expect(during.polls).toBeGreaterThan(before.polls);
  await Promise.all(clients.map((c) => c.dispose()));
  const after = await until('the clients gone from server A', async () => {
    const g = await gauges();
    return g.subscribers === before.subscribers && g;
  });
  expect(after.subscribers).toBe(before.subscribers);
  expect(after.partitions).toBe(before.partitions);
});
