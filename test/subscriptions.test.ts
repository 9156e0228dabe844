/**
 * Subscriptions (`@subscribe`): writes reported from the change log to subscribers over SSE and WebSocket — in
 * order, each once, one entity or a whole partition — and every refusal with its code; concurrent writers (each
 * acknowledged write reported once, a refused one never), delete-and-recreate of one key, a move carried out by
 * the worker, the change log's trim,
 * and `verify` clean with change entities beside the data. On a schema written for this test.
 */
import { compileSchema } from '../src/compiler/compile';
import { isTablegraphError } from '../src/errors';
import { CHANGE_ROW_KEY_END, CHANGE_ROW_KEY_PREFIX } from '../src/model/change-log';
import { verifyDerived } from '../src/maintenance/verify-derived';
import { ChangeLogTrimmer } from '../src/write/change-log-trim';
import { startSdlServer } from './support/harness';
import { sseSubscribe, subscribers, wsClient, wsSubscribe } from './support/subscription-clients';
import { pause } from './support/wait';

const SDL = `
type Beacon @entity(table: "Beacons", partitionKey: "{harbour}", rowKey: "beacon_{id}") {
  harbour: ID!
  id: ID!
  light: String!
}
type Query {
  beacon(harbour: ID!, id: ID!): Beacon @point
}
type Mutation {
  createBeacon(input: CreateBeaconInput!): BeaconPayload! @write(entity: "Beacon", action: CREATE)
  updateBeacon(input: UpdateBeaconInput!): BeaconPayload! @write(entity: "Beacon", action: UPDATE)
  deleteBeacon(input: DeleteBeaconInput!): BeaconPayload! @write(entity: "Beacon", action: DELETE)
  moveBeacon(input: MoveBeaconInput!): BeaconPayload! @write(entity: "Beacon", action: MOVE)
}
type Subscription {
  beaconChanged(harbour: ID!, after: String): BeaconChange! @subscribe(entity: "Beacon")
  oneBeacon(harbour: ID!, id: ID!): BeaconChange! @subscribe(entity: "Beacon")
}
`;

const CHANGED = 'subscription ($harbour: ID!, $after: String) { beaconChanged(harbour: $harbour, after: $after) { kind harbour id cursor node { light } } }';

let ctx: Awaited<ReturnType<typeof startSdlServer>>;
beforeAll(
  async () =>
    void (ctx = await startSdlServer(SDL, { TABLEGRAPH_AUTH: 'off', TABLEGRAPH_SUBSCRIPTION_POLL_MS: '100', TABLEGRAPH_SUBSCRIPTIONS_PER_CONNECTION: '3' })),
);
afterAll(() => ctx?.close());

async function write(query: string) {
  const r = await ctx.server.query(query);
  expect(r.errors).toBeUndefined();
  return r.data;
}
const create = (harbour: string, id: string, light: string) =>
  `mutation { createBeacon(input: { harbour: "${harbour}", id: "${id}", light: "${light}" }) { beacon { id } } }`;

test('SSE: a create, an update and a delete of the partition, in order; nothing of another partition', async () => {
  const sub = sseSubscribe(ctx.server.url, CHANGED, { harbour: 'north' });
  await sub.started;
  await write(create('south', 'x', 'grey'));
  await write(create('north', '1', 'red'));
  await sub.waitFor(1);
  await write('mutation { updateBeacon(input: { harbour: "north", id: "1", light: "blue" }) { beacon { id } } }');
  await sub.waitFor(2);
  await write('mutation { deleteBeacon(input: { harbour: "north", id: "1" }) { beacon { id } } }');
  const events = await sub.waitFor(3);
  await pause(300, 'quiet'); // no event after the three
  sub.stop();
  expect(events.map((e) => e.beaconChanged.kind)).toEqual(['CREATED', 'UPDATED', 'DELETED']);
  expect(events.every((e) => e.beaconChanged.harbour === 'north' && e.beaconChanged.id === '1')).toBe(true);
  // The entity as read when the change was: each event here was read before the next write.
  expect(events.map((e) => e.beaconChanged.node)).toEqual([{ light: 'red' }, { light: 'blue' }, null]);
  expect(new Set(events.map((e) => e.beaconChanged.cursor)).size).toBe(3);
  expect(sub.events).toHaveLength(3);
});

test('WebSocket: a partition and one entity of it', async () => {
  const client = wsClient(ctx.server.url);
  const all = wsSubscribe(client, CHANGED, { harbour: 'west' });
  const one = wsSubscribe(client, 'subscription { oneBeacon(harbour: "west", id: "2") { kind id node { light } } }');
  await subscribers(ctx.server.url, 2);
  await write(create('west', '1', 'red'));
  await write(create('west', '2', 'green'));
  expect((await all.waitFor(2)).map((e) => e.beaconChanged.id)).toEqual(['1', '2']);
  expect((await one.waitFor(1))[0].oneBeacon).toEqual({ kind: 'CREATED', id: '2', node: { light: 'green' } });
  await pause(300, 'quiet'); // no event of the other entity
  expect(one.events).toHaveLength(1);
  await client.dispose();
});

test('concurrent writers: each acknowledged write is reported once, a refused one never; delete and recreate in order', async () => {
  const sub = sseSubscribe(ctx.server.url, CHANGED, { harbour: 'busy' });
  await sub.started;
  // 40 creates at once, each id twice: half are refused (EntityAlreadyExists), in the same group commits.
  const results = await Promise.all(Array.from({ length: 40 }, (_, i) => ctx.server.query(create('busy', String(i % 20), `l${i}`))));
  const ok = results.filter((r) => !r.errors).length;
  expect(ok).toBe(20);
  expect(results.filter((r) => r.errors?.[0]?.extensions?.code === 'CONFLICT')).toHaveLength(20);
  // Delete and recreate one key, at once and in order.
  await write('mutation { deleteBeacon(input: { harbour: "busy", id: "7" }) { beacon { id } } }');
  await write(create('busy', '7', 'again'));
  const events = await sub.waitFor(22, 15_000);
  await pause(500, 'quiet'); // no event of a refused write, none twice
  sub.stop();
  expect(sub.events).toHaveLength(22);
  const creates = events.slice(0, 20).map((e) => e.beaconChanged);
  expect(creates.every((c) => c.kind === 'CREATED')).toBe(true);
  expect(new Set(creates.map((c) => c.id)).size).toBe(20);
  expect(events.slice(20).map((e) => [e.beaconChanged.kind, e.beaconChanged.id])).toEqual([
    ['DELETED', '7'],
    ['CREATED', '7'],
  ]);
  // Change entities beside the data leave every check clean.
  const report = await verifyDerived({ store: ctx.server.store, model: ctx.model });
  expect(report.ok).toBe(true);
});

test('a move, carried out by the worker: the old partition sees the delete, the new one the create', async () => {
  const from = sseSubscribe(ctx.server.url, CHANGED, { harbour: 'old' });
  const to = sseSubscribe(ctx.server.url, CHANGED, { harbour: 'new' });
  await Promise.all([from.started, to.started]);
  await write(create('old', 'm', 'amber'));
  await from.waitFor(1);
  await write('mutation { moveBeacon(input: { harbour: "old", id: "m", toHarbour: "new" }) { beacon { id } } }');
  const [created] = await to.waitFor(1, 15_000);
  expect(created.beaconChanged).toMatchObject({ kind: 'CREATED', harbour: 'new', id: 'm', node: { light: 'amber' } });
  const events = await from.waitFor(2, 15_000);
  expect(events.map((e) => e.beaconChanged.kind)).toEqual(['CREATED', 'DELETED']);
  await pause(500, 'quiet'); // nothing more on either side
  expect(to.events).toHaveLength(1);
  expect(from.events).toHaveLength(2);
  from.stop();
  to.stop();
});

test('refusals: not a subscription, an invalid document, a bad cursor, too many on one WebSocket', async () => {
  const query = sseSubscribe(ctx.server.url, '{ beacon(harbour: "a", id: "b") { id } }');
  await expect(query.waitFor(1, 3000)).rejects.toThrow(/ended/);
  expect(query.refusal?.status).toBe(400);
  expect(JSON.parse(query.refusal!.body).errors[0].extensions.code).toBe('BAD_REQUEST');
  const invalid = sseSubscribe(ctx.server.url, 'subscription { beaconChanged(harbour: "a") { colour } }');
  await expect(invalid.waitFor(1, 3000)).rejects.toThrow(/ended/);
  expect(JSON.parse(invalid.refusal!.body).errors[0].extensions.code).toBe('GRAPHQL_VALIDATION_FAILED');
  const cursor = sseSubscribe(ctx.server.url, CHANGED, { harbour: 'a', after: 'forged.cursor' });
  await expect(cursor.waitFor(1, 3000)).rejects.toThrow(/ended/);
  expect(JSON.stringify(cursor.error ?? cursor.refusal)).toMatch(/BAD_USER_INPUT/);
  // A subscription sent to POST /graphql is refused with a code, never INTERNAL_SERVER_ERROR.
  const posted = await ctx.server.query('subscription { beaconChanged(harbour: "a") { kind } }');
  expect(posted.errors?.[0].extensions.code).not.toBe('INTERNAL_SERVER_ERROR');
  expect(posted.errors?.[0].extensions.code).toEqual(expect.any(String));
  // Three per connection here (TABLEGRAPH_SUBSCRIPTIONS_PER_CONNECTION): the fourth is refused, the others go on.
  const client = wsClient(ctx.server.url);
  const subs = ['l1', 'l2', 'l3', 'l4'].map((h) => wsSubscribe(client, CHANGED, { harbour: h }));
  await subscribers(ctx.server.url, 3);
  await expect(subs[3].waitFor(1, 3000)).rejects.toThrow(/ended/);
  expect(JSON.stringify(subs[3].error)).toMatch(/TooManyOnConnection/);
  await write(create('l1', '1', 'x'));
  expect(await subs[0].waitFor(1)).toHaveLength(1);
  await client.dispose();
});

test('the change log is trimmed: change entities older than the retention are deleted', async () => {
  const table = ctx.model.entities.get('Beacon')!.layout.table;
  const range = { table, partitionKey: 'busy', rowKeyFrom: CHANGE_ROW_KEY_PREFIX, rowKeyTo: CHANGE_ROW_KEY_END, limit: 1000 };
  const before = (await ctx.server.store.queryRange(range)).entities.length;
  expect(before).toBe(22);
  const trimmer = new ChangeLogTrimmer({ store: ctx.server.store, retentionMs: 60_000 });
  // Nothing is an hour old yet.
  expect(await trimmer.trim(table, 'busy')).toBe(0);
  // An hour from now, all of them are.
  expect(await trimmer.trim(table, 'busy', Date.now() + 3_600_000)).toBe(22);
  expect((await ctx.server.store.queryRange(range)).entities).toHaveLength(0);
  // The data is untouched.
  expect((await ctx.server.query('{ beacon(harbour: "busy", id: "7") { light } }')).data.beacon).toEqual({ light: 'again' });
});

test('the compiler: every Subscription field says what it follows, by the keys', () => {
  const compile = (subscription: string) => {
    try {
      compileSchema([{ name: 's.graphql', body: SDL.replace(/type Subscription \{[\s\S]*?\n\}/, `type Subscription {\n${subscription}\n}`) }]);
      return [];
    } catch (e) {
      if (!isTablegraphError(e)) throw e;
      return (e.details.problems as Array<{ message: string; locations?: unknown[] }>).map((p) => p.message);
    }
  };
  expect(compile('  a(harbour: ID!): BeaconChange! @subscribe(entity: "Beacon")')).toEqual([]);
  expect(compile('  a(harbour: ID!): BeaconChange!')[0]).toMatch(/has no @subscribe/);
  expect(compile('  a(id: ID!): BeaconChange! @subscribe(entity: "Beacon")')[0]).toMatch(/add the argument\(s\) harbour/);
  expect(compile('  a(harbour: ID!, light: String): BeaconChange! @subscribe(entity: "Beacon")')[0]).toMatch(/neither a key field of Beacon nor `after`/);
  expect(compile('  a(harbour: ID!): BeaconPayload! @subscribe(entity: "Beacon")')[0]).toMatch(/returns BeaconChange/);
  expect(compile('  a(harbour: ID!): BeaconChange! @subscribe(entity: "Lighthouse")')[0]).toMatch(/no @entity type of that name/);
  expect(compile('  a(harbour: ID!, after: Int): BeaconChange! @subscribe(entity: "Beacon")')[0]).toMatch(/after: String/);
});
