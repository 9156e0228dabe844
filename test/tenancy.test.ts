/**
 * Tenants (`extend schema @tenancy`, src/model/tenancy.ts) on a schema written for this test: a shop whose stores,
 * items and suppliers belong to tenants, and currencies that every tenant shares (`@global`). Three tenants write the
 * very same keys. Then a property, from a printed seed: thousands of random requests — reads, pages, writes,
 * cursors taken from another tenant, inputs and arguments that name a tenant, tokens without a tenant, with a forged
 * one or a bad signature — and subscriptions of each tenant: no answer holds another tenant's entity, no event
 * another tenant's write, no request scans; then every tenant's data is exactly what its own acknowledged writes
 * made it (summaries, indexes and copies included), `verify` is clean, and a raw listing of every table finds each
 * entity in its own tenant's key range. The three tenants are on the three tiers (docs/tenancy.md, "Tiers"): alpha on
 * the shared tables (PARTITION_PREFIX), bravo in tables of its own (TABLE), charlie in an account of its own (ACCOUNT:
 * a second Azurite, reached through an environment variable's connection string), each made with
 * `npm run tenant -- create` before its first request. Last, a load into one tenant (`--tenant`), a tenant exported
 * (`npm run tenant -- export`) and loaded back into another, a tenant closed and one deleted.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SignJWT } from 'jose';
import { AzureSASCredential, TableClient } from '@azure/data-tables';
import { compileSchema } from '../src/compiler/compile';
import { loadSchemaSources } from '../src/compiler/load-schema';
import { loadEntities } from '../src/load/load-entities';
import { checkColumns, readLoadRows } from '../src/load/load-rows';
import { readManifest } from '../src/load/manifest';
import { runCommand } from './support/processes';
import { verifyDerived } from '../src/maintenance/verify-derived';
import { untilConverged } from './support/fanout-fixtures';
import { isReservedName } from '../src/storage/reserved-names';
import { connectionString, startSdlServer, testQueues } from './support/harness';
import { indexAddress } from './support/write-fixtures';
import { randomUUID } from 'node:crypto';
import { Catalogue } from '../src/evolution/catalogue';
import { renderKey } from '../src/model/key-template';
import { encodeMessage } from '../src/queue/messages';
import { workQueueNames } from '../src/queue/sender';
import { sseSubscribe, type Collected } from './support/subscription-clients';
import { seededRandom, testSeed } from './support/seed';
import { until } from './support/wait';
import { startAzurite, type AzuriteHandle } from '../src/storage/azurite';
import { TableStore } from '../src/storage/table-store';
import { tenantTable } from '../src/model/tenancy';

const SECRET = 'a-tenancy-test-secret-of-32-chars-at-least';
const TENANTS = ['alpha', 'bravo', 'charlie'] as const;
type Tenant = (typeof TENANTS)[number];

const SDL = `
extend schema @tenancy(claim: "tid")

type Currency @global @entity(table: "Currencies", partitionKey: "currencies", rowKey: "{code}") {
  code: ID!
  name: String!
}

type Store @entity(table: "Shop", partitionKey: "{storeId}", rowKey: "store")
  @index(name: "all", table: "Stores", partitionKey: "stores", rowKey: "{storeId}", include: ["name"]) {
  etag: String!
  storeId: ID!
  name: String!
  currencyCode: ID!
  currency: Currency @point(partitionKey: "currencies", rowKey: "{currencyCode}")
  itemCount: Int! @summary(of: "Item", via: "store", count: true)
  stock: Int! @summary(of: "Item", via: "store", sum: ["stock"])
  items(first: Int, after: String): ItemConnection! @range(partitionKey: "{storeId}", rowKeyPrefix: "item_")
  itemsByTitle(first: Int, after: String): ItemConnection! @range(index: "byTitle", partitionKey: "{storeId}", rowKeyPrefix: "title_")
  # A read-only SAS for the store's partition: the tenant's.
  sas: String @sas(expiresInSeconds: 600)
}

type Item @entity(table: "Shop", partitionKey: "{storeId}", rowKey: "item_{sku}")
  @index(name: "byTitle", rowKey: "title_{title}_{sku}", include: ["stock"])
  @index(name: "bySupplier", table: "ItemsBySupplier", partitionKey: "supplier_{supplierId}", rowKey: "{storeId}_{sku}", include: ["title"]) {
  etag: String!
  storeId: ID!
  sku: ID!
  title: String!
  stock: Int!
  supplierId: ID!
  supplierName: String @copy(from: "supplier", field: "name")
  store: Store! @point(partitionKey: "{storeId}", rowKey: "store")
  supplier: Supplier! @point(partitionKey: "suppliers", rowKey: "{supplierId}")
}

type Supplier @entity(table: "Suppliers", partitionKey: "suppliers", rowKey: "{supplierId}")
  @index(name: "byEmail", table: "SuppliersByEmail", partitionKey: "email", rowKey: "{email}", unique: true) {
  etag: String!
  supplierId: ID!
  email: String!
  name: String!
  itemCount: Int! @summary(of: "Item", via: "supplier", count: true)
  items(first: Int, after: String): ItemConnection! @range(index: "bySupplier", partitionKey: "supplier_{supplierId}")
}

type Query {
  store(storeId: ID!): Store @point
  stores(first: Int, after: String): StoreConnection! @range(index: "all")
  item(storeId: ID!, sku: ID!): Item @point
  supplier(supplierId: ID!): Supplier @point(partitionKey: "suppliers")
  supplierByEmail(email: String!): Supplier @point(index: "byEmail")
  currency(code: ID!): Currency @point(partitionKey: "currencies")
}

type Mutation {
  createCurrency(input: CreateCurrencyInput!): CurrencyPayload! @write(entity: "Currency", action: CREATE)
  createStore(input: CreateStoreInput!): StorePayload! @write(entity: "Store", action: CREATE)
  createSupplier(input: CreateSupplierInput!): SupplierPayload! @write(entity: "Supplier", action: CREATE)
  updateSupplier(input: UpdateSupplierInput!): SupplierPayload! @write(entity: "Supplier", action: UPDATE)
  createItem(input: CreateItemInput!): ItemPayload! @write(entity: "Item", action: CREATE)
  updateItem(input: UpdateItemInput!): ItemPayload! @write(entity: "Item", action: UPDATE)
  deleteItem(input: DeleteItemInput!): ItemPayload! @write(entity: "Item", action: DELETE)
}

type Subscription {
  itemChanged(storeId: ID!, after: String): ItemChange! @subscribe(entity: "Item")
}
`;

const STORES = ['s1', 's2'];
const SUPPLIERS = ['sup1', 'sup2'];
const SKUS = Array.from({ length: 12 }, (_, i) => `k${i}`);
/** Every supplier of every tenant has this e-mail: a unique index is unique within a tenant. */
const emailOf = (supplierId: string) => `${supplierId}@example.test`;

function sign(claims: Record<string, unknown>, secret = SECRET, expires = '30m'): Promise<string> {
  return new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).setExpirationTime(expires).sign(new TextEncoder().encode(secret));
}

let ctx: Awaited<ReturnType<typeof startSdlServer>>;
const tokens = new Map<Tenant, string>();

type Answer = { status: number; data?: any; errors?: any[]; extensions?: any };
async function as(token: string | undefined, query: string, variables?: Record<string, unknown>): Promise<Answer> {
  const res = await fetch(ctx.server.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token && { authorization: `Bearer ${token}` }) },
    body: JSON.stringify({ query, variables }),
  });
  return { status: res.status, ...((await res.json()) as object) };
}
const code = (a: Answer) => a.errors?.[0]?.extensions?.code as string | undefined;

/** Charlie's own account (tier ACCOUNT): a second Azurite, its connection string in an environment variable. */
let charlieAccount: AzuriteHandle;
const CHARLIE_ACCOUNT_VARIABLE = 'TABLEGRAPH_TEST_CHARLIE_ACCOUNT';
/** The environment of the test's commands (npm run tenant, …): charlie's account variable passes through. */
const commandEnv = (more: Record<string, string> = {}) => ({
  AZURE_STORAGE_CONNECTION_STRING: connectionString(),
  TABLEGRAPH_SCHEMA_DIR: ctx.dir,
  TABLEGRAPH_TABLE_PREFIX: ctx.server.config.tablePrefix,
  [CHARLIE_ACCOUNT_VARIABLE]: charlieAccount.connectionString,
  ...more,
});

beforeAll(async () => {
  charlieAccount = await startAzurite({ inMemory: true });
  process.env[CHARLIE_ACCOUNT_VARIABLE] = charlieAccount.connectionString;
  ctx = await startSdlServer(SDL, { TABLEGRAPH_JWT_SECRET: SECRET, TABLEGRAPH_RATE_LIMIT: '1000000', TABLEGRAPH_SUBSCRIPTION_POLL_MS: '100' });
  for (const t of TENANTS) tokens.set(t, await sign({ sub: `owner@${t}.test`, tid: t }));
  // bravo and charlie get their tiers before their first request; alpha is on the schema's default.
  const created = await Promise.all([
    runCommand('tenant', ['create', 'bravo', '--isolation', 'TABLE'], undefined, commandEnv()).exited,
    runCommand('tenant', ['create', 'charlie', '--isolation', 'ACCOUNT', '--account', `env:${CHARLIE_ACCOUNT_VARIABLE}`], undefined, commandEnv()).exited,
  ]);
  expect(created.map((c) => c.code)).toEqual([0, 0]);
}, 90_000);
afterAll(async () => {
  await ctx?.close();
  await charlieAccount?.stop();
  delete process.env[CHARLIE_ACCOUNT_VARIABLE];
});

test('npm run tenant -- list: each tenant on its tier; a tenant created twice, or with a connection string for an account, is refused', async () => {
  const list = runCommand('tenant', ['list'], undefined, commandEnv());
  expect((await list.exited).code).toBe(0);
  expect(list.output()).toMatch(/bravo\s+TABLE\s+open/);
  expect(list.output()).toMatch(new RegExp(`charlie\\s+ACCOUNT \\(env:${CHARLIE_ACCOUNT_VARIABLE}\\)\\s+open`));
  const again = runCommand('tenant', ['create', 'bravo', '--isolation', 'ACCOUNT', '--account', 'env:X'], undefined, commandEnv());
  expect((await again.exited).code).toBe(1);
  expect(again.output()).toMatch(/Tenant bravo exists already \(TABLE, open\)/);
  const clear = runCommand(
    'tenant',
    ['create', 'delta2', '--isolation', 'ACCOUNT', '--account', 'DefaultEndpointsProtocol=https;AccountKey=x'],
    undefined,
    commandEnv(),
  );
  expect((await clear.exited).code).toBe(1);
  expect(clear.output()).toMatch(/is not an account reference: .*a connection string is never stored/);
});

/** Every string of an answer under a key that holds a tenant's text (`name`, `title`, `supplierName`), with its path. */
function taggedTexts(data: unknown, path = ''): Array<{ path: string; text: string }> {
  if (Array.isArray(data)) return data.flatMap((d, i) => taggedTexts(d, `${path}[${i}]`));
  if (typeof data !== 'object' || data === null) return [];
  return Object.entries(data).flatMap(([k, v]) => {
    if (k === 'currency') return []; // shared by every tenant
    if (typeof v === 'string' && ['name', 'title', 'supplierName'].includes(k)) return [{ path: `${path}.${k}`, text: v }];
    return taggedTexts(v, `${path}.${k}`);
  });
}

/** Fails on any text of another tenant in an answer given to `tenant`, and on any scan. */
function expectOwn(tenant: Tenant, a: Answer, what: string): void {
  const foreign = taggedTexts(a.data).filter((t) => !t.text.startsWith(`${tenant}:`));
  if (foreign.length > 0) throw new Error(`${what}: ${tenant} was answered ${JSON.stringify(foreign)}`);
  const cost = a.extensions?.cost;
  if (cost && (cost.tableScans !== 0 || cost.partitionScans !== 0)) throw new Error(`${what}: a scan (${JSON.stringify(cost)})`);
}

const CREATE_ITEM = 'mutation($i: CreateItemInput!) { createItem(input: $i) { item { storeId sku title stock supplierName } } }';
const UPDATE_ITEM = 'mutation($i: UpdateItemInput!) { updateItem(input: $i) { item { storeId sku title stock } } }';
const DELETE_ITEM = 'mutation($i: DeleteItemInput!) { deleteItem(input: $i) { item { sku } } }';
const ITEMS_PAGE =
  'query($s: ID!, $after: String) { store(storeId: $s) { name itemCount stock currency { name } items(first: 3, after: $after) { edges { node { sku title stock supplierName store { name } supplier { name } } } pageInfo { hasNextPage endCursor } } } }';
const BY_TITLE = 'query($s: ID!) { store(storeId: $s) { itemsByTitle(first: 5) { edges { node { sku title } } } } }';
const ITEM = 'query($s: ID!, $k: ID!) { item(storeId: $s, sku: $k) { sku title stock supplierName store { name itemCount } supplier { name itemCount } } }';
const SUPPLIER = 'query($e: String!) { supplierByEmail(email: $e) { supplierId name itemCount items(first: 5) { edges { node { sku title } } } } }';
const STORES_PAGE = 'query { stores(first: 10) { edges { node { storeId name } } } }';

/** Creates the tenant's stores and suppliers, with the same keys as every other tenant's. */
async function seedTenant(t: Tenant): Promise<void> {
  const token = tokens.get(t)!;
  for (const s of STORES) {
    const r = await as(token, 'mutation($i: CreateStoreInput!) { createStore(input: $i) { store { storeId name } } }', {
      i: { storeId: s, name: `${t}: store ${s}`, currencyCode: 'EUR' },
    });
    expect(r.errors).toBeUndefined();
    expectOwn(t, r, 'createStore');
  }
  for (const s of SUPPLIERS) {
    const r = await as(token, 'mutation($i: CreateSupplierInput!) { createSupplier(input: $i) { supplier { supplierId name } } }', {
      i: { supplierId: s, email: emailOf(s), name: `${t}: supplier ${s}` },
    });
    expect(r.errors).toBeUndefined();
  }
}

test('a global type is shared by every tenant: one currency, created once', async () => {
  const first = await as(tokens.get('alpha'), 'mutation { createCurrency(input: { code: "EUR", name: "Euro" }) { currency { code name } } }');
  expect(first.errors).toBeUndefined();
  const again = await as(tokens.get('bravo'), 'mutation { createCurrency(input: { code: "EUR", name: "Euro" }) { currency { code } } }');
  expect(code(again)).toBe('CONFLICT');
  const read = await as(tokens.get('charlie'), 'query { currency(code: "EUR") { name } }');
  expect(read.data).toEqual({ currency: { name: 'Euro' } });
  for (const t of TENANTS) await seedTenant(t);
});

test('the tenant is the token’s: no token, a token without a tenant, a bad one or a forged signature are refused', async () => {
  const q = 'query { store(storeId: "s1") { name } }';
  const refusals: Array<[string, string | undefined]> = [
    ['no token', undefined],
    ['no tid', await sign({ sub: 'x@example.test' })],
    ['upper case', await sign({ sub: 'x@example.test', tid: 'ALPHA' })],
    ['an underscore', await sign({ sub: 'x@example.test', tid: 'al_pha' })],
    ['a number', await sign({ sub: 'x@example.test', tid: 42 })],
    ['another key', await sign({ sub: 'x@example.test', tid: 'alpha' }, 'another-secret-of-at-least-32-characters!')],
  ];
  for (const [what, token] of refusals) {
    const r = await as(token, q);
    expect({ what, status: r.status, code: code(r), data: r.data ?? null }).toEqual({ what, status: 401, code: 'UNAUTHENTICATED', data: null });
  }
  // The tenant is never an input or an argument: the schema has neither, and a document that names one is invalid.
  const input = await as(
    tokens.get('alpha'),
    'mutation { createItem(input: { _tenant: "bravo", storeId: "s1", sku: "x", title: "alpha: x", stock: 1, supplierId: "sup1" }) { item { sku } } }',
  );
  expect(code(input)).toBe('GRAPHQL_VALIDATION_FAILED');
  const arg = await as(tokens.get('alpha'), 'query { store(storeId: "s1", _tenant: "bravo") { name } }');
  expect(code(arg)).toBe('GRAPHQL_VALIDATION_FAILED');
});

test('a @sas field signs for the tenant’s own partition only, in its own table or account', async () => {
  const shop = `${ctx.server.config.tablePrefix}Shop`;
  const tables = { alpha: shop, bravo: tenantTable(shop, 'bravo'), charlie: shop };
  for (const t of TENANTS) {
    const r = await as(tokens.get(t), 'query { store(storeId: "s1") { sas } }');
    const url = new URL(r.data.store.sas);
    expect([url.searchParams.get('spk'), url.searchParams.get('epk')]).toEqual([`${t}_s1`, `${t}_s1`]);
    expect(url.pathname.endsWith(`/${tables[t]}`)).toBe(true);
    // Used as a client would: it reads the tenant's store where it is (charlie's in its own account).
    const client = new TableClient(
      `${url.origin}${url.pathname.slice(0, url.pathname.lastIndexOf('/'))}`,
      tables[t],
      new AzureSASCredential(url.search.slice(1)),
      {
        allowInsecureConnection: true,
      },
    );
    const found: string[] = [];
    for await (const e of client.listEntities<{ name?: string }>()) found.push(`${e.partitionKey}/${e.rowKey}/${e.name}`);
    expect(found).toContain(`${t}_s1/store/${t}: store s1`);
  }
});

/** What each tenant's acknowledged writes made: items by `store/sku`. */
type Item = { storeId: string; sku: string; title: string; stock: number; supplierId: string };
const expected = new Map<Tenant, Map<string, Item>>(TENANTS.map((t) => [t, new Map()]));
/** Acknowledged writes of items of store s1, per tenant: what its subscription must report. */
const s1Writes = new Map<Tenant, number>(TENANTS.map((t) => [t, 0]));

test('random requests of three tenants over the same keys: nothing of another tenant is read, written or reported; no scan', async () => {
  const seed = testSeed();
  const random = seededRandom(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)];
  const subscriptions = new Map<Tenant, Collected>();
  for (const t of TENANTS) {
    const sub = sseSubscribe(ctx.server.url, 'subscription { itemChanged(storeId: "s1") { kind storeId sku node { title } } }', {}, tokens.get(t));
    await sub.started;
    subscriptions.set(t, sub);
  }
  /** Cursors each tenant was given, to be tried by the others. */
  const cursors: Array<{ tenant: Tenant; storeId: string; cursor: string }> = [];
  const busy = new Set<string>();
  const counts: Record<string, number> = {};
  // Two thousand: some 15 s alone, under a minute on a machine busy with other test files (the fast tier's share).
  const REQUESTS = 2000;
  let sent = 0;

  async function one(): Promise<void> {
    const t = pick(TENANTS);
    const token = tokens.get(t)!;
    const storeId = pick(STORES);
    const sku = pick(SKUS);
    const key = `${t}/${storeId}/${sku}`;
    const kind = pick(['create', 'create', 'update', 'delete', 'page', 'byTitle', 'item', 'supplier', 'stores', 'foreignCursor', 'forged'] as const);
    counts[kind] = (counts[kind] ?? 0) + 1;
    const items = expected.get(t)!;
    if (kind === 'create' || kind === 'update' || kind === 'delete') {
      if (busy.has(key)) return; // one write at a time per key: the expected state follows each answer
      busy.add(key);
      try {
        const had = items.get(`${storeId}/${sku}`);
        const supplierId = pick(SUPPLIERS);
        const title = `${t}: item ${sku} ${Math.floor(random() * 1000)}`;
        const stock = Math.floor(random() * 50);
        const r =
          kind === 'create'
            ? await as(token, CREATE_ITEM, { i: { storeId, sku, title, stock, supplierId } })
            : kind === 'update'
              ? await as(token, UPDATE_ITEM, { i: { storeId, sku, title, stock } })
              : await as(token, DELETE_ITEM, { i: { storeId, sku } });
        expectOwn(t, r, kind);
        const expectedCode = kind === 'create' ? (had ? 'CONFLICT' : undefined) : had ? undefined : 'NOT_FOUND';
        expect({ kind, key, code: code(r) }).toEqual({ kind, key, code: expectedCode });
        if (!r.errors) {
          if (kind === 'create') items.set(`${storeId}/${sku}`, { storeId, sku, title, stock, supplierId });
          else if (kind === 'update') items.set(`${storeId}/${sku}`, { ...had!, title, stock });
          else items.delete(`${storeId}/${sku}`);
          if (storeId === 's1') s1Writes.set(t, s1Writes.get(t)! + 1);
        }
      } finally {
        busy.delete(key);
      }
      return;
    }
    if (kind === 'page' || kind === 'foreignCursor') {
      const foreign = kind === 'foreignCursor' ? cursors.filter((c) => c.tenant !== t) : [];
      const from = foreign.length > 0 ? pick(foreign) : undefined;
      const r = await as(token, ITEMS_PAGE, { s: from?.storeId ?? storeId, after: from?.cursor ?? null });
      if (from) {
        // Another tenant's cursor names another range: refused, and nothing of it is told.
        expect({ kind, code: code(r) }).toEqual({ kind, code: 'BAD_USER_INPUT' });
        return;
      }
      expect(r.errors).toBeUndefined();
      expectOwn(t, r, kind);
      const end = r.data.store.items.pageInfo.endCursor;
      if (end) cursors.push({ tenant: t, storeId, cursor: end });
      if (cursors.length > 50) cursors.shift();
      return;
    }
    if (kind === 'forged') {
      const forged = await sign({ sub: `intruder@${t}.test`, tid: `${t}_x` });
      const r = await as(forged, ITEM, { s: storeId, k: sku });
      expect({ kind, status: r.status, code: code(r) }).toEqual({ kind, status: 401, code: 'UNAUTHENTICATED' });
      return;
    }
    const r =
      kind === 'byTitle'
        ? await as(token, BY_TITLE, { s: storeId })
        : kind === 'item'
          ? await as(token, ITEM, { s: storeId, k: sku })
          : kind === 'supplier'
            ? await as(token, SUPPLIER, { e: emailOf(pick(SUPPLIERS)) })
            : await as(token, STORES_PAGE);
    expect({ kind, errors: r.errors }).toEqual({ kind, errors: undefined });
    expectOwn(t, r, kind);
  }

  const began = Date.now();
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (sent < REQUESTS) {
        sent++;
        await one();
      }
    }),
  );
  console.log(`tenancy property (seed ${seed}): ${REQUESTS} requests in ${Math.round((Date.now() - began) / 1000)} s ${JSON.stringify(counts)}`);

  // Each tenant's subscription reported each of its own acknowledged writes of s1, and nothing else.
  for (const t of TENANTS) {
    const sub = subscriptions.get(t)!;
    const events = await sub.waitFor(s1Writes.get(t)!, 30_000);
    sub.stop();
    expect(events.length).toBe(s1Writes.get(t));
    for (const e of events) {
      expect(e.itemChanged.storeId).toBe('s1');
      if (e.itemChanged.node) expect(e.itemChanged.node.title.startsWith(`${t}:`)).toBe(true);
    }
  }
  // 2,000 requests take 15 s alone, a minute and more on a machine busy with other tests: the time is generous.
}, 900_000);

test('each tenant’s data is what its own writes made: pages, summaries, indexes and copies; verify clean', async () => {
  for (const t of TENANTS) {
    const token = tokens.get(t)!;
    const items = [...expected.get(t)!.values()];
    for (const storeId of STORES) {
      const own = items.filter((i) => i.storeId === storeId).sort((a, b) => (a.sku < b.sku ? -1 : 1));
      const seen: any[] = [];
      let after: string | null = null;
      let r: Answer;
      do {
        r = await as(token, ITEMS_PAGE, { s: storeId, after });
        expect(r.errors).toBeUndefined();
        seen.push(...r.data.store.items.edges.map((e: any) => e.node));
        after = r.data.store.items.pageInfo.endCursor;
      } while (r.data.store.items.pageInfo.hasNextPage);
      expect(seen.map((n) => ({ storeId, sku: n.sku, title: n.title, stock: n.stock }))).toEqual(
        own.map(({ storeId: s, sku, title, stock }) => ({ storeId: s, sku, title, stock })),
      );
      expect(r.data.store.itemCount).toBe(own.length);
      expect(r.data.store.stock).toBe(own.reduce((n, i) => n + i.stock, 0));
    }
    // Kept eventually by the worker: the supplier's count and its index of items.
    for (const supplierId of SUPPLIERS) {
      const own = items.filter((i) => i.supplierId === supplierId);
      await until(`${t}'s ${supplierId} counts ${own.length} items`, async () => {
        const r = await as(token, 'query($s: ID!) { supplier(supplierId: $s) { itemCount name } }', { s: supplierId });
        return r.data?.supplier?.itemCount === own.length;
      });
    }
  }
  // The index entities the worker keeps may still wait for its last messages when the counts above are right.
  await untilConverged({ store: ctx.server.store, model: ctx.model });
});

/**
 * Every entity of the deployment's tables, read raw (no placement): the shared account's tables — the shared ones and
 * bravo's own — and charlie's account's, each with the tenant whose tables they are ('' for the shared ones).
 */
async function rawListing(): Promise<Array<{ table: string; owner: string; entity: { partitionKey: string; properties: Record<string, unknown> } }>> {
  const prefix = ctx.server.config.tablePrefix;
  const shared = new TableStore({ connectionString: connectionString(), target: 'azurite' });
  const charlie = new TableStore({ connectionString: charlieAccount.connectionString, target: 'azurite' });
  const bravoTables = new Set(ctx.model.tables.map((t) => tenantTable(t, 'bravo')));
  const listed: Array<{ table: string; owner: string; entity: { partitionKey: string; properties: Record<string, unknown> } }> = [];
  for (const [store, owner] of [
    [shared, ''],
    [charlie, 'charlie'],
  ] as const) {
    for (const table of (await store.listTables(prefix)).filter((name) => !isReservedName(name.slice(prefix.length)))) {
      const own = owner || (bravoTables.has(table) ? 'bravo' : '');
      for await (const page of store.scan(table)) for (const entity of page) listed.push({ table, owner: own, entity });
    }
  }
  return listed;
}

test('a raw listing of every table and account finds each entity in its own tenant’s key range and on its tier, and the global ones apart', async () => {
  const prefix = ctx.server.config.tablePrefix;
  const listed = await rawListing();
  const owners = new Set<string>();
  for (const { table, owner, entity: e } of listed) {
    if (table === `${prefix}Currencies`) {
      expect([owner, e.partitionKey]).toEqual(['', 'currencies']);
      continue;
    }
    const tenant = TENANTS.find((t) => e.partitionKey.startsWith(`${t}_`));
    expect({ table, partitionKey: e.partitionKey, tenant }).toEqual({ table, partitionKey: e.partitionKey, tenant: expect.any(String) });
    // Each tenant's entities on its own tier only: alpha in the shared tables, bravo in its own, charlie in its account.
    expect({ table, tenant, owner }).toEqual({ table, tenant, owner: tenant === 'alpha' ? '' : tenant });
    owners.add(owner);
    if ('_tenant' in e.properties) expect(e.properties._tenant).toBe(tenant);
    for (const k of ['name', 'title', 'supplierName']) {
      const v = e.properties[k];
      if (typeof v === 'string') expect(v.startsWith(`${tenant}:`)).toBe(true);
    }
  }
  expect([...owners].sort()).toEqual(['', 'bravo', 'charlie']);
  expect(listed.length).toBeGreaterThan(100);
});

test('npm run load -- --tenant: every row of a tenant-scoped type goes to that tenant; a row naming another is skipped', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tenancy-load-'));
  const write = (name: string, rows: object[]) => {
    writeFileSync(path.join(dir, name), rows.map((r) => JSON.stringify(r)).join('\n'));
    return path.join(dir, name);
  };
  const stores = write('stores.ndjson', [{ storeId: 'loaded', name: 'delta: loaded', currencyCode: 'EUR' }]);
  const suppliers = write('suppliers.ndjson', [{ supplierId: 'sup1', email: 'sup1@example.test', name: 'delta: supplier' }]);
  const items = write('items.ndjson', [
    { storeId: 'loaded', sku: 'a', title: 'delta: loaded a', stock: 1, supplierId: 'sup1' },
    { storeId: 'loaded', sku: 'b', title: 'delta: loaded b', stock: 2, supplierId: 'sup1', _tenant: 'delta' },
    { storeId: 'loaded', sku: 'c', title: 'alpha: smuggled', stock: 3, supplierId: 'sup1', _tenant: 'alpha' },
  ]);
  const { schema, model } = compileSchema(loadSchemaSources(ctx.dir), { tablePrefix: ctx.server.config.tablePrefix });
  const step = (type: string, file: string) => ({ type, rows: readLoadRows(file, model.entities.get(type)!, schema, 'delta'), existing: 'replace' as const });
  const summary = await loadEntities({ store: ctx.server.store, model, steps: [step('Store', stores), step('Supplier', suppliers), step('Item', items)] });
  expect(summary.steps.map((s) => s.loaded)).toEqual([1, 1, 2]);
  expect(summary.steps[2].skipped).toEqual([{ line: 3, reason: '_tenant is "alpha", and the load is into delta' }]);
  rmSync(dir, { recursive: true, force: true });
  const delta = await sign({ sub: 'owner@delta.test', tid: 'delta' });
  const read = await as(
    delta,
    'query { store(storeId: "loaded") { itemCount stock } a: item(storeId: "loaded", sku: "a") { title supplierName } c: item(storeId: "loaded", sku: "c") { title } }',
  );
  expect(read.data).toEqual({ store: { itemCount: 2, stock: 3 }, a: { title: 'delta: loaded a', supplierName: 'delta: supplier' }, c: null });
  const alpha = await as(tokens.get('alpha'), 'query { item(storeId: "loaded", sku: "a") { title } }');
  expect(alpha.data).toEqual({ item: null });
  // Without --tenant, a file without _tenant is refused before anything is read.
  expect(() => checkColumns(model.entities.get('Item')!, ['storeId', 'sku', 'title', 'stock', 'supplierId'], 'items.ndjson')).toThrow(
    /_tenant of Item are missing \(Item is tenant-scoped: load into one tenant with --tenant <id>\)/,
  );
});

test('npm run tenant -- export: a tenant’s entities as NDJSON and a manifest, loaded back into another tenant as they were', async () => {
  const out = mkdtempSync(path.join(os.tmpdir(), 'tenancy-export-'));
  const run = runCommand('tenant', ['export', 'alpha', '--out', out], undefined, commandEnv());
  expect((await run.exited).code).toBe(0);
  const own = [...expected.get('alpha')!.values()];
  expect(run.output()).toMatch(new RegExp(`Item\\s+${own.length} entities`));
  expect(run.output()).toMatch(/load them with: npm run load -- --manifest \S+manifest\.json --tenant <id>/);
  const manifest = JSON.parse(readFileSync(path.join(out, 'manifest.json'), 'utf8')) as { steps: Array<{ type: string; file: string }> };
  // In dependency order: what items refer to and are counted by, first.
  expect(manifest.steps.map((s) => s.type)).toEqual(['Store', 'Supplier', 'Item']);
  const items = readFileSync(path.join(out, 'Item.ndjson'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  expect(items.length).toBe(own.length);
  // Neither the tenant (the load names it) nor what the load keeps itself (copies, summaries).
  expect(items.every((i) => !('_tenant' in i) && String(i.title).startsWith('alpha:') && !('supplierName' in i))).toBe(true);
  // Loaded back into a tenant of its own: the same items, summaries and copies, kept by the load.
  const { schema, model } = compileSchema(loadSchemaSources(ctx.dir), { tablePrefix: ctx.server.config.tablePrefix });
  const steps = readManifest(path.join(out, 'manifest.json')).map((s) => ({
    type: s.type,
    rows: readLoadRows(s.file, model.entities.get(s.type)!, schema, 'echo'),
    existing: s.existing,
  }));
  const summary = await loadEntities({ store: ctx.server.store, model, steps });
  expect(summary.steps.map((s) => s.skipped)).toEqual([[], [], []]);
  rmSync(out, { recursive: true, force: true });
  const echo = await sign({ sub: 'owner@echo.test', tid: 'echo' });
  const alpha = tokens.get('alpha')!;
  for (const storeId of STORES) {
    const q = 'query($s: ID!) { store(storeId: $s) { itemCount stock items(first: 50) { edges { node { sku stock supplierName } } } } }';
    const [a, e] = [await as(alpha, q, { s: storeId }), await as(echo, q, { s: storeId })];
    expect(e.errors).toBeUndefined();
    // The texts name their tenant: alpha's, copied. Everything else is the same.
    expect(JSON.stringify(e.data)).toBe(JSON.stringify(a.data));
  }
});

/**
 * An item's inter-partition index entity taken away, and a fan-out message for the item sent as a writer would: the
 * worker writes the index entity again — unless the item's tenant is closed.
 * @returns whether the index entity is there once the worker handled the message
 */
async function indexAfterMessage(tenant: Tenant, item: Item): Promise<boolean> {
  const values = { ...item, _tenant: tenant };
  const index = indexAddress(ctx.model, 'Item', 'bySupplier', values);
  expect(await ctx.server.store.deleteEntity(index)).toBe(true);
  const entity = ctx.model.entities.get('Item')!;
  const primary = { table: entity.layout.table, partitionKey: renderKey(entity.layout.partitionKey, values), rowKey: renderKey(entity.layout.rowKey, values) };
  const stored = await ctx.server.store.getEntity(primary);
  const handled = ctx.server.worker!.stats().handled;
  const message = {
    v: 3 as const,
    kind: 'fanout' as const,
    id: randomUUID(),
    entity: 'Item',
    primary,
    writeId: String(stored!.properties.WriteId),
    basedOn: null,
    deleted: false,
    candidates: [index],
    enqueuedAt: Date.now(),
  };
  await testQueues().send(workQueueNames(ctx.server.config.tablePrefix).queue, encodeMessage(message));
  await until('the worker handled the message', async () => ctx.server.worker!.stats().handled > handled);
  return (await ctx.server.store.getEntity(index)) !== null;
}

test('a closed tenant: its tokens refused, and the worker writes nothing for it from its messages', async () => {
  const [alphaItem] = [...expected.get('alpha')!.values()];
  // The control: an open tenant's message is acted on.
  expect(await indexAfterMessage('alpha', alphaItem)).toBe(true);
  const catalogue = new Catalogue(ctx.server.store, ctx.server.config.tablePrefix);
  const charlie = await catalogue.tenant('charlie');
  expect(charlie?.isolation).toBe('ACCOUNT');
  await catalogue.putTenant({ ...charlie!, state: 'closed', closedAt: Date.now() });
  // The server and its worker learn of it within their refresh.
  await until('charlie refused', async () => (await as(tokens.get('charlie'), 'query { store(storeId: "s1") { name } }')).status === 403);
  const [charlieItem] = [...expected.get('charlie')!.values()];
  expect(await indexAfterMessage('charlie', charlieItem)).toBe(false);
});

/** Entities of each tenant's key range in every table of the deployment and charlie's account (the catalogue left out), by tenant. */
async function entitiesByTenant(): Promise<Record<string, number>> {
  const prefix = ctx.server.config.tablePrefix;
  const counts: Record<string, number> = {};
  for (const { table, entity: e } of await rawListing()) {
    const tenant = table === `${prefix}Currencies` ? 'global' : e.partitionKey.slice(0, e.partitionKey.indexOf('_'));
    counts[tenant] = (counts[tenant] ?? 0) + 1;
  }
  return counts;
}

test('npm run tenant -- delete: the tenant refused, every entity of its key range gone, the other tenants untouched', async () => {
  // What a delete waits out after closing the tenant: no request or message of it is in flight here.
  const env = commandEnv({ TABLEGRAPH_REQUEST_TIMEOUT_MS: '1000', TABLEGRAPH_SETTLE_MS: '1000', TABLEGRAPH_STORAGE_TIMEOUT_MS: '2000' });
  const unconfirmed = runCommand('tenant', ['delete', 'charlie'], undefined, env);
  expect((await unconfirmed.exited).code).toBe(1);
  expect(unconfirmed.output()).toMatch(/cannot be undone: run it again with --yes/);
  const before = await entitiesByTenant();
  expect(before.charlie).toBeGreaterThan(0);
  const run = runCommand('tenant', ['delete', 'charlie', '--yes'], undefined, env);
  expect((await run.exited).code).toBe(0);
  expect(run.output()).toMatch(new RegExp(`tenant charlie deleted: ${before.charlie} entities, 0 blobs`));
  const after = await entitiesByTenant();
  expect(after).toEqual({ ...before, charlie: undefined });
  // Its tokens are refused (the server learns of it within its refresh), whatever they ask.
  const charlie = tokens.get('charlie')!;
  let refused: Answer | undefined;
  await until('charlie refused', async () => (refused = await as(charlie, 'query { store(storeId: "s1") { name } }')).status === 403);
  expect({ code: code(refused!), reason: refused!.errors![0].extensions.reason, data: refused!.data ?? null }).toEqual({
    code: 'FORBIDDEN',
    reason: 'TenantClosed',
    data: null,
  });
  const write = await as(charlie, CREATE_ITEM, { i: { storeId: 's1', sku: 'back', title: 'charlie: back', stock: 1, supplierId: 'sup1' } });
  expect(write.status).toBe(403);
  expect((await entitiesByTenant()).charlie).toBeUndefined();
  // The others are served as before, and every derived entity is still as its entity says.
  const alpha = await as(tokens.get('alpha'), 'query { store(storeId: "s1") { itemCount } }');
  expect(alpha.data.store.itemCount).toBe([...expected.get('alpha')!.values()].filter((i) => i.storeId === 's1').length);
  expect((await verifyDerived({ store: ctx.server.store, model: ctx.model })).ok).toBe(true);
});
