/**
 * Where a table's entities live when they are not all in one table of one account: a tenant of a `@tenancy` schema kept
 * in a table of its own, or in an account of its own (docs/tenancy.md, "Tiers"). Everything above the store names the
 * table as the schema does; the store asks its placement where the call goes, by the table and the PartitionKey, and a
 * scan of the whole table reads every place in turn. The store knows nothing of tenants: the placement does
 * (src/evolution/tenant-directory.ts).
 */
/** A table of a store (`S`: the TableStore, table-store.ts): where calls on one PartitionKey of a placed table go instead. */
export interface TablePlace<S> {
  store: S;
  /** The table's name in that store (the table prefix included). */
  table: string;
}

/** One place a whole-table scan reads: `key` names it in a continuation token, `keep` says which of its entities count. */
export interface ScanPlace<S> {
  key: string;
  /** Absent: the table itself, in the store that was asked. */
  place?: TablePlace<S>;
  /** Whether an entity found there is one this place holds (a moved tenant's leftovers are not). */
  keep(partitionKey: string): boolean;
}

export interface TablePlacement<S> {
  /**
   * Where calls on `partitionKey` of `table` go: undefined for the table itself. `forWrite` for a write.
   * @throws TablegraphError when the place cannot be reached yet (STORAGE_UNAVAILABLE), or takes no writes for a while
   *   (STORAGE_BUSY with `retryAfterMs`: every writer handles it as throttling)
   */
  placeOf(table: string, partitionKey: string, forWrite?: boolean): TablePlace<S> | undefined;
  /** The places a whole-table scan of `table` reads, in a stable order; undefined when the table is not placed. */
  scanPlaces(table: string): Array<ScanPlace<S>> | undefined;
}

const TOKEN_PREFIX = 'tgplace:';

/** A chained scan's continuation token: the place it is in, and that place's own token ('' for its first page). */
export function placeToken(key: string, inner: string | undefined): string {
  return `${TOKEN_PREFIX}${JSON.stringify([key, inner ?? ''])}`;
}

/** The place and inner token of a chained scan's token; the first place's first page for none. */
export function readPlaceToken(token: string | undefined): { key?: string; inner?: string } {
  if (token === undefined || !token.startsWith(TOKEN_PREFIX)) return { inner: token };
  const [key, inner] = JSON.parse(token.slice(TOKEN_PREFIX.length)) as [string, string];
  return { key, inner: inner === '' ? undefined : inner };
}
