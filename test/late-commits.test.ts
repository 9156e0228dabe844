/**
 * An EGT applied long after its answer was given up on (src/write/change-fence.ts): a proxy in front of one server's
 * Table endpoint holds its EGTs past the server's storage timeout, then passes them on all the same, as a service that
 * read a request before its client timed out applies it. The write is answered STORAGE_UNAVAILABLE; what happens
 * next is decided by a fence at its change entity's RowKey:
 * - the fence gets there first: the late EGT is refused whole — never stored, and no subscriber hears of it;
 * - the EGT gets there first, later than the change log's readers look back: its change is told again (a relay), so a
 *   live subscriber gets it, and a client resuming from before it gets it once — live and resumed streams agree.
 * Continuous backup captures the same: the fenced write not at all, the late one once (its relay is not a second
 * write). On a schema written for the test (a type a subscription follows).
 */
import { decodeChangeSegment, parsePassManifest, replayKey } from '../src/backup/change-format';
import { lastCapturedChanges } from './support/captured-changes';
import { startSdlServer, testBlobs, uniquePrefix } from './support/harness';
import { startStorageProxy, type StorageProxy } from './support/storage-proxy';
import { sseSubscribe } from './support/subscription-clients';
import { until } from './support/wait';

const SDL = `
type Kite @entity(table: "Kites", partitionKey: "{field}", rowKey: "kite_{id}") {
  field: ID!
  id: ID!
  colour: String!
}
type Query {
  kite(field: ID!, id: ID!): Kite @point
}
type Mutation {
  createKite(input: CreateKiteInput!): KitePayload! @write(entity: "Kite", action: CREATE)
}
type Subscription {
  kiteChanged(field: ID!, after: String): KiteChange! @subscribe(entity: "Kite")
}
`;
const CHANGED = 'subscription ($field: ID!, $after: String) { kiteChanged(field: $field, after: $after) { kind id cursor } }';
type Server = Awaited<ReturnType<typeof startSdlServer>>;

const prefix = uniquePrefix();
// A short storage timeout: the change log's readers look back 2 × 1.5 s + 0.1 s + 1 s.
const env = { TABLEGRAPH_AUTH: 'off', TABLEGRAPH_TABLE_PREFIX: prefix, TABLEGRAPH_SUBSCRIPTION_POLL_MS: '100', TABLEGRAPH_STORAGE_TIMEOUT_MS: '1500' };
/**
 * How the proxy holds requests, as the test sets it: each EGT `egt` ms; with `insertsAfterEgt`, every single insert
 * until just after the held EGT was let through — as a service stopped a while then takes its requests in order.
 */
const hold = { egt: 0, insertsAfterEgt: false, egtReleasedAt: 0 };
function holdOf(method: string, path: string): number {
  if (method !== 'POST') return 0;
  if (path.includes('$batch')) {
    if (hold.egt > 0) hold.egtReleasedAt = Date.now() + hold.egt;
    return hold.egt;
  }
  if (!hold.insertsAfterEgt || !path.includes(`${prefix}Kites`)) return 0;
  return Math.max(0, hold.egtReleasedAt + 500 - Date.now());
}
let proxy: StorageProxy;
let slow: Server;
let reader: Server;

beforeAll(async () => {
  proxy = await startStorageProxy(process.env.AZURE_STORAGE_CONNECTION_STRING!, {
    passAbandoned: true,
    delayMs: holdOf,
  });
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

const create = (server: Server, field: string, id: string) =>
  server.server.query(`mutation { createKite(input: { field: "${field}", id: "${id}", colour: "red" }) { kite { id } } }`);

/** Waits until the proxy has passed on `n` EGTs (held ones included) and the service answered them. */
async function egtsForwarded(n: number): Promise<void> {
  await until(
    () => `${n} EGTs passed on by the proxy (${egtsSoFar()} so far)`,
    () => egtsSoFar() >= n,
    { timeoutMs: 30_000 },
  );
}
const egtsSoFar = () => proxy.forwarded().filter((f) => f.path.includes('$batch')).length;

test('a late EGT the fence gets to first: refused, never stored, and no subscriber hears of it', async () => {
  const live = sseSubscribe(reader.server.url, CHANGED, { field: 'f1' });
  await reader.server.query('{ __typename }');
  const before = egtsSoFar();
  hold.egt = 5000;
  const r = await create(slow, 'f1', 'lost');
  hold.egt = 0;
  expect(r.errors?.[0].extensions.code).toBe('STORAGE_UNAVAILABLE');
  await egtsForwarded(before + 1); // the held EGT reached the service, after the fence
  expect((await reader.server.query('{ kite(field: "f1", id: "lost") { id } }')).data.kite).toBeNull();
  // A write after it is heard; the lost one never is.
  expect((await create(reader, 'f1', 'next')).errors).toBeUndefined();
  const events = await live.waitFor(1, 15_000);
  expect(events.map((e) => e.kiteChanged.id)).toEqual(['next']);
  live.stop();
  const captured = await lastCapturedChanges(slow.model, prefix, `${prefix.toLowerCase()}-fenced`);
  expect([captured.has(replayKey('Kites', 'f1', 'kite_lost')), captured.get(replayKey('Kites', 'f1', 'kite_next'))?.kind]).toEqual([false, 'CREATED']);
}, 60_000);

test('a late EGT applied before its fence: a relay tells it to live subscribers, and once to a client resuming from before it', async () => {
  const live = sseSubscribe(reader.server.url, CHANGED, { field: 'f2' });
  expect((await create(reader, 'f2', 'first')).errors).toBeUndefined();
  const [first] = await live.waitFor(1, 15_000);
  hold.egt = 5000;
  hold.insertsAfterEgt = true; // the fence waits behind the EGT: the EGT is applied first, 5 s after its change's time
  const r = await create(slow, 'f2', 'late');
  hold.egt = 0;
  expect(r.errors?.[0].extensions.code).toBe('STORAGE_UNAVAILABLE');
  // Applied late, and heard live (the relay), ahead of a write made after it.
  const got = await live.waitFor(2, 30_000);
  expect(got.map((e) => e.kiteChanged.id)).toEqual(['first', 'late']);
  hold.insertsAfterEgt = false;
  expect((await reader.server.query('{ kite(field: "f2", id: "late") { id } }')).data.kite).toEqual({ id: 'late' });
  expect((await create(reader, 'f2', 'after')).errors).toBeUndefined();
  expect((await live.waitFor(3, 15_000)).map((e) => e.kiteChanged.id)).toEqual(['first', 'late', 'after']);
  // A client resuming from the first event gets the late change once (its change entity and its relay are one).
  const resumed = sseSubscribe(reader.server.url, CHANGED, { field: 'f2', after: first.kiteChanged.cursor });
  expect((await resumed.waitFor(2, 15_000)).map((e) => e.kiteChanged.id)).toEqual(['late', 'after']);
  expect((await create(reader, 'f2', 'last')).errors).toBeUndefined();
  expect((await resumed.waitFor(3, 15_000)).map((e) => e.kiteChanged.id)).toEqual(['late', 'after', 'last']);
  expect((await live.waitFor(4, 15_000)).map((e) => e.kiteChanged.id)).toEqual(['first', 'late', 'after', 'last']);
  live.stop();
  resumed.stop();
  // Captured once, as written: the relay tells the same change again, it is no second write.
  const blobs = testBlobs();
  const container = `${prefix.toLowerCase()}-late`;
  const captured = await lastCapturedChanges(slow.model, prefix, container);
  expect(captured.get(replayKey('Kites', 'f2', 'kite_late'))).toMatchObject({
    kind: 'CREATED',
    image: [{ entity: { properties: { colour: { value: 'red' } } } }],
  });
  const manifest = (await blobs.list(container, 'changes/')).find((b) => b.name.endsWith('/manifest.json'))!;
  const pass = parsePassManifest((await blobs.download(container, manifest.name))!.bytes.toString('utf8'), manifest.name);
  const lates = (await Promise.all(pass.segments.map(async (g) => decodeChangeSegment((await blobs.download(container, g.name))!.bytes, g)))).flat();
  expect(lates.filter((c) => c.rowKey === 'kite_late')).toHaveLength(1);
}, 90_000);
