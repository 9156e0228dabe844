/**
 * A capture pass (src/backup/capture-pass.ts) reads what was written since the last one, whatever the size of the
 * tables: the partitions the capture journal names (src/model/capture-journal.ts), each by a range query of its change
 * entities. On a schema written for this test — books on shelves, an index of them by author in a table of its own —
 * through a counting proxy in front of the Table service (test/support/storage-proxy.ts):
 * - no query of a table of the data without its PartitionKey, at 1,000 entities and at 10,000; the rows a pass reads
 *   follow the writes, not the tables;
 * - nothing committed is missed: a write whose EGT's answer was lost (applied), marks made by a clock 5 s behind or
 *   ahead, a mark whose writer was killed before its EGT, a pass racing another; and under a storm of writers into
 *   one partition — creates, updates, deletes and re-creates of the same keys, EGTs throttled or applied with their
 *   answer lost (a seeded schedule), passes running meanwhile — a write is acknowledged exactly when stored, each
 *   key's last captured change is what the table holds, and verify is clean;
 * - the change entities a pass copied are deleted by a later one once due, a subscription's kept for its retention.
 */
import { runCapturePass, type CapturePassOptions } from '../src/backup/capture-pass';
import { listManifests } from '../src/backup/backup-blobs';
import { CHANGES, decodeChangeSegment, parsePassManifest, type CapturedChange } from '../src/backup/change-format';
import { queueTrims } from '../src/backup/journal-reads';
import { loadEntities } from '../src/load/load-entities';
import { bucketKey, bucketOf, journalTable } from '../src/model/capture-journal';
import { CHANGE_ROW_KEY_END, CHANGE_ROW_KEY_PREFIX, changeEntity } from '../src/model/change-log';
import { commitOrder } from '../src/backup/change-replay';
import { formatVerifyReport, verifyDerived } from '../src/maintenance/verify-derived';
import { TableStore } from '../src/storage/table-store';
import { JournalMarks } from '../src/write/journal-marks';
import { connectionString, startSdlServer, testBlobs, testQueues, testStore } from './support/harness';
import { startStorageProxy, type StorageProxy } from './support/storage-proxy';
import { seededRng } from './support/fanout-fixtures';
import { testSeed } from './support/seed';
import { drainFanout } from './support/write-fixtures';

const SDL = `
type Book @entity(table: "Library", partitionKey: "{shelf}", rowKey: "book_{id}")
  @index(name: "byAuthor", table: "BooksByAuthor", partitionKey: "{author}", rowKey: "{shelf}_{id}") {
  shelf: ID!
  id: ID!
  author: String!
  title: String!
}
type Query {
  book(shelf: ID!, id: ID!): Book @point
  byAuthor(author: String!, first: Int, after: String): BookConnection! @range(index: "byAuthor")
}
type Mutation {
  createBook(input: CreateBookInput!): BookPayload! @write(entity: "Book", action: CREATE)
  updateBook(input: UpdateBookInput!): BookPayload! @write(entity: "Book", action: UPDATE)
  deleteBook(input: DeleteBookInput!): BookPayload! @write(entity: "Book", action: DELETE)
}
`;

let proxy: StorageProxy;
let ctx: Awaited<ReturnType<typeof startSdlServer>>;
/** The capture pass's store: through the proxy, so its calls are counted. */
let passStore: TableStore;

beforeAll(async () => {
  // Faults (when a test turns them on) meet EGTs alone.
  proxy = await startStorageProxy(connectionString(), { seed: testSeed(), faultable: (method, path) => method === 'POST' && path.includes('$batch') });
  // No worker of its own (no capture loop): the test runs each pass.
  ctx = await startSdlServer(SDL, { AZURE_STORAGE_CONNECTION_STRING: proxy.connectionString, TABLEGRAPH_WORKER: 'off' });
  passStore = new TableStore({ connectionString: proxy.connectionString, target: 'azurite', timeoutMs: 30_000 });
}, 60_000);
afterAll(async () => {
  await ctx?.close();
  await proxy?.close();
});

const prefix = () => ctx.server.config.tablePrefix;
const container = () => ctx.server.config.backup.container;
function passOptions(store: TableStore = passStore): CapturePassOptions {
  return { store, blobs: testBlobs(), container: container(), model: ctx.model, tablePrefix: prefix(), schemaHash: 'h', subscriptionRetentionMs: 3_600_000 };
}

async function createBook(shelf: string, id: string, title = `t${id}`): Promise<void> {
  const r = await ctx.server.query('mutation($i: CreateBookInput!) { createBook(input: $i) { book { id } } }', {
    i: { shelf, id, author: `a${Number(id) % 3}`, title },
  });
  expect(r.errors).toBeUndefined();
}

/** Books loaded straight into the tables (the loader writes no change entity and marks nothing): the tables' size. */
async function fill(count: number, from: number): Promise<void> {
  async function* rows() {
    for (let i = from; i < from + count; i++) yield { line: i, values: { shelf: `fill${i % 50}`, id: String(i), author: `f${i % 40}`, title: 'filler' } };
  }
  await loadEntities({ store: testStore(), model: ctx.model, steps: [{ type: 'Book', rows: rows() }] });
}

/** Every change in the container's complete passes: `table/partitionKey/rowKey` of each entity written. */
async function captured(): Promise<CapturedChange[]> {
  const all: CapturedChange[] = [];
  for (const pass of await listManifests(testBlobs(), container(), CHANGES, parsePassManifest)) {
    for (const s of pass.segments) all.push(...decodeChangeSegment((await testBlobs().download(container(), s.name))!.bytes, s));
  }
  return all;
}

/** The queries a pass sent to the tables of the data (not the journal, not the catalogue), and the rows it read. */
async function countedPass(): Promise<{
  queries: string[];
  whole: string[];
  rows: number;
  changes: number;
  rpo?: { p99Ms: number; maxMs: number; writes: number };
}> {
  const before = proxy.forwarded().length;
  const { latest } = await runCapturePass(passOptions());
  const data = [`${prefix()}Library`, `${prefix()}BooksByAuthor`];
  const queries = proxy
    .forwarded()
    .slice(before)
    .filter((f) => f.method === 'GET' && data.some((t) => f.path.includes(`/${t}(`) || f.path.includes(`/${t}()`)))
    .map((f) => decodeURIComponent(f.path));
  return { queries, whole: queries.filter((q) => !/PartitionKey eq '/.test(q)), rows: latest.read!.rows, changes: latest.changes, rpo: latest.rpo };
}

test('a pass queries only the partitions written, by range queries, and reads as many rows at 10,000 entities as at 1,000', async () => {
  await runCapturePass(passOptions()); // the first pass: nothing written yet
  await fill(1000, 0);
  for (let i = 0; i < 20; i++) await createBook(`s${i % 4}`, String(100_000 + i));
  const small = await countedPass();
  await fill(9000, 1000);
  for (let i = 20; i < 40; i++) await createBook(`s${i % 4}`, String(100_000 + i));
  const large = await countedPass();
  console.log(
    `capture pass at 1,000 and 10,000 entities: ${JSON.stringify({ small: { ...small, queries: small.queries.length }, large: { ...large, queries: large.queries.length } })}`,
  );
  for (const pass of [small, large]) {
    expect(pass.whole).toEqual([]);
    // The 20 changes since the last pass — and those of the 20 before when they were committed within the clock
    // margin of that pass's start, read again — and not a row more.
    expect(pass.changes).toBeGreaterThanOrEqual(20);
    expect(pass.changes).toBeLessThanOrEqual(40);
    expect(pass.rows).toBeLessThanOrEqual(pass.changes + 10);
    // A query per partition written (4 shelves), at most once per pass; the index's partitions have no change entities.
    expect(pass.queries.length).toBeLessThanOrEqual(8);
    // The RPO of the 20 writes committed since the last pass's start: each restorable once this pass is recorded.
    expect(pass.rpo?.writes).toBe(20);
    expect(pass.rpo!.p99Ms).toBeLessThanOrEqual(pass.rpo!.maxMs);
    expect(pass.rpo!.maxMs).toBeGreaterThan(0);
  }
  // Ten times the entities, the same writes: the same rows, but for the changes read again within the margin.
  expect(large.rows).toBeLessThanOrEqual(small.rows + 20 + 10);
}, 120_000);

test('nothing committed is missed: an answer lost, marks of a clock 5 s behind and ahead, a mark without its EGT, passes racing', async () => {
  // An EGT applied, its answer lost (500 after the apply): the write reads back as applied and is acknowledged.
  proxy.setFaults({ timedOutAfterApply: 1 });
  await createBook('lost', '1').finally(() => proxy.setFaults({}));
  // Writers whose clocks are 5 s behind and 5 s ahead of this one: their marks in other buckets; then their EGTs.
  const store = testStore();
  const table = `${prefix()}Library`;
  for (const [shelf, skew] of [
    ['behind', -5000],
    ['ahead', 5000],
  ] as const) {
    await new JournalMarks(store, prefix(), () => Date.now() + skew).mark(table, shelf);
    const at = Date.now() + skew;
    const image = [{ partitionKey: shelf, rowKey: 'book_1', properties: { EntityType: { type: 'String' as const, value: 'Book' } } }];
    await store.createEntity(
      table,
      changeEntity({ table, partitionKey: shelf, rowKey: 'book_1' }, { entityType: 'Book', kind: 'CREATED', writeId: `w-${shelf}`, at, image }),
    );
  }
  // A writer killed between its mark and its EGT: marked, nothing committed.
  await new JournalMarks(store, prefix()).mark(table, 'killed');
  // Two passes at once (as two workers without the lease would be): each reads the same changes; none is missed.
  await Promise.all([runCapturePass(passOptions()), runCapturePass(passOptions(testStore()))]);
  await runCapturePass(passOptions());
  const keys = new Set((await captured()).map((c) => `${c.partitionKey}/${c.rowKey}`));
  expect([...keys].filter((k) => /^(lost|behind|ahead|killed)\//.test(k)).sort()).toEqual(['ahead/book_1', 'behind/book_1', 'lost/book_1']);
}, 120_000);

test('a later pass deletes the change entities copied once they are due; a subscription-free type keeps none', async () => {
  const store = testStore();
  const table = `${prefix()}Library`;
  // Change entities of twenty minutes ago, copied by a pass then, their trim due now.
  const at = Date.now() - 20 * 60_000;
  for (let i = 0; i < 3; i++) {
    const address = { table, partitionKey: 'old', rowKey: `book_${i}` };
    await store.createEntity(table, changeEntity(address, { entityType: 'Book', kind: 'CREATED', writeId: `old-${i}`, at: at + i }));
  }
  await queueTrims(store, prefix(), Date.now() - 60_000, [{ table, partitionKey: 'old' }]);
  const changesIn = async (partitionKey: string) =>
    (await store.queryRange({ table, partitionKey, rowKeyFrom: CHANGE_ROW_KEY_PREFIX, rowKeyTo: CHANGE_ROW_KEY_END, limit: 100 })).entities.length;
  expect(await changesIn('old')).toBe(3);
  const { trimmed } = await runCapturePass(passOptions());
  expect(trimmed).toBeGreaterThanOrEqual(3);
  expect(await changesIn('old')).toBe(0);
  // The trim done is out of the queue: the journal's due bucket is empty.
  const due = await store.queryRange({ table: journalTable(prefix()), partitionKey: bucketKey('t', bucketOf(Date.now() - 60_000)), limit: 10 });
  expect(due.entities).toEqual([]);
}, 60_000);

test('a storm into one partition under faults, passes running meanwhile: acknowledged exactly when stored, every key last captured as stored, verify clean', async () => {
  const seed = testSeed();
  const rng = seededRng(seed);
  const table = `${prefix()}Library`;
  const state = new Map<string, string | null>(); // each key's title as acknowledged; null: deleted
  const answers: Record<string, number> = {};
  let storming = true;
  const passes = (async () => {
    while (storming) await runCapturePass(passOptions()).catch(() => undefined); // a pass that meets a fault is run again
  })();
  proxy.setFaults({ throttled: 0.1, busy: 0.05, timedOutAfterApply: 0.05, resetAfterApply: 0.05 });
  // Four writers, a key each, one partition: create, update, delete, create again — each write's answer recorded.
  await Promise.all(
    Array.from({ length: 4 }, async (_, w) => {
      const id = `storm${w}`;
      for (let i = 0; i < 12; i++) {
        const current = state.get(id) ?? null;
        const title = `t${w}-${i}`;
        const [name, input] =
          current === null
            ? ['createBook', { shelf: 'storm', id, author: `a${w}`, title }]
            : rng.chance(0.4)
              ? ['deleteBook', { shelf: 'storm', id }]
              : ['updateBook', { shelf: 'storm', id, title }];
        const type = `${name[0].toUpperCase()}${name.slice(1)}Input`;
        const r = await ctx.server.query(`mutation($i: ${type}!) { ${name}(input: $i) { __typename } }`, { i: input });
        const code = r.errors?.[0]?.extensions?.code ?? 'ok';
        answers[`${name} ${code}`] = (answers[`${name} ${code}`] ?? 0) + 1;
        if (!r.errors) state.set(id, name === 'deleteBook' ? null : title);
        else expect(['STORAGE_BUSY', 'STORAGE_UNAVAILABLE']).toContain(code); // refused: not stored (checked below)
      }
    }),
  );
  proxy.setFaults({});
  storming = false;
  await passes;
  await runCapturePass(passOptions());
  console.log(`storm into one partition (seed ${seed}): ${JSON.stringify(answers)}; injected ${JSON.stringify(proxy.injected())}`);
  // Acknowledged exactly when stored: the table holds each key as its acknowledged writes left it.
  const last = new Map<string, CapturedChange>();
  for (const c of await captured()) {
    if (c.partitionKey !== 'storm') continue;
    const seen = last.get(c.rowKey);
    if (!seen || commitOrder(seen, c) < 0) last.set(c.rowKey, c);
  }
  for (const [id, title] of state) {
    const stored = await testStore().getEntity({ table, partitionKey: 'storm', rowKey: `book_${id}` });
    expect([id, stored?.properties.title ?? null]).toEqual([id, title]);
    // Its last captured change is what is stored: the image's title, or a delete.
    const change = last.get(`book_${id}`);
    const image = change?.kind === 'DELETED' ? null : (change?.image?.[0]?.entity.properties.title?.value ?? 'none captured');
    expect([id, image]).toEqual([id, title]);
  }
  await drainFanout({ queues: testQueues(), store: testStore(), model: ctx.model, tablePrefix: prefix() });
  expect(formatVerifyReport(await verifyDerived({ store: testStore(), model: ctx.model }))).toMatch(/^verify: ok/m);
}, 120_000);
