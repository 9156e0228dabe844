/**
 * References (`@point` fields a write checks, src/model/references.ts) checked against what is stored: every entity
 * of a referring type is read (a scan of its table, on purpose: a maintenance command; one for all the referring
 * types a table holds) and each reference it sets looked up (one point query per target, each read once; 16 in
 * flight). A reference to nothing — a join entity whose target was deleted, left before the worker deleted it, say —
 * is reported as dangling.
 */
import pLimit from 'p-limit';
import { valuesOf } from '../model/entity-codec';
import { readReferenced, referenceAddress } from '../model/references';
import { ENTITY_TYPE_PROPERTY, type EntityModel, type Model, type PointPath } from '../model/types';
import type { TableStore } from '../storage/table-store';
import type { EntityAddress, StorageObserver, StoredEntity } from '../storage/storage-types';
import { addressKey } from '../storage/address-key';

/** Reference lookups (point queries) in flight at once: one at a time, a 33k-entity type took 30 s on Azurite. */
const IN_FLIGHT = 16;

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
  const limit = pLimit(IN_FLIGHT);
  const targets = new Map<string, Promise<StoredEntity | null>>();
  const get = (at: EntityAddress) => {
    if (!targets.has(addressKey(at)))
      targets.set(
        addressKey(at),
        limit(() => store.getEntity(at, { observer })),
      );
    return targets.get(addressKey(at))!;
  };
  const joins = new Set(
    [...model.dependentsOf.values()]
      .flat()
      .filter((d) => d.join)
      .map((d) => d.reference),
  );
  // Each referring type's references, grouped by the table its entities are in: one read of a table for all of them.
  const byTable = new Map<string, Map<string, { entity: EntityModel; mine: Array<{ path: PointPath; diff: ReferenceDiff }> }>>();
  const diffs: ReferenceDiff[] = [];
  for (const [type, paths] of model.references) {
    if (types && !types.includes(type)) continue;
    const entity = model.entities.get(type);
    if (!entity || paths.length === 0) continue;
    const mine = paths.map((path) => ({
      path,
      diff: { reference: path.coordinate, table: entity.layout.table, join: joins.has(path), checked: 0, dangling: [] } as ReferenceDiff,
    }));
    diffs.push(...mine.map((m) => m.diff));
    if (!byTable.has(entity.layout.table)) byTable.set(entity.layout.table, new Map());
    byTable.get(entity.layout.table)!.set(entity.entityType, { entity, mine });
  }
  for (const [table, referring] of byTable) {
    for await (const page of store.scan(table, { observer, entityTypes: [...referring.keys()] })) {
      const checks: Array<{ diff: ReferenceDiff; e: StoredEntity; at: EntityAddress; target: Promise<StoredEntity | null> }> = [];
      for (const e of page) {
        const of = referring.get(String(e.properties[ENTITY_TYPE_PROPERTY]));
        if (!of) continue;
        const values = valuesOf(of.entity, e.properties);
        for (const { path, diff } of of.mine) {
          const at = referenceAddress(path, values);
          if (!at) continue; // an optional reference that is not set
          diff.checked++;
          // Through a unique index: its index entity, then the entity whose keys it holds.
          checks.push({ diff, e, at, target: readReferenced(path, values, get) });
        }
      }
      // A page's lookups go together (IN_FLIGHT at once); reported in the page's order.
      const found = await Promise.all(checks.map((c) => c.target));
      checks.forEach(({ diff, e, at }, i) => {
        if (!found[i]) diff.dangling.push({ table, partitionKey: e.partitionKey, rowKey: e.rowKey, target: at });
      });
    }
  }
  return diffs;
}
