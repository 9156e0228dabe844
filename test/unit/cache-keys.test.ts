/**
 * The cache keys the GraphQL Code Generator plugin writes (src/client-cache), on a schema written for this test: under
 * `@tenancy` (whose tenant no client sees), with a stored interface, an index connection at the root and a
 * subscription whose change events carry the keys of what changed.
 */
import { readFileSync } from 'node:fs';
import { compileSchema } from '../../src/compiler/compile';
import { clientSchema } from '../../src/compiler/client-schema';
import { cacheKeys } from '../../src/client-cache/cache-keys';
import { renderApolloTypePolicies } from '../../src/client-cache/apollo-type-policies';
import { renderUrqlCacheConfig } from '../../src/client-cache/urql-cache-config';
import { cacheConfigModule } from '../../src/cli/codegen-cache-plugin';
import { DIRECTIVES_FILE } from '../support/harness';

const SDL = `
extend schema @tenancy(claim: "org")
type Garage @entity(table: "Garages", partitionKey: "garage_{code}", rowKey: "garage") {
  code: ID!
  vehicles(first: Int, after: String): VehicleConnection! @range(partitionKey: "garage_{code}", rowKeyPrefix: "vehicle_")
}
interface Vehicle { garage: ID! plate: ID! make: String! }
type Car implements Vehicle @entity(table: "Garages", partitionKey: "garage_{garage}", rowKey: "vehicle_{plate}")
  @index(name: "byMake", table: "VehiclesByMake", partitionKey: "{make}", rowKey: "{garage}_{plate}") {
  garage: ID! plate: ID! make: String! seats: Int!
}
type Van implements Vehicle @entity(table: "Garages", partitionKey: "garage_{garage}", rowKey: "vehicle_{plate}") {
  garage: ID! plate: ID! make: String! load: Int!
}
type Query {
  garage(code: ID!): Garage @point
  carsByMake(make: String!, first: Int, after: String): CarConnection! @range(index: "byMake", partitionKey: "{make}")
}
type Mutation { createCar(input: CreateCarInput!): CarPayload! @write(entity: "Car", action: CREATE) }
type Subscription { carChanged(garage: ID!): CarChange! @subscribe(entity: "Car") }
`;

const compiled = compileSchema([
  { name: 'schema/directives.graphql', body: readFileSync(DIRECTIVES_FILE, 'utf8') },
  { name: 'garages.graphql', body: SDL },
]);
const schema = clientSchema(compiled.schema);
const keys = cacheKeys(compiled.model, schema);
const keyOf = (type: string) => keys.types.find((t) => t.type === type)?.keyFields;

test('entities keyed by their PartitionKey and RowKey fields, without the tenant; everything else not normalised', () => {
  expect(compiled.model.entities.get('Car')!.keyFields).toContain('_tenant');
  expect([keyOf('Garage'), keyOf('Car'), keyOf('Van')]).toEqual([['code'], ['garage', 'plate'], ['garage', 'plate']]);
  // The change event carries the car's keys and an `id`-less payload; neither is the car.
  for (const type of ['CarChange', 'CarPayload', 'CarConnection', 'CarEdge', 'PageInfo']) expect([type, keyOf(type)]).toEqual([type, false]);
  expect(keys.types.map((t) => t.type)).not.toEqual(expect.arrayContaining(['Query', 'Mutation', 'Subscription']));
  expect(keys.possibleTypes).toEqual({ Vehicle: ['Car', 'Van'] });
});

test('each connection field keyed by its arguments other than the pagination ones', () => {
  expect(keys.connections).toEqual([
    { type: 'Garage', field: 'vehicles', keyArgs: [] },
    { type: 'Query', field: 'carsByMake', keyArgs: ['make'] },
  ]);
});

test("a root point query whose arguments are its entity's keys redirected to the entity (the tenant from the token)", () => {
  expect(keys.redirects).toEqual([{ field: 'garage', type: 'Garage', args: { code: 'code' } }]);
});

test('the modules written for Apollo Client and urql', () => {
  const fieldsOf = (name: string) => Object.keys((schema.getType(name) as any)?.getFields?.() ?? {});
  const apollo = renderApolloTypePolicies(keys, fieldsOf);
  expect(apollo).toContain('  Car: { keyFields: ["garage","plate"] },');
  expect(apollo).toContain('  Garage: { keyFields: ["code"], fields: { vehicles: relayStylePagination(false) } },');
  expect(apollo).toContain(
    '  Query: { fields: { carsByMake: relayStylePagination(["make"]), garage: { read: (_, { args, toReference }) => toReference({ __typename: "Garage", "code": args?.code }) } } },',
  );
  const urql = renderUrqlCacheConfig(keys);
  expect(urql).toContain('  Car: (data) => keyOf(data, ["garage","plate"]),');
  expect(urql).toContain('  CarChange: () => null,');
  expect(urql).toContain('  Query: { carsByMake: relayPagination(), garage: (_, args) => ({ __typename: "Garage", "code": args.code }) },');
});

test('the plugin says what it needs', () => {
  expect(() => cacheConfigModule({})).toThrow(/set `config.schemaDir`/);
  expect(() => cacheConfigModule({ schemaDir: 'examples/hr', client: 'relay' as never })).toThrow(/apollo or urql, not relay/);
});
