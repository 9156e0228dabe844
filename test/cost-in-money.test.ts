/**
 * `extensions.cost` in money: `azureTransactions` (every REST request to the Table service, an EGT counted once)
 * and `cosmosRequestUnits` (1 RU per entity read, at least 1 per read round trip; 5 RU per entity written), on a
 * schema written for this test.
 */
import { startSdlServer } from './support/harness';

const SDL = `
type Shelf @entity(table: "Shelves", partitionKey: "{shelf}", rowKey: "shelf") {
  shelf: ID!
  label: String!
  jarCount: Int! @summary(of: "Jar", via: "onShelf", count: true)
  jars(first: Int, after: String): JarConnection! @range(rowKeyPrefix: "jar_")
}
type Jar @entity(table: "Shelves", partitionKey: "{shelf}", rowKey: "jar_{id}") {
  shelf: ID!
  id: ID!
  content: String!
  onShelf: Shelf! @point(partitionKey: "{shelf}", rowKey: "shelf")
}
type Query {
  shelf(shelf: ID!): Shelf @point
  jar(shelf: ID!, id: ID!): Jar @point
}
type Mutation {
  createShelf(input: CreateShelfInput!): ShelfPayload! @write(entity: "Shelf", action: CREATE)
  createJar(input: CreateJarInput!): JarPayload! @write(entity: "Jar", action: CREATE)
}
`;

let ctx: Awaited<ReturnType<typeof startSdlServer>>;
beforeAll(async () => void (ctx = await startSdlServer(SDL)));
afterAll(() => ctx?.close());

test('reads: one transaction per round trip, 1 RU per entity read and at least 1 per query', async () => {
  const { server } = ctx;
  expect((await server.query('mutation { createShelf(input: { shelf: "A", label: "pantry" }) { shelf { shelf } } }')).errors).toBeUndefined();
  for (const id of ['1', '2', '3']) {
    const r = await server.query(`mutation { createJar(input: { shelf: "A", id: "${id}", content: "jam" }) { jar { id } } }`);
    expect(r.errors).toBeUndefined();
  }
  // A point query (1 entity) and a range query (3 jars): 2 requests, 4 entities.
  const page = await server.query('{ shelf(shelf: "A") { label jarCount jars(first: 10) { edges { node { id } } } } }');
  expect(page.errors).toBeUndefined();
  expect(page.extensions.cost).toMatchObject({ pointQueries: 1, rangeQueries: 1, roundTrips: 2, azureTransactions: 2, entitiesRead: 4, cosmosRequestUnits: 4 });
  // A miss still costs its request and 1 RU.
  const miss = await server.query('{ jar(shelf: "A", id: "404") { id } }');
  expect(miss.data.jar).toBeNull();
  expect(miss.extensions.cost).toMatchObject({ pointQueries: 1, entitiesRead: 0, azureTransactions: 1, cosmosRequestUnits: 1 });
});

test('a create: one EGT is one transaction, 5 RU per entity it writes', async () => {
  const { server } = ctx;
  const r = await server.query('mutation { createJar(input: { shelf: "A", id: "9", content: "honey" }) { jar { id } } }');
  expect(r.errors).toBeUndefined();
  const cost = r.extensions.cost;
  // The jar, its change entity (continuous backup) and the shelf's count in one EGT (the shelf's summary holder read
  // beside it, or cached from the last write): every request is one transaction, and the EGT's three entities cost 15 RU.
  expect(cost.writes).toBe(1);
  expect(cost.azureTransactions).toBe(cost.roundTrips);
  expect(cost.rangeQueries).toBe(0);
  expect(cost.cosmosRequestUnits).toBe(5 * 3 + cost.pointQueries);
});
