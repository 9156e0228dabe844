/**
 * Whether a load's EGT is stored, read back after its answer was lost (a timeout, a 5xx, a reset connection): the
 * Table service may have applied it all the same, and an EGT is all or nothing ("Entity Group Transactions"), so one
 * of its entities tells for all of them. A load only writes what is not stored as it would write it (load-plan.ts),
 * and gives each entity it writes a WriteId of its own, so an entity stored exactly as the EGT wrote it was written
 * by it.
 */
import type { TableWrite } from '../model/entity-codec';
import { WRITE_ID_PROPERTY } from '../model/types';
import type { TableStore } from '../storage/table-store';
import type { StorageObserver, TypedValue } from '../storage/storage-types';

/** Whether a property as read equals the value written (null: not stored, as the service leaves a null out). */
function sameValue(read: unknown, written: TypedValue | null | undefined): boolean {
  if (written === null || written === undefined) return read === null || read === undefined;
  const v = written.value;
  if (v instanceof Date) return read instanceof Date && read.getTime() === v.getTime();
  if (v instanceof Uint8Array) return read instanceof Uint8Array && Buffer.compare(Buffer.from(read), Buffer.from(v)) === 0;
  if (typeof v === 'bigint') return (typeof read === 'bigint' || typeof read === 'number' || typeof read === 'string') && BigInt(read) === v;
  if (typeof v === 'number') return typeof read === 'number' && (read === v || (Number.isNaN(read) && Number.isNaN(v)));
  return read === v;
}

/**
 * Reads the entity that tells whether `writes` (one EGT's, of one table and partition) are stored: the first that
 * carries a WriteId (an entity, not an index entity), else the first.
 * @returns true when it is stored exactly as written (the EGT was applied: all of it is); false when it is not (none
 *   of it is)
 * @throws storage errors of the read
 */
export async function egtStored(store: TableStore, table: string, writes: TableWrite[], observer?: StorageObserver): Promise<boolean> {
  const tells = writes.find((w) => w.entity.properties[WRITE_ID_PROPERTY]) ?? writes[0];
  if (!tells) return true;
  const stored = await store.getEntity({ table, partitionKey: tells.entity.partitionKey, rowKey: tells.entity.rowKey }, { observer });
  if (!stored) return false;
  return Object.entries(tells.entity.properties).every(([name, value]) => sameValue(stored.properties[name], value));
}
