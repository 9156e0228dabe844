/**
 * Compiles `@constraint`: reads a stored field's rules and checks that they fit its type. Checking values against
 * them, on every write, is src/model/constraints.ts.
 */
import { getDirectiveValues, type FieldDefinitionNode, type GraphQLSchema } from 'graphql';
import type { SchemaProblems } from './schema-errors';
import type { FieldConstraint } from '../model/types';
import { NUMERIC, TEXT } from '../model/constraints';

/**
 * Reads and checks the `@constraint` of a stored field: bounds only on numeric fields (Int, Float, Decimal, Long),
 * lengths and patterns only on String and ID fields, a pattern that compiles, min ≤ max.
 * @returns the constraint, or undefined when the field has none or it is invalid (a problem is recorded then)
 */
export function readConstraint(
  schema: GraphQLSchema,
  node: FieldDefinitionNode | undefined | null,
  graphqlType: string,
  coordinate: string,
  problems: SchemaProblems,
): FieldConstraint | undefined {
  const d = node?.directives?.find((x) => x.name.value === 'constraint');
  const def = schema.getDirective('constraint');
  if (!d || !def) return undefined;
  const v = (getDirectiveValues(def, { directives: [d] }) ?? {}) as Record<string, number | string | undefined>;
  const c: FieldConstraint = {};
  const fail = (message: string) => {
    problems.add(coordinate, `@constraint: ${message}`, d);
    return undefined;
  };
  if (v.min !== undefined || v.max !== undefined) {
    if (!NUMERIC.has(graphqlType)) return fail(`min and max apply to Int, Float, Decimal and Long fields, not ${graphqlType}`);
    if (v.min !== undefined && v.max !== undefined && Number(v.min) > Number(v.max)) return fail(`min (${v.min}) is above max (${v.max})`);
    c.min = v.min as number | undefined;
    c.max = v.max as number | undefined;
  }
  if (v.minLength !== undefined || v.maxLength !== undefined || v.pattern !== undefined) {
    if (!TEXT.has(graphqlType)) return fail(`minLength, maxLength and pattern apply to String and ID fields, not ${graphqlType}`);
    if ((v.minLength !== undefined && Number(v.minLength) < 0) || (v.maxLength !== undefined && Number(v.maxLength) < 0)) return fail('lengths are ≥ 0');
    c.minLength = v.minLength as number | undefined;
    c.maxLength = v.maxLength as number | undefined;
    if (v.pattern !== undefined) {
      try {
        c.pattern = new RegExp(`^(?:${v.pattern as string})$`, 'u');
      } catch (e) {
        return fail(`pattern ${JSON.stringify(v.pattern)} is not a regular expression: ${(e as Error).message}`);
      }
    }
  }
  return c;
}
