/**
 * What a load step compares a row with, against what is stored (load-plan.ts): whether the row's values are the
 * stored ones, and which index entities the stored state derived that the row's new state does not ("Index
 * Entities Pattern": they are deleted once the new state is written).
 */
import { addressOfWrite, indexWrites, typedValue, type TableWrite } from '../model/entity-codec';
import type { EntityModel } from '../model/types';
import { addressKey } from '../storage/address-key';
import type { EntityAddress } from '../storage/storage-types';

/** Whether two sets of field values are equal as stored (Decimals and dates compared by their stored form). */
export function sameValues(entity: EntityModel, a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  for (const field of entity.fields.values()) {
    const x = typedValue(field, a[field.name]);
    const y = typedValue(field, b[field.name]);
    if (
      JSON.stringify(x, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)) !==
      JSON.stringify(y, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))
    )
      return false;
  }
  return true;
}

/**
 * The index entities `before` (a stored entity's values) derived that `writes` (the row's new writes) do not.
 * @returns their addresses (a stored value that cannot form a key derived nothing)
 */
export function staleIndexAddresses(entity: EntityModel, before: Record<string, unknown>, writes: TableWrite[]): EntityAddress[] {
  const now = new Set(writes.map((w) => addressKey(addressOfWrite(w))));
  const stale: EntityAddress[] = [];
  for (const index of entity.indexes.values()) {
    let derived: TableWrite[];
    try {
      derived = indexWrites(index, before);
    } catch {
      continue; // a stored value that cannot form a key derived nothing
    }
    for (const w of derived) if (!now.has(addressKey(addressOfWrite(w)))) stale.push(addressOfWrite(w));
  }
  return stale;
}
