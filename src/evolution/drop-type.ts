/**
 * `migrate apply --drop <Type>`: the stored entities of a type the schema no longer has, deleted — the type's own
 * and its index entities — so that the type's removal can be deployed (layout-diff.ts refuses it while any is
 * stored). A maintenance scan on purpose (filtered by EntityType by the service), then deletes in EGTs per
 * partition, each If-Match on the ETag read: an entity written since is left, and the removal stays refused.
 */
import pLimit from 'p-limit';
import { ErrorCode, isTablegraphError } from '../errors';
import type { TableStore } from '../storage/table-store';
import type { StoredEntity, TransactionOperation } from '../storage/storage-types';
import { limitsFor } from '../storage/limits';
import type { RecordedLayout } from './layout-record';

/**
 * Deletes the entities of `type` as `layout` recorded it, and its index entities.
 * @returns entities deleted (entities)
 * @throws TablegraphError from the store (what was deleted stays deleted; running it again goes on)
 */
export async function dropStoredType(store: TableStore, layout: RecordedLayout, type: string): Promise<number> {
  const recorded = layout.types[type];
  let deleted = await deleteEntitiesOf(store, recorded.table, recorded.entityType);
  for (const path of Object.values(layout.paths)) {
    if (path.kind !== 'index' || path.type !== type) continue;
    deleted += await deleteEntitiesOf(store, String(path.definition.table), `${recorded.entityType}.${path.name}`);
  }
  return deleted;
}

/** Every entity of `entityType` in `table`, deleted page by page (a missing table holds none). */
async function deleteEntitiesOf(store: TableStore, table: string, entityType: string): Promise<number> {
  if (table.includes('{')) return 0; // a table per period: its tables go with `npm run expire`
  const max = limitsFor(store.target).maxTransactionOperations;
  const limit = pLimit(8);
  let deleted = 0;
  try {
    for await (const page of store.scan(table, { entityType, select: ['EntityType'] })) {
      const byPartition = new Map<string, StoredEntity[]>();
      for (const e of page) byPartition.set(e.partitionKey, [...(byPartition.get(e.partitionKey) ?? []), e]);
      const batches: TransactionOperation[][] = [];
      for (const entities of byPartition.values()) {
        for (let i = 0; i < entities.length; i += max) {
          batches.push(entities.slice(i, i + max).map((e) => ({ kind: 'delete', partitionKey: e.partitionKey, rowKey: e.rowKey, ifMatch: e.etag })));
        }
      }
      await Promise.all(
        batches.map((ops) =>
          limit(async () => {
            try {
              await store.submitTransaction(table, ops);
              deleted += ops.length;
            } catch (e) {
              // One entity written or deleted since the read: each on its own, and that one left.
              if (!isTablegraphError(e, ErrorCode.CONFLICT) && !isTablegraphError(e, ErrorCode.NOT_FOUND)) throw e;
              for (const op of ops) {
                if (op.kind !== 'delete') continue;
                try {
                  if (await store.deleteEntity({ table, partitionKey: op.partitionKey, rowKey: op.rowKey }, { ifMatch: op.ifMatch })) deleted++;
                } catch (inner) {
                  if (!isTablegraphError(inner, ErrorCode.CONFLICT)) throw inner;
                }
              }
            }
          }),
        ),
      );
    }
  } catch (e) {
    if (isTablegraphError(e, ErrorCode.NOT_FOUND) && e.details.reason === 'TableNotFound') return deleted;
    throw e;
  }
  return deleted;
}
