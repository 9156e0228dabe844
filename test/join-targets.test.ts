/**
 * Join entities whose target is deleted or moved (src/derived/dependent-upkeep.ts), on a schema written for the test: books on
 * shelves, many-to-many through Placement join entities (each copying its book's non-null title), a shelf counting
 * its placements. The rule: a join entity of a deleted target is deleted by the worker, and the count follows; one
 * of a moved target is re-pointed at the new address; until the worker has done it, a page leaves a target that is
 * gone out whatever it selects, and never fails; `verify` reports a join entity pointing at nothing. Under
 * redelivered and reordered messages, two workers, workers killed mid-message, and a delete and re-create of one key.
 */
import fs from 'node:fs';
import { formatVerifyReport, verifyDerived } from '../src/maintenance/verify-derived';
import { compileSchema } from '../src/compiler/compile';
import { handleMessage } from './support/handle-message';
import { DIRECTIVES_FILE, testQueues } from './support/harness';
import { seededRng, useSdlWorld } from './support/fanout-fixtures';
import { receiveFanout } from './support/write-fixtures';
import { testSeed } from './support/seed';

const SDL = `
type Shelf @entity(table: "Library", partitionKey: "{library}", rowKey: "shelf_{id}") {
  etag: String! library: ID! id: ID! name: String!
  books(first: Int, after: String): BookConnection!
    @range(index: "byShelf", partitionKey: "{library}", rowKeyPrefix: "shelfplacement_{id}_", through: "Placement.book")
}
type Book @entity(table: "Library", partitionKey: "{library}", rowKey: "book_{id}") {
  library: ID! id: ID! title: String!
  shelfCount: Int! @summary(of: "Placement", via: "book", count: true)
  shelves(first: Int, after: String): ShelfConnection! @range(partitionKey: "{library}", rowKeyPrefix: "placement_{id}_", through: "Placement.shelf")
}
type Placement @entity(table: "Library", partitionKey: "{library}", rowKey: "placement_{bookId}_{shelfId}")
  @index(name: "byShelf", rowKey: "shelfplacement_{shelfId}_{bookId}") {
  library: ID! bookId: ID! shelfId: ID!
  shelfName: String @copy(from: "shelf", field: "name")
  book: Book! @point(partitionKey: "{library}", rowKey: "book_{bookId}")
  shelf: Shelf! @point(partitionKey: "{library}", rowKey: "shelf_{shelfId}")
}
type Query {
  shelf(library: ID!, id: ID!): Shelf @point
  book(library: ID!, id: ID!): Book @point
}
type Mutation {
  createShelf(input: CreateShelfInput!): ShelfPayload! @write(entity: "Shelf", action: CREATE)
  deleteShelf(input: DeleteShelfInput!): ShelfPayload! @write(entity: "Shelf", action: DELETE)
  moveShelf(input: MoveShelfInput!): ShelfPayload! @write(entity: "Shelf", action: MOVE)
  createBook(input: CreateBookInput!): BookPayload! @write(entity: "Book", action: CREATE)
  place(input: CreatePlacementInput!): PlacementPayload! @write(entity: "Placement", action: CREATE)
}`;

const world = useSdlWorld(SDL);
const { ok, drain } = world;

/**
 * A book's shelves as two selections see them: ids and names alone (served from the join entities: the id from
 * its key, the name from its copy), and with what only the shelf holds (read in a second wave); and its count.
 */
async function book(id: string): Promise<{ named: string[]; read: string[]; count: number | null }> {
  const r = await world.server.query(
    'query($id: ID!) { book(library: "L", id: $id) { shelfCount a: shelves { edges { node { id name } } } b: shelves { edges { node { id name etag } } } } }',
    { id },
  );
  expect(r.errors).toBeUndefined();
  const b = r.data.book;
  if (!b) return { named: [], read: [], count: null };
  return {
    named: b.a.edges.map((e: any) => `${e.node.id}:${e.node.name}`),
    read: b.b.edges.map((e: any) => `${e.node.id}:${e.node.name}`),
    count: b.shelfCount,
  };
}
async function booksOn(shelf: string): Promise<string[]> {
  const r = await world.server.query('query($id: ID!) { shelf(library: "L", id: $id) { books { edges { node { id } } } } }', { id: shelf });
  expect(r.errors).toBeUndefined();
  return r.data.shelf ? r.data.shelf.books.edges.map((e: any) => e.node.id) : [];
}

test('deleted and moved targets: join entities deleted or re-pointed, pages never failing, counts following, verify clean', async () => {
  const seed = testSeed();
  const rng = seededRng(seed);
  const random = () => rng.int(0x7fffffff) / 0x7fffffff;
  for (const [id, name] of [
    ['s1', 'One'],
    ['s2', 'Two'],
    ['s3', 'Three'],
  ])
    await ok('createShelf', 'CreateShelfInput', { library: 'L', id, name });
  for (const id of ['b1', 'b2']) await ok('createBook', 'CreateBookInput', { library: 'L', id, title: id });
  for (const [bookId, shelfId] of [
    ['b1', 's1'],
    ['b1', 's2'],
    ['b1', 's3'],
    ['b2', 's2'],
  ])
    await ok('place', 'CreatePlacementInput', { library: 'L', bookId, shelfId });
  await drain(random);
  expect(await book('b1')).toEqual({ named: ['s1:One', 's2:Two', 's3:Three'], read: ['s1:One', 's2:Two', 's3:Three'], count: 3 });

  // s2 deleted. A worker without a write path nulls the join entities' copies of its non-null name (and cannot
  // delete them): a page served from the copies leaves s2 out rather than fail on the null, as the page reading
  // the shelves does; verify reports the join entities dangling.
  await ok('deleteShelf', 'DeleteShelfInput', { library: 'L', id: 's2' });
  const deleted = (await receiveFanout(testQueues(), world.server.config.tablePrefix)).map((r) => r.message);
  for (const m of deleted) await handleMessage(m, { model: world.model, store: world.server.store, settleMs: 0, holdMs: 0 });
  expect(await book('b1')).toEqual({ named: ['s1:One', 's3:Three'], read: ['s1:One', 's3:Three'], count: 3 });
  const report = await verifyDerived({ store: world.server.store, model: world.model });
  expect(
    report.references
      .find((r) => r.reference === 'Placement.shelf')!
      .dangling.map((d) => d.rowKey)
      .sort(),
  ).toEqual(['placement_b1_s2', 'placement_b2_s2']);
  expect(formatVerifyReport(report)).toMatch(/FAIL Placement\.shelf \(join entities' reference.*2 dangling/);

  // The worker as it runs: the join entities go, and the books' counts with them.
  for (const m of deleted) await handleMessage(m, { model: world.model, store: world.server.store, settleMs: 0, holdMs: 0, writer: world.writer });
  await drain(random);
  expect(await book('b1')).toEqual({ named: ['s1:One', 's3:Three'], read: ['s1:One', 's3:Three'], count: 2 });
  expect(await book('b2')).toEqual({ named: [], read: [], count: 0 });

  // s1 moved to s9: its join entities are re-pointed, whatever the redelivery; b1's count unchanged.
  await ok('moveShelf', 'MoveShelfInput', { library: 'L', id: 's1', toId: 's9' });
  // s3 deleted and created again before the worker: the new s3 keeps the join entity pointing at its address.
  await ok('deleteShelf', 'DeleteShelfInput', { library: 'L', id: 's3' });
  await ok('createShelf', 'CreateShelfInput', { library: 'L', id: 's3', name: 'Three again' });
  const { messages, killed } = await drain(random);
  expect(await book('b1')).toEqual({ named: ['s3:Three again', 's9:One'], read: ['s3:Three again', 's9:One'], count: 2 });
  expect(await booksOn('s9')).toEqual(['b1']);
  expect(await booksOn('s1')).toEqual([]);
  const after = await verifyDerived({ store: world.server.store, model: world.model });
  if (!after.ok) console.log(formatVerifyReport(after));
  expect(after.problems).toBe(0);
  console.log(`join targets seed ${seed}: ${messages} messages delivered twice and late, ${killed} deliveries killed mid-message`);
}, 120_000);

test("the compiler asks for the range that finds a target's join entities", () => {
  const directives = { name: 'directives.graphql', body: fs.readFileSync(DIRECTIVES_FILE, 'utf8') };
  const without = SDL.replace(/\n {2}books\(first: Int, after: String\): BookConnection!\n {4}@range\([^\n]*\)/, '');
  expect(() => compileSchema([directives, { name: 'library.graphql', body: without }])).toThrow(
    /Book\.shelves.*through: "Placement\.shelf": when a Shelf is deleted or moved, the worker deletes or re-points its Placement join entities.*declare one/,
  );
});
