/**
 * Compiles tables per period (the guide's "High volume delete pattern"): a table template's syntax, and the uses
 * such a type cannot have. Naming a period's table at run time is src/model/table-template.ts.
 */
import type { ASTNode, GraphQLSchema } from 'graphql';
import { checkTableName } from '../storage/limits';
import type { KeyTemplate } from '../model/key-template';
import { parseTemplate } from './parse-template';
import type { SchemaProblems } from './schema-errors';
import type { Model } from '../model/types';
import { refuseUses } from './entity-uses';

/** Whether a `table` argument is a template (holds a placeholder) rather than a table's name. */
export function isTableTemplate(source: string): boolean {
  return source.includes('{');
}

/**
 * Parses and checks a table template, recording each problem with the directive's location.
 * @returns the template, or undefined when it is not one tablegraph can render table names from
 */
export function parseTableTemplate(source: string, coordinate: string, node: ASTNode | undefined, problems: SchemaProblems): KeyTemplate | undefined {
  const template = parseTemplate(source, 'Table', coordinate, node, problems);
  if (!template) return undefined;
  const [literal, placeholder, ...rest] = template.segments;
  const shapeOk = literal?.kind === 'literal' && /^[A-Za-z][A-Za-z0-9]*$/.test(literal.text) && rest.length === 0;
  if (!shapeOk || placeholder?.kind !== 'placeholder' || placeholder.format.kind !== 'date') {
    problems.add(
      coordinate,
      `table template "${source}" must be letters and digits followed by one DateTime key field written yyyyMMdd or yyyyMM, as in "LoginAttempts{at:yyyyMMdd}": a table per day or month`,
      node,
    );
    return undefined;
  }
  try {
    checkTableName(literal.text + '0'.repeat(placeholder.format.pattern.length));
  } catch {
    problems.add(coordinate, `table template "${source}" renders names outside 3-63 letters and digits`, node);
    return undefined;
  }
  return template;
}

/**
 * What a type with a table per period cannot take part in: a summary, a copy (either end), a move or a `@sas` field.
 * Each would keep or hand out something about its entities beyond their own table, which outlives the table's
 * deletion or does not know which table to name.
 */
export function checkPeriodTableUses(schema: GraphQLSchema, model: Model, problems: SchemaProblems): void {
  refuseUses(
    schema,
    model,
    problems,
    (e) => e.layout.tableTemplate !== undefined,
    (e, what) => `${e.name} has a table per period ("${e.layout.table}"): it cannot ${what}, which would outlive the period's table`,
  );
}
