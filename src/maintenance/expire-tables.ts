/**
 * Retention by whole tables: the guide's "High volume delete pattern". A type with a table per period
 * (table-template.ts) keeps each day's (or month's) entities in a table of their own; expiring a period is one
 * storage operation — deleting its table — however many entities it holds, where deleting them one by one would
 * first need a scan to find them.
 */
import { ErrorCode, TablegraphError } from '../errors';
import { tableFamily, tablePeriod, type TablePeriod } from '../model/table-template';
import type { EntityModel } from '../model/types';
import type { TableStore } from '../storage/table-store';

export interface ExpireOptions {
  store: TableStore;
  entity: EntityModel;
  /** Tables whose whole period ended at or before this instant are deleted. */
  cutoff: Date;
  /** List what would be deleted, delete nothing. */
  dryRun?: boolean;
  /** Told of each table as it is deleted (or would be, on a dry run). */
  onTable?: (period: TablePeriod) => void;
}

export interface ExpireReport {
  type: string;
  cutoff: string;
  /** The tables deleted (or, on a dry run, to delete), oldest first. */
  expired: string[];
  /** The type's tables kept: their period ends after the cutoff. */
  kept: string[];
  dryRun: boolean;
}

/**
 * Deletes every table of `entity`'s table template whose period ended at or before `cutoff`: one listing of the
 * account's tables with the template's prefix, then one delete per table. A table of the family whose name is not
 * one the template renders (not a date) is neither deleted nor kept: it is not the type's.
 * @throws TablegraphError BAD_USER_INPUT when the type has one table, not a table per period; STORAGE_UNAVAILABLE
 *   and the store's other errors as they come (tables deleted before stay deleted: running it again goes on)
 */
export async function expireTables(opts: ExpireOptions): Promise<ExpireReport> {
  const template = opts.entity.layout.tableTemplate;
  if (!template) {
    throw new TablegraphError(
      ErrorCode.BAD_USER_INPUT,
      `${opts.entity.name} lives in one table (${opts.entity.layout.table}): expire drops the tables of a type with a table per period, as @entity(table: "LoginAttempts{at:yyyyMMdd}")`,
      { type: opts.entity.name },
    );
  }
  const periods = (await opts.store.listTables(tableFamily(template)))
    .map((name) => tablePeriod(template, name))
    .filter((p): p is TablePeriod => p !== undefined)
    .sort((a, b) => a.start.getTime() - b.start.getTime());
  const expired = periods.filter((p) => p.end.getTime() <= opts.cutoff.getTime());
  for (const period of expired) {
    if (!opts.dryRun) await opts.store.deleteTable(period.table);
    opts.onTable?.(period);
  }
  return {
    type: opts.entity.name,
    cutoff: opts.cutoff.toISOString(),
    expired: expired.map((p) => p.table),
    kept: periods.filter((p) => !expired.includes(p)).map((p) => p.table),
    dryRun: opts.dryRun ?? false,
  };
}
