/**
 * Table templates: a table per period, the guide's "High volume delete pattern". `@entity(table:
 * "LoginAttempts{at:yyyyMMdd}")` puts each day's entities in a table of their own (`LoginAttempts20261122`), so that
 * dropping a day is one storage operation — deleting its table — instead of finding and deleting every entity.
 *
 * Grammar: a key template (key-template.ts) made of one literal — letters and digits, starting with a letter — and
 * then one placeholder of a DateTime key field written `yyyyMMdd` (a table per UTC day) or `yyyyMM` (per UTC month),
 * so that every rendered name is a valid table name and says which period its entities belong to.
 */
import type { ASTNode, GraphQLSchema } from 'graphql';
import { checkTableName } from '../storage/limits';
import { parseKey, renderKey, type DatePattern, type KeyTemplate } from './key-template';
import { parseTemplate } from './parse-template';
import type { SchemaProblems } from './schema-errors';
import type { Layout, Model } from './types';
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
 * The table an entity with `values` lives in: the layout's table, or its table template rendered.
 * @throws TablegraphError BAD_USER_INPUT (details `{ field }`) when the template's field has no valid date
 */
export function tableOf(layout: Layout, values: Record<string, unknown>): string {
  return layout.tableTemplate ? renderKey(layout.tableTemplate, values) : layout.table;
}

/** The period a table of a template holds: [start, end) in UTC. */
export interface TablePeriod {
  table: string;
  start: Date;
  end: Date;
}

/** The period `table` holds when it is one of `template`'s tables; undefined when it is not (another name). */
export function tablePeriod(template: KeyTemplate, table: string): TablePeriod | undefined {
  const parsed = parseKey(template, table);
  const placeholder = template.segments.find((s) => s.kind === 'placeholder');
  if (!parsed || placeholder?.kind !== 'placeholder' || placeholder.format.kind !== 'date') return undefined;
  const start = new Date(`${parsed[placeholder.name]}T00:00:00.000Z`);
  return { table, start, end: periodEnd(start, placeholder.format.pattern) };
}

/** The literal every table of `template` starts with, e.g. `LoginAttempts`. */
export function tableFamily(template: KeyTemplate): string {
  const first = template.segments[0];
  return first?.kind === 'literal' ? first.text : '';
}

function periodEnd(start: Date, pattern: DatePattern): Date {
  const end = new Date(start);
  if (pattern === 'yyyyMMdd') end.setUTCDate(end.getUTCDate() + 1);
  else end.setUTCMonth(end.getUTCMonth() + 1);
  return end;
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
