/**
 * Subscriptions (`@subscribe`): writes reported from the change log to subscribers over SSE and WebSocket, on a
 * schema written for this test.
 */
import { startSdlServer } from './support/harness';
import { sseSubscribe, wsClient, wsSubscribe } from './support/subscription-clients';

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
  updateKite(input: UpdateKiteInput!): KitePayload! @write(entity: "Kite", action: UPDATE)
  deleteKite(input: DeleteKiteInput!): KitePayload! @write(entity: "Kite", action: DELETE)
}
type Subscription {
  kiteChanged(field: ID!, after: String): KiteChange! @subscribe(entity: "Kite")
  oneKite(field: ID!, id: ID!): KiteChange! @subscribe(entity: "Kite")
}
`;

const CHANGED = 'subscription ($field: ID!, $after: String) { kiteChanged(field: $field, after: $after) { kind field id cursor node { colour } } }';

let ctx: Awaited<ReturnType<typeof startSdlServer>>;
beforeAll(async () => void (ctx = await startSdlServer(SDL, { TABLEGRAPH_AUTH: 'off', TABLEGRAPH_SUBSCRIPTION_POLL_MS: '100' })));
afterAll(() => ctx?.close());

async function write(query: string) {
  const r = await ctx.server.query(query);
  expect(r.errors).toBeUndefined();
  return r.data;
}

test('SSE: a create, an update and a delete of the partition, in order; nothing of another partition', async () => {
  const sub = sseSubscribe(ctx.server.url, CHANGED, { field: 'north' });
  await new Promise((r) => setTimeout(r, 300));
  await write('mutation { createKite(input: { field: "south", id: "x", colour: "grey" }) { kite { id } } }');
  await write('mutation { createKite(input: { field: "north", id: "1", colour: "red" }) { kite { id } } }');
  await sub.waitFor(1);
  await write('mutation { updateKite(input: { field: "north", id: "1", colour: "blue" }) { kite { id } } }');
  await sub.waitFor(2);
  await write('mutation { deleteKite(input: { field: "north", id: "1" }) { kite { id } } }');
  const events = await sub.waitFor(3);
  sub.stop();
  expect(events.map((e) => e.kiteChanged.kind)).toEqual(['CREATED', 'UPDATED', 'DELETED']);
  expect(events.every((e) => e.kiteChanged.field === 'north' && e.kiteChanged.id === '1')).toBe(true);
  // The entity as read when the change was: each event here was read before the next write.
  expect(events.map((e) => e.kiteChanged.node)).toEqual([{ colour: 'red' }, { colour: 'blue' }, null]);
  expect(new Set(events.map((e) => e.kiteChanged.cursor)).size).toBe(3);
  expect(sub.events).toHaveLength(3);
});

test('WebSocket: the same, and a subscription of one entity sees only it', async () => {
  const client = wsClient(ctx.server.url);
  const all = wsSubscribe(client, CHANGED, { field: 'west' });
  const one = wsSubscribe(client, 'subscription { oneKite(field: "west", id: "2") { kind id node { colour } } }');
  await new Promise((r) => setTimeout(r, 300));
  await write('mutation { createKite(input: { field: "west", id: "1", colour: "red" }) { kite { id } } }');
  await write('mutation { createKite(input: { field: "west", id: "2", colour: "green" }) { kite { id } } }');
  const events = await all.waitFor(2);
  expect(events.map((e) => e.kiteChanged.id)).toEqual(['1', '2']);
  const mine = await one.waitFor(1);
  expect(mine[0].oneKite).toEqual({ kind: 'CREATED', id: '2', node: { colour: 'green' } });
  await new Promise((r) => setTimeout(r, 300));
  expect(one.events).toHaveLength(1);
  await client.dispose();
});
