/**
 * The checks of Apollo's federation subgraph compatibility suite (apollographql/apollo-federation-subgraph-compatibility,
 * packages/compatibility/src/tests) that apply to a stored schema, run against a schema written for them: the suite's
 * `products` subgraph as tablegraph can store it, composed by a real `@apollo/gateway` with a `users` subgraph that
 * also resolves `User.name` (for `@override`) and `Product.weight` (for `@shareable`). docs/federation.md lists the
 * checks that do not apply, and why.
 */
import { ApolloServer } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { ApolloGateway, IntrospectAndCompose } from '@apollo/gateway';
import { buildSubgraphSchema } from '@apollo/subgraph';
import { parse, stripIgnoredCharacters } from 'graphql';
import { entityWrites } from '../src/model/entity-codec';
import { planEgtBatches, writeEgtBatches } from '../src/write/egt-batches';
import { startSdlServer } from './support/harness';

const PRODUCTS = `
extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key", "@shareable", "@inaccessible", "@override", "@tag"])

type Product @entity(table: "Products", partitionKey: "product_{id}", rowKey: "product")
  @index(name: "bySkuPackage", table: "ProductsBySku", partitionKey: "sku_{sku}", rowKey: "{package}", unique: true)
  @key(fields: "id") @key(fields: "sku package") {
  id: ID!
  sku: String!
  package: String!
  notes: String @tag(name: "internal")
  unit: String @inaccessible
  weight: Float @shareable
  createdByEmail: ID!
  createdBy: User @point(partitionKey: "user_{createdByEmail}", rowKey: "user")
}

type DeprecatedProduct @entity(table: "Products", partitionKey: "deprecated_{sku}", rowKey: "deprecated_{package}") @key(fields: "sku package") {
  sku: String!
  package: String!
  reason: String
}

type User @entity(table: "Products", partitionKey: "user_{email}", rowKey: "user") @key(fields: "email") {
  email: ID!
  name: String @override(from: "users")
}

type Query {
  product(id: ID!): Product @point(partitionKey: "product_{id}", rowKey: "product")
  deprecatedProduct(sku: String!, package: String!): DeprecatedProduct
    @point(partitionKey: "deprecated_{sku}", rowKey: "deprecated_{package}") @deprecated(reason: "Use product query instead")
}
`;

/** The suite's `users` subgraph, cut to what the stored checks need. */
const USERS = `extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key", "@shareable"])
type User @key(fields: "email") { email: ID! name: String }
type Product @key(fields: "id") { id: ID! weight: Float @shareable }
type Query { users: [User!]! }`;

let products: Awaited<ReturnType<typeof startSdlServer>>;
let users: ApolloServer;
let gateway: ApolloServer;
let usersUrl: string;
let gatewayUrl: string;

async function request(url: string, query: string, variables?: Record<string, unknown>, headers: Record<string, string> = {}) {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ query, variables }) });
  return (await res.json()) as { data?: any; errors?: any[]; extensions?: any };
}
const productsRequest = (query: string, variables?: Record<string, unknown>, headers?: Record<string, string>) =>
  request(products.server.url, query, variables, headers);
const sdl = async () => stripIgnoredCharacters((await productsRequest('query { _service { sdl } }')).data._service.sdl);

beforeAll(async () => {
  products = await startSdlServer(PRODUCTS, { TABLEGRAPH_AUTH: 'off' });
  const { model } = products;
  const rows: Array<[string, Record<string, unknown>]> = [
    [
      'Product',
      {
        id: 'apollo-federation',
        sku: 'federation',
        package: '@apollo/federation',
        notes: 'note',
        unit: 'kg',
        weight: 1,
        createdByEmail: 'support@apollographql.com',
      },
    ],
    ['DeprecatedProduct', { sku: 'apollo-federation-v1', package: '@apollo/federation-v1', reason: 'Migrate to Federation V2' }],
    ['User', { email: 'support@apollographql.com', name: 'Jane Smith' }],
  ];
  const writes = rows.flatMap(([type, values]) => {
    const w = entityWrites(model.entities.get(type)!, values);
    return [w.primary, ...w.indexes];
  });
  await writeEgtBatches(products.server.store, planEgtBatches(writes, products.server.store.target), { concurrency: 2 });
  const resolvers = {
    User: { __resolveReference: (u: { email: string }) => ({ ...u, name: 'not the overridden name' }) },
    Product: { __resolveReference: (p: { id: string }) => ({ ...p, weight: 1 }) },
    Query: { users: () => [] },
  };
  users = new ApolloServer({ schema: buildSubgraphSchema({ typeDefs: parse(USERS), resolvers: resolvers as any }) });
  usersUrl = (await startStandaloneServer(users, { listen: { port: 0 } })).url;
  gateway = new ApolloServer({
    gateway: new ApolloGateway({
      supergraphSdl: new IntrospectAndCompose({
        subgraphs: [
          { name: 'products', url: products.server.url },
          { name: 'users', url: usersUrl },
        ],
      }),
    }),
  });
  gatewayUrl = (await startStandaloneServer(gateway, { listen: { port: 0 } })).url;
}, 60_000);

afterAll(async () => {
  await gateway?.stop();
  await users?.stop();
  await products?.close();
});

test('@link: one federation link, of v2.0–v2.7, importing only federation names', async () => {
  const links = (await sdl()).match(/@link\(([\s\S]+?)\)/g) ?? [];
  const federation = links.filter((l) => /url:"https:\/\/specs.apollo.dev\/federation\/v/.test(l));
  expect(federation).toHaveLength(1);
  expect(federation[0]).toMatch(/federation\/v2\.[0-7]"/);
  const imports = federation[0].match(/import:\[(.+?)\]/)![1].split(/\s+/);
  const allowed = ['@authenticated', '@composeDirective', '@extends', '@external', '@inaccessible', '@interfaceObject', '@key', '@override', '@policy'];
  allowed.push('@provides', '@requires', '@requiresScopes', '@shareable', '@tag', 'FieldSet', 'Scope', 'Policy');
  for (const i of imports) expect(allowed).toContain(i.replaceAll('"', ''));
});

describe('@key', () => {
  test('single: applied on User and resolved', async () => {
    expect(await sdl()).toMatch(/type User(@key|@federation__key)\(fields:"email"( resolvable:true)?\)/);
    const resp = await productsRequest('query ($r: [_Any!]!) { _entities(representations: $r) { ...on User { email name } } }', {
      r: [{ __typename: 'User', email: 'support@apollographql.com' }],
    });
    expect(resp).not.toHaveProperty('errors');
    expect(resp.data).toEqual({ _entities: [{ email: 'support@apollographql.com', name: 'Jane Smith' }] });
  });

  test('multiple fields: applied on DeprecatedProduct and resolved', async () => {
    expect(await sdl()).toMatch(/type DeprecatedProduct(@key|@federation__key)\(fields:"sku package"/);
    const resp = await productsRequest('query ($r: [_Any!]!) { _entities(representations: $r) { ...on DeprecatedProduct { sku package reason } } }', {
      r: [{ __typename: 'DeprecatedProduct', sku: 'apollo-federation-v1', package: '@apollo/federation-v1' }],
    });
    expect(resp).not.toHaveProperty('errors');
    expect(resp.data).toEqual({ _entities: [{ sku: 'apollo-federation-v1', package: '@apollo/federation-v1', reason: 'Migrate to Federation V2' }] });
  });

  test('repeatable: Product by either key, the second through its unique index', async () => {
    expect(await sdl()).toMatch(/type Product(@key|@federation__key)\(fields:"id"\)(@key|@federation__key)\(fields:"sku package"\)/);
    const resp = await productsRequest('query ($r: [_Any!]!) { _entities(representations: $r) { ...on Product { id sku package notes } } }', {
      r: [
        { __typename: 'Product', id: 'apollo-federation' },
        { __typename: 'Product', sku: 'federation', package: '@apollo/federation' },
      ],
    });
    expect(resp).not.toHaveProperty('errors');
    const product = { id: 'apollo-federation', sku: 'federation', package: '@apollo/federation', notes: 'note' };
    expect(resp.data).toEqual({ _entities: [product, product] });
  });
});

test('@shareable: in the SDL, and resolved through the gateway', async () => {
  expect(await sdl()).toMatch(/weight:Float(@shareable|@federation__shareable)/);
  const resp = await request(gatewayUrl, 'query ($id: ID!) { product(id: $id) { weight } }', { id: 'apollo-federation' });
  expect(resp).not.toHaveProperty('errors');
  expect(resp.data).toEqual({ product: { weight: 1 } });
});

test('@inaccessible: in the SDL, readable from the subgraph, not through the gateway', async () => {
  const text = await sdl();
  expect(text).not.toContain('@federation__inaccessible');
  expect(text).toContain('unit:String@inaccessible');
  const direct = await productsRequest('query ($id: ID!) { product(id: $id) { unit } }', { id: 'apollo-federation' });
  expect(direct).not.toHaveProperty('errors');
  expect(direct.data).toEqual({ product: { unit: 'kg' } });
  const viaGateway = await request(gatewayUrl, 'query ($id: ID!) { product(id: $id) { unit } }', { id: 'apollo-federation' });
  expect(viaGateway.errors?.[0].extensions.code).toBe('GRAPHQL_VALIDATION_FAILED');
});

test('@override: in the SDL, and the overriding subgraph answers through the gateway', async () => {
  expect(await sdl()).toMatch(/(@override|@federation__override)\(from:"users"\)/);
  const resp = await request(gatewayUrl, 'query ($id: ID!) { product(id: $id) { createdBy { name } } }', { id: 'apollo-federation' });
  expect(resp).not.toHaveProperty('errors');
  expect(resp.data).toEqual({ product: { createdBy: { name: 'Jane Smith' } } });
});

test('@tag: in the SDL as written', async () => {
  const text = await sdl();
  expect(text).not.toContain('@federation__tag');
  expect(text).toContain('@tag(name:"internal")');
});

test('introspection: _service serves the schema (its Query type, its deprecations)', async () => {
  const text = await sdl();
  expect(text).toContain('type Query');
  expect(text).toContain('deprecatedProduct(sku:String!package:String!):DeprecatedProduct@deprecated(reason:"Use product query instead")');
});

test('ftv1: a federated trace when the gateway asks for one', async () => {
  const resp = await productsRequest('query { __typename }', undefined, { 'apollo-federation-include-trace': 'ftv1' });
  expect(resp.data).toEqual({ __typename: 'Query' });
  // tablegraph's own extensions (cost, consistency) are beside it: the suite's exact-equality check cannot hold.
  expect(resp.extensions?.ftv1).toEqual(expect.any(String));
});
