/**
 * One queue message per group commit (src/queue/messages.ts `batch`, src/write/attempt-effects.ts sendMessages), on a
 * schema written for the test: the writes of one EGT send their fan-out messages as one queue message; the worker
 * handles each item as the message it is (src/worker/message-worker.ts); the message then keeps only the items that
 * failed or must wait, and a failing item reaches the poison queue alone. Under concurrent writers into one partition, every message delivered twice,
 * late and reordered, by two workers killed mid-message; `verify` clean after.
 */
import { encodeBatches, encodeMessage, type EntityMessage } from '../src/queue/messages';
import { workQueueNames } from '../src/queue/sender';
import { createMessageWorker } from '../src/worker/message-worker';
import { primaryAddress } from '../src/model/entity-codec';
import { testQueues } from './support/harness';
import { expectConverged, seededRng, useSdlWorld } from './support/fanout-fixtures';
import { receiveFanout } from './support/write-fixtures';
import { testSeed } from './support/seed';

const SDL = `
type Parcel @entity(table: "Parcels", partitionKey: "{depot}", rowKey: "parcel_{id}")
  @index(name: "byCode", table: "ParcelsByCode", partitionKey: "codes", rowKey: "{code}", unique: true)
  @index(name: "byRoute", table: "ParcelsByRoute", partitionKey: "route_{route}", rowKey: "{depot}_{id}") {
  etag: String! depot: ID! id: ID! code: String! route: String!
}
type Query {
  parcel(depot: ID!, id: ID!): Parcel @point
  parcelByCode(code: String!): Parcel @point(index: "byCode", partitionKey: "codes")
  parcelsOnRoute(route: String!, first: Int, after: String): ParcelConnection! @range(index: "byRoute")
}
type Mutation {
  createParcel(input: CreateParcelInput!): ParcelPayload! @write(entity: "Parcel", action: CREATE)
  updateParcel(input: UpdateParcelInput!): ParcelPayload! @write(entity: "Parcel", action: UPDATE)
  deleteParcel(input: DeleteParcelInput!): ParcelPayload! @write(entity: "Parcel", action: DELETE)
}`;

const world = useSdlWorld(SDL);
const queues = testQueues();

async function onRoute(route: string): Promise<string[]> {
  const r = await world.server.query('query($r: String!) { parcelsOnRoute(route: $r, first: 100) { edges { node { id code } } } }', { r: route });
  expect(r.errors).toBeUndefined();
  return r.data.parcelsOnRoute.edges.map((e: any) => `${e.node.id}:${e.node.code}`).sort();
}

test('concurrent writes into one partition: one queue message per group commit (≤ 0.2 per write), each write reconciled, verify clean', async () => {
  const { queue } = workQueueNames(world.server.config.tablePrefix);
  const seed = testSeed();
  const rng = seededRng(seed);
  const random = () => rng.int(0x7fffffff) / 0x7fffffff;
  const writes = 60;
  const depthBefore = await queues.approximateDepth(queue);
  // Through the write path at once (60 in flight: over HTTP they would arrive spread over the requests' handling).
  const create = world.model.writes.get('Mutation.createParcel')!;
  await Promise.all(Array.from({ length: writes }, (_, i) => world.writer.execute(create, { depot: 'D1', id: `p${i}`, code: `c${i}`, route: `r${i % 3}` })));
  const sent = (await queues.approximateDepth(queue)) - depthBefore;
  expect(sent).toBeGreaterThan(0);
  expect(sent / writes).toBeLessThanOrEqual(0.2);
  // Updates (a new route, so old and new index entities), a delete and re-create of one id, all at once.
  await Promise.all([
    ...Array.from({ length: 20 }, (_, i) => world.ok('updateParcel', 'UpdateParcelInput', { depot: 'D1', id: `p${i}`, route: 'moved' })),
    world
      .ok('deleteParcel', 'DeleteParcelInput', { depot: 'D1', id: 'p59' })
      .then(() => world.ok('createParcel', 'CreateParcelInput', { depot: 'D1', id: 'p59', code: 'c59-again', route: 'r2' })),
  ]);
  const { messages, killed } = await world.drain(random);
  console.log(`batch messages seed ${seed}: ${sent} queue messages for ${writes} creates; ${messages} write messages delivered, ${killed} killed mid-message`);
  expect(messages).toBeGreaterThanOrEqual(writes);
  expect(await onRoute('moved')).toHaveLength(20);
  const r0 = await onRoute('r0');
  expect(r0).toHaveLength(20 - 7); // p0, p3, … p57: 20 on r0, of which p0…p18 by 3 (7) moved
  expect(await onRoute('r2')).toContain('p59:c59-again');
  await expectConverged(world.server.store, world.model);
}, 120_000);

test('a batch whose items fail or must wait: the others done once; the failing one poisoned alone, the waiting one handled after its wait', async () => {
  const prefix = world.server.config.tablePrefix;
  const names = workQueueNames(prefix);
  await Promise.all(['a', 'b', 'c'].map((id) => world.ok('createParcel', 'CreateParcelInput', { depot: 'D2', id, code: `split-${id}`, route: 'split' })));
  // The writes' own messages, taken off the queue to be sent again inside one batch of the test's making.
  const received = await receiveFanout(queues, prefix);
  const items = received.map((r) => r.message).filter((m) => m.primary.partitionKey === 'D2');
  expect(items).toHaveLength(3);
  await Promise.all([...new Map(received.map((r) => [r.ref.id, r.ref])).values()].map((ref) => queues.delete(names.queue, ref)));
  const parcel = world.model.entities.get('Parcel')!;
  const unknownType: EntityMessage = { ...items[0], id: 'unknown-type', entity: 'Nope' };
  // A create that never shows: told to wait until the settle time (5 s) has passed, then reconciled (nothing to do).
  const neverVisible: EntityMessage = {
    ...items[0],
    id: 'never-visible',
    writeId: 'w-never',
    basedOn: null,
    primary: primaryAddress(parcel, { depot: 'D2', id: 'never' }),
    candidates: [],
    enqueuedAt: Date.now(),
  };
  const [batch, ...more] = encodeBatches([...items, unknownType, neverVisible]);
  expect(more).toEqual([]);
  expect(JSON.parse(batch.text)).toMatchObject({ kind: 'batch', messages: { length: 5 } });
  await queues.send(names.queue, batch.text);
  const handled: string[] = [];
  const worker = createMessageWorker({
    model: world.model,
    store: world.server.store,
    queues,
    tablePrefix: prefix,
    maxDequeueCount: 2,
    settleMs: 5000,
    afterUpserts: (m) => void handled.push(m.id),
  });
  const drained = await worker.drain({ timeoutMs: 30_000, settleMs: 7000 });
  // Receive 1: three items done, one failed, one waits; receive 2: the same two not done, and the waiting one goes
  // on alone (the next receive poisons the message); receive 3: the failing item, alone, to the poison queue.
  expect(drained).toEqual({ handled: 1, poisoned: 1, retried: 0 });
  expect(worker.stats()).toMatchObject({ failed: 2 });
  expect(handled.filter((id) => items.some((m) => m.id === id)).sort()).toEqual(items.map((m) => m.id).sort());
  expect(handled.filter((id) => id === 'never-visible')).toHaveLength(1);
  const [entry, ...others] = (await queues.receive(names.poison, { max: 32, visibilityTimeoutSeconds: 30 })).map((m) => JSON.parse(m.text));
  expect(others).toEqual([]);
  expect(entry.message).toBe(encodeMessage(unknownType));
  expect(entry.error).toContain('names Nope, which the schema does not have');
  expect(await onRoute('split')).toEqual(['a:split-a', 'b:split-b', 'c:split-c']);
  await expectConverged(world.server.store, world.model);
}, 60_000);
