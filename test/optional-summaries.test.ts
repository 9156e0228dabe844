/**
 * Summaries over an optional reference (`@summary(via:)` naming a nullable `@point`), on a schema written for the
 * test: a shop's products may have a category (held in the shop's partition: kept in the write's EGT) and a brand
 * (held in a table of its own: kept eventually by the worker). A product whose reference is null counts towards
 * no holder; one whose reference changes from null to a value, or back, or to another holder, moves its
 * contribution — exactly, under concurrent writers, redelivered and reordered messages, two workers and workers
 * killed mid-message; `verify` recounts the same, and `npm run load` of the same rows writes no holder again.
 */
import { verifyDerived, formatVerifyReport } from '../src/maintenance/verify-derived';
import { loadEntities } from '../src/load/load-entities';
import type { Model } from '../src/model/types';
import { startSdlServer, testQueues, type TestServer } from './support/harness';
import { deliverTwiceByTwoWorkers, seededRng } from './support/fanout-fixtures';
import { receiveFanout } from './support/write-fixtures';
import { testSeed } from './support/seed';

const SDL = `
type Category @entity(table: "Shop", partitionKey: "{shop}", rowKey: "cat_{id}") {
  shop: ID! id: ID! name: String
  productCount: Int! @summary(of: "Product", via: "category", count: true)
  stock: Int! @summary(of: "Product", via: "category", sum: ["units"])
}
type Brand @entity(table: "Brands", partitionKey: "brands", rowKey: "{id}") {
  id: ID! name: String
  productCount: Int! @summary(of: "Product", via: "brand", count: true)
}
type Product @entity(table: "Shop", partitionKey: "{shop}", rowKey: "prod_{id}") {
  shop: ID! id: ID! units: Int categoryId: ID brandId: ID
  category: Category @point(partitionKey: "{shop}", rowKey: "cat_{categoryId}")
  brand: Brand @point(partitionKey: "brands", rowKey: "{brandId}")
}
type Query {
  category(shop: ID!, id: ID!): Category @point
  brand(id: ID!): Brand @point(partitionKey: "brands")
  product(shop: ID!, id: ID!): Product @point
}
type Mutation {
  createCategory(input: CreateCategoryInput!): CategoryPayload! @write(entity: "Category", action: CREATE)
  createBrand(input: CreateBrandInput!): BrandPayload! @write(entity: "Brand", action: CREATE)
  createProduct(input: CreateProductInput!): ProductPayload! @write(entity: "Product", action: CREATE)
  updateProduct(input: UpdateProductInput!): ProductPayload! @write(entity: "Product", action: UPDATE)
  deleteProduct(input: DeleteProductInput!): ProductPayload! @write(entity: "Product", action: DELETE)
}`;

let server: TestServer;
let model: Model;
let close: () => Promise<void>;

beforeAll(async () => {
  ({ server, model, close } = await startSdlServer(SDL, { TABLEGRAPH_WORKER: 'off' }));
}, 60_000);
afterAll(() => close?.());

async function ok(mutation: string, input: Record<string, unknown>): Promise<void> {
  const r = await server.query(`mutation($input: ${mutation[0].toUpperCase()}${mutation.slice(1)}Input!) { ${mutation}(input: $input) { __typename } }`, {
    input,
  });
  expect([mutation, input, r.errors]).toEqual([mutation, input, undefined]);
}
/** The worker by hand: every message, twice, reordered, by two workers that die one time in five, until none is left. */
async function drain(random: () => number): Promise<number> {
  let messages = 0;
  for (let round = 0; round < 10; round++) {
    const batch = (await receiveFanout(testQueues(), server.config.tablePrefix)).map((r) => r.message);
    if (batch.length === 0) break;
    messages += batch.length;
    await deliverTwiceByTwoWorkers(batch, { model, store: server.store, settleMs: 0, holdMs: 0 }, random);
  }
  return messages;
}
async function counts(): Promise<Record<string, number>> {
  const r = await server.query(
    '{ c1: category(shop: "S", id: "c1") { productCount stock } c2: category(shop: "S", id: "c2") { productCount stock } b1: brand(id: "b1") { productCount } }',
  );
  expect(r.errors).toBeUndefined();
  return { c1: r.data.c1.productCount, c1Stock: r.data.c1.stock, c2: r.data.c2.productCount, c2Stock: r.data.c2.stock, b1: r.data.b1.productCount };
}

test('a null reference counts towards no holder; null to a value, back, and to another holder move the contribution', async () => {
  const rng = seededRng(testSeed());
  const random = () => rng.int(0x7fffffff) / 0x7fffffff;
  for (const id of ['c1', 'c2']) await ok('createCategory', { shop: 'S', id });
  await ok('createBrand', { id: 'b1' });
  await ok('createProduct', { shop: 'S', id: 'p1', units: 5, categoryId: 'c1', brandId: 'b1' });
  await ok('createProduct', { shop: 'S', id: 'p2', units: 7 }); // no category, no brand
  await ok('createProduct', { shop: 'S', id: 'p3', units: 11, categoryId: 'c1' });
  await drain(random);
  expect(await counts()).toEqual({ c1: 2, c1Stock: 16, c2: 0, c2Stock: 0, b1: 1 });

  await ok('updateProduct', { shop: 'S', id: 'p2', categoryId: 'c2', brandId: 'b1' }); // null → a value
  await ok('updateProduct', { shop: 'S', id: 'p1', categoryId: null, brandId: null }); // a value → null
  await ok('updateProduct', { shop: 'S', id: 'p3', categoryId: 'c2' }); // one holder → another
  await drain(random);
  expect(await counts()).toEqual({ c1: 0, c1Stock: 0, c2: 2, c2Stock: 18, b1: 1 });
  await ok('deleteProduct', { shop: 'S', id: 'p2' });
  await ok('deleteProduct', { shop: 'S', id: 'p1' }); // counted nowhere: nothing to take back
  await drain(random);
  expect(await counts()).toEqual({ c1: 0, c1Stock: 0, c2: 1, c2Stock: 11, b1: 0 });

  // Concurrent writers flip 12 products between no category and c1, and no brand and b1.
  const ids = Array.from({ length: 12 }, (_, i) => `q${i}`);
  await Promise.all(ids.map((id, i) => ok('createProduct', { shop: 'S', id, units: i, ...(i % 2 ? { categoryId: 'c1', brandId: 'b1' } : {}) })));
  const finals = new Map<string, boolean>();
  await Promise.all(
    ids.map(async (id) => {
      for (let round = 0; round < 3; round++) {
        const on = rng.chance(0.5);
        await ok('updateProduct', { shop: 'S', id, categoryId: on ? 'c1' : null, brandId: on ? 'b1' : null });
        finals.set(id, on);
      }
    }),
  );
  const messages = await drain(random);
  const on = ids.filter((id) => finals.get(id));
  expect(await counts()).toEqual({ c1: on.length, c1Stock: on.reduce((n, id) => n + Number(id.slice(1)), 0), c2: 1, c2Stock: 11, b1: on.length });
  const report = await verifyDerived({ store: server.store, model });
  if (!report.ok) console.log(formatVerifyReport(report));
  expect(report.problems).toBe(0);
  console.log(`optional summaries: ${on.length} of 12 products with a category and a brand after 36 concurrent flips, ${messages} messages delivered twice`);
}, 60_000);

test('load counts rows with a null reference towards no holder, and a second load writes no holder', async () => {
  const rows = [
    { shop: 'L', id: 'a', units: 1, categoryId: 'k1', brandId: 'lb' },
    { shop: 'L', id: 'b', units: 2 },
    { shop: 'L', id: 'c', units: 4, categoryId: 'k1' },
  ];
  const steps = () => [
    {
      type: 'Category',
      rows: (async function* () {
        yield { line: 2, values: { shop: 'L', id: 'k1' } };
      })(),
    },
    {
      type: 'Brand',
      rows: (async function* () {
        yield { line: 2, values: { id: 'lb' } };
      })(),
    },
    {
      type: 'Product',
      rows: (async function* () {
        for (const [i, values] of rows.entries()) yield { line: i + 2, values };
      })(),
    },
  ];
  const first = await loadEntities({ store: server.store, model, steps: steps() });
  expect(first.steps.map((s) => [s.type, s.loaded, s.skipped.length])).toEqual([
    ['Category', 1, 0],
    ['Brand', 1, 0],
    ['Product', 3, 0],
  ]);
  const r = await server.query('{ category(shop: "L", id: "k1") { productCount stock } brand(id: "lb") { productCount } }');
  expect(r.data).toEqual({ category: { productCount: 2, stock: 5 }, brand: { productCount: 1 } });
  const again = await loadEntities({ store: server.store, model, steps: steps() });
  expect(again.steps.map((s) => [s.type, s.unchanged, s.holders])).toEqual([
    ['Category', 1, 0],
    ['Brand', 1, 0],
    ['Product', 3, 0],
  ]);
  expect((await verifyDerived({ store: server.store, model })).problems).toBe(0);
});

test('a load over more partitions than it reads one by one: the rest of the table read in one scan, a reload writing nothing, a drifted holder summed again', async () => {
  const brands = Array.from({ length: 40 }, (_, i) => ({ id: `many${i}` }));
  // 40 shops: the products fill 40 partitions of the Shop table.
  const products = brands.flatMap((b, i) => [
    { shop: `M${i}`, id: 'a', units: 1, brandId: b.id },
    { shop: `M${i}`, id: 'b', units: 2, brandId: i % 2 ? b.id : null },
  ]);
  const steps = () => [
    {
      type: 'Brand',
      rows: (async function* () {
        for (const [i, values] of brands.entries()) yield { line: i + 2, values };
      })(),
    },
    {
      type: 'Product',
      rows: (async function* () {
        for (const [i, values] of products.entries()) yield { line: i + 2, values };
      })(),
    },
  ];
  let scans = 0;
  const observer = { onCall: (r: { kind: string }) => void (r.kind === 'tableScan' && scans++) };
  const first = await loadEntities({ store: server.store, model, steps: steps(), observer });
  expect(first.steps.map((s) => [s.type, s.loaded, s.skipped.length])).toEqual([
    ['Brand', 40, 0],
    ['Product', 80, 0],
  ]);
  expect(scans).toBeGreaterThan(0); // 40 shop partitions: past the first ones, the Shop table was scanned
  const count = async (id: string) => (await server.query('query($id: ID!) { brand(id: $id) { productCount } }', { id })).data.brand.productCount;
  expect([await count('many0'), await count('many1')]).toEqual([1, 2]);
  const again = await loadEntities({ store: server.store, model, steps: steps() });
  expect(again.steps.map((s) => [s.type, s.unchanged, s.holders])).toEqual([
    ['Brand', 40, 0],
    ['Product', 80, 0],
  ]);
  expect(again.entities).toBe(0);
  // A holder left wrong (a load that failed midway, a hand edit): the next load sums it again.
  await server.store.updateEntity(
    `${server.config.tablePrefix}Brands`,
    { partitionKey: 'brands', rowKey: 'many3', properties: { productCount: { type: 'Int32', value: 99 } } },
    'merge',
  );
  const repaired = await loadEntities({ store: server.store, model, steps: steps() });
  expect(repaired.steps.map((s) => [s.type, s.holders])).toEqual([
    ['Brand', 0],
    ['Product', 1],
  ]);
  expect(await count('many3')).toBe(2);
  expect((await verifyDerived({ store: server.store, model })).problems).toBe(0);
});

test('a step reads what the steps before it wrote: two types in one table over many partitions, holders written whole', async () => {
  const steps = (name: string, extra: number) => {
    const categories = Array.from({ length: 30 }, (_, i) => ({ shop: `N${i}`, id: 'k', name }));
    const products = categories.flatMap((c, i) => [
      { shop: c.shop, id: 'x', units: i + extra, categoryId: 'k' },
      { shop: c.shop, id: 'y', units: 1, categoryId: i % 3 ? 'k' : null },
    ]);
    return [
      {
        type: 'Category',
        rows: (async function* () {
          for (const [i, values] of categories.entries()) yield { line: i + 2, values };
        })(),
      },
      {
        type: 'Product',
        rows: (async function* () {
          for (const [i, values] of products.entries()) yield { line: i + 2, values };
        })(),
      },
    ];
  };
  const first = await loadEntities({ store: server.store, model, steps: steps('first', 0) });
  expect(first.steps.map((s) => [s.type, s.loaded, s.skipped.length])).toEqual([
    ['Category', 30, 0],
    ['Product', 60, 0],
  ]);
  const read = async () =>
    (await server.query('{ a: category(shop: "N0", id: "k") { name productCount stock } b: category(shop: "N29", id: "k") { name productCount stock } }')).data;
  expect(await read()).toEqual({ a: { name: 'first', productCount: 1, stock: 0 }, b: { name: 'first', productCount: 2, stock: 30 } });
  // The Category step renames every category (its scan of the Shop table, taken before, is then out of date); the
  // Product step changes each category's stock and writes the category whole in its partition's last EGT: from
  // what the table holds after the renames, not from that scan.
  await loadEntities({ store: server.store, model, steps: steps('second', 100) });
  expect(await read()).toEqual({ a: { name: 'second', productCount: 1, stock: 100 }, b: { name: 'second', productCount: 2, stock: 130 } });
  expect((await loadEntities({ store: server.store, model, steps: steps('second', 100) })).entities).toBe(0);
  expect((await verifyDerived({ store: server.store, model })).problems).toBe(0);
});
