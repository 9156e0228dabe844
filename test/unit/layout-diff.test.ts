/**
 * The layout diff (src/evolution/layout-diff.ts) on schemas written for the test, compiled and recorded as the
 * catalogue records them: each kind of change gets its class — compatible, built online, re-keyed, retired, refused with a
 * remedy and, where it holds only while entities are stored, a probe — and two schemas that store the same data
 * in the same places (queries, descriptions, @auth aside) have the same layout hash.
 */
import { compileSchema } from '../../src/compiler/compile';
import { diffLayouts } from '../../src/evolution/layout-diff';
import { layoutHash, recordLayout } from '../../src/evolution/layout-record';
import { isEnumType } from 'graphql';
import fs from 'node:fs';
import { DIRECTIVES_FILE } from '../support/harness';

const DIRECTIVES = fs.readFileSync(DIRECTIVES_FILE, 'utf8');

function layoutOf(sdl: string) {
  const { model, schema } = compileSchema([{ name: 'schema.graphql', body: `${DIRECTIVES}\n${sdl}` }], {});
  return recordLayout(model, (name) => {
    const t = schema.getType(name);
    return isEnumType(t) ? t.getValues().map((v) => v.name) : undefined;
  });
}

const schema = (opts: { fields?: string; indexes?: string; extra?: string; query?: string } = {}) => `
enum Level { LOW HIGH }
type Item @entity(table: "Items", partitionKey: "{shop}", rowKey: "item_{id}")${opts.indexes ?? ''} {
  shop: ID!
  id: ID!
  name: String
  qty: Int
  level: Level${opts.fields ?? ''}
}${opts.extra ?? ''}
type Query {
  item(shop: ID!, id: ID!): Item @point${opts.query ?? ''}
}`;

const BY_NAME = '\n  @index(name: "byName", table: "ItemsByName", partitionKey: "n_{name:hash16}", rowKey: "{name}_{shop}_{id}")';

const classes = (before: string, after: string) =>
  diffLayouts(layoutOf(before), layoutOf(after)).map((c) => `${c.class} ${c.pathId ?? c.coordinate}${c.probe ? ' (probe)' : ''}`);

test('the same stored layout, the same hash: queries and descriptions are not part of it', () => {
  const a = layoutOf(schema());
  const b = layoutOf(schema({ query: '\n  """A second way to read one."""\n  sameItem(shop: ID!, id: ID!): Item @point' }));
  expect(layoutHash(a)).toBe(layoutHash(b));
  expect(layoutHash(a)).not.toBe(layoutHash(layoutOf(schema({ fields: '\n  note: String' }))));
});

test('each kind of change gets its class', () => {
  expect(classes(schema(), schema({ fields: '\n  note: String' }))).toEqual(['compatible Item.note']);
  expect(classes(schema(), schema({ fields: '\n  note: String!' }))).toEqual(['refused Item.note (probe)']);
  expect(classes(schema(), schema().replace('qty: Int', 'qty: Float'))).toEqual(['compatible Item.qty']);
  expect(classes(schema(), schema().replace('qty: Int', 'qty: String'))).toEqual(['refused Item.qty (probe)']);
  expect(classes(schema(), schema().replace('name: String', 'name: String!'))).toEqual(['refused Item.name (probe)']);
  expect(classes(schema(), schema().replace('enum Level { LOW HIGH }', 'enum Level { LOW HIGH TOP }'))).toEqual(['compatible Item.level']);
  expect(classes(schema(), schema().replace('enum Level { LOW HIGH }', 'enum Level { LOW }'))).toEqual(['refused Item.level (probe)']);
  expect(classes(schema(), schema().replace('  qty: Int\n', ''))).toEqual(['refused Item.qty (probe)']);
  expect(classes(schema(), schema().replace('rowKey: "item_{id}"', 'rowKey: "it_{id}"'))).toEqual(['rekey rekey:Item (probe)']);
  expect(classes(schema(), schema().replace('table: "Items"', 'table: "Goods"'))).toEqual(['rekey rekey:Item (probe)']);
  expect(classes(schema(), schema().replace('partitionKey: "{shop}"', 'partitionKey: "s_{shop}"'))).toEqual(['rekey rekey:Item (probe)']);
  expect(classes(schema(), schema().replace('@entity(table: "Items"', '@entity(typeName: "Goods", table: "Items"'))).toEqual(['refused Item (probe)']);
  expect(classes(schema(), schema({ indexes: BY_NAME }))).toEqual(['build index:Item.byName']);
  expect(classes(schema({ indexes: BY_NAME }), schema())).toEqual(['retire index:Item.byName']);
  expect(classes(schema({ indexes: BY_NAME }), schema({ indexes: BY_NAME.replace('n_{name:hash16}', 'n_{name:hash32}') }))).toEqual([
    'build index:Item.byName',
  ]);
  const other = '\ntype Shelf @entity(table: "Shelves", partitionKey: "shelves", rowKey: "{id}") { id: ID! }';
  expect(classes(schema(), schema({ extra: other }))).toEqual(['compatible Shelf']);
  expect(classes(schema({ extra: other }), schema())).toEqual(['refused Shelf (probe)']);
});

test('a refusal says what makes the change possible', () => {
  const [change] = diffLayouts(layoutOf(schema()), layoutOf(schema({ fields: '\n  note: String!' })));
  expect(change.remedy).toMatch(/add it nullable/);
  const [removed] = diffLayouts(layoutOf(schema()), layoutOf(schema().replace('  qty: Int\n', '')));
  expect(removed.remedy).toMatch(/migrate -- apply --drop Item\.qty/);
});
