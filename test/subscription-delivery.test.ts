/**
 * Subscriptions deliver each change exactly once, however late its EGT is applied and wherever the client resumes:
 * - a live subscriber gets the writes of a server whose storage holds every write for seconds (a delaying proxy in
 *   front of its Table endpoint), so that each EGT is applied long after its write was planned;
 * - a client resuming from any event's cursor gets exactly the events that came after it — over SSE, and across a
 *   second server — never one it had before, never a miss.
 * On a schema written for this test (a unique index, so that a create waits for its reservation before its EGT).
 */
import { CHANGE_ROW_KEY_END, CHANGE_ROW_KEY_PREFIX, readChange } from '../src/model/change-log';
import { StorageAdmission } from '../src/read/admission';
import { ChangePoller } from '../src/read/change-poller';
import { startSdlServer, uniquePrefix } from './support/harness';
import { startStorageProxy, type StorageProxy } from './support/storage-proxy';
import { sseSubscribe, subscribers, wsClient, wsSubscribe } from './support/subscription-clients';
import { pause, until } from './support/wait';

const SDL = `
type Kite @entity(table: "Kites", partitionKey: "{field}", rowKey: "kite_{id}")
  @index(name: "bySerial", table: "KitesBySerial", partitionKey: "{serial}", rowKey: "kite", unique: true) {
  field: ID!
  id: ID!
  serial: String!
  colour: String!
}
type Query {
  kite(field: ID!, id: ID!): Kite @point
}
type Mutation {
  createKite(input: CreateKiteInput!): KitePayload! @write(entity: "Kite", action: CREATE)
  updateKite(input: UpdateKiteInput!): KitePayload! @write(entity: "Kite", action: UPDATE)
}
type Subscription {
  kiteChanged(field: ID!, after: String): KiteChange! @subscribe(entity: "Kite")
}
`;

const CHANGED = 'subscription ($field: ID!, $after: String) { kiteChanged(field: $field, after: $after) { kind id cursor node { colour } } }';
type Server = Awaited<ReturnType<typeof startSdlServer>>;

const prefix = uniquePrefix();
// A short storage timeout, so that the proxy's hold is a large part of it.
const env = { TABLEGRAPH_AUTH: 'off', TABLEGRAPH_TABLE_PREFIX: prefix, TABLEGRAPH_SUBSCRIPTION_POLL_MS: '100', TABLEGRAPH_STORAGE_TIMEOUT_MS: '5000' };
const HOLD_MS = 3500;
let proxy: StorageProxy;
let slow: Server;
let reader: Server;
beforeAll(async () => {
  // Every write (a reservation's insert, an EGT, a confirmation) held 3.5 s: a create's EGT goes out after its
  // reservation, so it is applied about 7 s after the write was planned.
  proxy = await startStorageProxy(process.env.AZURE_STORAGE_CONNECTION_STRING!, { delayMs: (method) => (method === 'POST' || method === 'PUT' ? HOLD_MS : 0) });
  [slow, reader] = await Promise.all([
    startSdlServer(SDL, { ...env, AZURE_STORAGE_CONNECTION_STRING: proxy.connectionString, TABLEGRAPH_WORKER: 'off' }),
    startSdlServer(SDL, env),
  ]);
});
afterAll(async () => {
  await slow?.close();
  await reader?.close();
  await proxy?.close();
});

async function write(server: Server, query: string) {
  const r = await server.server.query(query);
  expect(r.errors).toBeUndefined();
}
const create = (field: string, id: string, colour = 'red') =>
  `mutation { createKite(input: { field: "${field}", id: "${id}", serial: "${field}-${id}", colour: "${colour}" }) { kite { id } } }`;

test('a live subscriber gets every write of a server whose EGTs are applied seconds after they were planned', async () => {
  const live = sseSubscribe(reader.server.url, CHANGED, { field: 'late' });
  const ws = wsSubscribe(wsClient(reader.server.url), CHANGED, { field: 'late' });
  await Promise.all([live.started, subscribers(reader.server.url, 2)]);
  const started = Date.now();
  await Promise.all(['1', '2', '3'].map((id) => write(slow, create('late', id))));
  // Each write was acknowledged only after its EGT was applied, well after it was planned.
  expect(Date.now() - started).toBeGreaterThan(2 * HOLD_MS);
  expect(proxy.delayed()).toBeGreaterThanOrEqual(6);
  const events = await live.waitFor(3, 15_000);
  expect(events.map((e) => e.kiteChanged.id).sort()).toEqual(['1', '2', '3']);
  // Each change's time was taken right before its EGT, not when its write was planned (before its reservation):
  // it is at most one held call older than the EGT's commit (the service's Timestamp).
  const log = await reader.server.store.queryRange({
    table: `${prefix}Kites`,
    partitionKey: 'late',
    rowKeyFrom: CHANGE_ROW_KEY_PREFIX,
    rowKeyTo: CHANGE_ROW_KEY_END,
    limit: 100,
  });
  const changes = log.entities.map((e) => readChange(`${prefix}Kites`, e)!);
  expect(changes).toHaveLength(3);
  for (const c of changes) expect(Date.parse(c.committed) - c.at).toBeLessThan(HOLD_MS + 1000);
  expect((await ws.waitFor(3, 5000)).map((e) => e.kiteChanged.id).sort()).toEqual(['1', '2', '3']);
  await pause(1000, 'quiet'); // no event twice
  expect(live.events).toHaveLength(3);
  expect(live.error).toBeUndefined();
  live.stop();
  ws.stop();
}, 60_000);

test('resuming from any event gets exactly the events after it: over SSE and WebSocket, on another server', async () => {
  const first = sseSubscribe(reader.server.url, CHANGED, { field: 'again' });
  await first.started;
  // Writes in bursts, so that some polls deliver several events (a cursor in the middle of a round).
  for (const burst of [['1', '2'], ['3'], ['4', '5', '6']]) {
    await Promise.all(burst.map((id) => write(reader, create('again', id))));
    await write(reader, `mutation { updateKite(input: { field: "again", id: "${burst[0]}", colour: "blue" }) { kite { id } } }`);
  }
  const all = await first.waitFor(9);
  await pause(500, 'quiet'); // nothing more
  expect(first.events).toHaveLength(9);
  first.stop();
  const told = all.map((e) => `${e.kiteChanged.kind} ${e.kiteChanged.id}`);
  // From every cursor: the rest, in the order the first subscriber got it, and nothing more.
  for (const [i, e] of all.entries()) {
    const resumed =
      i % 2 === 0
        ? sseSubscribe(slow.server.url, CHANGED, { field: 'again', after: e.kiteChanged.cursor })
        : wsSubscribe(wsClient(slow.server.url), CHANGED, { field: 'again', after: e.kiteChanged.cursor });
    const rest = told.slice(i + 1);
    if (rest.length > 0) expect((await resumed.waitFor(rest.length)).map((r) => `${r.kiteChanged.kind} ${r.kiteChanged.id}`)).toEqual(rest);
    await pause(400, 'quiet'); // nothing past the rest
    expect(resumed.events).toHaveLength(rest.length);
    expect(resumed.error).toBeUndefined();
    resumed.stop();
  }
  // Then a new write reaches a resumed subscriber once.
  const last = all.at(-1)!.kiteChanged.cursor;
  const resumed = sseSubscribe(reader.server.url, CHANGED, { field: 'again', after: last });
  await resumed.started;
  await write(reader, create('again', '7'));
  expect((await resumed.waitFor(1)).map((e) => e.kiteChanged.id)).toEqual(['7']);
  await pause(500, 'quiet'); // the one write once
  expect(resumed.events).toHaveLength(1);
  expect(resumed.error).toBeUndefined();
  resumed.stop();
}, 90_000);

test('a resume that would read more changed entities than the demand budget is refused before it reads them', async () => {
  // A budget a create fits in (8 calls at worst) and a resume of ten changed entities does not.
  const tight = await startSdlServer(SDL, { ...env, TABLEGRAPH_MAX_STORAGE_CALLS: '9' });
  try {
    const first = sseSubscribe(tight.server.url, CHANGED, { field: 'budget' });
    await first.started;
    await write(tight, create('budget', '0'));
    const [e0] = await first.waitFor(1);
    first.stop();
    // Ten more: resuming from the first would read ten entities.
    for (let id = 1; id <= 10; id++) await write(tight, create('budget', String(id)));
    const refused = sseSubscribe(tight.server.url, CHANGED, { field: 'budget', after: e0.kiteChanged.cursor });
    await until('the resume refused', () => refused.done);
    expect((refused.error as any[])[0].extensions).toMatchObject({ code: 'QUERY_TOO_COSTLY', reason: 'ResumeTooLarge', limit: 9 });
    // Subscribing afresh works (past the second before its start, which a new subscription also reports).
    await pause(1200, 'clock');
    const fresh = sseSubscribe(tight.server.url, CHANGED, { field: 'budget' });
    await fresh.started;
    await write(tight, create('budget', '11'));
    expect((await fresh.waitFor(1)).map((e) => e.kiteChanged.id)).toEqual(['11']);
    fresh.stop();
  } finally {
    await tight.close();
  }
});

test("the change log's polls and reads take turns in the server's storage admission", async () => {
  const admission = new StorageAdmission({ maxInFlight: 1, maxQueued: 10 });
  const poller = new ChangePoller({ store: reader.server.store, overlapMs: 5000, admission });
  // A request's call holds the only slot: the poller's read waits for it.
  let release!: () => void;
  const held = admission.run('a request', () => new Promise<void>((r) => (release = r)));
  let read = false;
  const table = `${prefix}Kites`;
  const catchUp = poller
    .resume(table, 'again', { changeKey: '~change_0000000000000000000_x', round: { seen: { through: '', keys: [] } } }, () => true, 100)
    .then(() => (read = true));
  await until("the poller's read queued behind the request's call", () => admission.load().queued === 1);
  expect(read).toBe(false);
  expect(admission.load()).toEqual({ inFlight: 1, queued: 1 });
  release();
  await held;
  await catchUp;
  expect(read).toBe(true);
  await poller.close();
});
