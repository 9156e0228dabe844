/**
 * `@constraint`: the rules a stored field's value must keep (a salary is not negative, an id is not blank),
 * declared beside the field and checked by every write before anything is sent. The argument names are those of
 * the widely used graphql-constraint-directive, so a reader recognises them. Read by src/compiler/read-constraint.ts;
 * checked here.
 */
import { ErrorCode, TablegraphError } from '../errors';
import { toDecimal } from './decimal';
import type { StoredField } from './types';

/** The field types bounds apply to, and those lengths and patterns apply to. */
export const NUMERIC = new Set(['Int', 'Float', 'Decimal', 'Long']);
export const TEXT = new Set(['String', 'ID']);

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
