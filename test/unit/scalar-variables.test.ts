/**
 * The check of variables that certainly coerce (src/server/scalar-variables.ts), against graphql-js's own coercion
 * (`getVariableValues`) on a schema written for the test: whenever the check says a request's variables coerce, they
 * do; and it declines every operation with a variable it cannot tell.
 */
import { buildSchema, getVariableValues, parse, type OperationDefinitionNode } from 'graphql';
import { scalarVariablesCheck } from '../../src/server/scalar-variables';

const schema = buildSchema(`
  enum Shade { DARK LIGHT }
  input Span { from: Int! }
  scalar Moment
  type Query { lamp(id: ID!, name: String, watts: Int, ratio: Float, on: Boolean, shade: Shade, span: Span, at: Moment, ids: [ID!]): String }
`);

const definitionsOf = (document: string) => (parse(document).definitions[0] as OperationDefinitionNode).variableDefinitions ?? [];

/** Values of every JavaScript type the variables of a JSON body can have, and some awkward ones. */
const VALUES: unknown[] = [
  undefined,
  null,
  '',
  'x',
  '7',
  0,
  7,
  -1,
  2.5,
  2147483647,
  2147483648,
  -2147483648,
  -2147483649,
  1e21,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  true,
  false,
  [],
  ['7'],
  {},
  { from: 1 },
];

describe('scalarVariablesCheck', () => {
  const operations = [
    'query Q($id: ID!) { lamp(id: $id) }',
    'query Q($id: ID!, $name: String, $watts: Int, $ratio: Float, $on: Boolean) { lamp(id: $id, name: $name, watts: $watts, ratio: $ratio, on: $on) }',
    'query Q($id: ID! = "1", $watts: Int! = 3, $name: String = "n") { lamp(id: $id, watts: $watts, name: $name) }',
    'query Q($ratio: Float!, $on: Boolean!) { lamp(id: "1", ratio: $ratio, on: $on) }',
  ];

  it.each(operations)('says variables coerce only when graphql-js coerces them: %s', (document) => {
    const definitions = definitionsOf(document);
    const check = scalarVariablesCheck(schema, definitions)!;
    expect(check).toBeDefined();
    const names = definitions.map((d) => d.variable.name.value);
    let told = 0;
    // Each variable in turn takes each value, the others a value that coerces.
    for (const name of names) {
      for (const value of VALUES) {
        const variables: Record<string, unknown> = { id: '1', name: 'n', watts: 3, ratio: 0.5, on: true, [name]: value };
        if (value === undefined) delete variables[name];
        const coerces = !('errors' in getVariableValues(schema, definitions, variables));
        if (check(variables)) {
          told++;
          expect({ variables, coerces }).toEqual({ variables, coerces: true });
        } else {
          expect({ variables, refused: !coerces }).toEqual({ variables, refused: true });
        }
      }
    }
    expect(told).toBeGreaterThan(names.length); // the check tells the common case, not nothing
  });

  it('says nothing of an operation with an enum, an input object, a custom scalar, a list or an unknown type', () => {
    for (const document of [
      'query Q($shade: Shade) { lamp(id: "1", shade: $shade) }',
      'query Q($span: Span) { lamp(id: "1", span: $span) }',
      'query Q($at: Moment) { lamp(id: "1", at: $at) }',
      'query Q($ids: [ID!]) { lamp(id: "1", ids: $ids) }',
      'query Q($id: ID!, $x: Nowhere) { lamp(id: $id) }',
    ]) {
      expect(scalarVariablesCheck(schema, definitionsOf(document))).toBeUndefined();
    }
  });

  it('ignores variables the operation does not declare, as graphql-js does, and not inherited ones', () => {
    const check = scalarVariablesCheck(schema, definitionsOf('query Q($id: ID!, $name: String) { lamp(id: $id, name: $name) }'))!;
    expect(check({ id: '1', other: { deep: [1] } })).toBe(true);
    expect(check(Object.create({ id: '1' }) as Record<string, unknown>)).toBe(false);
    expect(check({})).toBe(false);
  });
});
