/**
 * Counting what is stored, for a migration's plan (migration-plan.ts) and a build's total (build-runner.ts): keys-only
 * reads of one entity type in a table — whole-table reads on purpose, off every request path.
 */
import { ErrorCode, isTablegraphError } from '../errors';
import type { StorageObserver, StoredEntity } from '../storage/storage-types';
import type { TableStore } from '../storage/table-store';

/** The entities of one type in a table, counted with a keys-only read (entities, and the pages it took). */
export async function countEntities(
  store: TableStore,
  table: string,
  entityType: string,
  observer?: StorageObserver,
): Promise<{ count: number; pages: number }> {
  let count = 0;
  let pages = 0;
  for await (const page of scanOrNothing(store, table, { entityType, select: ['EntityType'], observer })) {
    count += page.length;
    pages++;
  }
  return { count, pages: Math.max(pages, 1) };
}

/** A scan's pages; none for a table that does not exist (nothing stored yet). */
export async function* scanOrNothing(store: TableStore, table: string, opts: Parameters<TableStore['scan']>[1]): AsyncIterable<StoredEntity[]> {
  try {
    yield* store.scan(table, opts);
  } catch (e) {
    if (!isTablegraphError(e, ErrorCode.NOT_FOUND)) throw e;
  }
}
