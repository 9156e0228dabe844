/**
 * References (`@point` fields a write checks, src/model/references.ts) checked against what is stored: every entity
 * of a referring type is read (a scan of its table, on purpose: a maintenance command) and each reference it sets
 * looked up (one point query per target, each read once). A reference to nothing — a join entity whose target was
 * deleted, left before the worker deleted it, say — is reported as dangling.
 */
import { valuesOf } from '../model/entity-codec';
import { readReferenced, referenceAddress } from '../model/references';
import { ENTITY_TYPE_PROPERTY, type Model } from '../model/types';
import type { TableStore } from '../storage/table-store';
import type { EntityAddress, StorageObserver, StoredEntity } from '../storage/storage-types';
import { addressKey } from '../storage/address-key';

/** How one reference field compares with what is stored. */
export interface ReferenceDiff {
  /** `Type.field`, e.g. `Order.customer`. */
  reference: string;
  table: string;
  /** Whether the referring type is the join type of a many-to-many connection through this reference. */
  join: boolean;
  /** References set that were checked (entities). */
  checked: number;
  /** Entities whose reference points at nothing (or at an entity of another type), with where it points. */
  dangling: Array<EntityAddress & { target: EntityAddress }>;
}

/**
 * Checks every reference a write checks, of the entity types named (all by default).
 * @throws storage errors from the scans and reads
 */
export async function readReferenceState(store: TableStore, model: Model, types?: string[], observer?: StorageObserver): Promise<ReferenceDiff[]> {
  const diffs: ReferenceDiff[] = [];
  const targets = new Map<string, Promise<StoredEntity | null>>();
  const get = (at: EntityAddress) => {
    if (!targets.has(addressKey(at))) targets.set(addressKey(at), store.getEntity(at, { observer }));
    return targets.get(addressKey(at))!;
  };
  const joins = new Set(
    [...model.dependentsOf.values()]
      .flat()
      .filter((d) => d.join)
      .map((d) => d.reference),
  );
  for (const [type, paths] of model.references) {
    if (types && !types.includes(type)) continue;
    const entity = model.entities.get(type);
    if (!entity || paths.length === 0) continue;
    const mine = paths.map((path) => ({
      path,
      diff: { reference: path.coordinate, table: entity.layout.table, join: joins.has(path), checked: 0, dangling: [] } as ReferenceDiff,
    }));
    for await (const page of store.scan(entity.layout.table, { observer })) {
      for (const e of page) {
        if (e.properties[ENTITY_TYPE_PROPERTY] !== entity.entityType) continue;
        const values = valuesOf(entity, e.properties);
        for (const { path, diff } of mine) {
          const at = referenceAddress(path, values);
          if (!at) continue; // an optional reference that is not set
          diff.checked++;
          // Through a unique index: its index entity, then the entity whose keys it holds.
          const target = await readReferenced(path, values, get);
          if (!target) diff.dangling.push({ table: entity.layout.table, partitionKey: e.partitionKey, rowKey: e.rowKey, target: at });
        }
      }
    }
    diffs.push(...mine.map((m) => m.diff));
  }
  return diffs;
}
