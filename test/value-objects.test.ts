/**
 * Value objects kept inside their holder, through a real server on a schema written for the test: products holding
 * a size (one value object), a maker (a value object holding another) and the addresses they ship from (a list of
 * them), with hostile strings (quotes, commas, braces, line separators, emoji, 60 KiB of text) — created, read
 * through a point query, a range and an index entity that includes them, updated (a value given replaces the whole),
 * deleted and re-created; an over-large one refused with LIMIT_EXCEEDED before anything is written. Four writers
 * change one product at once, every message is delivered twice, late and in reverse by workers killed mid-message,
 * and storage throttles or applies a write and loses its answer: each write acknowledged if and only if stored, the
 * index entities equal to their products, `verify` clean. A federation `@shareable` value type composes with a
 * second subgraph's definition of it in a real `@apollo/gateway`.
 */
import { ApolloServer } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { ApolloGateway, IntrospectAndCompose } from '@apollo/gateway';
import { buildSubgraphSchema } from '@apollo/subgraph';
import { parse } from 'graphql';
import { formatVerifyReport, verifyDerived } from '../src/maintenance/verify-derived';
import { testQueues, testStore, uniquePrefix } from './support/harness';
import { drainWithRedelivery, queueWriter, seededRng, useSdlWorld } from './support/fanout-fixtures';
import { startProxiedServer } from './support/proxied-server';
import { testSeed } from './support/seed';

const SDL = `
extend schema @link(url: "https://specs.apollo.dev/federation/v2.7", import: ["@key", "@shareable"])
enum Unit { MM CM }
type Size @shareable { width: Float! height: Float! unit: Unit! }
type Address { street: String! city: String! lines: [String!] }
type Maker { name: String! address: Address }
type Product @entity(table: "Products", partitionKey: "{shop}", rowKey: "p_{sku}") @key(fields: "shop sku")
  @index(name: "byLabel", table: "ProductsByLabel", partitionKey: "label_{label}", rowKey: "{shop}_{sku}", include: ["size", "maker"]) {
  shop: ID!
  sku: ID!
  label: String!
  size: Size
  maker: Maker!
  shipsFrom: [Address!]
}
type Query {
  product(shop: ID!, sku: ID!): Product @point
  products(shop: ID!, first: Int, after: String): ProductConnection! @range(partitionKey: "{shop}", rowKeyPrefix: "p_")
  productsByLabel(label: String!, first: Int, after: String): ProductConnection! @range(index: "byLabel", partitionKey: "label_{label}")
}
type Mutation {
  createProduct(input: CreateProductInput!): ProductPayload! @write(entity: "Product", action: CREATE)
  updateProduct(input: UpdateProductInput!): ProductPayload! @write(entity: "Product", action: UPDATE)
  deleteProduct(input: DeleteProductInput!): ProductPayload! @write(entity: "Product", action: DELETE)
}`;

const HOSTILE = ['a "quoted", comma', '{"an":"object"}', '[not, json]', 'line\u2028sep\u2029', 'tab\there\nnew', '💿 ünïcödé', "it's", ''];
const FIELDS = '{ shop sku label size { width height unit } maker { name address { street city lines } } shipsFrom { street city lines } }';

const world = useSdlWorld(SDL);

type Server = { query(q: string, v?: Record<string, unknown>): Promise<any> };

async function write(server: Server, mutation: string, input: Record<string, unknown>): Promise<{ code?: string; error?: any; data?: any }> {
  const type = `${mutation[0].toUpperCase()}${mutation.slice(1)}Input`;
  const r = await server.query(`mutation($input: ${type}!) { ${mutation}(input: $input) { product ${FIELDS} } }`, { input });
  return { code: r.errors?.[0]?.extensions?.code as string | undefined, error: r.errors?.[0], data: r.data?.[mutation]?.product };
}

const product = (i: number, over: Record<string, unknown> = {}) => ({
  shop: `s${i % 2}`,
  sku: `k${i}`,
  label: i % 3 === 0 ? 'red' : 'blue',
  size: { width: i + 0.5, height: 2, unit: i % 2 ? 'MM' : 'CM' },
  maker: { name: HOSTILE[i % HOSTILE.length], address: { street: HOSTILE[(i + 1) % HOSTILE.length], city: 'Oslo', lines: HOSTILE.slice(0, i % 4) } },
  shipsFrom: i % 4 === 3 ? null : HOSTILE.slice(i % 3, (i % 3) + 2).map((street, j) => ({ street, city: `c${j}`, lines: null })),
  ...over,
});

/** A product as it reads back: what was written, a nullable field not given as null. */
const asRead = (p: Record<string, any>) => ({
  ...p,
  maker: { ...p.maker, address: p.maker.address && { lines: null, ...p.maker.address } },
});

/** Each label's products through the index (its entities hold the size and the maker), against each product read by its keys. */
async function expectIndexAnswers(server: Server, keys: Array<[string, string]>) {
  const stored: any[] = [];
  for (const [shop, sku] of keys) {
    const r = await server.query(`query($s: ID!, $k: ID!) { product(shop: $s, sku: $k) ${FIELDS} }`, { s: shop, k: sku });
    expect(r.errors).toBeUndefined();
    if (r.data.product) stored.push(r.data.product);
  }
  for (const label of ['red', 'blue', 'green']) {
    const r = await server.query(
      'query($l: String!) { productsByLabel(label: $l, first: 100) { edges { node { shop sku size { width height unit } maker { name address { street city lines } } } } } }',
      {
        l: label,
      },
    );
    expect(r.errors).toBeUndefined();
    const want = stored
      .filter((p) => p.label === label)
      .map(({ shop, sku, size, maker }) => ({ shop, sku, size, maker }))
      .sort((a, b) => `${a.shop}_${a.sku}`.localeCompare(`${b.shop}_${b.sku}`));
    expect([label, r.data.productsByLabel.edges.map((e: any) => e.node)]).toEqual([label, want]);
  }
}

async function expectVerified(store: Parameters<typeof verifyDerived>[0]['store'], model: Parameters<typeof verifyDerived>[0]['model']) {
  const report = await verifyDerived({ store, model });
  if (!report.ok) console.log(formatVerifyReport(report));
  expect(report.problems).toBe(0);
}

test('created, read by a point, a range and an index, updated, deleted: every value as written, 60 KiB and hostile text kept', async () => {
  const { server } = world;
  const first = product(0, { shop: 'solo', maker: { name: 'x'.repeat(30_000), address: { street: HOSTILE[0], city: HOSTILE[1], lines: HOSTILE } } });
  const created = await write(server, 'createProduct', first);
  expect(created.code).toBeUndefined();
  expect(created.data).toEqual(asRead(first));
  const read = await server.query(`{ product(shop: "solo", sku: "k0") ${FIELDS} products(shop: "solo") { edges { node ${FIELDS} } } }`);
  expect(read.errors).toBeUndefined();
  expect(read.data.product).toEqual(asRead(first));
  expect(read.data.products.edges.map((e: any) => e.node)).toEqual([asRead(first)]);
  // One property, the JSON text of the value; a part of it can be selected alone.
  const stored = await testStore().getEntity({ table: `${server.config.tablePrefix}Products`, partitionKey: 'solo', rowKey: 'p_k0' });
  expect(JSON.parse(stored!.properties.maker as string)).toEqual(first.maker);
  expect((await server.query('{ product(shop: "solo", sku: "k0") { maker { address { city } } size { __typename unit } } }')).data.product).toEqual({
    maker: { address: { city: HOSTILE[1] } },
    size: { __typename: 'Size', unit: 'CM' },
  });
  // An UPDATE replaces a value given (all its fields: one not given becomes null) and keeps one not given.
  const updated = await write(server, 'updateProduct', { shop: 'solo', sku: 'k0', size: null, maker: { name: 'M' } });
  expect(updated.code).toBeUndefined();
  expect(updated.data).toEqual({ ...asRead(first), size: null, maker: { name: 'M', address: null } });
  // Refused before anything is written: a value object over the 64 KiB a property holds, a missing field, a wrong enum.
  const big = await write(
    server,
    'createProduct',
    product(1, { shop: 'solo', maker: { name: 'y'.repeat(40_000), address: { street: 'z'.repeat(40_000), city: 'c' } } }),
  );
  expect(big.code).toBe('LIMIT_EXCEEDED');
  expect(big.error.extensions).toMatchObject({ property: 'maker' });
  const missing = await write(server, 'createProduct', product(1, { shop: 'solo', size: { width: 1, unit: 'MM' } }));
  expect(missing.code).toBe('BAD_USER_INPUT');
  const wrong = await write(server, 'createProduct', product(1, { shop: 'solo', size: { width: 1, height: 1, unit: 'INCH' } }));
  expect(wrong.code).toBe('BAD_USER_INPUT');
  expect((await server.query('{ product(shop: "solo", sku: "k1") { sku } }')).data.product).toBeNull();
  const deleted = await write(server, 'deleteProduct', { shop: 'solo', sku: 'k0' });
  expect(deleted.data.maker).toEqual({ name: 'M', address: null });
  expect((await server.query('{ product(shop: "solo", sku: "k0") { sku } }')).data.product).toBeNull();
  await world.drain(() => 0.5);
  await expectVerified(server.store, world.model);
});

test('four writers on one product, a delete and re-create, every message twice, late, reversed, workers killed: the index equals its products', async () => {
  const seed = testSeed();
  const rng = seededRng(seed);
  const random = () => rng.int(0x7fffffff) / 0x7fffffff;
  const { server } = world;
  const keys: Array<[string, string]> = [];
  for (let i = 0; i < 8; i++) {
    expect((await write(server, 'createProduct', product(i))).code).toBeUndefined();
    keys.push([`s${i % 2}`, `k${i}`]);
  }
  await world.drain(random);
  await expectIndexAnswers(server, keys);
  const makers = [0, 1, 2, 3].map((w) => ({ name: `writer ${w} ${HOSTILE[w]}`, address: { street: HOSTILE[w + 1], city: `w${w}` } }));
  const answers = await Promise.all(makers.map((maker, w) => write(server, 'updateProduct', { shop: 's0', sku: 'k0', maker, label: w % 2 ? 'green' : 'red' })));
  for (const a of answers) if (a.code) expect(a.code).toMatch(/^(CONFLICT|STORAGE_UNAVAILABLE)$/);
  const won = answers.filter((a) => !a.code);
  expect(won.length).toBeGreaterThan(0);
  expect((await write(server, 'deleteProduct', { shop: 's1', sku: 'k1' })).code).toBeUndefined();
  expect((await write(server, 'createProduct', product(1, { label: 'green', size: { width: 9, height: 9, unit: 'MM' } }))).code).toBeUndefined();
  expect((await write(server, 'updateProduct', { shop: 's0', sku: 'k2', size: null, shipsFrom: [] })).code).toBeUndefined();
  const { messages, killed } = await world.drain(random);
  await expectIndexAnswers(server, keys);
  // The product holds what one acknowledged writer wrote, whole: no mix of two.
  const k0 = (await server.query(`{ product(shop: "s0", sku: "k0") ${FIELDS} }`)).data.product;
  expect(won.map((a) => JSON.stringify(a.data.maker))).toContain(JSON.stringify(k0.maker));
  const reconcileOpts = { model: world.model, store: server.store, writer: world.writer, queues: testQueues(), tablePrefix: server.config.tablePrefix };
  await drainWithRedelivery(reconcileOpts, random);
  await expectIndexAnswers(server, keys);
  await expectVerified(server.store, world.model);
  console.log(`value objects seed ${seed}: ${messages} messages delivered twice and late, ${killed} deliveries killed mid-message`);
}, 120_000);

test('under storage faults: acknowledged if and only if stored, the index equal to its products after the worker, verify clean', async () => {
  const seed = testSeed();
  const proxied = await startProxiedServer(SDL, { seed, prefix: uniquePrefix(), env: { TABLEGRAPH_WORKER: 'off' } });
  const { proxy, ctx } = proxied;
  try {
    const keys: Array<[string, string]> = Array.from({ length: 12 }, (_, i) => [`f${i % 3}`, `k${i}`]);
    proxy.setFaults({ busy: 0.1, throttled: 0.1, timedOutAfterApply: 0.1, resetAfterApply: 0.1 });
    const created = await Promise.all(keys.map(([shop, sku], i) => write(ctx.server, 'createProduct', product(i, { shop, sku }))));
    const changed = { name: 'changed "under" faults', address: { street: '💿', city: HOSTILE[0], lines: HOSTILE } };
    const updated = await Promise.all(
      keys.map(([shop, sku], i) =>
        created[i].code ? Promise.resolve({ code: 'skipped' }) : write(ctx.server, 'updateProduct', { shop, sku, maker: changed }),
      ),
    );
    proxy.setFaults({});
    for (const a of [...created, ...updated]) if (a.code && a.code !== 'skipped') expect(a.code).toMatch(/^(STORAGE_BUSY|STORAGE_UNAVAILABLE|CONFLICT)$/);
    for (const [i, [shop, sku]] of keys.entries()) {
      const r = await ctx.server.query(`query($s: ID!, $k: ID!) { product(shop: $s, sku: $k) ${FIELDS} }`, { s: shop, k: sku });
      if (created[i].code) expect([sku, r.data.product]).toEqual([sku, null]);
      else if (updated[i].code) expect([sku, r.data.product]).toEqual([sku, asRead(product(i, { shop, sku }))]);
      else expect([sku, r.data.product.maker]).toEqual([sku, changed]);
    }
    const writer = queueWriter(ctx.model, ctx.server);
    await drainWithRedelivery(
      { model: ctx.model, store: ctx.server.store, writer, queues: testQueues(), tablePrefix: ctx.server.config.tablePrefix },
      () => 0.5,
    );
    await expectIndexAnswers(ctx.server, keys);
    await expectVerified(ctx.server.store, ctx.model);
    console.log(
      `value objects under faults (seed ${seed}): ${JSON.stringify([...created, ...updated].map((a) => a.code ?? 'ok'))}; injected ${JSON.stringify(proxy.injected())}`,
    );
  } finally {
    await proxied.close();
  }
}, 120_000);

/** A second subgraph that defines the same `@shareable` value type and holds one per product. */
const SHIPPING = `extend schema @link(url: "https://specs.apollo.dev/federation/v2.7", import: ["@key", "@shareable"])
enum Unit { MM CM }
type Size @shareable { width: Float! height: Float! unit: Unit! }
type Product @key(fields: "shop sku") { shop: ID! sku: ID! boxSize: Size! }`;

test('a @shareable value type composes with another subgraph defining it, read through a real gateway from both', async () => {
  const { server } = world;
  expect((await write(server, 'createProduct', product(5, { shop: 'fed', sku: 'f1' }))).code).toBeUndefined();
  const shipping = new ApolloServer({
    schema: buildSubgraphSchema({
      typeDefs: parse(SHIPPING),
      resolvers: { Product: { __resolveReference: (ref: any) => ref, boxSize: () => ({ width: 10, height: 20, unit: 'CM' }) } } as any,
    }),
  });
  const { url: shippingUrl } = await startStandaloneServer(shipping, { listen: { port: 0 } });
  const gateway = new ApolloServer({
    gateway: new ApolloGateway({
      supergraphSdl: new IntrospectAndCompose({
        subgraphs: [
          { name: 'products', url: (server as any).url },
          { name: 'shipping', url: shippingUrl },
        ],
      }),
    }),
  });
  try {
    const { url } = await startStandaloneServer(gateway, { listen: { port: 0 } });
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ product(shop: "fed", sku: "f1") { label size { width height unit } boxSize { width unit } maker { name } } }' }),
    });
    const body = (await res.json()) as any;
    expect(body.errors).toBeUndefined();
    expect(body.data.product).toEqual({
      label: product(5).label,
      size: product(5).size,
      boxSize: { width: 10, unit: 'CM' },
      maker: { name: product(5).maker.name },
    });
  } finally {
    await gateway.stop();
    await shipping.stop();
  }
}, 60_000);
