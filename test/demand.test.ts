/**
 * Demand control from the access paths (src/read/demand.ts, src/server/demand-plugin.ts): an operation's worst case
 * — storage calls, entities read, response nodes — is computed before it runs; over a budget it is refused with
 * QUERY_TOO_COSTLY and no storage call. The estimate never undercounts what a query then costs.
 */
import { parse, type FragmentDefinitionNode, type OperationDefinitionNode } from 'graphql';
import { expectNoRequestReads } from './support/request-reads';
import { estimateDemand } from '../src/read/demand';
import path from 'node:path';
import { compileHr, ROOT, startSdlServer, startTestServer, type TestServer } from './support/harness';
import { writeFixtures } from './support/read-fixtures';
import { until } from './support/wait';

const { schema, model } = compileHr('dm');

function estimate(query: string, variables: Record<string, unknown> = {}) {
  const doc = parse(query);
  const operation = doc.definitions.find((d): d is OperationDefinitionNode => d.kind === 'OperationDefinition')!;
  const fragments = Object.fromEntries(doc.definitions.flatMap((d) => (d.kind === 'FragmentDefinition' ? [[d.name.value, d as FragmentDefinitionNode]] : [])));
  return estimateDemand(schema, model, operation, fragments, variables);
}

/** Three nested lists of 100 with a department between them: a million nodes from a 200-byte query. */
const OOM = `{ departments(first: 100) { edges { node { employees(first: 100) { edges { node {
  department { employees(first: 100) { edges { node { id firstName } } } } } } } } } } }`;

describe('the estimate', () => {
  test('a point query and a page of 5: 2 calls, the page and the one after it read, 13 nodes', () => {
    const q = '{ department(id: "POLICE") { employeeCount employees(first: 5) { edges { node { id lastName title } } pageInfo { hasNextPage endCursor } } } }';
    expect(estimate(q)).toEqual({ storageCalls: 2, entitiesRead: 7, nodes: 13 });
  });

  test('`first` from a variable, the default page size when absent, the maximum when above it', () => {
    const q = 'query($n: Int) { department(id: "X") { employees(first: $n) { edges { node { id } } } } }';
    expect(estimate(q, { n: 50 }).nodes).toBe(1 + 1 + 50 + 50);
    expect(estimate(q, {}).nodes).toBe(1 + 1 + 20 + 20);
    expect(estimate(q, { n: 5000 }).nodes).toBe(1 + 1 + 100 + 100);
  });

  test('a variable not sent counts with its declared default, as execution will run it', () => {
    const q = 'query($n: Int = 100) { department(id: "X") { employees(first: $n) { edges { node { id } } } } }';
    expect(estimate(q, {}).nodes).toBe(1 + 1 + 100 + 100);
    expect(estimate(q, { n: 3 }).nodes).toBe(1 + 1 + 3 + 3);
    expect(estimate(q, { n: null }).nodes).toBe(1 + 1 + 20 + 20); // an explicit null: the field's default page size
  });

  test('reading through an index: one more point query per node only when a selected field is not projected', () => {
    const covered = '{ employeesByLastName(lastName: "WILLIAMS", first: 10) { edges { node { id firstName title } } } }';
    const uncovered = '{ employeesByLastName(lastName: "WILLIAMS", first: 10) { edges { node { id annualSalary } } } }';
    expect(estimate(covered).storageCalls).toBe(1);
    expect(estimate(uncovered).storageCalls).toBe(11);
  });

  test('a many-to-many page: a read or two per node, none when the join entities hold every field the nodes select', async () => {
    const { compileSchema } = await import('../src/compiler/compile');
    const { loadSchemaSources } = await import('../src/compiler/load-schema');
    const tracker = compileSchema(loadSchemaSources(path.join(ROOT, 'examples/tracker')));
    const of = (q: string) => estimateDemand(tracker.schema, tracker.model, parse(q).definitions[0] as OperationDefinitionNode, {});
    // IssueLabel holds the label's id (its key through the unique index byId) and a copy of its color.
    const labels = (node: string) => `{ issue(projectKey: "P", number: "1") { labels(first: 10) { edges { node { ${node} } } } } }`;
    expect(of(labels('id color')).storageCalls).toBe(2);
    expect(of(labels('__typename color')).storageCalls).toBe(2);
    expect(of(labels('id name')).storageCalls).toBe(2 + 10 * 2);
    expect(of(labels('color etag')).storageCalls).toBe(2 + 10 * 2);
  });

  test('fragments count as written, a fragment cycle does not loop', () => {
    const q = '{ department(id: "A") { ...D } } fragment D on Department { employees(first: 3) { edges { node { department { ...D } } } } }';
    expect(estimate(q).storageCalls).toBeGreaterThan(1);
  });

  test('a mutation counts its writes', () => {
    const q =
      'mutation { a: deleteEmployee(input: { departmentId: "A", id: "1" }) { employee { id } } b: deleteEmployee(input: { departmentId: "A", id: "2" }) { employee { id } } }';
    expect(estimate(q).storageCalls).toBeGreaterThanOrEqual(16);
  });

  test('@skip and @include: what execution leaves out costs nothing, for the values the request sends', () => {
    const q = `query($withPay: Boolean!, $short: Boolean = true) { employeesByLastName(lastName: "WILLIAMS", first: 10) { edges { node {
      id firstName annualSalary @include(if: $withPay) ... @skip(if: $short) { department { name } } } } } }`;
    expect(estimate(q, { withPay: false })).toEqual({ storageCalls: 1, entitiesRead: 11, nodes: 21 });
    expect(estimate(q, { withPay: true }).storageCalls).toBe(11); // the index lacks annualSalary: one read per node
    expect(estimate(q, { withPay: false, short: false }).storageCalls).toBe(1 + 10); // each node's department (its key is in the index)
    expect(estimate('{ department(id: "X") @skip(if: true) { employees(first: 100) { edges { node { id } } } } }')).toEqual({
      storageCalls: 0,
      entitiesRead: 0,
      nodes: 0,
    });
  });

  test('the same field with the same arguments under several aliases: read once (as the DataLoaders read it), a node per alias', () => {
    const page = (alias: string) => `${alias}: employeesByLastName(lastName: "WILLIAMS", first: 100) { edges { node { id firstName } } }`;
    const one = estimate(`{ ${page('a')} }`);
    const nine = estimate(`{ ${['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i'].map(page).join(' ')} }`);
    expect(nine.storageCalls).toBe(one.storageCalls);
    expect(nine.entitiesRead).toBe(one.entitiesRead);
    expect(nine.nodes).toBe(9 * one.nodes);
    // Merged selections: what one alias adds below the shared page still counts, once.
    const more = estimate(`{ ${page('a')} b: employeesByLastName(lastName: "WILLIAMS", first: 100) { edges { node { annualSalary } } } }`);
    expect(more.storageCalls).toBe(1 + 100);
    // Other arguments, or a variable, are other reads.
    expect(estimate(`{ ${page('a')} b: employeesByLastName(lastName: "JONES", first: 100) { edges { node { id } } } }`).storageCalls).toBe(2);
    // Each alias of a mutation is a write of its own.
    const single = estimate('mutation { a: deleteEmployee(input: { departmentId: "A", id: "1" }) { __typename } }');
    const two = estimate(
      'mutation { a: deleteEmployee(input: { departmentId: "A", id: "1" }) { __typename } b: deleteEmployee(input: { departmentId: "A", id: "1" }) { __typename } }',
    );
    expect(two.storageCalls).toBe(2 * single.storageCalls);
  });

  test('the query that once exhausted the heap: about a million nodes', () => {
    expect(estimate(OOM).nodes).toBeGreaterThan(1_000_000);
  });
});

describe('the server', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
    await writeFixtures(server.store, compileHr(server.config.tablePrefix).model);
  }, 60_000);
  afterAll(() => server?.close());
  afterEach(() => jest.restoreAllMocks());

  test('refuses the costly query with QUERY_TOO_COSTLY and the figures, before any storage call; HTTP 400', async () => {
    const spies = [jest.spyOn(server.store, 'getEntity'), jest.spyOn(server.store, 'queryRange')];
    const res = await fetch(server.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: OOM }) });
    expect(res.status).toBe(400);
    const body = (await res.json()) as any;
    expect(body.errors[0].extensions).toMatchObject({
      code: 'QUERY_TOO_COSTLY',
      estimate: { nodes: expect.any(Number), storageCalls: expect.any(Number) },
      budget: { maxStorageCalls: 1000, maxNodes: 10_000 },
    });
    expect(body.errors[0].extensions.estimate.nodes).toBeGreaterThan(1_000_000);
    expectNoRequestReads(spies, server.config.tablePrefix);
    // A cheap query answers meanwhile.
    expect((await server.query('{ department(id: "FINANCE") { employeeCount } }')).data).toEqual({ department: { employeeCount: 40 } });
  });

  test.each([
    [
      'a department and a page of 5',
      '{ department(id: "ENGINEERING") { employeeCount employees(first: 5) { edges { node { id lastName title } } pageInfo { hasNextPage endCursor } } } }',
    ],
    [
      'WILLIAMS with a field the index lacks and the department',
      '{ department(id: "ENGINEERING") { employeesByLastName(lastName: "WILLIAMS", first: 50) { edges { node { id annualSalary department { id employeeCount } } } } } }',
    ],
    [
      'every department with 10 employees and their department',
      '{ departments(first: 36) { edges { node { id employees(first: 10) { edges { node { id department { name } } } } } } } }',
    ],
    ['WILLIAMS across the organisation', '{ employeesByLastName(lastName: "WILLIAMS", first: 100) { edges { node { id firstName title } } } }'],
  ])('%s: served, and the estimate beside the cost is never below it', async (_name, query) => {
    const r = await server.query(query);
    expect(r.errors).toBeUndefined();
    const { estimate: est, ...actual } = r.extensions.cost;
    expect(est.storageCalls).toBeGreaterThanOrEqual(actual.pointQueries + actual.rangeQueries);
    expect(est.entitiesRead).toBeGreaterThanOrEqual(actual.entitiesRead);
    expect(est.storageCalls).toBeLessThanOrEqual(1000);
  });

  test('a default-valued variable cannot carry the costly query past the estimate: refused before any storage call', async () => {
    const byDefault = `query Q($f: Int = 100) { departments(first: $f) { edges { node { employees(first: $f) { edges { node {
      department { employees(first: $f) { edges { cursor } } } } } } } } } }`;
    const spies = [jest.spyOn(server.store, 'getEntity'), jest.spyOn(server.store, 'queryRange')];
    const r = await server.query(byDefault);
    expect(r.errors?.[0].extensions).toMatchObject({ code: 'QUERY_TOO_COSTLY' });
    expect(r.errors?.[0].extensions.estimate.nodes).toBeGreaterThan(1_000_000);
    expectNoRequestReads(spies, server.config.tablePrefix);
  });

  test('an explicit null and a variable not sent are two estimates: the lane never admits what Apollo refuses', async () => {
    const byDefault = `query Q($f: Int = 100) { departments(first: $f) { edges { node { employees(first: $f) { edges { node {
      department { employees(first: $f) { edges { cursor } } } } } } } } } }`;
    const post = async (variables?: Record<string, unknown>) =>
      (await (
        await fetch(server.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: byDefault, variables }) })
      ).json()) as any;
    const get = async (variables?: Record<string, unknown>) => {
      const search = new URLSearchParams({ query: byDefault, ...(variables && { variables: JSON.stringify(variables) }) });
      return (await (await fetch(`${server.url}?${search}`, { headers: { 'apollo-require-preflight': 'true' } })).json()) as any;
    };
    // With null, each page is the default page size (20): admitted. The same text with no variables then takes the
    // declared default (100), and is refused — through the lane (POST) as through Apollo (GET).
    const admitted = await post({ f: null });
    expect(admitted.errors).toBeUndefined();
    const spies = [jest.spyOn(server.store, 'getEntity'), jest.spyOn(server.store, 'queryRange')];
    const refused = await post();
    expect(refused.errors?.[0].extensions).toMatchObject({ code: 'QUERY_TOO_COSTLY' });
    expectNoRequestReads(spies, server.config.tablePrefix);
    expect(refused.errors[0].extensions.estimate).toEqual((await get()).errors[0].extensions.estimate);
    expect(admitted.extensions.cost.estimate).toEqual((await get({ f: null })).extensions.cost.estimate);
  });

  test('@skip through the lane: the estimate and the reads of the skipped field are gone, as through Apollo', async () => {
    const q = `query($pay: Boolean!) { department(id: "ENGINEERING") { employeesByLastName(lastName: "WILLIAMS", first: 50) { edges { node {
      id firstName annualSalary @include(if: $pay) } } } } }`;
    const lane = await server.query(q, { pay: false });
    expect(lane.errors).toBeUndefined();
    expect(lane.extensions.cost.estimate.storageCalls).toBe(2);
    expect(lane.extensions.cost.pointQueries).toBe(1); // the department, and no entity behind an index entity
    const search = new URLSearchParams({ query: q, variables: JSON.stringify({ pay: false }) });
    const apollo = (await (await fetch(`${server.url}?${search}`, { headers: { 'apollo-require-preflight': 'true' } })).json()) as any;
    expect(apollo.extensions.cost.estimate).toEqual(lane.extensions.cost.estimate);
    const paid = await server.query(q, { pay: true });
    expect(paid.extensions.cost.estimate.storageCalls).toBeGreaterThan(2);
  });

  test('the budgets are settings: TABLEGRAPH_MAX_STORAGE_CALLS=1 refuses a query of two', async () => {
    const tight = await startTestServer({ TABLEGRAPH_MAX_STORAGE_CALLS: '1' });
    try {
      const r = await tight.query('{ department(id: "X") { employees(first: 1) { edges { node { id } } } } }');
      expect(r.errors?.[0].extensions).toMatchObject({ code: 'QUERY_TOO_COSTLY', estimate: { storageCalls: 2 }, budget: { maxStorageCalls: 1 } });
      expect(r.extensions?.cost?.roundTrips ?? 0).toBe(0);
    } finally {
      await tight.close();
    }
  });
});

test('npm run explain -- --query prints the worst case and whether the budgets allow it', async () => {
  const { execFileSync } = await import('node:child_process');
  const path = await import('node:path');
  const { ROOT } = await import('./support/harness');
  const run = (query: string) =>
    JSON.parse(
      execFileSync(process.execPath, [path.join(ROOT, 'node_modules/tsx/dist/cli.mjs'), 'src/cli/explain.ts', '--json', '--query', query], {
        cwd: ROOT,
        encoding: 'utf8',
      }),
    );
  expect(run('{ department(id: "POLICE") { employees(first: 5) { edges { node { id } } } } }')).toEqual({
    estimate: { storageCalls: 2, entitiesRead: 7, nodes: 12 },
    // A transaction per call; 1 RU per entity read and at least 1 per call: at most 7 + 2.
    money: { azureTransactions: 2, cosmosRequestUnits: 9 },
    budget: { maxStorageCalls: 1000, maxNodes: 10_000 },
    allowed: true,
  });
  expect(run(OOM).allowed).toBe(false);
  // A mutation's entities written are not estimated: no RU figure for it. A department's delete reads whether an
  // employee still points at it (Employee.department, onDelete: RESTRICT): one more range query.
  expect(run('mutation { deleteDepartment(input: { id: "X" }) { department { id } } }').money).toEqual({ azureTransactions: 9 });
}, 60_000);

test('a many-to-many page read through a unique index: the estimate counts both point queries of each node', async () => {
  const sdl = `
type Playlist @entity(table: "Music", partitionKey: "{owner}", rowKey: "playlist_{id}") {
  owner: ID!
  id: ID!
  tracks(first: Int, after: String): TrackConnection! @range(partitionKey: "{owner}", rowKeyPrefix: "entry_{id}_", through: "Entry.track")
}
type Track @entity(table: "Music", partitionKey: "{owner}", rowKey: "track_{title}")
  @index(name: "byId", table: "TracksById", partitionKey: "{owner}", rowKey: "{id}", unique: true) {
  owner: ID!
  id: ID!
  title: String!
  seconds: Int!
  playlists(first: Int, after: String): PlaylistConnection!
    @range(index: "byTrack", partitionKey: "{owner}", rowKeyPrefix: "trackentry_{id}_", through: "Entry.playlist")
}
type Entry @entity(table: "Music", partitionKey: "{owner}", rowKey: "entry_{playlistId}_{trackId}")
  @index(name: "byTrack", rowKey: "trackentry_{trackId}_{playlistId}") {
  owner: ID!
  playlistId: ID!
  trackId: ID!
  track: Track! @point(index: "byId", partitionKey: "{owner}", rowKey: "{trackId}")
  playlist: Playlist! @point(partitionKey: "{owner}", rowKey: "playlist_{playlistId}")
}
type Query {
  playlist(owner: ID!, id: ID!): Playlist @point
}
type Mutation {
  createPlaylist(input: CreatePlaylistInput!): PlaylistPayload! @write(entity: "Playlist", action: CREATE)
  createTrack(input: CreateTrackInput!): TrackPayload! @write(entity: "Track", action: CREATE)
  createEntry(input: CreateEntryInput!): EntryPayload! @write(entity: "Entry", action: CREATE)
}`;
  const ctx = await startSdlServer(sdl, { TABLEGRAPH_AUTH: 'off' });
  try {
    const run = async (query: string) => {
      const r = await ctx.server.query(query);
      expect(r.errors).toBeUndefined();
      return r;
    };
    await run('mutation { createPlaylist(input: { owner: "o", id: "p" }) { playlist { id } } }');
    for (let i = 0; i < 6; i++) await run(`mutation { createTrack(input: { owner: "o", id: "${i}", title: "t${i}", seconds: ${100 + i} }) { track { id } } }`);
    for (let i = 0; i < 6; i++) await run(`mutation { createEntry(input: { owner: "o", playlistId: "p", trackId: "${i}" }) { entry { trackId } } }`);
    // The tracks' unique index is kept by the worker: wait until every track reads through it.
    const page =
      '{ playlist(owner: "o", id: "p") { a: tracks(first: 3) { edges { node { title seconds } } } b: tracks(first: 6) { edges { node { title } } } } }';
    let r = await run(page);
    await until('every track read through the index', async () => (r = await run(page)).data.playlist.b.edges.length === 6, { everyMs: 100 }).catch(
      () => undefined,
    );
    expect(r.data.playlist.b.edges).toHaveLength(6);
    const { roundTrips, entitiesRead, estimate: worst } = r.extensions.cost;
    // Each node: its index entity, then the track: 1 + 3 × 2 + 6 × 2 (loaders share the repeated reads).
    expect(roundTrips).toBeGreaterThan(9);
    expect(worst.storageCalls).toBeGreaterThanOrEqual(roundTrips);
    expect(worst.entitiesRead).toBeGreaterThanOrEqual(entitiesRead);
  } finally {
    await ctx.close();
  }
});
