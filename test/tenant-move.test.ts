/**
 * A tenant moved between tiers online (`npm run tenant -- move`, src/maintenance/tenant-move.ts), on a schema written
 * for this test: two tenants write the same keys without pause — creates, absolute updates, deletes and creates again
 * of one key, each key's writes one after another — and read them, while one tenant is moved from PARTITION_PREFIX to
 * TABLE, the worker (a process of its own) killed twice at named points of the move, then from TABLE to an account of
 * its own (a second Azurite), the worker killed once more. After each move: every acknowledged write is there, every
 * read during the move was answered, the summaries equal a recount, `verify` is clean, and a raw listing finds the
 * moved tenant's entities on its new tier only. Last it is deleted: a raw listing of every table of both accounts and
 * of the work queues finds nothing of it, and the other tenant's entities are untouched.
 */
import { SignJWT } from 'jose';
import { untilConverged } from './support/fanout-fixtures';
import { tenantTable } from '../src/model/tenancy';
import { isReservedName } from '../src/storage/reserved-names';
import { workQueueNames } from '../src/queue/sender';
import { startSdlServer, testBlobs, testQueues, testStore, connectionString } from './support/harness';
import { startAzurite, type AzuriteHandle } from '../src/storage/azurite';
import { TableStore } from '../src/storage/table-store';
import { killCommandProcesses, runCommand, exitedOk, type CommandProcess } from './support/processes';
import { until } from './support/wait';
import { BlobServiceClient } from '@azure/storage-blob';
import { gunzipSync } from 'node:zlib';
import { listManifests, listSnapshots } from '../src/backup/backup-blobs';
import { decodeSegment } from '../src/backup/backup-format';
import { CHANGES, decodeChangeSegment, parsePassManifest } from '../src/backup/change-format';

const SECRET = 'a-tenant-move-test-secret-of-32-chars-at-least';

const SDL = `
extend schema @tenancy(claim: "tid")

type Store @entity(table: "Depot", partitionKey: "{storeId}", rowKey: "store") {
  storeId: ID!
  name: String!
  itemCount: Int! @summary(of: "Item", via: "store", count: true)
  stock: Int! @summary(of: "Item", via: "store", sum: ["stock"])
  items(first: Int, after: String): ItemConnection! @range(partitionKey: "{storeId}", rowKeyPrefix: "item_")
}

type Item @entity(table: "Depot", partitionKey: "{storeId}", rowKey: "item_{sku}")
  @index(name: "byMaker", table: "ItemsByMaker", partitionKey: "maker_{makerId}", rowKey: "{storeId}_{sku}", include: ["stock"]) {
  storeId: ID!
  sku: ID!
  stock: Int!
  makerId: ID!
  label: String @blob(container: "labels")
  store: Store! @point(partitionKey: "{storeId}", rowKey: "store")
  maker: Maker! @point(partitionKey: "makers", rowKey: "{makerId}")
}

type Maker @entity(table: "Makers", partitionKey: "makers", rowKey: "{makerId}") {
  makerId: ID!
  itemCount: Int! @summary(of: "Item", via: "maker", count: true)
  items(first: Int, after: String): ItemConnection! @range(index: "byMaker", partitionKey: "maker_{makerId}")
}

type Query {
  store(storeId: ID!): Store @point
  item(storeId: ID!, sku: ID!): Item @point
  maker(makerId: ID!): Maker @point(partitionKey: "makers")
}

type Mutation {
  createStore(input: CreateStoreInput!): StorePayload! @write(entity: "Store", action: CREATE)
  createMaker(input: CreateMakerInput!): MakerPayload! @write(entity: "Maker", action: CREATE)
  createItem(input: CreateItemInput!): ItemPayload! @write(entity: "Item", action: CREATE)
  updateItem(input: UpdateItemInput!): ItemPayload! @write(entity: "Item", action: UPDATE)
  deleteItem(input: DeleteItemInput!): ItemPayload! @write(entity: "Item", action: DELETE)
}
`;

const TENANTS = ['mover', 'stay'] as const;
type Tenant = (typeof TENANTS)[number];
const KEYS = Array.from({ length: 16 }, (_, i) => ({ storeId: `s${i % 2}`, sku: `k${i}`, makerId: `m${i % 3}` }));

let ctx: Awaited<ReturnType<typeof startSdlServer>>;
const tokens = new Map<Tenant, string>();
type Answer = { status: number; data?: any; errors?: any[] };

async function as(tenant: Tenant, query: string, variables?: Record<string, unknown>): Promise<Answer> {
  const res = await fetch(ctx.server.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${tokens.get(tenant)}` },
    body: JSON.stringify({ query, variables }),
  });
  return { status: res.status, ...((await res.json()) as object) };
}
const codeOf = (a: Answer) => a.errors?.[0]?.extensions?.code as string | undefined;

/** The moved tenant's own account at the end (tier ACCOUNT): a second Azurite, reached through an environment variable. */
let account: AzuriteHandle;
const ACCOUNT_VARIABLE = 'TABLEGRAPH_TEST_MOVER_ACCOUNT';

/**
 * The request and storage timeouts of every process: a move waits them out (a write sent before the freeze was read
 * ends within a storage call, a read of the old place within a request), so the server's must be the commands' own.
 */
const TIMEOUTS = { TABLEGRAPH_REQUEST_TIMEOUT_MS: '10000', TABLEGRAPH_STORAGE_TIMEOUT_MS: '10000' };

function env(): Record<string, string> {
  return {
    [ACCOUNT_VARIABLE]: account.connectionString,
    AZURE_STORAGE_CONNECTION_STRING: connectionString(),
    TABLEGRAPH_SCHEMA_DIR: ctx.dir,
    TABLEGRAPH_TABLE_PREFIX: ctx.server.config.tablePrefix,
    TABLEGRAPH_JWT_SECRET: SECRET,
    // What a move waits out (the server's timeouts: TIMEOUTS), and a killed worker's messages' return.
    ...TIMEOUTS,
    TABLEGRAPH_SETTLE_MS: '1000',
    TABLEGRAPH_VISIBILITY_TIMEOUT_SECONDS: '3',
  };
}

beforeAll(async () => {
  account = await startAzurite({ inMemory: true });
  process.env[ACCOUNT_VARIABLE] = account.connectionString;
  ctx = await startSdlServer(SDL, {
    TABLEGRAPH_JWT_SECRET: SECRET,
    TABLEGRAPH_RATE_LIMIT: '1000000',
    TABLEGRAPH_TENANT_TRANSACTIONS_PER_SECOND: '1000000',
    TABLEGRAPH_TENANT_ENTITIES_PER_SECOND: '10000000',
    TABLEGRAPH_WORKER: 'off',
    ...TIMEOUTS,
  });
  for (const t of TENANTS)
    tokens.set(
      t,
      await new SignJWT({ sub: `owner@${t}.test`, tid: t })
        .setProtectedHeader({ alg: 'HS256' })
        .setExpirationTime('30m')
        .sign(new TextEncoder().encode(SECRET)),
    );
}, 60_000);
afterAll(async () => {
  killCommandProcesses();
  await ctx?.close();
  await account?.stop();
  delete process.env[ACCOUNT_VARIABLE];
});

/**
 * A write sent until it is answered for sure: refusals of a moving tenant (STORAGE_BUSY, TenantMoving) are retried.
 * The name of the blob of a label it wrote is kept in `labels`, by tenant.
 */
async function write(t: Tenant, mutation: string, input: Record<string, unknown>, counts: { refused: number }): Promise<Answer> {
  for (;;) {
    const a = await as(t, `mutation($i: ${mutation[0].toUpperCase()}${mutation.slice(1)}Input!) { ${mutation}(input: $i) { item { label } } }`, { i: input });
    if (input.label && !a.errors) labels.get(t)!.add(blobNameOf(a.data[mutation].item.label));
    if (codeOf(a) !== 'STORAGE_BUSY') return a;
    expect(a.errors?.[0]?.extensions?.reason).toBe('TenantMoving');
    counts.refused++;
  }
}

/** The names of the blobs of every label a tenant's acknowledged writes gave, from the read URLs they answered. */
const labels = new Map<Tenant, Set<string>>(TENANTS.map((t) => [t, new Set()]));
/** A blob's name from its SAS URL: `/<account>/<container>/<name>`. */
const blobNameOf = (url: string) => decodeURIComponent(new URL(url).pathname.split('/').slice(3).join('/'));
const label = (t: Tenant, stock: number) => ({ contentType: 'text/plain', base64: Buffer.from(`${t} ${stock}`).toString('base64') });

/** Every blob of the deployment's containers in the shared account, read raw (@azure/storage-blob): its name and text (gunzipped). */
async function rawBlobs(): Promise<Array<{ name: string; text: string }>> {
  const service = BlobServiceClient.fromConnectionString(connectionString());
  const blobs: Array<{ name: string; text: string }> = [];
  for await (const c of service.listContainers({ prefix: ctx.server.config.tablePrefix.toLowerCase() })) {
    const container = service.getContainerClient(c.name);
    for await (const b of container.listBlobsFlat()) {
      const bytes = await container.getBlobClient(b.name).downloadToBuffer();
      blobs.push({ name: `${c.name}/${b.name}`, text: (b.name.endsWith('.gz') ? gunzipSync(bytes) : bytes).toString('utf8') });
    }
  }
  return blobs;
}

/**
 * The blobs that hold anything of a tenant: a label its writes gave (a snapshot's copy too), a name under its prefix,
 * or its PartitionKeys in the text (the backup's change and snapshot segments).
 */
function blobsOf(tenant: Tenant, blobs: Array<{ name: string; text: string }>): string[] {
  const given = [...labels.get(tenant)!];
  return blobs
    .filter((b) => given.some((l) => b.name.endsWith(`/${l}`)) || b.name.includes(`tenant=${tenant}/`) || b.text.includes(`${tenant}_`))
    .map((b) => b.name);
}

/** Every segment of every complete capture pass and snapshot in the backup container, read and checked as a restore does. */
async function backupSegments(): Promise<number> {
  const container = `${ctx.server.config.tablePrefix.toLowerCase()}-backup`;
  let segments = 0;
  for (const pass of await listManifests(testBlobs(), container, CHANGES, parsePassManifest)) {
    for (const s of pass.segments) decodeChangeSegment((await testBlobs().download(container, s.name))!.bytes, s);
    segments += pass.segments.length;
  }
  for (const snapshot of await listSnapshots(testBlobs(), container)) {
    for (const s of snapshot.segments) decodeSegment((await testBlobs().download(container, s.name))!.bytes, s);
    segments += snapshot.segments.length;
  }
  return segments;
}

/** Every entity of the deployment's tables in `store`'s account (default: the shared one), read raw (no placement), by table. */
async function rawListing(store: TableStore = testStore()): Promise<Map<string, Array<{ partitionKey: string }>>> {
  const prefix = ctx.server.config.tablePrefix;
  const listed = new Map<string, Array<{ partitionKey: string }>>();
  for (const table of (await store.listTables(prefix)).filter((n) => !isReservedName(n.slice(prefix.length)))) {
    const rows: Array<{ partitionKey: string }> = [];
    for await (const page of store.scan(table)) rows.push(...page);
    listed.set(table, rows);
  }
  return listed;
}

/** The tenant a raw row belongs to: its PartitionKey's prefix. */
const tenantOfRow = (r: { partitionKey: string }) => r.partitionKey.slice(0, r.partitionKey.indexOf('_'));

/** Each key's acknowledged state, null once deleted; one writer per key, so its last answer is its state. */
const expected = new Map<string, number | null>();
const workers: CommandProcess[] = [];
const counts = { refused: 0, writes: 0, reads: 0, readErrors: [] as string[] };

/**
 * Writers (one per key and tenant) and readers (one per tenant) without pause while `during` runs, and for 50 writes
 * more after it: every write's answer recorded in `expected`, every read's error in `counts.readErrors`.
 */
async function storm(during: () => Promise<void>): Promise<void> {
  let storming = true;
  const writer = async (t: Tenant, key: (typeof KEYS)[number]) => {
    const id = `${t}/${key.storeId}/${key.sku}`;
    let stock = expected.get(id) ?? 0;
    let live = expected.get(id) != null;
    for (let round = 0; storming; round++) {
      stock = (stock + 7) % 100;
      if (!live) {
        const a = await write(t, 'createItem', { ...key, stock, label: label(t, stock) }, counts);
        expect([codeOf(a), a.errors?.[0]?.message]).toEqual([undefined, undefined]);
        live = true;
      } else if (round % 5 === 4) {
        const a = await write(t, 'deleteItem', { storeId: key.storeId, sku: key.sku }, counts);
        expect(codeOf(a)).toBeUndefined();
        live = false;
      } else {
        // Every other update replaces the label: the value it replaces waits for its delayed cleanup.
        const a = await write(t, 'updateItem', { storeId: key.storeId, sku: key.sku, stock, ...(round % 2 === 0 && { label: label(t, stock) }) }, counts);
        expect(codeOf(a)).toBeUndefined();
      }
      counts.writes++;
      expected.set(id, live ? stock : null);
    }
  };
  const reader = async (t: Tenant) => {
    while (storming) {
      const a = await as(t, 'query { store(storeId: "s0") { itemCount items(first: 20) { edges { node { sku stock } } } } }');
      counts.reads++;
      if (a.errors) counts.readErrors.push(JSON.stringify(a.errors[0]));
    }
  };
  const running = [...TENANTS.flatMap((t) => KEYS.map((k) => writer(t, k))), ...TENANTS.map(reader)];
  try {
    await during();
    // The storm goes on a while at the new place, then stops.
    const after = counts.writes;
    await until('writes at the new place', async () => counts.writes > after + 50, { timeoutMs: 60_000 });
  } finally {
    storming = false;
    await Promise.all(running);
  }
  expect(counts.readErrors).toEqual([]);
  // Writes sent while the tenant was frozen were held by the server's own retries (the partition committer's
  // attempts), or answered STORAGE_BUSY (TenantMoving) and sent again (write): none was acknowledged at the old place.
}

/** The worker process killed (SIGKILL) and a new one started. */
async function killWorker(): Promise<void> {
  const last = workers[workers.length - 1];
  last.child.kill('SIGKILL');
  await last.exited;
  workers.push(runCommand('worker', [], undefined, env()));
}

/** Every tenant's data is what its acknowledged writes made: items, summaries, the worker's counts; verify clean. */
async function expectAcknowledged(): Promise<void> {
  for (const t of TENANTS) {
    for (const m of ['m0', 'm1', 'm2']) {
      const live = KEYS.filter((k) => k.makerId === m && expected.get(`${t}/${k.storeId}/${k.sku}`) != null).length;
      await until(
        `${t}'s ${m} counts ${live} items`,
        async () => (await as(t, `query { maker(makerId: "${m}") { itemCount } }`)).data?.maker?.itemCount === live,
        { timeoutMs: 90_000 },
      );
    }
    for (const key of KEYS) {
      const a = await as(t, 'query($s: ID!, $k: ID!) { item(storeId: $s, sku: $k) { stock } }', { s: key.storeId, k: key.sku });
      const want = expected.get(`${t}/${key.storeId}/${key.sku}`);
      expect([t, key.sku, a.data?.item?.stock ?? null]).toEqual([t, key.sku, want ?? null]);
    }
    for (const s of ['s0', 's1']) {
      const live = KEYS.filter((k) => k.storeId === s && expected.get(`${t}/${s}/${k.sku}`) != null);
      const a = await as(t, `query { store(storeId: "${s}") { itemCount stock } }`);
      expect(a.data.store).toEqual({ itemCount: live.length, stock: live.reduce((n, k) => n + (expected.get(`${t}/${s}/${k.sku}`) ?? 0), 0) });
    }
  }
  // Index entities that include a changed value are the worker's, eventually: the last updates' may still be queued
  // (a killed worker's messages come back after the visibility timeout) when the counts above have converged.
  const report = await untilConverged({ store: ctx.server.store, model: ctx.model, blobs: { store: testBlobs(), cleanupDelaySeconds: 3600 } });

  // Every label's blob is found under its tenant's entities: both tenants' items name one each.
  const labelled = report.blobs.find((b) => b.field === 'Item.label')!;
  expect(labelled.listed).toBeGreaterThanOrEqual(labelled.named);
  expect(labelled.named).toBe(TENANTS.flatMap((t) => KEYS.filter((k) => expected.get(`${t}/${k.storeId}/${k.sku}`) != null)).length);
}

const ownTables = () => new Set(ctx.model.tables.map((t) => tenantTable(t, 'mover')));

test('moved to TABLE under a write storm, its worker killed twice: no acknowledged write lost, reads answered, verify clean', async () => {
  for (const t of TENANTS) {
    for (const s of ['s0', 's1'])
      expect(codeOf(await as(t, 'mutation { createStore(input: { storeId: "' + s + '", name: "n" }) { __typename } }'))).toBeUndefined();
    for (const m of ['m0', 'm1', 'm2']) expect(codeOf(await as(t, 'mutation { createMaker(input: { makerId: "' + m + '" }) { __typename } }'))).toBeUndefined();
  }
  workers.push(runCommand('worker', [], undefined, env()));
  await storm(async () => {
    const move = runCommand('tenant', ['move', 'mover', '--isolation', 'TABLE'], undefined, env());
    // The worker killed twice at named points of the move: while it copies, and once the tenant is frozen.
    await move.waitFor(/"step":"copy"/, 120_000);
    await killWorker();
    await move.waitFor(/"step":"freeze"/, 120_000);
    await killWorker();
    expect(await exitedOk(move)).toMatch(/tenant mover moved from PARTITION_PREFIX to TABLE: \d+ entities copied/);
  });
  expect(counts.reads).toBeGreaterThan(20);
  await expectAcknowledged();
  // A raw listing: the moved tenant's entities in its own tables only; the other's in the shared ones.
  const own = ownTables();
  expect([...own].filter((t) => t.includes('Depot')).length).toBe(1);
  let mine = 0;
  for (const [table, rows] of await rawListing()) {
    for (const r of rows) {
      expect([table, tenantOfRow(r)]).toEqual([table, own.has(table) ? 'mover' : 'stay']);
      if (own.has(table)) mine++;
    }
  }
  expect(mine).toBeGreaterThan(0);
}, 600_000);

test('moved on to an account of its own under the storm, its worker killed again: the same, and its own tables gone', async () => {
  await storm(async () => {
    const move = runCommand('tenant', ['move', 'mover', '--isolation', 'ACCOUNT', '--account', `env:${ACCOUNT_VARIABLE}`], undefined, env());
    await move.waitFor(/"step":"freeze"/, 120_000);
    await killWorker();
    expect(await exitedOk(move)).toMatch(/tenant mover moved from TABLE to ACCOUNT: \d+ entities copied/);
  });
  await expectAcknowledged();
  const own = ownTables();
  const shared = await rawListing();
  expect([...shared.keys()].filter((t) => own.has(t))).toEqual([]);
  for (const [table, rows] of shared) for (const r of rows) expect([table, tenantOfRow(r)]).toEqual([table, 'stay']);
  const theirs = [...(await rawListing(new TableStore({ connectionString: account.connectionString, target: 'azurite' }))).values()].flat();
  expect(theirs.length).toBeGreaterThan(0);
  expect(new Set(theirs.map(tenantOfRow))).toEqual(new Set(['mover']));
}, 600_000);

test('then deleted: nothing of it in any table of either account, any container or the queues; the other tenant as it was', async () => {
  const accountStore = new TableStore({ connectionString: account.connectionString, target: 'azurite' });
  const stay = async () => [...(await rawListing()).values()].flat().filter((r) => tenantOfRow(r) === 'stay').length;
  const before = await stay();
  // A snapshot, so that the backup holds its rows and its labels' blobs as well as its changes.
  expect(await exitedOk(runCommand('backup', ['snapshot'], undefined, env()))).toMatch(/snapshot/);
  // Its blobs: the labels its items name, those replaced since (their cleanup not yet due), any a write refused while
  // it was frozen had uploaded, the snapshot's copies, and the backup's segments that hold its changes and rows.
  const blobsBefore = await rawBlobs();
  const mine = blobsOf('mover', blobsBefore);
  const labelsContainer = `${ctx.server.config.tablePrefix.toLowerCase()}labels/`;
  expect(mine.filter((n) => n.startsWith(labelsContainer)).length).toBeGreaterThan(KEYS.length);
  expect(mine.filter((n) => n.includes('/snapshots/') && n.includes('/blobs/')).length).toBeGreaterThan(0);
  expect(mine.filter((n) => n.endsWith('.ndjson.gz')).length).toBeGreaterThan(0);
  const theirs = blobsBefore.filter((b) => b.name.startsWith(labelsContainer) && !mine.includes(b.name)).map((b) => b.name);
  const del = runCommand('tenant', ['delete', 'mover', '--yes'], undefined, env());
  const printed = await exitedOk(del);
  console.log(
    printed
      .split('\n')
      .filter((l) => /backup:|deleted:|warning:/.test(l))
      .join('\n'),
  );
  expect(Number(printed.match(/tenant mover deleted: \d+ entities, (\d+) blobs/)?.[1])).toBe(mine.filter((n) => n.startsWith(labelsContainer)).length);
  expect(printed).toMatch(/backup: [1-9]\d* changes out of [1-9]\d* capture passes, [1-9]\d* rows and [1-9]\d* blob copies out of [1-9]\d* snapshots/);
  const blobsAfter = await rawBlobs();
  expect(blobsOf('mover', blobsAfter)).toEqual([]);
  expect(blobsAfter.filter((b) => b.name.startsWith(labelsContainer)).map((b) => b.name)).toEqual(theirs);
  // The backup still reads back whole: every segment matches its manifest, the other tenant's in it.
  expect(await backupSegments()).toBeGreaterThan(0);
  expect(blobsOf('stay', blobsAfter).filter((n) => n.endsWith('.ndjson.gz')).length).toBeGreaterThan(0);
  for (const listing of [await rawListing(), await rawListing(accountStore)]) {
    expect([...listing.values()].flat().filter((r) => tenantOfRow(r) === 'mover')).toEqual([]);
  }
  expect(await stay()).toBe(before);
  const queues = workQueueNames(ctx.server.config.tablePrefix);
  await until(
    'the work queues are empty',
    async () => (await testQueues().visibleCount(queues.queue)) === 0 && (await testQueues().visibleCount(queues.poison)) === 0,
  );
  expect((await as('mover', 'query { store(storeId: "s0") { name } }')).status).toBe(403);
  for (const w of workers) w.child.kill('SIGTERM');
}, 600_000);
