/**
 * Index entities as the worker and the loader keep them: a unique one claimed for its entity, a stale one deleted
 * only while it still points at the entity whose old state derived it (the guide's "Index Entities Pattern" and
 * "Eventually consistent transactions pattern"; docs/architecture.md, "Fan-out and reconciliation").
 */
import type { DerivedTarget } from './derived-target';
import { addressOfWrite } from '../model/entity-codec';
import { ErrorCode, TablegraphError, isTablegraphError } from '../errors';
import { derivesIndexEntity, valuesIfOf, type TableWrite } from '../model/entity-codec';
import { ENTITY_TYPE_PROPERTY, RESERVED_UNTIL_PROPERTY, WRITE_ID_PROPERTY } from '../model/types';
import type { EntityAddress, StoredEntity } from '../storage/storage-types';
import { isPendingReservation, pointsAt } from '../write/reservations';

/** The entity whose index entities are written or deleted: its store, type and address (derived-target.ts). */
export type IndexOwner = Pick<DerivedTarget, 'store' | 'entity' | 'primary' | 'observer'>;

/**
 * Writes a unique index entity only if it is free or already this entity's: an insert when absent, a replace
 * with If-Match on the ETag read when it points here. A check followed by an unconditional upsert could overwrite
 * a reservation another writer made in between (its conditional insert, reservations.ts) and hand its key to
 * this entity — and a later pass would then delete it, leaving that writer's key unreserved. A pending
 * reservation of this same entity is left as it is: it already holds the key for this entity, and rewriting it
 * as a plain index entity would erase what keeps it from being deleted while its write may still commit.
 * @returns false when the key belongs to another entity
 * @throws TablegraphError STORAGE_UNAVAILABLE (reason Contention) when the entity kept changing under the claim
 */
export async function claimUnique(owner: IndexOwner, w: TableWrite, now: () => number): Promise<boolean> {
  const { store, entity, primary } = owner;
  const call = { observer: owner.observer };
  const address = addressOfWrite(w);
  for (let attempt = 1; attempt <= 5; attempt++) {
    const existing = await store.getEntity(address, call);
    if (existing && !pointsAt(entity, existing, primary)) return false;
    if (existing && typeof existing.properties[WRITE_ID_PROPERTY] === 'string' && isPendingReservation(existing, await store.getEntity(primary, call), now()))
      return true;
    try {
      if (existing) await store.updateEntity(w.table, w.entity, 'replace', { ...call, ifMatch: existing.etag });
      else await store.createEntity(w.table, w.entity, call);
      return true;
    } catch (e) {
      // Created, changed or deleted since it was read: look again.
      if (!isTablegraphError(e, ErrorCode.CONFLICT) && !isTablegraphError(e, ErrorCode.NOT_FOUND)) throw e;
    }
  }
  throw new TablegraphError(ErrorCode.STORAGE_UNAVAILABLE, `unique index entity ${w.table} ${w.entity.partitionKey}/${w.entity.rowKey} kept changing`, {
    reason: 'Contention',
  });
}

/**
 * Deletes a derived entity if it still is an index entity of this entity type pointing at this entity. For a
 * unique index, what decides is the entity read *after* the index entity, never the pass's earlier read: the
 * index entity stays when that fresh state derives it (the entity took the value back meanwhile) or when it is a
 * pending reservation (reservations.ts) — deleting it would hand the value to anyone for a moment. The delete is
 * conditional on the ETag the index entity was read with.
 * @returns 'deleted'; the end of the lease of a pending reservation kept; or 'left' (gone, not this entity's,
 *   derived again, or rewritten meanwhile)
 */
export async function deleteIfPointsAt(owner: IndexOwner, address: EntityAddress, now: () => number): Promise<'deleted' | 'left' | Date> {
  const { store, entity, primary } = owner;
  const call = { observer: owner.observer };
  let existing: StoredEntity | null;
  try {
    existing = await store.getEntity(address, call);
  } catch (e) {
    if (isTablegraphError(e, ErrorCode.NOT_FOUND)) return 'left'; // its table does not exist yet: nothing to delete
    throw e;
  }
  const type = existing?.properties[ENTITY_TYPE_PROPERTY];
  const index = [...entity.indexes.values()].find((i) => i.entityType === type);
  if (!existing || !index || !pointsAt(entity, existing, primary)) return 'left';
  if (index.unique) {
    const fresh = await store.getEntity(primary, call);
    if (isPendingReservation(existing, fresh, now())) return existing.properties[RESERVED_UNTIL_PROPERTY] as Date;
    if (derivesIndexEntity(index, valuesIfOf(entity, fresh), address)) return 'left';
  }
  try {
    return (await store.deleteEntity(address, { ...call, ifMatch: existing.etag })) ? 'deleted' : 'left';
  } catch (e) {
    // Rewritten since it was read: by a reconciliation of a newer state of this entity, or for another entity.
    if (isTablegraphError(e, ErrorCode.CONFLICT)) return 'left';
    throw e;
  }
}
