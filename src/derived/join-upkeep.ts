/**
 * The worker's side of join entities (src/compiler/build-joins.ts, the guide's "Modelling relationships": one join entity
 * per pair of a many-to-many relationship). Their target's fate is theirs:
 * - a target deleted: each join entity still pointing at it is deleted (deleteDanglingJoins), after the target's
 *   own message — through the write path, so the summaries that count join entities and their indexes follow;
 * - a target moved (`@write(action: MOVE)` to the same type): each is re-pointed at the new address before the old
 *   entity goes (repointJoins, from src/worker/carry-out-move.ts) — created with the new key values, then deleted; one that
 *   names its target through a unique index by fields the move keeps (an id) needs nothing.
 * Each join entity is found through the join's reverse range, read again, and written conditionally on its ETag;
 * every step is idempotent, so redelivered and concurrently handled messages converge.
 */
import { primaryAddress, valuesOf } from '../model/entity-codec';
import type { DerivedTarget } from './derived-target';
import { readReferenced, referenceAddress } from '../model/references';
import { ENTITY_TYPE_PROPERTY, type JoinModel } from '../model/types';
import type { EntityAddress, StoredEntity } from '../storage/storage-types';
import { addressKey } from '../storage/address-key';
import type { WriteExecutor } from '../write/write-executor';
import { listedBy } from './copy-refresh';
import { quietly, workerWrite } from './worker-write';

/**
 * The join entities of `join` that point at the target at `primary` (`values`: as it is or was; null: deleted,
 * known by its keys and `candidates`), each as read: those whose fields naming the target hold its values.
 */
async function pointingAt(of: DerivedTarget, join: JoinModel, values: StoredEntity | null, candidates: readonly EntityAddress[]): Promise<StoredEntity[]> {
  const { store, entity: target, primary, observer } = of;
  const out: StoredEntity[] = [];
  const targetValues = values ? valuesOf(target, values.properties) : null;
  for (const address of await listedBy(of, { reverse: join.reverse, holder: join.entity }, values, candidates)) {
    const stored = await store.getEntity(address, { observer });
    if (!stored || stored.properties[ENTITY_TYPE_PROPERTY] !== join.entity.entityType) continue;
    const own = valuesOf(join.entity, stored.properties);
    if (join.reference.index) {
      // Through an index the join names the target by the index's key fields; the reverse range is keyed by them.
      if (!targetValues || [...join.keyFields].every(([t, f]) => String(own[f]) === String(targetValues[t]))) out.push(stored);
      continue;
    }
    const at = referenceAddress(join.reference, own);
    if (at && addressKey(at) === addressKey(primary)) out.push(stored);
  }
  return out;
}

/**
 * Deletes the join entities that point at the entity at `primary` when it is gone (`current` null, or another type's).
 * Without a write path (`writer`), nothing: their deletes must go through it for the counts to follow.
 * @returns join entities deleted
 * @throws storage errors (the message is retried)
 */
export async function deleteDanglingJoins(target: DerivedTarget, current: StoredEntity | null, candidates: readonly EntityAddress[]): Promise<number> {
  const { model, store, writer, entity, observer } = target;
  const joins = model.joinsOf.get(entity.name) ?? [];
  if (joins.length === 0 || !writer || (current && current.properties[ENTITY_TYPE_PROPERTY] === entity.entityType)) return 0;
  let deleted = 0;
  for (const join of joins) {
    for (const stored of await pointingAt(target, join, null, candidates)) {
      // Re-created meanwhile at the same address, or (through an index) one with the same key there: the join
      // entity points at something again, and stays.
      const again = await readReferenced(join.reference, valuesOf(join.entity, stored.properties), (a) => store.getEntity(a, { observer }));
      if (again) continue;
      const keys = Object.fromEntries(join.entity.keyFields.map((k) => [k, valuesOf(join.entity, stored.properties)[k]]));
      if (await quietly(writer.execute(workerWrite(join.entity, 'DELETE'), { ...keys, ifMatch: stored.etag }, observer))) deleted++;
    }
  }
  return deleted;
}

/**
 * Re-points the join entities that point at the entity at `from` to its new key values (`keys`, by target field):
 * each is created with them, then deleted at its old address.
 * @returns join entities re-pointed
 * @throws storage errors and refusals of the create (a reference it would break): the move is retried
 */
export async function repointJoins(target: DerivedTarget & { writer: WriteExecutor }, old: StoredEntity, keys: Record<string, unknown>): Promise<number> {
  const { model, writer, entity, observer } = target;
  let moved = 0;
  for (const join of model.joinsOf.get(entity.name) ?? []) {
    // A join that names its target by fields the move keeps (an id, through a unique index) still points at it.
    if (![...join.keyFields.keys()].some((t) => keys[t] !== undefined && String(keys[t]) !== String(valuesOf(entity, old.properties)[t]))) continue;
    for (const stored of await pointingAt(target, join, old, [])) {
      const values = valuesOf(join.entity, stored.properties);
      const next: Record<string, unknown> = {};
      for (const f of workerWrite(join.entity, 'CREATE').inputFields) next[f] = values[f] ?? null;
      for (const [targetField, joinField] of join.keyFields) if (keys[targetField] !== undefined) next[joinField] = keys[targetField];
      if (addressKey(primaryAddress(join.entity, next)) === addressKey(primaryAddress(join.entity, values))) {
        // Its own keys do not name the target: the same join entity, its reference changed in place.
        if (await quietly(writer.execute(workerWrite(join.entity, 'REPLACE'), { ...next, ifMatch: stored.etag }, observer))) moved++;
        continue;
      }
      await quietly(writer.execute(workerWrite(join.entity, 'CREATE'), next, observer)); // already there: re-pointed before
      const oldKeys = Object.fromEntries(join.entity.keyFields.map((k) => [k, values[k]]));
      await quietly(writer.execute(workerWrite(join.entity, 'DELETE'), { ...oldKeys, ifMatch: stored.etag }, observer));
      moved++;
    }
  }
  return moved;
}
