/**
 * Value objects kept inside their holder (src/compiler/value-types.ts, src/model/entity-codec.ts jsonValue) on schemas
 * written for this test: an object type without @entity held by an entity's field — nested, in a list, in a list
 * inside a value — compiles to one stored field whose JSON text holds its fields; its input is generated; what cannot
 * be kept so is refused where it is written; and the catalogue refuses a change stored values would not read as.
 */
import { readFileSync } from 'node:fs';
import { isInputObjectType } from 'graphql';
import { compileSchema } from '../../src/compiler/compile';
import { entityWrites, valuesOf } from '../../src/model/entity-codec';
import { schemaLayout } from '../../src/evolution/deployment';
import { diffLayouts } from '../../src/evolution/layout-diff';
import { cacheKeys } from '../../src/client-cache/cache-keys';
import { DIRECTIVES_FILE } from '../support/harness';
import { lineOf, schemaProblems } from '../support/schema-problems';

const DIRECTIVES = { name: 'schema/directives.graphql', body: readFileSync(DIRECTIVES_FILE, 'utf8') };
const compile = (sdl: string) => compileSchema([DIRECTIVES, { name: 'shop.graphql', body: sdl }]);

const SHOP = `
enum Unit { MM CM }
type Size { width: Float! height: Float! unit: Unit! }
type Box { size: Size! label: String notes: [String!] }
type Place { street: String! city: String! @constraint(maxLength: 40) }
type Parcel @entity(table: "Parcels", partitionKey: "{depot}", rowKey: "parcel_{id}") {
  depot: ID!
  id: ID!
  box: Box!
  stops: [Place!]
  sentAt: DateTime
  weight: Long
  from: Place
}
type Query { parcel(depot: ID!, id: ID!): Parcel @point }
type Mutation {
  createParcel(input: CreateParcelInput!): ParcelPayload! @write(entity: "Parcel", action: CREATE)
  updateParcel(input: UpdateParcelInput!): ParcelPayload! @write(entity: "Parcel", action: UPDATE)
}
`;

test('a value object is one stored field holding its shape; its input is generated with the same fields', () => {
  const { model, schema } = compile(SHOP);
  const parcel = model.entities.get('Parcel')!;
  const box = parcel.fields.get('box')!;
  expect(box).toMatchObject({ graphqlType: 'Box', edm: 'String', nonNull: true });
  expect([...box.value!.fields.keys()]).toEqual(['size', 'label', 'notes']);
  expect(box.value!.fields.get('size')!.value!.fields.get('unit')).toMatchObject({ graphqlType: 'Unit', nonNull: true });
  expect(box.value!.fields.get('notes')).toMatchObject({ list: true, graphqlType: 'String' });
  expect(parcel.fields.get('stops')).toMatchObject({ list: true, graphqlType: 'Place' });
  const create = (schema.getType('CreateParcelInput') as any).getFields();
  expect([String(create.box.type), String(create.stops.type), String(create.from.type)]).toEqual(['BoxInput!', '[PlaceInput!]', 'PlaceInput']);
  expect(String((schema.getType('UpdateParcelInput') as any).getFields().box.type)).toBe('BoxInput');
  const boxInput = schema.getType('BoxInput');
  expect(isInputObjectType(boxInput)).toBe(true);
  const inner = (boxInput as any).getFields();
  expect([String(inner.size.type), String(inner.label.type), String(inner.notes.type)]).toEqual(['SizeInput!', 'String', '[String!]']);
  expect(String((schema.getType('SizeInput') as any).getFields().unit.type)).toBe('Unit!');
});

test('written as its JSON text, each value checked where it is; null fields left out; read back as written', () => {
  const parcel = compile(SHOP).model.entities.get('Parcel')!;
  const hostile = 'a "quoted", comma } ] \\ \u2028 💿 ' + 'x'.repeat(20_000);
  const values = {
    depot: 'd1',
    id: 'p1',
    box: { size: { width: 1.5, height: 2, unit: 'CM' }, label: hostile, notes: ['n1', ''] },
    stops: [
      { street: 'Main "St"', city: 'Oslo' },
      { street: '{}', city: '[]' },
    ],
    from: { street: 's', city: 'c' },
  };
  const { properties } = entityWrites(parcel, values).primary.entity;
  expect(properties.box).toEqual({ type: 'String', value: JSON.stringify(values.box) });
  expect(properties.stops).toEqual({ type: 'String', value: JSON.stringify(values.stops) });
  const stored = Object.fromEntries(Object.entries(properties).map(([k, v]) => [k, v?.value]));
  expect(valuesOf(parcel, stored)).toMatchObject({ box: values.box, stops: values.stops, from: values.from });
  // A nullable field given as null is left out of the text; a CSV cell holds the JSON text.
  const bare = entityWrites(parcel, { ...values, box: { size: values.box.size, label: null } }).primary.entity.properties.box;
  expect(bare).toEqual({ type: 'String', value: JSON.stringify({ size: values.box.size }) });
  const cell = entityWrites(parcel, { ...values, from: '{"street":"a","city":"b"}' }).primary.entity.properties.from;
  expect(cell).toEqual({ type: 'String', value: '{"street":"a","city":"b"}' });
  // Refused before anything is sent, naming where.
  const refused = (box: unknown, stops: unknown = null) => {
    try {
      entityWrites(parcel, { ...values, box, stops });
      return undefined;
    } catch (e: any) {
      return [e.code, e.details?.field, e.message];
    }
  };
  expect(refused({ label: 'no size' })).toEqual(['BAD_USER_INPUT', 'box.size', 'box.size is required']);
  expect(refused({ ...values.box, size: { ...values.box.size, width: 'wide' } })?.slice(0, 2)).toEqual(['BAD_USER_INPUT', 'box.size.width']);
  expect(refused({ ...values.box, colour: 'red' })?.[2]).toMatch(/Box has no field "colour"/);
  expect(refused('not json')?.[2]).toMatch(/box: expected an object \(Box\)/);
  expect(refused([values.box])?.[2]).toMatch(/expected an object/);
  expect(refused(values.box, [values.stops[0], null])?.[2]).toMatch(/stops\[1\] is null/);
  expect(refused(values.box, [{ street: 's', city: 'c'.repeat(41) }])?.slice(0, 2)).toEqual(['BAD_USER_INPUT', 'stops[0].city']);
  expect(refused({ ...values.box, notes: 'one' })?.[2]).toMatch(/box.notes: expected a list/);
});

test('what cannot be kept inside its holder is refused where it is written', () => {
  const sdl = `
type Inner { a: String! }
type Loop { next: Loop }
type Bad {
  one(x: Int): String
  many: [[String!]!]
  ref: Thing
  secret: String @encrypted
  loop: Loop
}
type Thing @entity(table: "Things", partitionKey: "{id}", rowKey: "t") {
  id: ID!
  inner: Inner! @constraint(maxLength: 3)
  bad: Bad
  opt: [Inner]
}
type Other @entity(table: "Others", partitionKey: "{inner}", rowKey: "o") @index(name: "byInner", table: "OthersByInner", partitionKey: "{inner}", rowKey: "o_{id}") {
  id: ID!
  inner: Inner!
}
type Query { thing(id: ID!): Thing @point }
`;
  const problems = schemaProblems(() => compile(sdl));
  const at = (coordinate: string) => problems.filter((p) => p.coordinate === coordinate).map((p) => p.message);
  expect(at('Thing.inner').join()).toMatch(/@constraint is for a field holding a scalar: Inner is a value object/);
  expect(at('Bad.one').join()).toMatch(/takes no arguments/);
  expect(at('Bad.many').join()).toMatch(/holds non-null elements/);
  expect(at('Bad.ref').join()).toMatch(/Thing is an @entity/);
  expect(at('Bad.secret').join()).toMatch(/@encrypted is for an @entity's own fields/);
  expect(at('Loop.next').join()).toMatch(/Loop would hold itself \(Loop → Loop\)/);
  expect(at('Thing.opt').join()).toMatch(/holds non-null elements/);
  expect(at('Other').join()).toMatch(/names \{inner\}, a value object \(Inner\): a key part is one scalar value/);
  expect(at('Other@index(byInner)').join()).toMatch(/a value object \(Inner\)/);
  const bound = `
type Inner { a: String! }
type Thing @entity(table: "Things", partitionKey: "{id}", rowKey: "t") { id: ID! }
type Holder @entity(table: "Holders", partitionKey: "{hid}", rowKey: "h") { hid: ID! id: Inner! thing: Thing @point }
type Query { holder(hid: ID!): Holder @point }
`;
  // An @auth scope compares one stored value with a claim: not a value object's text, nor a list's.
  const scoped = `
type Inner { a: String! }
type Thing @entity(table: "Things", partitionKey: "{id}", rowKey: "t")
  @auth(rules: [{ scope: [{ field: "inner", claim: "a" }] }, { scope: [{ field: "tags", claim: "a" }] }]) { id: ID! inner: Inner tags: [String!] }
type Query { thing(id: ID!): Thing @point }
`;
  expect(schemaProblems(() => compile(scoped)).map((p) => p.message)).toEqual([
    expect.stringMatching(/rule 1: scope field "inner" is a value object/),
    expect.stringMatching(/rule 2: scope field "tags" is a list/),
  ]);
  // An object type no entity holds is no value object: nothing says where its data lives.
  const orphan = `${bound.replace('id: Inner!', 'id: ID!')}type Orphan { a: Inner }\n`;
  expect(schemaProblems(() => compile(orphan))).toEqual([
    expect.objectContaining({ coordinate: 'Inner', message: expect.stringMatching(/nor a value object an entity holds/), line: lineOf(orphan, 'type Inner') }),
    expect.objectContaining({
      coordinate: 'Orphan',
      message: expect.stringMatching(/nor a value object an entity holds/),
      line: lineOf(orphan, 'type Orphan'),
    }),
  ]);
  expect(schemaProblems(() => compile(bound))).toEqual([
    expect.objectContaining({ coordinate: 'Holder.thing', message: expect.stringMatching(/Holder.id is a value object \(Inner\), which is no key value/) }),
  ]);
  // Each problem once, with its place in the file.
  expect(at('Bad.one')).toHaveLength(1);
  const loop = problems.find((p) => p.coordinate === 'Loop.next')!;
  expect(loop.line).toBe(lineOf(sdl, 'next: Loop'));
});

test('a client cache keeps a value object inside its holder (keyFields: false), even one with an id', () => {
  const { model, schema } = compile(SHOP.replace('type Place { street', 'type Place { id: ID street'));
  const keys = cacheKeys(model, schema).types;
  expect(keys.find((k) => k.type === 'Place')).toEqual({ type: 'Place', keyFields: false });
  expect(keys.find((k) => k.type === 'Parcel')?.keyFields).toEqual(['depot', 'id']);
});

test('the catalogue refuses a change stored values would not read as, and takes one they would', () => {
  const layout = (sdl: string) => {
    const { model, schema } = compile(sdl);
    return schemaLayout(model, schema).layout;
  };
  const before = layout(SHOP);
  const change = (from: string, to: string) => {
    return diffLayouts(before, layout(SHOP.replace(from, to))).filter((c) => c.coordinate === 'Parcel.box' || c.coordinate === 'Parcel.stops');
  };
  expect(change('label: String ', 'label: String! ')).toEqual([
    expect.objectContaining({ class: 'refused', description: expect.stringMatching(/label: it became non-null/) }),
  ]);
  expect(change('unit: Unit!', 'unit: Unit! depth: Float!')).toEqual([
    expect.objectContaining({ class: 'refused', description: expect.stringMatching(/size.depth: a new non-null field of a value object/) }),
  ]);
  expect(change('enum Unit { MM CM }', 'enum Unit { MM }')[0]).toMatchObject({ class: 'refused', description: expect.stringMatching(/enum values CM/) });
  expect(change('street: String!', 'street: Int!')[0]).toMatchObject({ class: 'refused', coordinate: 'Parcel.stops' });
  // A new nullable field, a field made nullable, a field removed: stored values still read.
  expect(change('unit: Unit!', 'unit: Unit! depth: Float').map((c) => c.class)).toEqual(['compatible']);
  expect(change('label: String notes: [String!]', 'label: String').map((c) => c.class)).toEqual(['compatible']);
});
