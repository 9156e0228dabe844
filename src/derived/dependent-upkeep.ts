/**
 * The worker's side of the entities that point at a deleted or moved one and go with it (src/compiler/build-dependents.ts,
 * the guide's "Modelling relationships"): the join entities of many-to-many connections, and the entities of references
 * declared `@point(onDelete: CASCADE)`. Their target's fate is theirs:
 * - a target deleted: each one still pointing at it is deleted (deleteDependents), after the target's own message —
 *   through the write path, so the summaries that count them, their indexes, copies and own dependents follow; for a
 *   CASCADE, the tombstone the delete left at the target's address (src/model/tombstones.ts) goes once none is left;
 * - a target moved (`@write(action: MOVE)` to the same type): each is re-pointed at the new address before the old
 *   entity goes (repointDependents, from src/worker/carry-out-move.ts) — created with the new key values, then deleted; one
 *   that names its target through a unique index by fields the move keeps (an id) needs nothing.
 * Each is found through the dependent's reverse range, read again, and written conditionally on its ETag; every step is
 * idempotent, so redelivered and concurrently handled messages converge.
 */
import { ErrorCode, TablegraphError } from '../errors';
import { primaryAddress, valuesOf } from '../model/entity-codec';
import type { DerivedTarget } from './derived-target';
import { readReferenced, referenceAddress } from '../model/references';
import { isTombstone } from '../model/tombstones';
import { ENTITY_TYPE_PROPERTY, type DependentModel } from '../model/types';
import type { EntityAddress, StoredEntity } from '../storage/storage-types';
import { addressKey } from '../storage/address-key';
import type { WriteExecutor } from '../write/write-executor';
import { listedBy } from './copy-refresh';
import { quietly, workerWrite } from './worker-write';

/**
 * The entities of `dependent` that point at the target at `primary` (`values`: as it is or was; null: deleted,
 * known by its keys and `candidates`), each as read: those whose fields naming the target hold its values.
 */
async function pointingAt(
  of: DerivedTarget,
  dependent: DependentModel,
  values: StoredEntity | null,
  candidates: readonly EntityAddress[],
): Promise<StoredEntity[]> {
  const { store, entity: target, primary, observer } = of;
  const out: StoredEntity[] = [];
  const targetValues = values ? valuesOf(target, values.properties) : null;
  for (const address of await listedBy(of, { reverse: dependent.reverse, holder: dependent.entity }, values, candidates)) {
    const stored = await store.getEntity(address, { observer });
    if (!stored || stored.properties[ENTITY_TYPE_PROPERTY] !== dependent.entity.entityType) continue;
    const own = valuesOf(dependent.entity, stored.properties);
    if (dependent.reference.index) {
      // Through an index the dependent names the target by the index's key fields; the reverse range is keyed by them.
      if (!targetValues || [...dependent.keyFields].every(([t, f]) => String(own[f]) === String(targetValues[t]))) out.push(stored);
      continue;
    }
    const at = referenceAddress(dependent.reference, own);
    if (at && addressKey(at) === addressKey(primary)) out.push(stored);
  }
  return out;
}

/**
 * Deletes the entities that go with the entity at `primary` when it is gone (`current` null, a tombstone, or another
 * type's), then its tombstone once none is left. Without a write path (`writer`), nothing: their deletes must go
 * through it for the counts to follow.
 * @returns dependents deleted
 * @throws storage errors; STORAGE_UNAVAILABLE (reason Contention) when a CASCADE dependent changed as it was deleted
 *   (the message is retried, the tombstone kept meanwhile)
 */
export async function deleteDependents(target: DerivedTarget, current: StoredEntity | null, candidates: readonly EntityAddress[]): Promise<number> {
  const { model, writer, entity } = target;
  const cascades = (model.dependentsOf.get(entity.name) ?? []).filter((d) => d.onDelete === 'CASCADE');
  if (cascades.length === 0 || !writer || (current && current.properties[ENTITY_TYPE_PROPERTY] === entity.entityType)) return 0;
  let deleted = 0;
  for (const dependent of cascades) deleted += await deleteEach(target, dependent, candidates);
  if (!isTombstone(current)) return deleted;
  const left = await Promise.all(cascades.filter((d) => !d.join).map((d) => pointingAt(target, d, null, candidates)));
  if (left.some((l) => l.length > 0)) {
    throw new TablegraphError(
      ErrorCode.STORAGE_UNAVAILABLE,
      `${entity.name} ${target.primary.partitionKey}/${target.primary.rowKey}: its dependents changed as they were deleted`,
      {
        reason: 'Contention',
      },
    );
  }
  // None points at the address any more: it may hold an entity again.
  await quietly(target.store.deleteEntity(target.primary, { ifMatch: current!.etag, observer: target.observer }));
  return deleted;
}

/** Deletes one dependent's entities pointing at the deleted target. @returns how many */
async function deleteEach(target: DerivedTarget, dependent: DependentModel, candidates: readonly EntityAddress[]): Promise<number> {
  const { store, writer, observer } = target;
  let deleted = 0;
  for (const stored of await pointingAt(target, dependent, null, candidates)) {
    // A join entity whose target was re-created meanwhile at the same address (or, through an index, one with the same
    // key there) points at something again, and stays. (A CASCADE's tombstone holds the address: none is re-created.)
    const again = await readReferenced(dependent.reference, valuesOf(dependent.entity, stored.properties), (a) => store.getEntity(a, { observer }));
    if (again) continue;
    const keys = Object.fromEntries(dependent.entity.keyFields.map((k) => [k, valuesOf(dependent.entity, stored.properties)[k]]));
    if (await quietly(writer!.execute(workerWrite(dependent.entity, 'DELETE'), { ...keys, ifMatch: stored.etag }, observer))) deleted++;
  }
  return deleted;
}

/**
 * Re-points the entities that go with the entity at `from` to its new key values (`keys`, by target field): each is
 * created with them, then deleted at its old address.
 * @returns dependents re-pointed
 * @throws storage errors and refusals of the create (a reference it would break): the move is retried
 */
export async function repointDependents(target: DerivedTarget & { writer: WriteExecutor }, old: StoredEntity, keys: Record<string, unknown>): Promise<number> {
  const { model, writer, entity, observer } = target;
  let moved = 0;
  for (const dependent of (model.dependentsOf.get(entity.name) ?? []).filter((d) => d.onDelete === 'CASCADE')) {
    // A dependent that names its target by fields the move keeps (an id, through a unique index) still points at it.
    if (![...dependent.keyFields.keys()].some((t) => keys[t] !== undefined && String(keys[t]) !== String(valuesOf(entity, old.properties)[t]))) continue;
    for (const stored of await pointingAt(target, dependent, old, [])) {
      const values = valuesOf(dependent.entity, stored.properties);
      const next: Record<string, unknown> = {};
      for (const f of workerWrite(dependent.entity, 'CREATE').inputFields) next[f] = values[f] ?? null;
      for (const [targetField, field] of dependent.keyFields) if (keys[targetField] !== undefined) next[field] = keys[targetField];
      if (addressKey(primaryAddress(dependent.entity, next)) === addressKey(primaryAddress(dependent.entity, values))) {
        // Its own keys do not name the target: the same entity, its reference changed in place.
        if (await quietly(writer.execute(workerWrite(dependent.entity, 'REPLACE'), { ...next, ifMatch: stored.etag }, observer))) moved++;
        continue;
      }
      await quietly(writer.execute(workerWrite(dependent.entity, 'CREATE'), next, observer)); // already there: re-pointed before
      const oldKeys = Object.fromEntries(dependent.entity.keyFields.map((k) => [k, values[k]]));
      await quietly(writer.execute(workerWrite(dependent.entity, 'DELETE'), { ...oldKeys, ifMatch: stored.etag }, observer));
      moved++;
    }
  }
  return moved;
}
