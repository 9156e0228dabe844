/**
 * Copies (`@copy`, the guide's "Denormalization pattern") checked against their targets, and repaired: every
 * entity of a copying type is read (a scan of its table, on purpose: a maintenance command) and each copy compared
 * with the field of the entity its reference points at (one point query per target, each read once).
 */
import { valuesOf } from '../model/entity-codec';
import { readReferenced } from '../model/references';
import { ENTITY_TYPE_PROPERTY, type EntityModel, type Model } from '../model/types';
import type { TableStore } from '../storage/table-store';
import type { EntityAddress, StorageObserver, StoredEntity } from '../storage/storage-types';
import { refreshCopies } from '../derived/copy-refresh';
import { addressKey } from '../storage/address-key';

/** How one copy field compares with its targets. Values as JSON text (null: no value). */
export interface CopyDiff {
  /** `Type.field`, e.g. `Order.customerName`. */
  copy: string;
  table: string;
  /** Entities checked (entities). */
  checked: number;
  different: Array<EntityAddress & { stored: string; expected: string }>;
}

const text = (v: unknown) => JSON.stringify(v instanceof Date ? v.toISOString() : typeof v === 'bigint' ? v.toString() : (v ?? null));

/** The copying types among `types` (all by default). */
function copying(model: Model, types?: string[]): EntityModel[] {
  return [...model.entities.values()].filter((e) => e.copies.size > 0 && (!types || types.includes(e.name)));
}

/**
 * Compares every copy of the entity types named (all by default) with its target.
 * @throws storage errors from the scans and reads
 */
export async function readCopyState(store: TableStore, model: Model, types?: string[], observer?: StorageObserver): Promise<CopyDiff[]> {
  const diffs: CopyDiff[] = [];
  const targets = new Map<string, Promise<StoredEntity | null>>();
  // Each address read once: a target (or, through a unique index, its index entity) many copies name.
  const get = (at: EntityAddress) => {
    if (!targets.has(addressKey(at))) targets.set(addressKey(at), store.getEntity(at, { observer }));
    return targets.get(addressKey(at))!;
  };
  for (const entity of copying(model, types)) {
    const mine = [...entity.copies.values()].map((c) => ({
      c,
      diff: { copy: `${entity.name}.${c.field}`, table: entity.layout.table, checked: 0, different: [] } as CopyDiff,
    }));
    for await (const page of store.scan(entity.layout.table, { observer })) {
      for (const e of page) {
        if (e.properties[ENTITY_TYPE_PROPERTY] !== entity.entityType) continue;
        const values = valuesOf(entity, e.properties);
        for (const { c, diff } of mine) {
          diff.checked++;
          const target = await readReferenced(c.reference, values, get);
          const expected = target ? target.properties[c.targetField] : null;
          if (text(expected) !== text(e.properties[c.field])) {
            diff.different.push({
              table: entity.layout.table,
              partitionKey: e.partitionKey,
              rowKey: e.rowKey,
              stored: text(e.properties[c.field]),
              expected: text(expected),
            });
          }
        }
      }
    }
    diffs.push(...mine.map((m) => m.diff));
  }
  return diffs;
}

/**
 * Writes every copy of one entity type that differs from its target (each entity with If-Match on its ETag, again
 * after a conflict). Safe while the server serves.
 * @returns entities checked and rewritten (entities)
 */
export async function repairCopies(store: TableStore, model: Model, type: string, observer?: StorageObserver): Promise<{ checked: number; repaired: number }> {
  let checked = 0;
  let repaired = 0;
  for (const entity of copying(model, [type])) {
    for await (const page of store.scan(entity.layout.table, { observer })) {
      for (const e of page) {
        if (e.properties[ENTITY_TYPE_PROPERTY] !== entity.entityType) continue;
        checked++;
        if (await refreshCopies(store, entity, { table: entity.layout.table, partitionKey: e.partitionKey, rowKey: e.rowKey }, observer)) repaired++;
      }
    }
  }
  return { checked, repaired };
}
