/**
 * Summaries over a reference through a unique index (`@summary(via:)` naming a `@point(index:)`), on a schema
 * written for the test: orders hold only their customer's id, while customers are partitioned by region. The
 * customer's order count and total are kept eventually by the worker, which finds each holder by reading its index
 * entity: exact under concurrent writers, orders moved between customers, a delete and re-create of one order key,
 * redelivered and reordered messages, two workers and workers killed mid-message; `verify` recounts the same and
 * catches a holder left wrong; `npm run load` of the same rows counts the same and writes nothing the second time.
 */
import { loadEntities } from '../src/load/load-entities';
import { repairSummaries } from '../src/maintenance/summary-state';
import { formatVerifyReport, verifyDerived } from '../src/maintenance/verify-derived';
import { seededRng, useSdlWorld } from './support/fanout-fixtures';
import { testSeed } from './support/seed';

const SDL = `
type Customer @entity(table: "Customers", partitionKey: "{region}", rowKey: "customer_{id}")
  @index(name: "byId", table: "CustomersById", partitionKey: "customers", rowKey: "{id}", unique: true) {
  region: ID! id: ID! name: String
  orderCount: Int! @summary(of: "Order", via: "customer", count: true)
  spent: Decimal! @summary(of: "Order", via: "customer", sum: ["total"])
}
type Order @entity(table: "Orders", partitionKey: "{shop}", rowKey: "order_{id}") {
  shop: ID! id: ID! total: Decimal customerId: ID
  """Optional: an order without a customer counts towards none."""
  customer: Customer @point(index: "byId", partitionKey: "customers", rowKey: "{customerId}")
}
type Query {
  customer(id: ID!): Customer @point(index: "byId", partitionKey: "customers")
}
type Mutation {
  createCustomer(input: CreateCustomerInput!): CustomerPayload! @write(entity: "Customer", action: CREATE)
  createOrder(input: CreateOrderInput!): OrderPayload! @write(entity: "Order", action: CREATE)
  updateOrder(input: UpdateOrderInput!): OrderPayload! @write(entity: "Order", action: UPDATE)
  deleteOrder(input: DeleteOrderInput!): OrderPayload! @write(entity: "Order", action: DELETE)
}`;

const world = useSdlWorld(SDL);
const { ok, drain } = world;

/** Each customer's order count and total, as `count/total`. */
async function summaries(ids: string[]): Promise<string[]> {
  const out: string[] = [];
  for (const id of ids) {
    const r = await world.server.query('query($id: ID!) { customer(id: $id) { orderCount spent } }', { id });
    expect(r.errors).toBeUndefined();
    out.push(`${r.data.customer.orderCount}/${r.data.customer.spent}`);
  }
  return out;
}

test('orders counted towards the customer their id names, read through its index: exact under concurrency and redelivery, verify clean', async () => {
  const seed = testSeed();
  const rng = seededRng(seed);
  const random = () => rng.int(0x7fffffff) / 0x7fffffff;
  await ok('createCustomer', 'CreateCustomerInput', { region: 'north', id: 'c1', name: 'One' });
  await ok('createCustomer', 'CreateCustomerInput', { region: 'south', id: 'c2', name: 'Two' });
  const missing = await world.server.query('mutation { createOrder(input: { shop: "S", id: "x", total: "1", customerId: "c404" }) { __typename } }');
  expect(missing.errors?.[0].extensions).toMatchObject({ code: 'NOT_FOUND', reason: 'ReferenceMissing', field: 'customer' });

  // Concurrent writers: 16 orders, each then moved between c1, c2 and no customer, twice.
  const ids = Array.from({ length: 16 }, (_, i) => `o${i}`);
  const owner = new Map<string, string | null>();
  await Promise.all(ids.map((id, i) => ok('createOrder', 'CreateOrderInput', { shop: 'S', id, total: `${i}.25`, customerId: 'c1' })));
  await Promise.all(
    ids.map(async (id) => {
      owner.set(id, 'c1');
      for (let round = 0; round < 2; round++) {
        const next = [null, 'c1', 'c2'][rng.int(3)];
        await ok('updateOrder', 'UpdateOrderInput', { shop: 'S', id, customerId: next });
        owner.set(id, next);
      }
    }),
  );
  // One order key deleted and created again for the other customer before the worker.
  await ok('deleteOrder', 'DeleteOrderInput', { shop: 'S', id: 'o0' });
  await ok('createOrder', 'CreateOrderInput', { shop: 'S', id: 'o0', total: '100', customerId: owner.get('o0') === 'c2' ? 'c1' : 'c2' });
  const o0 = owner.get('o0') === 'c2' ? 'c1' : 'c2';
  owner.set('o0', o0);
  const { messages, killed } = await drain(random);
  const expected = (c: string) => {
    const mine = ids.filter((id) => owner.get(id) === c);
    const total = mine.reduce((n, id) => n + (id === 'o0' ? 100 : Number(id.slice(1)) + 0.25), 0);
    return `${mine.length}/${total}`;
  };
  expect(await summaries(['c1', 'c2'])).toEqual([expected('c1'), expected('c2')]);
  const report = await verifyDerived({ store: world.server.store, model: world.model });
  if (!report.ok) console.log(formatVerifyReport(report));
  expect(report.problems).toBe(0);
  expect(report.summaries.find((s) => s.summary === 'Customer.orderCount')).toMatchObject({ holders: 2, counted: ids.filter((id) => owner.get(id)).length });

  // A holder left wrong: verify names it.
  await world.server.store.updateEntity(
    `${world.server.config.tablePrefix}Customers`,
    { partitionKey: 'south', rowKey: 'customer_c2', properties: { orderCount: { type: 'Int32', value: 99 } } },
    'merge',
  );
  const wrong = await verifyDerived({ store: world.server.store, model: world.model });
  expect(wrong.summaries.find((s) => s.summary === 'Customer.orderCount')!.different.map((d) => d.rowKey)).toEqual(['customer_c2']);
  // repair-summaries sums it again from its contribution entities.
  expect((await repairSummaries({ store: world.server.store, model: world.model })).repaired.map((a) => a.rowKey)).toEqual(['customer_c2']);
  expect(await summaries(['c1', 'c2'])).toEqual([expected('c1'), expected('c2')]);
  console.log(`index summaries seed ${seed}: ${messages} messages delivered twice and late, ${killed} deliveries killed mid-message`);
}, 120_000);

test('load finds each holder through its index, counts the same, and a second load writes nothing', async () => {
  const steps = () => [
    {
      type: 'Customer',
      rows: (async function* () {
        yield { line: 2, values: { region: 'west', id: 'L1' } };
        yield { line: 3, values: { region: 'east', id: 'L2' } };
      })(),
    },
    {
      type: 'Order',
      rows: (async function* () {
        yield { line: 2, values: { shop: 'LS', id: 'a', total: '1.5', customerId: 'L1' } };
        yield { line: 3, values: { shop: 'LS', id: 'b', total: '2', customerId: 'L1' } };
        yield { line: 4, values: { shop: 'LS', id: 'c', total: '4', customerId: 'L2' } };
        yield { line: 5, values: { shop: 'LS', id: 'd', total: '8' } };
        yield { line: 6, values: { shop: 'LS', id: 'e', total: '16', customerId: 'L404' } };
      })(),
    },
  ];
  const first = await loadEntities({ store: world.server.store, model: world.model, steps: steps() });
  expect(first.steps.map((s) => [s.type, s.loaded, s.skipped.map((k) => k.line)])).toEqual([
    ['Customer', 2, []],
    ['Order', 4, [6]],
  ]);
  expect(first.steps[1].skipped[0].reason).toMatch(/customer: no Customer at customers\/L404/);
  expect(await summaries(['L1', 'L2'])).toEqual(['2/3.5', '1/4']);
  const again = await loadEntities({ store: world.server.store, model: world.model, steps: steps() });
  expect(again.steps.map((s) => [s.type, s.unchanged, s.holders])).toEqual([
    ['Customer', 2, 0],
    ['Order', 4, 0],
  ]);
  expect(again.entities).toBe(0);
  expect((await verifyDerived({ store: world.server.store, model: world.model })).problems).toBe(0);
});
