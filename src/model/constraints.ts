/**
 * `@constraint`: the rules a stored field's value must keep (a salary is not negative, an id is not blank),
 * declared beside the field and checked by every write before anything is sent. The argument names are those of
 * the widely used graphql-constraint-directive, so a reader recognises them.
 */
import { getDirectiveValues, type FieldDefinitionNode, type GraphQLSchema } from 'graphql';
import { ErrorCode, TablegraphError } from '../errors';
import { toDecimal } from './decimal';
import type { SchemaProblems } from './schema-errors';
import type { FieldConstraint, StoredField } from './types';

const NUMERIC = new Set(['Int', 'Float', 'Decimal', 'Long']);
const TEXT = new Set(['String', 'ID']);

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

/**
 * Checks one value against its field's constraint; null and undefined pass (nullability is checked elsewhere).
 * @throws TablegraphError BAD_USER_INPUT naming the field and the rule broken, details { field, constraint }
 */
export function checkConstraint(field: StoredField, value: unknown): void {
  const c = field.constraint;
  if (!c || value === null || value === undefined) return;
  const bad = (rule: string, why: string) =>
    new TablegraphError(ErrorCode.BAD_USER_INPUT, `${field.name}: ${why} (got ${JSON.stringify(String(value))})`, { field: field.name, constraint: rule });
  if (c.min !== undefined || c.max !== undefined) {
    const d = toDecimal(typeof value === 'bigint' ? value.toString() : value, field.name);
    if (c.min !== undefined && d.lessThan(c.min)) throw bad('min', `must be at least ${c.min}`);
    if (c.max !== undefined && d.greaterThan(c.max)) throw bad('max', `must be at most ${c.max}`);
  }
  if (typeof value === 'string') {
    if (c.minLength !== undefined && value.length < c.minLength) throw bad('minLength', `must be at least ${c.minLength} characters`);
    if (c.maxLength !== undefined && value.length > c.maxLength) throw bad('maxLength', `must be at most ${c.maxLength} characters`);
    if (c.pattern && !c.pattern.test(value)) throw bad('pattern', `must match ${c.pattern.source.slice(4, -2)}`);
  }
}
