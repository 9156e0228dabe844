/**
 * Validation kept by a document's shape (src/server/validated-shapes.ts) and the prepared documents that use it
 * (src/server/prepared-documents.ts), on a schema written for the test: a document is valid exactly when graphql-js's
 * `validate` with every rule says so, whatever the literals of a shape seen before; and an operation answers the same
 * before and after graphql-jit compiles it.
 */
import { buildSchema, GraphQLScalarType, Kind, parse, specifiedRules, validate, type GraphQLSchema } from 'graphql';
import { mayOverlap, shapeOf, ValidatedShapes } from '../../src/server/validated-shapes';
import { COMPILE_AFTER, PreparedDocuments } from '../../src/server/prepared-documents';
import { compileSchema } from '../../src/compiler/compile';

const SDL = `
  scalar Day
  enum Size { SMALL LARGE }
  input Range { from: Int!, to: Int }
  type Box { id: ID!, size: Size, label(upper: Boolean): String, count(of: Int): Int }
  type Query { box(id: ID!, size: Size, at: Day, range: Range, n: Int, ratio: Float): Box, boxes(first: Int): [Box!]! }
`;

/** The schema, its `Day` a custom scalar whose literals must read YYYY-MM-DD. */
function testSchema(): GraphQLSchema {
  const schema = buildSchema(SDL);
  const day = schema.getType('Day') as GraphQLScalarType;
  day.parseLiteral = (ast) => {
    if (ast.kind !== Kind.STRING || !/^\d{4}-\d{2}-\d{2}$/.test(ast.value)) throw new TypeError('not a day');
    return ast.value;
  };
  return schema;
}

/** Each case: a document of a shape first seen valid, then others of the same shape, valid or not. */
const CASES: Array<{ seen: string; same: string[] }> = [
  {
    seen: '{ box(id: "1") { id } }',
    same: ['{ box(id: "2") { id } }', '{ box(id: 3) { id } }', '{ box(id: 1.5) { id } }', '{ box(id: """x""") { id } }'],
  },
  {
    seen: '{ box(id: "1", n: 5) { id } }',
    same: [
      '{ box(id: "1", n: 2147483648) { id } }',
      '{ box(id: "1", n: -2147483649) { id } }',
      '{ box(id: "1", n: "x") { id } }',
      '{ box(id: "1", n: 7) { id } }',
    ],
  },
  { seen: '{ box(id: "1", ratio: 0.5) { id } }', same: ['{ box(id: "1", ratio: 1e400) { id } }', '{ box(id: "1", ratio: "0.5") { id } }'] },
  {
    seen: '{ box(id: "1", at: "2026-11-28") { id } }',
    same: ['{ box(id: "1", at: "yesterday") { id } }', '{ box(id: "1", at: "2026-1-1") { id } }', '{ box(id: "1", at: "2026-01-01") { id } }'],
  },
  { seen: '{ box(id: "1", range: { from: 1, to: 2 }) { id } }', same: ['{ box(id: "1", range: { from: "a", to: 2 }) { id } }'] },
  {
    // Two fields under one response name: the same arguments merge, others do not.
    seen: '{ box(id: "1") { a: count(of: 1) a: count(of: 1) } }',
    same: ['{ box(id: "1") { a: count(of: 2) a: count(of: 2) } }', '{ box(id: "1") { a: count(of: 1) a: count(of: 2) } }'],
  },
  {
    seen: '{ box(id: "1") { ...F ...G } } fragment F on Box { a: count(of: 1) } fragment G on Box { a: count(of: 1) }',
    same: [
      '{ box(id: "1") { ...F ...G } } fragment F on Box { a: count(of: 1) } fragment G on Box { a: count(of: 2) }',
      '{ box(id: "1") { ...F ...G } } fragment F on Box { a: count(of: 3) } fragment G on Box { a: count(of: 3) }',
    ],
  },
];

describe('validation by shape', () => {
  const schema = testSchema();
  const rules = specifiedRules;
  const graphqlJs = (text: string) => validate(schema, parse(text), rules).length === 0;

  it.each(CASES)('a document is valid exactly when graphql-js says so, a shape seen valid or not: $seen', ({ seen, same }) => {
    const shapes = new ValidatedShapes(schema, rules);
    expect(shapes.valid(seen, parse(seen))).toBe(graphqlJs(seen));
    expect(graphqlJs(seen)).toBe(true);
    for (const text of same) {
      expect(shapes.valid(text, parse(text))).toBe(graphqlJs(text));
    }
  });

  it('the cases hold invalid documents of a valid shape seen before: the ones only the value rules refuse', () => {
    const invalid = CASES.flatMap(({ seen, same }) => same.filter((t) => !graphqlJs(t) && shapeOf(t) === shapeOf(seen)).map((t) => [seen, t]));
    expect(invalid.length).toBeGreaterThanOrEqual(6);
    for (const [seen, text] of invalid) {
      const shapes = new ValidatedShapes(schema, rules);
      expect(shapes.valid(seen, parse(seen))).toBe(true);
      expect(shapes.valid(text, parse(text))).toBe(false);
    }
  });

  it('a shape keeps names, enum values, booleans and null; literals of one kind are one placeholder', () => {
    expect(shapeOf('{ box(id: "1") { id } }')).toBe(shapeOf('{box(id:"2"){id}}'));
    expect(shapeOf('{ box(id: "1") { id } }')).not.toBe(shapeOf('{ box(id: 1) { id } }'));
    expect(shapeOf('{ box(id: "1", size: SMALL) { id } }')).not.toBe(shapeOf('{ box(id: "1", size: LARGE) { id } }'));
    expect(shapeOf('{ box(id: "1") { label(upper: true) } }')).not.toBe(shapeOf('{ box(id: "1") { label(upper: false) } }'));
    expect(shapeOf('{ boxes { id } }')).toBeUndefined(); // no literal: the text is its own shape
    expect(shapeOf('{ box(id: "1) { id } }')).toBeUndefined(); // does not lex
  });

  it('may overlap: a fragment, or a response name twice in one selection set', () => {
    expect(mayOverlap(parse('{ box(id: "1") { id label } }'))).toBe(false);
    expect(mayOverlap(parse('{ box(id: "1") { id id } }'))).toBe(true);
    expect(mayOverlap(parse('{ box(id: "1") { a: id a: label } }'))).toBe(true);
    expect(mayOverlap(parse('{ box(id: "1") { ... on Box { id } } }'))).toBe(true);
    expect(mayOverlap(parse('{ box(id: "1") { ...F } } fragment F on Box { id }'))).toBe(true);
  });
});

describe('prepared documents', () => {
  const { schema, model } = compileSchema(
    [
      {
        name: 'test.graphql',
        body: `type Note @entity(table: "Notes", partitionKey: "{owner}", rowKey: "note_{id}") { owner: ID! id: ID! text: String }
               type Query { note(owner: ID!, id: ID!): Note @point }`,
      },
    ],
    { tablePrefix: 't' },
  );
  schema.getQueryType()!.getFields().note.resolve = (_: unknown, args: Record<string, unknown>) => ({
    owner: args.owner,
    id: args.id,
    text: `note ${String(args.id)}`,
  });

  it('runs an operation by graphql-js until it repeats, then compiled; the answers are the same', async () => {
    const prepared = new PreparedDocuments({ schema, model, validationRules: [], parseOptions: { maxTokens: 1000 } });
    const text = 'query N($id: ID!) { note(owner: "a", id: $id) { id text } }';
    const answers = [];
    for (let i = 0; i < COMPILE_AFTER + 2; i++) answers.push(await prepared.get(text, undefined)!.run({}, { id: String(i) }));
    answers.forEach((a, i) => expect(a).toEqual({ data: { note: { id: String(i), text: `note ${i}` } } }));
  });

  it('refuses for the lane what does not validate, introspects or defers, whatever the shapes seen', () => {
    const prepared = new PreparedDocuments({ schema, model, validationRules: [], parseOptions: { maxTokens: 1000 } });
    expect(prepared.get('{ note(owner: "a", id: "1") { id } }', undefined)).toBeDefined();
    expect(prepared.get('{ note(owner: "a", id: "2") { nope } }', undefined)).toBeUndefined();
    expect(prepared.get('{ note(owner: "a", id: "3") { id __typename } }', undefined)).toBeDefined();
    expect(prepared.get('{ __schema { types { name } } note(owner: "a", id: "4") { id } }', undefined)).toBeUndefined();
    expect(prepared.get('{ note(owner: "a", id: "5") { id } __type(name: "Note") { name } }', undefined)).toBeUndefined();
  });
});
