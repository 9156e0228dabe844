/**
 * Table templates: a table per period, the guide's "High volume delete pattern". `@entity(table:
 * "LoginAttempts{at:yyyyMMdd}")` puts each day's entities in a table of their own (`LoginAttempts20261122`), so that
 * dropping a day is one storage operation — deleting its table — instead of finding and deleting every entity.
 *
 * Grammar: a key template (key-template.ts) made of one literal — letters and digits, starting with a letter — and
 * then one placeholder of a DateTime key field written `yyyyMMdd` (a table per UTC day) or `yyyyMM` (per UTC month),
 * so that every rendered name is a valid table name and says which period its entities belong to.
 */
import { parseKey, renderKey, type DatePattern, type KeyTemplate } from './key-template';
import type { Layout } from './types';

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
