/**
 * `@transaction` mutations (docs/reads-and-writes.md, "Transactions") against the test Azurite, on a schema written for
 * the test: an order and its lines in one partition, the order holding a count and a sum of its lines. A transaction's
 * writes land in one EGT, all or nothing: a failed item names itself (`extensions.itemIndex`) and nothing is written.
 * Then 200 concurrent transactions through the storage fault proxy (503, 429, writes applied and their answer lost,
 * from a printed seed), with conflicting `ifMatch` values: each all or nothing, acknowledged if and only if stored,
 * the summaries equal to a recount, `verify` clean.
 */
import { formatVerifyReport, verifyDerived } from '../src/maintenance/verify-derived';
import { testStore, uniquePrefix } from './support/harness';
import { limited } from './support/limited';
import { lastCapturedChanges } from './support/captured-changes';
import { replayKey } from '../src/backup/change-format';
import { testSeed, seededRandom } from './support/seed';
import type { StorageProxy } from './support/storage-proxy';
import { startProxiedServer, type ProxiedServer } from './support/proxied-server';

const ORDERS = `
type Order @entity(table: "Shop", partitionKey: "order_{orderId}", rowKey: "order") {
  orderId: ID! @constraint(maxLength: 40)
  etag: String!
  customer: String! @constraint(maxLength: 100)
  status: String! @constraint(maxLength: 20)
  lineCount: Int! @summary(of: "OrderLine", via: "order", count: true)
  total: Decimal! @summary(of: "OrderLine", via: "order", sum: ["quantity * price"])
  lines(first: Int, after: String): OrderLineConnection! @range(partitionKey: "order_{orderId}", rowKeyPrefix: "line_")
}
type OrderLine @entity(table: "Shop", partitionKey: "order_{orderId}", rowKey: "line_{lineNo:03}") {
  orderId: ID! @constraint(maxLength: 40)
  lineNo: Int!
  etag: String!
  sku: String! @constraint(maxLength: 40)
  quantity: Int!
  price: Decimal!
  order: Order! @point(partitionKey: "order_{orderId}", rowKey: "order")
}
type Query {
  order(orderId: ID!): Order @point
}
type Mutation {
  createOrder(input: CreateOrderInput!): OrderPayload! @write(entity: "Order", action: CREATE)
  updateOrder(input: UpdateOrderInput!): OrderPayload! @write(entity: "Order", action: UPDATE)
  createOrderLine(input: CreateOrderLineInput!): OrderLinePayload! @write(entity: "OrderLine", action: CREATE)
  updateOrderLine(input: UpdateOrderLineInput!): OrderLinePayload! @write(entity: "OrderLine", action: UPDATE)
  deleteOrderLine(input: DeleteOrderLineInput!): OrderLinePayload! @write(entity: "OrderLine", action: DELETE)
  placeOrder(orderId: ID!, writes: [OrderWrite!]!): [OrderWritten]! @transaction(maxItems: 21)
}
input OrderWrite {
  createOrder: CreateOrderInput
  updateOrder: UpdateOrderInput
  createOrderLine: CreateOrderLineInput
  updateOrderLine: UpdateOrderLineInput
  deleteOrderLine: DeleteOrderLineInput
}
union OrderWritten = Order | OrderLine
`;

const PLACE = `mutation ($orderId: ID!, $writes: [OrderWrite!]!) {
  placeOrder(orderId: $orderId, writes: $writes) { __typename ... on Order { orderId etag lineCount total status } ... on OrderLine { lineNo etag } }
}`;
const ORDER =
  'query ($orderId: ID!) { order(orderId: $orderId) { etag status lineCount total lines(first: 100) { edges { node { lineNo sku quantity price } } } } }';

const seed = testSeed();
const prefix = uniquePrefix();
let proxy: StorageProxy;
let ctx: ProxiedServer['ctx'];
let server: ProxiedServer | undefined;

beforeAll(async () => {
  server = await startProxiedServer(ORDERS, { seed, prefix });
  ({ proxy, ctx } = server);
}, 60_000);
afterAll(() => server?.close());

const line = (lineNo: number, quantity = 1, price = '2.5') => ({ createOrderLine: { lineNo, sku: `sku-${lineNo}`, quantity, price } });
/** `placeOrder`, each item's input given the order's id (the generated inputs require their key fields) unless it has one. */
const place = (orderId: string, writes: unknown[]) =>
  ctx.server.query(PLACE, {
    orderId,
    writes: (writes as Array<Record<string, Record<string, unknown>>>).map((w) =>
      Object.fromEntries(Object.entries(w).map(([k, input]) => [k, { orderId, ...input }])),
    ),
  });
const order = async (orderId: string) => (await ctx.server.query(ORDER, { orderId })).data?.order;

describe('one EGT, all or nothing', () => {
  test('an order and its lines in one call: each item as written, with its ETag; the summaries counted in the same EGT', async () => {
    const r = await place('o-1', [{ createOrder: { customer: 'ann', status: 'NEW' } }, line(1, 2, '3.5'), line(2, 1, '10')]);
    expect(r.errors).toBeUndefined();
    const [o, l1, l2] = r.data.placeOrder;
    expect(o).toMatchObject({ __typename: 'Order', orderId: 'o-1', lineCount: 2, total: '17', status: 'NEW' });
    expect([l1.lineNo, l2.lineNo]).toEqual([1, 2]);
    for (const item of r.data.placeOrder) expect(item.etag).toMatch(/^W\//);
    const stored = await order('o-1');
    expect(stored).toMatchObject({ etag: o.etag, lineCount: 2, total: '17' });
    expect(stored.lines.edges).toHaveLength(2);
    // One EGT: one storage call writes them all. The estimate counted, per item of 21 at most, its entity, its two
    // summaries' holder and its reference read, and a read back; and the journal's mark and the EGT: 21 × 5 + 2.
    expect(r.extensions.cost.writes).toBe(1);
    expect(r.extensions.cost.captureMarks).toBeLessThanOrEqual(1);
    expect(r.extensions.cost.estimate.storageCalls).toBe(107);
  });

  test('a stale ifMatch fails the whole call, naming its item; nothing of it is written', async () => {
    await place('o-2', [{ createOrder: { customer: 'bo', status: 'NEW' } }, line(1)]);
    const before = await order('o-2');
    const r = await place('o-2', [line(2), { updateOrder: { status: 'PAID', ifMatch: 'W/"datetime\'2020-01-01T00%3A00%3A00.000Z\'"' } }, line(3)]);
    expect(r.data).toBeNull();
    expect(r.errors![0].extensions).toMatchObject({ code: 'CONFLICT', reason: 'ETagMismatch', itemIndex: 1 });
    expect(await order('o-2')).toEqual(before);
  });

  test('a line that exists fails the call with its itemIndex; with the right ETag the same call lands', async () => {
    const created = await place('o-3', [{ createOrder: { customer: 'cy', status: 'NEW' } }, line(1)]);
    const etag = created.data.placeOrder[0].etag;
    const dup = await place('o-3', [{ updateOrder: { status: 'PAID', ifMatch: etag } }, line(2), line(1)]);
    expect(dup.errors![0].extensions).toMatchObject({ code: 'CONFLICT', reason: 'EntityAlreadyExists', itemIndex: 2 });
    expect(await order('o-3')).toMatchObject({ etag, status: 'NEW', lineCount: 1 });
    const ok = await place('o-3', [{ updateOrder: { status: 'PAID', ifMatch: etag } }, line(2), { deleteOrderLine: { lineNo: 1 } }]);
    expect(ok.errors).toBeUndefined();
    expect(ok.data.placeOrder[2]).toBeNull(); // a delete
    expect(await order('o-3')).toMatchObject({ status: 'PAID', lineCount: 1, total: '2.5', etag: ok.data.placeOrder[0].etag });
  });

  test('bad calls are refused before anything is read or sent, each naming its item', async () => {
    const cases: Array<[unknown[], Record<string, unknown>]> = [
      [
        [line(1), { createOrderLine: { lineNo: 2, sku: 'x', quantity: 1, price: '1' }, deleteOrderLine: { lineNo: 3 } }],
        { code: 'BAD_USER_INPUT', itemIndex: 1 },
      ],
      [[line(1), { createOrderLine: { orderId: 'elsewhere', lineNo: 2, sku: 'x', quantity: 1, price: '1' } }], { code: 'BAD_USER_INPUT', itemIndex: 1 }],
      [[line(1), line(1)], { code: 'BAD_USER_INPUT', itemIndex: 1 }],
      [Array.from({ length: 22 }, (_, i) => line(i + 1)), { code: 'LIMIT_EXCEEDED', reason: 'TooManyItems' }],
      [[{ createOrder: { customer: 'x'.repeat(101), status: 'NEW' } }], { code: 'BAD_USER_INPUT', itemIndex: 0 }],
    ];
    for (const [writes, expected] of cases) {
      const r = await place('o-4', writes);
      expect(r.errors![0].extensions).toMatchObject(expected);
      expect(r.extensions.cost.writes).toBe(0);
    }
    expect(await order('o-4')).toBeNull();
  });
});

test('200 concurrent transactions under storage faults: each all or nothing, acknowledged iff stored, summaries exact, verify clean', async () => {
  const random = seededRandom(seed);
  const ORDERS_N = 40;
  // Before the faults: 40 orders, each with one line, to update with the ETag read — and with stale ones.
  const etags = new Map<string, string>();
  for (let o = 0; o < ORDERS_N; o++) {
    const r = await place(`f-${o}`, [{ createOrder: { customer: `c${o}`, status: 'NEW' } }, line(0, 1, '1')]);
    expect(r.errors).toBeUndefined();
    etags.set(`f-${o}`, r.data.placeOrder[0].etag);
  }
  proxy.setFaults({ busy: 0.05, throttled: 0.08, timedOutAfterApply: 0.04, resetAfterApply: 0.03 });
  type Batch = { orderId: string; lines: number[]; status: string; stale: boolean; unconditional: boolean };
  const batches: Batch[] = Array.from({ length: 200 }, (_, i) => {
    const orderId = `f-${i % ORDERS_N}`;
    const slot = Math.floor(i / ORDERS_N); // five batches per order, each with lines of its own
    const n = 1 + Math.floor(random() * (slot === 4 ? 19 : 20)); // within maxItems: 21 with the order (and a delete)
    const lines = Array.from({ length: n }, (_, k) => 1 + slot * 20 + k);
    // Two in five give an ETag already stale; two the same current one (one of them at most lands); the fifth none — it
    // lands whatever the others did (read again when they changed the order), and deletes the order's first line.
    return { orderId, lines, status: `S${i}`, stale: slot < 2, unconditional: slot === 4 };
  });
  // Beside them, one plain @write per order (group commit, the same summaries): a writer of another kind in each partition.
  const SINGLE = 'mutation ($input: CreateOrderLineInput!) { createOrderLine(input: $input) { orderLine { lineNo } } }';
  const singles = Array.from({ length: ORDERS_N }, (_, o) => async () => {
    const r = await ctx.server.query(SINGLE, { input: { orderId: `f-${o}`, lineNo: 150, sku: 'single', quantity: 1, price: '7' } });
    return { orderId: `f-${o}`, acknowledged: !r.errors, code: r.errors?.[0]?.extensions?.code as string | undefined };
  });
  const singleOutcomes = limited(4, singles);
  const outcomes = await limited(
    16,
    batches.map((b) => async () => {
      const ifMatch = b.unconditional ? undefined : b.stale ? 'W/"datetime\'2020-01-01T00%3A00%3A00.000Z\'"' : etags.get(b.orderId)!;
      const extra = b.unconditional ? [{ deleteOrderLine: { lineNo: 0 } }] : [];
      const r = await place(b.orderId, [{ updateOrder: { status: b.status, ifMatch } }, ...extra, ...b.lines.map((n) => line(n, 1 + (n % 3), '0.5'))]);
      return { b, acknowledged: !r.errors, code: r.errors?.[0]?.extensions?.code as string | undefined };
    }),
  );
  const plain = await singleOutcomes;
  proxy.setFaults({});
  const codes: Record<string, number> = {};
  for (const o of outcomes) codes[o.code ?? 'OK'] = (codes[o.code ?? 'OK'] ?? 0) + 1;
  const plainCodes = plain.map((x) => x.code ?? 'OK').join(',');
  console.log(`transactions under faults (seed ${seed}): ${JSON.stringify(codes)}; plain writes ${plainCodes}; injected ${JSON.stringify(proxy.injected())}`);
  // Around the proxy: what is stored.
  for (let o = 0; o < ORDERS_N; o++) {
    const orderId = `f-${o}`;
    const stored = await order(orderId);
    const lineNos = new Set<number>(stored.lines.edges.map((e: any) => e.node.lineNo));
    const single = plain.find((x) => x.orderId === orderId)!;
    if (single.acknowledged) expect([orderId, lineNos.has(150)]).toEqual([orderId, true]);
    if (single.code === 'CONFLICT' || single.code === 'BAD_USER_INPUT') expect([orderId, lineNos.has(150)]).toEqual([orderId, false]);
    for (const { b, acknowledged, code } of outcomes.filter((x) => x.b.orderId === orderId)) {
      const landed = b.lines.map((n) => lineNos.has(n));
      // All or nothing, whatever the answer.
      expect([b.status, new Set(landed).size]).toEqual([b.status, 1]);
      if (acknowledged) expect([b.status, landed[0]]).toEqual([b.status, true]);
      // Refused for the client's own reason (a stale ETag, a conflict): nothing of it stored.
      if (code === 'CONFLICT' || code === 'BAD_USER_INPUT') expect([b.status, landed[0]]).toEqual([b.status, false]);
      if (b.stale) expect([b.status, acknowledged]).toEqual([b.status, false]);
      // The unconditional one lands unless storage gave up (never for a conflict of its own), its delete with it.
      if (b.unconditional) expect([b.status, code === undefined || code.startsWith('STORAGE_')]).toEqual([b.status, true]);
      if (b.unconditional && acknowledged) expect([b.status, lineNos.has(0)]).toEqual([b.status, false]);
    }
    // The summaries equal a recount of the lines stored.
    const lines = stored.lines.edges.map((e: any) => e.node);
    expect(stored.lineCount).toBe(lines.length);
    expect(Number(stored.total)).toBeCloseTo(
      lines.reduce((n: number, l: any) => n + l.quantity * Number(l.price), 0),
      6,
    );
  }
  expect(codes.OK).toBeGreaterThan(0);
  // Of the two batches per order with the ETag read before, one at most lands: the other meets the ETag it changed.
  for (let o = 0; o < ORDERS_N; o++) {
    expect(outcomes.filter((x) => x.b.orderId === `f-${o}` && !x.b.unconditional && x.acknowledged).length).toBeLessThanOrEqual(1);
  }
  const report = await verifyDerived({ store: testStore(), model: ctx.model });
  if (!report.ok) console.log(formatVerifyReport(report));
  expect(report.ok).toBe(true);
  await expectCapturedAsStored(Array.from({ length: ORDERS_N }, (_, o) => `order_f-${o}`));
}, 300_000);

/**
 * Continuous backup (on by default) captured what is stored: of each entity stored, the last change captured holds
 * its state (its WriteId); of each captured and not stored, the last change is a delete. A transaction's change
 * entities are in its EGT: all of them or none.
 */
async function expectCapturedAsStored(partitions: string[]): Promise<void> {
  const captured = await lastCapturedChanges(ctx.model, prefix, `${prefix}-tx`.toLowerCase());
  const wrong: string[] = [];
  const stored = new Set<string>();
  for (const partitionKey of partitions) {
    const { entities } = await testStore().queryRange({ table: `${prefix}Shop`, partitionKey, rowKeyFrom: '', limit: 10_000 });
    for (const e of entities) {
      if (!/^(order|line_)/.test(e.rowKey)) continue; // change entities
      const key = replayKey('Shop', partitionKey, e.rowKey);
      stored.add(key);
      const image = captured.get(key)?.image?.[0]?.entity.properties.WriteId?.value;
      if (image !== e.properties.WriteId) wrong.push(`${partitionKey}/${e.rowKey}: stored by ${String(e.properties.WriteId)}, captured ${String(image)}`);
    }
  }
  for (const [key, c] of captured)
    if (partitions.includes(c.partitionKey) && !stored.has(key) && c.kind !== 'DELETED') wrong.push(`${key}: not stored, captured ${c.kind}`);
  expect(stored.size).toBeGreaterThan(partitions.length);
  expect(wrong).toEqual([]);
}
