/**
 * Lists of scalars kept in one property (`tags: [String!]`, src/compiler/layouts.ts listShape, src/model/entity-codec.ts
 * listValue) on schemas written for this test: what compiles, what is refused and where, and the property a list is
 * written as — its JSON text, each element checked as a value of its type, hostile text kept exactly.
 */
import { readFileSync } from 'node:fs';
import { compileSchema } from '../../src/compiler/compile';
import { entityWrites, listOf, valuesOf } from '../../src/model/entity-codec';
import { DIRECTIVES_FILE } from '../support/harness';
import { lineOf, schemaProblems } from '../support/schema-problems';

const DIRECTIVES = { name: 'schema/directives.graphql', body: readFileSync(DIRECTIVES_FILE, 'utf8') };
const compile = (sdl: string) => compileSchema([DIRECTIVES, { name: 'songs.graphql', body: sdl }]);

const SONGS = `
enum Mood { CALM LOUD }
type Song @entity(table: "Songs", partitionKey: "{album}", rowKey: "song_{track}") {
  album: ID!
  track: Int!
  title: String!
  tags: [String!]!
  ratings: [Int!]
  plays: [DateTime!]
  moods: [Mood!]
  sizes: [Long!]
}
type Query { song(album: ID!, track: Int!): Song @point }
type Mutation { createSong(input: CreateSongInput!): SongPayload! @write(entity: "Song", action: CREATE) }
`;

test('a list of non-null values is one stored field, its input the same list', () => {
  const { model, schema } = compile(SONGS);
  const song = model.entities.get('Song')!;
  for (const [name, type, edm] of [
    ['tags', 'String', 'String'],
    ['ratings', 'Int', 'Int32'],
    ['plays', 'DateTime', 'DateTime'],
    ['moods', 'Mood', 'String'],
    ['sizes', 'Long', 'Int64'],
  ])
    expect(song.fields.get(name)).toMatchObject({ name, graphqlType: type, edm, list: true });
  expect(song.fields.get('tags')!.nonNull).toBe(true);
  const input = (schema.getType('CreateSongInput') as any).getFields();
  expect([String(input.tags.type), String(input.ratings.type)]).toEqual(['[String!]!', '[Int!]']);
});

test('written as the JSON text of its elements, each checked; hostile text kept exactly; read back as the list', () => {
  const song = compile(SONGS).model.entities.get('Song')!;
  const hostile = ['a "quoted", comma', 'back\\slash', 'line\nbreak\u2028', '💿 ünïcödé', '[not, json]', '', 'x'.repeat(30_000)];
  const values = {
    album: 'a1',
    track: 1,
    title: 't',
    tags: hostile,
    ratings: [5, -1],
    plays: ['2026-12-01T10:00:00Z'],
    moods: ['CALM'],
    sizes: ['9007199254740993'],
  };
  const { properties } = entityWrites(song, values).primary.entity;
  expect(properties.tags).toEqual({ type: 'String', value: JSON.stringify(hostile) });
  expect(properties.ratings).toEqual({ type: 'String', value: '[5,-1]' });
  expect(properties.plays).toEqual({ type: 'String', value: '["2026-12-01T10:00:00.000Z"]' });
  expect(properties.sizes).toEqual({ type: 'String', value: '["9007199254740993"]' });
  const stored = Object.fromEntries(Object.entries(properties).map(([k, v]) => [k, v?.value]));
  expect(valuesOf(song, stored)).toMatchObject({ tags: hostile, ratings: [5, -1], moods: ['CALM'], sizes: ['9007199254740993'] });
  expect(listOf({ tags: '["a"]' }, 'tags')).toEqual(['a']);
  // A CSV cell holds the list's JSON text.
  expect(entityWrites(song, { ...values, tags: '["x","y"]' }).primary.entity.properties.tags).toEqual({ type: 'String', value: '["x","y"]' });
  // Refused before anything is sent: not a list, a null element, an element not of the type.
  const refusal = (tags: unknown, ratings: unknown = [1]) => {
    try {
      entityWrites(song, { ...values, tags, ratings });
    } catch (e: any) {
      return `${e.code}: ${e.message}`;
    }
    return 'written';
  };
  expect(refusal('plain text')).toBe('BAD_USER_INPUT: tags: expected a list');
  expect(refusal(['a', null])).toBe("BAD_USER_INPUT: tags[1] is null: the list's elements are not");
  expect(refusal(['a'], [1.5])).toMatch(/^BAD_USER_INPUT: ratings\[0\]: expected a 32-bit integer/);
});

test("refused where a list cannot be: nullable elements, nested lists, an entity's keys, @encrypted", () => {
  const cases: Array<[string, string, RegExp]> = [
    ['tags: [String]', 'Song.tags', /a list kept in one property holds non-null values/],
    ['tags: [[String!]!]', 'Song.tags', /a list kept in one property holds non-null values/],
    ['tags: [String!] @encrypted', 'Song.tags', /@encrypted is for String fields/],
  ];
  for (const [field, coordinate, message] of cases) {
    const sdl = SONGS.replace('tags: [String!]!', field);
    expect(schemaProblems(() => compile(sdl))).toContainEqual({ coordinate, message: expect.stringMatching(message), line: lineOf(sdl, field) });
  }
  const keyed = SONGS.replace('rowKey: "song_{track}"', 'rowKey: "song_{tags}"');
  expect(schemaProblems(() => compile(keyed)).map((p) => p.message)).toContainEqual(
    expect.stringMatching(/names \{tags\}, a list: a list cannot be part of an entity's key; an @index keyed by it keeps one index entity per element/),
  );
});

const withIndex = (index: string) =>
  SONGS.replace(
    'type Song @entity(table: "Songs", partitionKey: "{album}", rowKey: "song_{track}")',
    `type Song @entity(table: "Songs", partitionKey: "{album}", rowKey: "song_{track}") ${index}`,
  );

test('an @index keyed by a list: one index entity per distinct element, each holding the whole list; include may hold a list', () => {
  const sdl = withIndex('@index(name: "byTag", table: "SongsByTag", partitionKey: "tag_{tags}", rowKey: "{album}_{track:03}", include: ["title", "moods"])');
  const song = compile(sdl).model.entities.get('Song')!;
  const index = song.indexes.get('byTag')!;
  expect([index.element, index.scope]).toEqual(['tags', 'interPartition']);
  const values = { album: 'a1', track: 7, title: 'Seven', tags: ['rock', 'sl/ash "q"', 'rock', '💿'], moods: ['CALM'] };
  const writes = entityWrites(song, values).indexes;
  expect(writes.map((w) => w.entity.partitionKey)).toEqual(['tag_rock', 'tag_sl%2Fash "q"', 'tag_💿']);
  for (const w of writes) {
    expect(w.entity.rowKey).toBe('a1_007');
    expect(w.entity.properties.tags).toEqual({ type: 'String', value: JSON.stringify(values.tags) });
    expect(w.entity.properties.moods).toEqual({ type: 'String', value: '["CALM"]' });
  }
  // An empty or a null list derives nothing, as a null key field of a sparse index.
  expect(entityWrites(song, { ...values, tags: [] }).indexes).toEqual([]);
  // A CSV cell's JSON text keys the same index entities as the list.
  expect(entityWrites(song, { ...values, tags: JSON.stringify(values.tags) }).indexes.map((w) => w.entity)).toEqual(writes.map((w) => w.entity));
  // A list held by an index entity (include) that keys nothing: one index entity, the list beside its keys.
  const included = compile(withIndex('@index(name: "byTitle", rowKey: "title_{title}_{track}", include: ["tags"])')).model.entities.get('Song')!;
  const [one] = entityWrites(included, values).indexes;
  expect(one.entity.properties.tags).toEqual({ type: 'String', value: JSON.stringify(values.tags) });
});

test("an @index over a list is refused where its elements cannot be kept: two lists, unique, in the entity's partition, a range bound to it", () => {
  const cases: Array<[string, RegExp]> = [
    [
      '@index(name: "pair", table: "Pairs", partitionKey: "t_{tags}", rowKey: "{ratings}_{album}_{track}")',
      /its keys name \{tags\} and \{ratings\}, two lists/,
    ],
    [
      '@index(name: "uniq", table: "Uniq", partitionKey: "t_{tags}", rowKey: "{album}_{track}", unique: true)',
      /\{tags\}, a list: a unique index holds one value per entity/,
    ],
    [
      '@index(name: "intra", rowKey: "t_{tags}_{track}")',
      /in Song's table and PartitionKey: one index entity per element is kept by the worker.*give the index a table or a partitionKey of its own/,
    ],
  ];
  for (const [index, message] of cases) {
    const sdl = withIndex(index);
    expect(schemaProblems(() => compile(sdl))).toContainEqual(expect.objectContaining({ message: expect.stringMatching(message), line: lineOf(sdl, index) }));
  }
  const bound = withIndex('@index(name: "byTag", table: "SongsByTag", partitionKey: "tag_{tags}", rowKey: "{album}_{track:03}")').replace(
    '  sizes: [Long!]\n',
    '  sizes: [Long!]\n  alike(first: Int, after: String): SongConnection! @range(index: "byTag")\n',
  );
  expect(schemaProblems(() => compile(bound)).map((p) => p.message)).toContainEqual(
    expect.stringMatching(/needs \{tags\}: the stored field Song.tags is a list, which names no one key: add a non-null argument "tags" of its element type/),
  );
});
