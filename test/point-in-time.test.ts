/**
 * Point-in-time restore (docs/backup.md) on a schema written for the test — shelves, their books and tallies: a
 * count and a sum kept in the EGT, an inter-partition unique index and an intra-partition one, a `@series` counted
 * up by INCREMENT, a MOVE between shelves. Writers change it in a storm (creates, updates, increments, deletes, a
 * move), each write's request start and acknowledgement recorded; T is taken when half the storm is acknowledged.
 * The workers that copy the captured changes are killed twice in a pass (a named hold after its first segment) and
 * resume; `npm run restore -- --at T` is killed twice (after a segment, in a build) and resumes. The restored
 * deployment then holds every write acknowledged at or before T and none begun after it — the one write of a key in
 * flight at T wholly in or wholly out — its summaries equal a recount, and verify is clean.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { restorableWindow } from '../src/backup/restorable-window';
import { BlobStore } from '../src/storage/blob-store';
import { connectionString, DIRECTIVES_FILE, startTestServer, uniquePrefix, type TestServer } from './support/harness';
import { exitedOk, killedAt, runCommand, type CommandProcess } from './support/processes';
import { seededRng } from './support/fanout-fixtures';
import { testSeed } from './support/seed';
import { statesAt } from './support/states-at';
import { pause, until } from './support/wait';

const SDL = `
type Shelf @entity(table: "Shelves", partitionKey: "{shelf}", rowKey: "shelf") {
  shelf: ID!
  name: String!
  books: Int! @summary(of: "Book", via: "home", count: true)
  pages: Int! @summary(of: "Book", via: "home", sum: ["pages"])
  bookList(first: Int, after: String): BookConnection! @range(partitionKey: "{shelf}", rowKeyPrefix: "book_")
}
type Book @entity(table: "Shelves", partitionKey: "{shelf}", rowKey: "book_{id}")
  @index(name: "byIsbn", table: "BooksByIsbn", partitionKey: "{isbn}", rowKey: "book", unique: true)
  @index(name: "byTitle", rowKey: "title_{title}_{id}") {
  shelf: ID!
  id: ID!
  isbn: String!
  title: String!
  pages: Int!
  home: Shelf! @point(partitionKey: "{shelf}", rowKey: "shelf")
}
type Tally @entity(table: "Shelves", partitionKey: "{shelf}", rowKey: "tally_{id}") {
  shelf: ID!
  id: ID!
  hits: [Int!]! @series(length: 4)
}
type Query {
  shelf(shelf: ID!): Shelf @point
  book(shelf: ID!, id: ID!): Book @point
  bookByIsbn(isbn: String!): Book @point(index: "byIsbn")
  tally(shelf: ID!, id: ID!): Tally @point
}
type Mutation {
  createShelf(input: CreateShelfInput!): ShelfPayload! @write(entity: "Shelf", action: CREATE)
  createBook(input: CreateBookInput!): BookPayload! @write(entity: "Book", action: CREATE)
  updateBook(input: UpdateBookInput!): BookPayload! @write(entity: "Book", action: UPDATE)
  deleteBook(input: DeleteBookInput!): BookPayload! @write(entity: "Book", action: DELETE)
  deleteShelf(input: DeleteShelfInput!): ShelfPayload! @write(entity: "Shelf", action: DELETE)
  moveBook(input: MoveBookInput!): BookPayload! @write(entity: "Book", action: MOVE)
  countHit(input: IncrementTallyInput!): TallyPayload! @write(entity: "Tally", action: INCREMENT)
}`;

const SHELVES = ['s0', 's1', 's2'];
const LANES = 6;
const OPS_PER_LANE = 40;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-pitr-'));
const source = uniquePrefix();
const ENV = {
  AZURE_STORAGE_CONNECTION_STRING: connectionString(),
  TABLEGRAPH_SCHEMA_DIR: dir,
  TABLEGRAPH_TABLE_PREFIX: source,
  TABLEGRAPH_BACKUP_CAPTURE_SECONDS: '1',
  TABLEGRAPH_BUILD_PAGE_SIZE: '25',
  TABLEGRAPH_BUILD_LEASE_MS: '2000',
  TABLEGRAPH_BUILD_POLL_MS: '300',
  TABLEGRAPH_BUILD_ENTITIES_PER_SECOND: '0',
};
const container = `${source.toLowerCase()}-backup`;
const blobs = new BlobStore({ connectionString: connectionString() });
let server: TestServer;
let worker: CommandProcess | undefined;

function command(name: string, args: string[], env: Record<string, string> = {}): CommandProcess {
  return runCommand(name, args, dir, { ...ENV, ...env });
}

function serverOn(prefix: string, env: Record<string, string> = {}): Promise<TestServer> {
  return startTestServer({ TABLEGRAPH_SCHEMA_DIR: dir, TABLEGRAPH_TABLE_PREFIX: prefix, TABLEGRAPH_RATE_LIMIT: '1000000', ...env });
}

async function must(s: TestServer, query: string, variables?: Record<string, unknown>): Promise<any> {
  const r = await s.query(query, variables);
  expect(r.errors).toBeUndefined();
  return r.data;
}

/** A book's state as the test knows it; null: none at its address. */
type BookState = { title: string; pages: number; isbn: string } | null;

/** One write of the storm: what it did, to what key, and when it began and was acknowledged (ms, this clock). */
interface Write {
  key: string;
  start: number;
  ack: number;
  /** The state of its key after it: a book's, or a tally's hits (cumulative). */
  after: BookState | number[];
}

/** Every key's writes, in order (one lane writes a key, one write at a time). */
const writes = new Map<string, Write[]>();
/** The state of each key before the storm. */
const before = new Map<string, BookState | number[]>();
let counter = 0;
/** T: when half the storm's writes were acknowledged (ms, this clock); 0 until then. */
let t = 0;

const bookKey = (shelf: string, id: string) => `book:${shelf}/${id}`;

async function createBook(s: TestServer, shelf: string, id: string): Promise<BookState> {
  const n = ++counter;
  const state = { title: `title-${n}`, pages: n, isbn: `isbn-${n}` };
  await must(s, 'mutation($input: CreateBookInput!) { createBook(input: $input) { __typename } }', { input: { shelf, id, ...state } });
  return state;
}

/** One lane: its keys (books and a tally on one shelf), written one at a time; each write recorded. */
async function lane(s: TestServer, index: number, rng: ReturnType<typeof seededRng>, acknowledged: () => void): Promise<void> {
  const shelf = SHELVES[index % SHELVES.length];
  const books = Array.from({ length: 4 }, (_, k) => `l${index}b${k}`);
  const tally = `l${index}t`;
  const state = new Map<string, BookState | number[]>(books.map((id) => [bookKey(shelf, id), before.get(bookKey(shelf, id)) ?? null]));
  state.set(`tally:${shelf}/${tally}`, [0, 0, 0, 0]); // no tally before the storm: its first INCREMENT creates it
  for (let i = 0; i < OPS_PER_LANE; i++) {
    const start = Date.now();
    let key: string;
    let after: BookState | number[];
    if (rng.chance(0.25)) {
      key = `tally:${shelf}/${tally}`;
      const hour = rng.int(4);
      const by = 1 + rng.int(3);
      await must(s, 'mutation($input: IncrementTallyInput!) { countHit(input: $input) { __typename } }', {
        input: { shelf, id: tally, hits: { at: hour, by } },
      });
      after = (state.get(key) as number[]).map((h, j) => (j === hour ? h + by : h));
    } else {
      const id = rng.pick(books);
      key = bookKey(shelf, id);
      const current = state.get(key) as BookState;
      if (!current) after = await createBook(s, shelf, id);
      else if (rng.chance(0.3)) {
        await must(s, 'mutation($input: DeleteBookInput!) { deleteBook(input: $input) { __typename } }', { input: { shelf, id } });
        after = null;
      } else {
        const n = ++counter;
        await must(s, 'mutation($input: UpdateBookInput!) { updateBook(input: $input) { __typename } }', {
          input: { shelf, id, title: `title-${n}`, pages: n },
        });
        after = { ...current, title: `title-${n}`, pages: n };
      }
    }
    state.set(key, after);
    writes.set(key, [...(writes.get(key) ?? []), { key, start, ack: Date.now(), after }]);
    acknowledged();
    await pause(20 + rng.int(40), 'pace');
  }
}

/** The states a key may have at `t`: after its last write acknowledged by then, or after the one in flight at `t`. */
function allowedAt(key: string, t: number): Array<BookState | number[]> {
  return statesAt(writes.get(key) ?? [], before.get(key) ?? null, t);
}

/**
 * What a server restored to T answers for the keys of `shelves`: each key as its writes acknowledged by T left it (or
 * as the one in flight then did), each book found by its unique ISBN, and each shelf's count and sum equal to a
 * recount of its books.
 */
async function expectStateAt(restored: TestServer, shelves: string[]): Promise<void> {
  const keys = [...new Set([...before.keys(), ...writes.keys()])].filter((k) => shelves.includes(k.split(':')[1].split('/')[0]));
  for (const key of keys) {
    const [kind, rest] = key.split(':');
    const [shelf, id] = rest.split('/');
    let state: BookState | number[];
    if (kind === 'tally') state = (await must(restored, `{ t: tally(shelf: "${shelf}", id: "${id}") { hits } }`)).t?.hits ?? null;
    else state = (await must(restored, `{ b: book(shelf: "${shelf}", id: "${id}") { title pages isbn } }`)).b;
    expect({ key, allowed: allowedAt(key, t) }).toEqual({ key, allowed: expect.arrayContaining([state]) });
    if (kind === 'book' && state) expect((await must(restored, `{ b: bookByIsbn(isbn: "${(state as { isbn: string }).isbn}") { id } }`)).b).toEqual({ id });
  }
  for (const shelf of shelves) {
    const r = await must(restored, `{ s: shelf(shelf: "${shelf}") { books pages bookList(first: 100) { edges { node { pages } } } } }`);
    const list = r.s.bookList.edges.map((e: { node: { pages: number } }) => e.node.pages);
    expect([shelf, r.s.books, r.s.pages]).toEqual([shelf, list.length, list.reduce((n: number, p: number) => n + p, 0)]);
  }
}

beforeAll(async () => {
  fs.copyFileSync(DIRECTIVES_FILE, path.join(dir, 'directives.graphql'));
  fs.writeFileSync(path.join(dir, 'schema.graphql'), SDL);
  // The server leaves the work queue and the capture passes to the worker processes the test starts and kills.
  server = await serverOn(source, { TABLEGRAPH_WORKER: 'off' });
}, 60_000);

afterAll(async () => {
  worker?.child.kill('SIGKILL');
  await server?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('a restore to T mid-storm holds every write acknowledged by T and none begun after, summaries recounted, verify clean; workers and the restore killed twice each', async () => {
  const seed = testSeed();
  for (const shelf of SHELVES)
    await must(server, 'mutation($input: CreateShelfInput!) { createShelf(input: $input) { __typename } }', { input: { shelf, name: `Shelf ${shelf}` } });
  for (let l = 0; l < LANES; l++)
    for (let k = 0; k < 2; k++) {
      const shelf = SHELVES[l % SHELVES.length];
      before.set(bookKey(shelf, `l${l}b${k}`), await createBook(server, shelf, `l${l}b${k}`));
    }
  // The moved book: created before the storm, moved during it.
  const moved = await createBook(server, 's0', 'mover');

  // Two workers killed in a capture pass, each after its first segment (before the pass's manifest): the third
  // finds the same changes again (the lease of a killed one lapses first: 15 s).
  for (let i = 0; i < 2; i++) {
    const held = command('worker', [], { TABLEGRAPH_TEST_BUILD_HOLD: 'capture@1' });
    await killedAt(held, 'test hook: capture held');
  }
  worker = command('worker', []);
  const window = () => restorableWindow(blobs, container);
  await until('a complete capture pass', async () => (await window()).latestRestorableTime !== undefined, { timeoutMs: 60_000, everyMs: 250 });
  const snapshot = await exitedOk(command('backup', ['snapshot']));
  expect(snapshot).toMatch(/snapshot \S+: complete/);

  // The storm: six lanes, and the move; T when half the storm's writes are acknowledged.
  let acked = 0;
  const half = (LANES * OPS_PER_LANE) / 2;
  const onAck = () => {
    if (++acked === half) t = Date.now();
  };
  const moveStart = Date.now();
  let moveAsked = 0;
  let moveAck = 0;
  let moveDone = Number.POSITIVE_INFINITY;
  const move = (async () => {
    await until('a quarter of the storm', () => acked >= half / 2, { timeoutMs: 60_000 });
    moveAsked = Date.now();
    await must(server, 'mutation($input: MoveBookInput!) { moveBook(input: $input) { __typename } }', { input: { shelf: 's0', id: 'mover', toShelf: 's1' } });
    moveAck = Date.now();
    await until('the move carried out', async () => {
      const r = await must(server, '{ old: book(shelf: "s0", id: "mover") { id } now: book(shelf: "s1", id: "mover") { id } }');
      return r.old === null && r.now !== null;
    });
    moveDone = Date.now();
  })();
  await Promise.all([...Array.from({ length: LANES }, (_, l) => lane(server, l, seededRng(seed + l + 1), onAck)), move]);
  expect(t).toBeGreaterThan(0);
  const at = new Date(t).toISOString();
  const last = Math.max(...[...writes.values()].flat().map((w) => w.ack));
  await until('the storm captured', async () => Date.parse((await window()).latestRestorableTime ?? '0') > last, { timeoutMs: 90_000, everyMs: 250 });
  const status = await exitedOk(command('backup', ['status', '--json']));
  const parsed = JSON.parse(status.slice(status.indexOf('{'))) as { earliestRestorableTime: string; latestRestorableTime: string; lagMs: number };
  expect(Date.parse(parsed.earliestRestorableTime)).toBeLessThanOrEqual(t);
  expect(Date.parse(parsed.latestRestorableTime)).toBeGreaterThan(t);
  // The server, though the workers run the passes, shows the lag: in /health's details and in /metrics.
  const base = server.url.replace(/\/graphql$/, '');
  const health = (await (await fetch(`${base}/health`)).json()) as { backup: { latestRestorableTime: string; lagSeconds: number } };
  expect(Date.parse(health.backup.latestRestorableTime)).toBeGreaterThan(t);
  expect(health.backup.lagSeconds).toBeGreaterThanOrEqual(0);
  const metrics = await (await fetch(`${base}/metrics`)).text();
  expect(metrics).toMatch(/^tablegraph_backup_lag_seconds \d/m);
  expect(metrics).toMatch(/^tablegraph_backup_capture_lag_seconds\{quantile="0.99"\} \d/m);
  expect(metrics).toMatch(/^tablegraph_backup_rpo_seconds\{quantile="0.99"\} \d/m);

  // The restore to T, killed after its first segment, then in a build (named holds), then run to the end.
  const target = uniquePrefix();
  const args = ['--at', at, '--table-prefix', target];
  await killedAt(command('restore', args, { TABLEGRAPH_TEST_BUILD_HOLD: 'restore@1' }), 'test hook: restore held');
  await killedAt(command('restore', args, { TABLEGRAPH_TEST_BUILD_HOLD: 'index:Book.byIsbn@1' }), 'test hook: schema build held');
  const report = await exitedOk(command('restore', args));
  expect(report).toMatch(/^verify: ok/m);
  expect(report).not.toMatch(/failed/);
  const writesSeen = [...writes.values()].flat();
  const inFlight = writesSeen.filter((w) => w.start <= t && w.ack > t).length;
  console.log(
    `point in time (seed ${seed}): ${writesSeen.length} writes, T at ${at} with ${writesSeen.filter((w) => w.ack <= t).length} acknowledged before and ${inFlight} in flight; move acknowledged ${moveAck - moveStart} ms in, ${moveDone <= t ? 'carried out before T' : 'after T'}`,
  );

  const restored = await serverOn(target);
  try {
    await expectStateAt(restored, SHELVES);
    // The moved book: at one address, never two or none; at the new one if the move was carried out by T, at the
    // old one if it was asked for after T.
    const where = await must(restored, '{ old: book(shelf: "s0", id: "mover") { title } now: book(shelf: "s1", id: "mover") { title } }');
    expect([where.old, where.now].filter((b) => b !== null)).toEqual([{ title: moved!.title }]);
    if (moveDone <= t) expect(where.now).not.toBeNull();
    if (moveAsked > t) expect(where.old).not.toBeNull();
  } finally {
    await restored.close();
  }
}, 420_000);

test('restore --at T --partition brings back one deleted shelf and its books alone, while the source keeps serving', async () => {
  expect(t).toBeGreaterThan(0);
  // The shelf deleted after T: its books first (its count must be 0), then the shelf.
  const books = await must(server, '{ s: shelf(shelf: "s2") { bookList(first: 100) { edges { node { id } } } } }');
  for (const { node } of books.s.bookList.edges as Array<{ node: { id: string } }>)
    await must(server, 'mutation($input: DeleteBookInput!) { deleteBook(input: $input) { __typename } }', { input: { shelf: 's2', id: node.id } });
  await must(server, 'mutation($input: DeleteShelfInput!) { deleteShelf(input: $input) { __typename } }', { input: { shelf: 's2' } });
  expect((await must(server, '{ s: shelf(shelf: "s2") { name } }')).s).toBeNull();

  // Reads and writes go on at the source while the shelf is restored elsewhere.
  await createBook(server, 's0', 'traffic');
  let serving = true;
  let served = 0;
  const load = (async () => {
    for (let i = 0; serving; i++) {
      await must(server, 'mutation($input: UpdateBookInput!) { updateBook(input: $input) { __typename } }', {
        input: { shelf: 's0', id: 'traffic', pages: i },
      });
      expect((await must(server, '{ s: shelf(shelf: "s0") { name } }')).s).toEqual({ name: 'Shelf s0' });
      served++;
      await pause(50, 'pace');
    }
  })();
  const target = uniquePrefix();
  const report = await exitedOk(command('restore', ['--at', new Date(t).toISOString(), '--table-prefix', target, '--partition', 's2']));
  serving = false;
  await load;
  expect(report).toMatch(/^verify: ok/m);
  expect(served).toBeGreaterThan(0);

  const restored = await serverOn(target);
  try {
    expect(await must(restored, '{ s2: shelf(shelf: "s2") { name } s0: shelf(shelf: "s0") { name } }')).toEqual({ s2: { name: 'Shelf s2' }, s0: null });
    await expectStateAt(restored, ['s2']);
  } finally {
    await restored.close();
  }
}, 240_000);
