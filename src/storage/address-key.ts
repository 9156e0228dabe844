/**
 * Addresses as keys: one string per table, PartitionKey and RowKey, for the sets and maps that track entities.
 */
import type { EntityAddress } from './storage-types';

/** A stable string for an address, for sets and maps. */
export function addressKey(a: EntityAddress): string {
  return `${a.table}\u0000${a.partitionKey}\u0000${a.rowKey}`;
}
