/**
 * The names tablegraph keeps for its own storage: tables and blob containers whose name (after the table prefix) starts
 * with `Tablegraph` (compared without case, as the Table service compares table names). The catalogue
 * (`<prefix>TablegraphCatalogue`) is one; a schema's `@entity`, `@index` or `@blob` may name none of them, so no write
 * of a schema's mutation can ever reach the project's own rows.
 */

/** What every table and container name of the project's own starts with, after the table prefix. */
export const RESERVED_NAME_PREFIX = 'Tablegraph';

/**
 * Whether a table or container name, as a schema writes it (before the table prefix), is one of the project's own.
 * @example isReservedName('TablegraphCatalogue') // true
 * @example isReservedName('tablegraph-presence') // true
 * @example isReservedName('Directory') // false
 */
export function isReservedName(written: string): boolean {
  return written.toLowerCase().startsWith(RESERVED_NAME_PREFIX.toLowerCase());
}
