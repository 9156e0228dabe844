/**
 * tablegraph as an Apollo Federation 2 subgraph (docs/federation.md), composed with a real `@apollo/gateway`
 * (IntrospectAndCompose) and a second subgraph written here, which adds a field of its own to `Employee` and lists
 * employees by reference only. Every employee field it does not have, the gateway asks tablegraph for through
 * `_entities`: N representations are N point queries in one wave (counted by tablegraph's own `extensions.cost`, as
 * the gateway receives it), under demand control and `@auth`, and the answers equal tablegraph's own.
 * The HR example is used as shipped, with one file beside it that opts in (`extend schema @link(...)`) and declares a
 * second key, served by the unique e-mail index.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ApolloServer } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { ApolloGateway, IntrospectAndCompose, RemoteGraphQLDataSource } from '@apollo/gateway';
import { buildSubgraphSchema } from '@apollo/subgraph';
import { parse } from 'graphql';
import { SignJWT } from 'jose';
import { compileSchema } from '../src/compiler/compile';
import { loadSchemaSources } from '../src/compiler/load-schema';
import { SCHEMA_DIR, startTestServer, type TestServer } from './support/harness';
import { employeeRow, ENGINEERING, expectCost, writeFixtures } from './support/read-fixtures';

const SECRET = 'a-test-secret-of-at-least-32-characters';
const token = (claims: Record<string, unknown>) =>
  new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).setExpirationTime('10m').sign(new TextEncoder().encode(SECRET));
const ADMIN = () => token({ sub: 'admin@example.test', roles: ['hr-admin'] });
const READER = (department: string) => token({ sub: 'r@example.test', roles: ['reader'], department });

/** The file that makes the HR example a subgraph: the link, and a second key on the unique e-mail index. */
const LINK = `extend schema @link(url: "https://specs.apollo.dev/federation/v2.7", import: ["@key", "@shareable"])
extend type Employee @key(fields: "email")
`;

/** The second subgraph: a badge for each employee, and an on-call list of employees by reference. */
const BADGES = `extend schema @link(url: "https://specs.apollo.dev/federation/v2.7", import: ["@key"])
type Employee @key(fields: "departmentId id") {
  departmentId: ID!
  id: ID!
  badge: String!
}
type Query {
  onCall(first: Int!): [Employee!]!
}`;

let dir: string;
let server: TestServer;
let badges: { url: string; stop(): Promise<void> };
let gateway: { url: string; stop(): Promise<void> };
/** tablegraph's `extensions.cost` of each request the gateway sent it, in order. */
const costs: any[] = [];

async function post(url: string, query: string, variables?: Record<string, unknown>, bearer?: string) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(bearer && { authorization: `Bearer ${bearer}` }) },
    body: JSON.stringify({ query, variables }),
  });
  return (await res.json()) as { data?: any; errors?: any[]; extensions?: any };
}

async function startBadges(): Promise<{ url: string; stop(): Promise<void> }> {
  const ids = ENGINEERING.employees.map((e) => e.id);
  const resolvers = {
    Query: { onCall: (_: unknown, { first }: { first: number }) => ids.slice(0, first).map((id) => ({ departmentId: 'ENGINEERING', id })) },
    Employee: {
      __resolveReference: (ref: { departmentId: string; id: string }) => ref,
      badge: (e: { id: string }) => `B-${e.id}`,
    },
  };
  const apollo = new ApolloServer({ schema: buildSubgraphSchema({ typeDefs: parse(BADGES), resolvers: resolvers as any }) });
  const { url } = await startStandaloneServer(apollo, { listen: { port: 0 } });
  return { url, stop: () => apollo.stop() };
}

/** A gateway over both subgraphs that passes the caller's token on and keeps tablegraph's cost of each request. */
async function startGateway(): Promise<{ url: string; stop(): Promise<void> }> {
  class Forwarding extends RemoteGraphQLDataSource {
    override willSendRequest({ request, context }: any) {
      if (context.authorization) request.http?.headers.set('authorization', context.authorization);
    }
    override didReceiveResponse({ response }: any) {
      if (this.url === server.url && response.extensions?.cost) costs.push(response.extensions.cost);
      return response;
    }
  }
  const apollo = new ApolloServer({
    gateway: new ApolloGateway({
      // tablegraph refuses a request without a token, `_service` included: the gateway composes with one of its own.
      supergraphSdl: new IntrospectAndCompose({
        subgraphs: [
          { name: 'hr', url: server.url },
          { name: 'badges', url: badges.url },
        ],
        introspectionHeaders: { authorization: `Bearer ${await token({ sub: 'gateway' })}` },
      }),
      buildService: ({ url }) => new Forwarding({ url }),
    }),
  });
  const { url } = await startStandaloneServer(apollo, { listen: { port: 0 }, context: async ({ req }) => ({ authorization: req.headers.authorization }) });
  return { url, stop: () => apollo.stop() };
}

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-federation-'));
  for (const f of fs.readdirSync(SCHEMA_DIR).filter((n) => n.endsWith('.graphql'))) fs.copyFileSync(path.join(SCHEMA_DIR, f), path.join(dir, f));
  fs.writeFileSync(path.join(dir, 'zz-federation.graphql'), LINK);
  // Introspection off, as in production: the gateway composes from `_service { sdl }`, which stays.
  server = await startTestServer({
    TABLEGRAPH_SCHEMA_DIR: dir,
    TABLEGRAPH_INTROSPECTION: 'false',
    TABLEGRAPH_JWT_SECRET: SECRET,
    TABLEGRAPH_RATE_LIMIT: '100000',
  });
  await writeFixtures(server.store, compileSchema(loadSchemaSources(dir), { tablePrefix: server.config.tablePrefix }).model);
  badges = await startBadges();
  gateway = await startGateway();
}, 60_000);

afterAll(async () => {
  await gateway?.stop();
  await badges?.stop();
  await server?.close();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

const EMPLOYEE_FIELDS = 'id departmentId firstName lastName title email annualSalary';

test('_service serves the schema with its keys and without storage directives, introspection off', async () => {
  const r = await post(server.url, '{ _service { sdl } }', undefined, await ADMIN());
  expect(r.errors).toBeUndefined();
  const sdl: string = r.data._service.sdl;
  expect(sdl).toMatch(/type Employee implements Node @key\(fields: "departmentId id"\)/);
  expect(sdl).toMatch(/extend type Employee @key\(fields: "email"\)/);
  expect(sdl).toMatch(/type Department implements Node @key\(fields: "id"\)/);
  // (Descriptions may speak of them: no application, no definition, no type of theirs.)
  for (const storage of ['@entity(', '@index(', '@auth(', '@point(', '@range(', '@summary(', 'directive @', 'input AuthRule', 'enum OnDelete', 'table: "']) {
    expect([storage, sdl.includes(storage)]).toEqual([storage, false]);
  }
  const introspection = await post(server.url, '{ __schema { types { name } } }', undefined, await ADMIN());
  expect(introspection.errors?.[0]).toBeDefined();
});

test('100 employees through the gateway: 100 point queries in one wave on tablegraph, answers equal its own', async () => {
  const admin = await ADMIN();
  costs.length = 0;
  const viaGateway = await post(gateway.url, `{ onCall(first: 100) { badge ${EMPLOYEE_FIELDS} } }`, undefined, admin);
  expect(viaGateway.errors).toBeUndefined();
  const direct = await post(
    server.url,
    `{ department(id: "ENGINEERING") { employees(first: 100) { edges { node { ${EMPLOYEE_FIELDS} } } } } }`,
    undefined,
    admin,
  );
  const expected = direct.data.department.employees.edges.map((e: any) => ({ badge: `B-${e.node.id}`, ...e.node }));
  expect(viaGateway.data.onCall).toHaveLength(100);
  expect(viaGateway.data.onCall).toEqual(expected);
  // One `_entities` request of 100 representations, estimated before it ran as exactly what it did.
  expect(costs).toHaveLength(1);
  expectCost({ extensions: { cost: costs[0] } }, { pointQueries: 100, rangeQueries: 0, entitiesRead: 100, waves: 1 });
  expect(costs[0].estimate).toMatchObject({ storageCalls: 100, entitiesRead: 100 });
});

test('a reference below an entity reads through the same loaders: 100 employees and their one department in two waves', async () => {
  costs.length = 0;
  const r = await post(gateway.url, '{ onCall(first: 100) { badge id department { name employeeCount } } }', undefined, await ADMIN());
  expect(r.errors).toBeUndefined();
  for (const e of r.data.onCall) expect(e.department).toEqual({ name: 'ENGINEERING', employeeCount: ENGINEERING.employees.length });
  expectCost({ extensions: { cost: costs[0] } }, { pointQueries: 101, rangeQueries: 0, entitiesRead: 101, waves: 2 });
});

test("Relay's node(nodeId:) through the gateway: the entity tablegraph's id names, with the other subgraph's fields", async () => {
  const admin = await ADMIN();
  const ids = await post(gateway.url, '{ onCall(first: 2) { id nodeId } }', undefined, admin);
  expect(ids.errors).toBeUndefined();
  const [first] = ids.data.onCall;
  const r = await post(
    gateway.url,
    'query ($id: ID!) { node(nodeId: $id) { __typename ... on Employee { id departmentId badge } } }',
    { id: first.nodeId },
    admin,
  );
  expect(r.errors).toBeUndefined();
  expect(r.data.node).toEqual({ __typename: 'Employee', id: first.id, departmentId: 'ENGINEERING', badge: `B-${first.id}` });
});

describe('_entities on its own', () => {
  const ENTITIES = 'query($r: [_Any!]!) { _entities(representations: $r) { __typename ... on Employee { id firstName email } ... on Department { id name } } }';

  test('de-duplicated; a missing entity is null; a key through the unique e-mail index', async () => {
    const e9 = employeeRow('ENGINEERING', 9);
    const reps = [
      { __typename: 'Employee', departmentId: 'ENGINEERING', id: '9' },
      { __typename: 'Employee', departmentId: 'ENGINEERING', id: 9 }, // an ID may come as a number
      { __typename: 'Department', id: 'ENGINEERING' },
      { __typename: 'Employee', departmentId: 'ENGINEERING', id: '999999' },
      { __typename: 'Employee', email: e9.email },
    ];
    const r = await post(server.url, ENTITIES, { r: reps }, await ADMIN());
    expect(r.errors).toBeUndefined();
    const nine = { __typename: 'Employee', id: '9', firstName: e9.firstName, email: e9.email };
    expect(r.data._entities).toEqual([nine, nine, { __typename: 'Department', id: 'ENGINEERING', name: 'ENGINEERING' }, null, nine]);
    // One wave of four point queries: employee 9 (asked twice), the department, the missing employee and the e-mail's
    // index entity. Through that eventually consistent index `@auth` decides on the entity itself, which the loader
    // already holds (employee 9). The estimate counts the worst case: five representations and that entity.
    expectCost(r, { pointQueries: 4, rangeQueries: 0, entitiesRead: 3, waves: 1 });
    expect(r.extensions.cost.estimate).toMatchObject({ storageCalls: 6, entitiesRead: 6 });
  });

  test('@auth decides as for any read: another department is FORBIDDEN before any call; the own one is answered', async () => {
    const reps = [
      { __typename: 'Employee', departmentId: 'ENGINEERING', id: '9' },
      { __typename: 'Employee', departmentId: 'FINANCE', id: '1001' },
    ];
    const r = await post(server.url, ENTITIES, { r: reps }, await READER('FINANCE'));
    expect(r.data._entities[0]).toBeNull();
    expect(r.data._entities[1]).toMatchObject({ id: '1001' });
    expect(r.errors).toHaveLength(1);
    expect(r.errors![0]).toMatchObject({ path: ['_entities', 0], extensions: { code: 'FORBIDDEN' } });
    expect(JSON.stringify(r)).not.toContain(employeeRow('ENGINEERING', 9).email);
    // Read through a scope, the counts would tell what the scope left out: only the estimate is shown, whatever is
    // selected (`__typename` alone too).
    expect(r.extensions.cost).toMatchObject({ withheld: 'ScopedRead' });
    const bare = await post(server.url, 'query($r: [_Any!]!) { _entities(representations: $r) { __typename } }', { r: reps }, await READER('FINANCE'));
    expect(bare.extensions.cost).toMatchObject({ withheld: 'ScopedRead' });
    expect(bare.extensions.cost.pointQueries).toBeUndefined();
  });

  test('a bad representation is BAD_USER_INPUT naming it, never an internal error', async () => {
    const reps = [
      { __typename: 'PageInfo', hasNextPage: true },
      { __typename: 'Employee', id: '9' },
      'Employee:9',
      { __typename: 'Employee', departmentId: 'ENGINEERING', id: '10' },
    ];
    const r = await post(server.url, ENTITIES, { r: reps }, await ADMIN());
    expect(r.data._entities.slice(0, 3)).toEqual([null, null, null]);
    expect(r.data._entities[3]).toMatchObject({ id: '10' });
    expect(r.errors!.map((e) => [e.path, e.extensions.code, e.extensions.reason])).toEqual([
      [['_entities', 0], 'BAD_USER_INPUT', 'BadRepresentation'],
      [['_entities', 1], 'BAD_USER_INPUT', 'BadRepresentation'],
      [['_entities', 2], 'BAD_USER_INPUT', 'BadRepresentation'],
    ]);
  });

  test('under demand control: representations over the budget are refused before the first storage call', async () => {
    const reps = Array.from({ length: 1001 }, (_, i) => ({ __typename: 'Employee', departmentId: 'ENGINEERING', id: String(9 + (i % 250)) }));
    const r = await post(server.url, ENTITIES, { r: reps }, await ADMIN());
    expect(r.data).toBeUndefined();
    expect(r.errors?.[0].extensions).toMatchObject({ code: 'QUERY_TOO_COSTLY', estimate: { storageCalls: 1001 } });
    // A list written in the query text is counted as one in variables.
    const inline = `{ _entities(representations: [${reps
      .slice(0, 7)
      .map((x) => `{ __typename: "Employee", departmentId: "ENGINEERING", id: "${x.id}" }`)
      .join(', ')}]) { ... on Employee { id } } }`;
    const r2 = await post(server.url, inline, undefined, await ADMIN());
    expect(r2.errors).toBeUndefined();
    expect(r2.data._entities).toHaveLength(7);
    expect(r2.extensions.cost).toMatchObject({ pointQueries: 7, estimate: { storageCalls: 7 } });
  });
});
