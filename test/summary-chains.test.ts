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
import { loadEntities } from '../src/load/load-entities';
import { repairSummaries } from '../src/maintenance/summary-state';
import { formatVerifyReport, verifyDerived } from '../src/maintenance/verify-derived';
import { seededRng, useSdlWorld } from './support/fanout-fixtures';
import { testSeed } from './support/seed';

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
  const rng = seededRng(testSeed());
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

/**
 * A summary of a summary, with each lower summary kept both ways: `Invoice.total` in the lines' EGT (lines in the
 * invoice's partition), `Invoice.extras` by the worker (extras in a table of their own); `Customer.totalSpent` sums
 * both (held elsewhere), `Region.revenue` sums the customers' totals (a chain of three).
 */
const CHAINS = `
type Region @entity(table: "Regions", partitionKey: "regions", rowKey: "{id}") {
  id: ID!
  revenue: Decimal! @summary(of: "Customer", via: "region", sum: ["totalSpent"])
}
type Customer @entity(table: "Customers", partitionKey: "customers", rowKey: "{id}") {
  id: ID!
  regionId: ID!
  region: Region! @point(partitionKey: "regions", rowKey: "{regionId}")
  totalSpent: Decimal! @summary(of: "Invoice", via: "customer", sum: ["total", "extras", "fee"])
  invoiceCount: Int! @summary(of: "Invoice", via: "customer", count: true)
}
type Invoice @entity(table: "Invoices", partitionKey: "{customerId}", rowKey: "invoice_{id}") {
  customerId: ID!
  id: ID!
  fee: Decimal
  customer: Customer! @point(partitionKey: "customers", rowKey: "{customerId}")
  total: Decimal! @summary(of: "Line", via: "invoice", sum: ["price * quantity"])
  extras: Decimal! @summary(of: "Extra", via: "invoice", sum: ["amount"])
}
type Line @entity(table: "Invoices", partitionKey: "{customerId}", rowKey: "line_{invoiceId}_{n}") {
  customerId: ID!
  invoiceId: ID!
  n: ID!
  price: Decimal!
  quantity: Int!
  invoice: Invoice! @point(partitionKey: "{customerId}", rowKey: "invoice_{invoiceId}")
}
type Extra @entity(table: "Extras", partitionKey: "{customerId}_{invoiceId}", rowKey: "{n}") {
  customerId: ID!
  invoiceId: ID!
  n: ID!
  amount: Decimal!
  invoice: Invoice! @point(partitionKey: "{customerId}", rowKey: "invoice_{invoiceId}")
}
type Query {
  region(id: ID!): Region @point(partitionKey: "regions")
  customer(id: ID!): Customer @point(partitionKey: "customers")
  invoice(customerId: ID!, id: ID!): Invoice @point
}
type Mutation {
  createRegion(input: CreateRegionInput!): RegionPayload! @write(entity: "Region", action: CREATE)
  createCustomer(input: CreateCustomerInput!): CustomerPayload! @write(entity: "Customer", action: CREATE)
  updateCustomer(input: UpdateCustomerInput!): CustomerPayload! @write(entity: "Customer", action: UPDATE)
  createInvoice(input: CreateInvoiceInput!): InvoicePayload! @write(entity: "Invoice", action: CREATE)
  updateInvoice(input: UpdateInvoiceInput!): InvoicePayload! @write(entity: "Invoice", action: UPDATE)
  createLine(input: CreateLineInput!): LinePayload! @write(entity: "Line", action: CREATE)
  updateLine(input: UpdateLineInput!): LinePayload! @write(entity: "Line", action: UPDATE)
  deleteLine(input: DeleteLineInput!): LinePayload! @write(entity: "Line", action: DELETE)
  createExtra(input: CreateExtraInput!): ExtraPayload! @write(entity: "Extra", action: CREATE)
  updateExtra(input: UpdateExtraInput!): ExtraPayload! @write(entity: "Extra", action: UPDATE)
}
`;

const chains = useSdlWorld(CHAINS);

/** Every region's revenue, customer's total and invoice's total and extras, as the API answers them. */
async function totals(customers: string[], invoices: Array<[string, string]>): Promise<Record<string, string | number>> {
  const fields = [
    ...['north', 'south'].map((r) => `r_${r}: region(id: "${r}") { revenue }`),
    ...customers.map((c) => `c_${c}: customer(id: "${c}") { totalSpent invoiceCount }`),
    ...invoices.map(([c, i]) => `i_${c}_${i}: invoice(customerId: "${c}", id: "${i}") { total extras }`),
  ];
  const r = await chains.server.query(`{ ${fields.join(' ')} }`);
  expect(r.errors).toBeUndefined();
  const out: Record<string, string | number> = {};
  for (const [k, v] of Object.entries(r.data as Record<string, Record<string, string | number>>)) for (const [f, x] of Object.entries(v)) out[`${k}.${f}`] = x;
  return out;
}

test('a summary of a summary — and of that — is kept by the worker, exact after the drain, under concurrent writers', async () => {
  const rng = seededRng(testSeed());
  const random = () => rng.int(0x7fffffff) / 0x7fffffff;
  for (const id of ['north', 'south']) await chains.ok('createRegion', 'CreateRegionInput', { id });
  const customers = ['c1', 'c2', 'c3'];
  for (const [i, id] of customers.entries()) await chains.ok('createCustomer', 'CreateCustomerInput', { id, regionId: i === 2 ? 'south' : 'north' });
  const invoices: Array<[string, string]> = customers.flatMap((c) => ['1', '2'].map((i): [string, string] => [c, i]));
  await Promise.all(invoices.map(([customerId, id], k) => chains.ok('createInvoice', 'CreateInvoiceInput', { customerId, id, fee: k % 2 ? '0.5' : null })));
  // Lines (in the invoice's EGT) and extras (by the worker), many at once.
  const lines = new Map<string, { price: number; quantity: number }>();
  const extras = new Map<string, number>();
  await Promise.all(
    invoices.flatMap(([customerId, invoiceId], k) =>
      [1, 2, 3].map(async (n) => {
        const line = { price: k + n + 0.25, quantity: n };
        lines.set(`${customerId}/${invoiceId}/${n}`, line);
        await chains.ok('createLine', 'CreateLineInput', { customerId, invoiceId, n: String(n), price: String(line.price), quantity: line.quantity });
        extras.set(`${customerId}/${invoiceId}/${n}`, n * 1.5);
        await chains.ok('createExtra', 'CreateExtraInput', { customerId, invoiceId, n: String(n), amount: String(n * 1.5) });
      }),
    ),
  );
  const first = await chains.drain(random);
  // Concurrently: lines changed and deleted, extras changed, a customer moved to the other region, fees changed —
  // while a worker drains.
  const draining = chains.drain(random);
  await Promise.all([
    ...invoices.map(async ([customerId, invoiceId]) => {
      for (let round = 0; round < 3; round++) {
        const n = String(1 + rng.int(3));
        const key = `${customerId}/${invoiceId}/${n}`;
        if (!lines.has(key)) continue;
        if (rng.chance(0.2)) {
          await chains.ok('deleteLine', 'DeleteLineInput', { customerId, invoiceId, n });
          lines.delete(key);
        } else {
          const quantity = 1 + rng.int(5);
          await chains.ok('updateLine', 'UpdateLineInput', { customerId, invoiceId, n, quantity });
          lines.set(key, { ...lines.get(key)!, quantity });
        }
        const amount = rng.int(100) / 4;
        await chains.ok('updateExtra', 'UpdateExtraInput', { customerId, invoiceId, n, amount: String(amount) });
        extras.set(key, amount);
      }
    }),
    chains.ok('updateCustomer', 'UpdateCustomerInput', { id: 'c1', regionId: 'south' }),
    chains.ok('updateInvoice', 'UpdateInvoiceInput', { customerId: 'c2', id: '1', fee: '7.25' }),
  ]);
  await draining;
  const last = await chains.drain(random);

  // The expected values, computed from what was written.
  const fees: Record<string, number> = { 'c1/1': 0, 'c1/2': 0.5, 'c2/1': 7.25, 'c2/2': 0.5, 'c3/1': 0, 'c3/2': 0.5 };
  const region: Record<string, string> = { c1: 'south', c2: 'north', c3: 'south' };
  const want: Record<string, number> = { 'r_north.revenue': 0, 'r_south.revenue': 0 };
  for (const [c, i] of invoices) {
    let total = 0;
    let extra = 0;
    for (const [key, l] of lines) if (key.startsWith(`${c}/${i}/`)) total += l.price * l.quantity;
    for (const [key, a] of extras) if (key.startsWith(`${c}/${i}/`)) extra += a;
    want[`i_${c}_${i}.total`] = total;
    want[`i_${c}_${i}.extras`] = extra;
    want[`c_${c}.totalSpent`] = (want[`c_${c}.totalSpent`] ?? 0) + total + extra + fees[`${c}/${i}`];
    want[`c_${c}.invoiceCount`] = 2;
  }
  for (const c of customers) want[`r_${region[c]}.revenue`] += want[`c_${c}.totalSpent`];
  const got = await totals(customers, invoices);
  expect(Object.fromEntries(Object.entries(got).map(([k, v]) => [k, Number(v)]))).toEqual(
    Object.fromEntries(Object.entries(want).map(([k, v]) => [k, Math.round(v * 100) / 100])),
  );
  const report = await verifyDerived({ store: chains.server.store, model: chains.model });
  if (!report.ok) console.log(formatVerifyReport(report));
  expect(report.problems).toBe(0);
  console.log(
    `summary chains: ${first.messages + last.messages} messages delivered twice and late, ${first.killed + last.killed} deliveries killed; revenue north ${got['r_north.revenue']}, south ${got['r_south.revenue']}`,
  );

  // Damage at every level — an invoice's total, a customer's total, a region's revenue — then repair-summaries: the
  // lower values first, the sums over them from the repaired ones.
  const store = chains.server.store;
  const prefix = chains.server.config.tablePrefix;
  const damage = (table: string, partitionKey: string, rowKey: string, field: string) =>
    store.updateEntity(`${prefix}${table}`, { partitionKey, rowKey, properties: { [field]: { type: 'String', value: '999.5' } } }, 'merge');
  await damage('Invoices', 'c2', 'invoice_1', 'total');
  await damage('Customers', 'customers', 'c3', 'totalSpent');
  await damage('Regions', 'regions', 'north', 'revenue');
  const damaged = await verifyDerived({ store, model: chains.model });
  expect(
    damaged.summaries
      .filter((d) => d.different.length > 0)
      .map((d) => d.summary)
      .sort(),
  ).toEqual(['Customer.totalSpent', 'Invoice.total', 'Region.revenue']);
  const repaired = await repairSummaries({ store, model: chains.model });
  expect(repaired.busy).toEqual([]);
  const after = await verifyDerived({ store, model: chains.model });
  if (!after.ok) console.log(formatVerifyReport(after));
  expect(after.problems).toBe(0);
  expect(await totals(customers, invoices)).toEqual(got);
}, 180_000);

test('npm run load keeps a summary of a summary: the invoices first, then their lines and extras; a second load writes nothing', async () => {
  const rows = (values: Array<Record<string, unknown>>) =>
    (async function* () {
      for (const [i, v] of values.entries()) yield { line: i + 2, values: v };
    })();
  const steps = () => [
    { type: 'Region', rows: rows([{ id: 'west' }]) },
    {
      type: 'Customer',
      rows: rows([
        { id: 'l1', regionId: 'west' },
        { id: 'l2', regionId: 'west' },
      ]),
    },
    {
      type: 'Invoice',
      rows: rows([
        { customerId: 'l1', id: '1', fee: '1.5' },
        { customerId: 'l2', id: '1', fee: null },
      ]),
    },
    {
      type: 'Line',
      rows: rows([
        { customerId: 'l1', invoiceId: '1', n: '1', price: '2.5', quantity: 2 },
        { customerId: 'l1', invoiceId: '1', n: '2', price: '10', quantity: 1 },
        { customerId: 'l2', invoiceId: '1', n: '1', price: '4', quantity: 3 },
      ]),
    },
    { type: 'Extra', rows: rows([{ customerId: 'l2', invoiceId: '1', n: '1', amount: '0.75' }]) },
  ];
  const first = await loadEntities({ store: chains.server.store, model: chains.model, steps: steps() });
  expect(first.failed).toEqual([]);
  const r = await chains.server.query('{ region(id: "west") { revenue } l1: customer(id: "l1") { totalSpent } l2: customer(id: "l2") { totalSpent } }');
  expect(r.errors).toBeUndefined();
  // l1: 2.5 × 2 + 10 + 1.5 fee = 16.5; l2: 4 × 3 + 0.75 = 12.75.
  expect([r.data.l1.totalSpent, r.data.l2.totalSpent, r.data.region.revenue].map(Number)).toEqual([16.5, 12.75, 29.25]);
  const again = await loadEntities({ store: chains.server.store, model: chains.model, steps: steps() });
  expect(again.steps.map((s) => s.holders)).toEqual([0, 0, 0, 0, 0]);
  const report = await verifyDerived({ store: chains.server.store, model: chains.model });
  if (!report.ok) console.log(formatVerifyReport(report));
  expect(report.problems).toBe(0);
});
