/**
 * What the compiler makes of a schema that links Apollo Federation 2 (src/compiler/federation-link.ts, federation.ts),
 * on schemas written for this test: each `@entity` type's generated `@key` (its PartitionKey then RowKey fields), a
 * declared key served by the entity's keys or a unique index, and every key or directive that would need a scan or a
 * field tablegraph does not store refused with its coordinate and line. The `_service` SDL composes, with
 * `@apollo/composition`, with another subgraph's.
 */
import { readFileSync } from 'node:fs';
import { composeServices } from '@apollo/composition';
import { parse } from 'graphql';
import { compileSchema } from '../../src/compiler/compile';
import { DIRECTIVES_FILE } from '../support/harness';
import { lineOf, schemaProblems } from '../support/schema-problems';

const DIRECTIVES = { name: 'schema/directives.graphql', body: readFileSync(DIRECTIVES_FILE, 'utf8') };
const compile = (sdl: string) => compileSchema([DIRECTIVES, { name: 'garden.graphql', body: sdl }]);

const LINK = 'extend schema @link(url: "https://specs.apollo.dev/federation/v2.5", import: ["@key", "@shareable", "@external", "@requires", "@tag"])\n';
const GARDEN = `
type Bed @entity(table: "Garden", partitionKey: "bed_{bedId}", rowKey: "bed") {
  bedId: ID!
  soil: String!
  plants(first: Int, after: String): PlantConnection! @range(partitionKey: "bed_{bedId}", rowKeyPrefix: "plant_")
}
type Plant @entity(table: "Garden", partitionKey: "bed_{bedId}", rowKey: "plant_{row:03}_{slot:03}")
  @index(name: "byTag", table: "PlantsByTag", partitionKey: "tag_{tag:hash8}", rowKey: "{tag}", unique: true) {
  bedId: ID!
  row: Int!
  slot: Int!
  tag: String!
  species: String!
  bed: Bed! @point(partitionKey: "bed_{bedId}", rowKey: "bed")
}
type Query {
  bed(bedId: ID!): Bed @point
  plantByTag(tag: String!): Plant @point(index: "byTag", partitionKey: "tag_{tag:hash8}", rowKey: "{tag}")
}
`;

/** The problems (coordinate, message, line) compiling `sdl` is refused with. */
const problems = (sdl: string) => schemaProblems(() => compile(sdl));

test('without the link, a schema is no subgraph: no _service, no _entities, no federation model', () => {
  const { schema, model } = compile(GARDEN);
  expect(model.federation).toBeUndefined();
  expect(Object.keys(schema.getQueryType()!.getFields())).toEqual(['bed', 'plantByTag']);
});

test('each @entity type gets the key of its PartitionKey then its RowKey fields, served by its own point query', () => {
  const { schema, model } = compile(LINK + GARDEN);
  expect(Object.keys(schema.getQueryType()!.getFields())).toEqual(['bed', 'plantByTag', '_entities', '_service']);
  const keys = (t: string) => model.federation!.keys.get(t)!.map((k) => [k.fields.join(' '), k.path?.index?.name ?? 'entity']);
  expect(keys('Bed')).toEqual([['bedId', 'entity']]);
  expect(keys('Plant')).toEqual([['bedId row slot', 'entity']]);
  const path = model.federation!.keys.get('Plant')![0].path!;
  expect([path.partitionKey.template.source, path.rowKey.template.source]).toEqual(['bed_{bedId}', 'plant_{row:03}_{slot:03}']);
  expect([...path.rowKey.bindings.values()]).toEqual([
    { source: 'argument', name: 'row' },
    { source: 'argument', name: 'slot' },
  ]);
  expect(model.federation!.sdl).toContain('type Plant @key(fields: "bedId row slot")');
  expect(model.federation!.sdl).not.toMatch(/@entity|@index|@point|@range|directive @|enum OnDelete/);
});

test('a declared key is kept as declared: the entity keys in any order, or a unique index; no generated one beside it', () => {
  const sdl = LINK + GARDEN.replace('type Plant @entity', 'type Plant @key(fields: "tag") @key(fields: "slot row bedId") @entity');
  const { model } = compile(sdl);
  expect(model.federation!.keys.get('Plant')!.map((k) => [k.fields.join(' '), k.path?.index?.name ?? 'entity'])).toEqual([
    ['tag', 'byTag'],
    ['slot row bedId', 'entity'],
  ]);
});

test('a nested key is refused where written, before the subgraph is built', () => {
  const sdl = LINK + GARDEN.replace('type Bed @entity', 'type Bed @key(fields: "bedId soil { x }") @entity');
  expect(problems(sdl)).toEqual([
    { coordinate: 'Bed', message: expect.stringMatching(/a nested key names fields of another type/), line: lineOf(sdl, '@key(fields: "bedId soil') },
  ]);
});

test('a key no point query serves and directives for fields tablegraph does not store are refused where written', () => {
  const sdl =
    LINK +
    GARDEN.replace('type Plant @entity', 'type Plant @key(fields: "species") @entity').replace(
      '  species: String!',
      '  species: String! @external\n  label: String! @requires(fields: "species")',
    );
  expect(problems(sdl)).toEqual([
    { coordinate: 'Plant.species', message: expect.stringMatching(/^@external marks a field another subgraph resolves/), line: lineOf(sdl, '@external\n') },
    { coordinate: 'Plant.label', message: expect.stringMatching(/^@requires computes a field/), line: lineOf(sdl, '@requires(') },
    {
      coordinate: 'Plant',
      message: expect.stringMatching(
        /@key\(fields: "species"\) cannot be served by a point query: Plant's keys take "bedId row slot", its unique indexes "tag" \(@index byTag\)/,
      ),
      line: lineOf(sdl, '@key(fields: "species")'),
    },
  ]);
});

test('under @tenancy the key leaves the tenant out: it comes from the token, never from a representation', () => {
  const { model } = compile(LINK + 'extend schema @tenancy(claim: "org")\n' + GARDEN);
  const [key] = model.federation!.keys.get('Plant')!;
  expect(key.fields).toEqual(['bedId', 'row', 'slot']);
  expect(key.path!.partitionKey.bindings.get('_tenant')).toEqual({ source: 'tenant', name: '_tenant' });
});

test('the _service SDL composes with another subgraph that adds a field to an entity', () => {
  const { model } = compile(LINK + GARDEN);
  const other = `extend schema @link(url: "https://specs.apollo.dev/federation/v2.5", import: ["@key"])
    type Plant @key(fields: "bedId row slot") { bedId: ID! row: Int! slot: Int! wateredAt: String }
    type Query { thirsty: [Plant!]! }`;
  const result = composeServices([
    { name: 'garden', url: 'http://garden.test/graphql', typeDefs: parse(model.federation!.sdl) },
    { name: 'care', url: 'http://care.test/graphql', typeDefs: parse(other) },
  ]);
  expect(result.errors).toBeUndefined();
  expect(result.supergraphSdl).toMatch(/type Plant[^{]*@join__type\(graph: CARE, key: "bedId row slot"\)/);
  // Nothing of the storage layout reaches the supergraph.
  expect(result.supergraphSdl).not.toMatch(/Garden|PlantsByTag|AuthRule/);
});
