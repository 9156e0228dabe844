/**
 * Group commit, the reading (partition-committer.ts): what a group of writes must know before it is planned — each
 * write's entity and the summary holders they contribute to, in as few waves as the keys allow (a holder whose
 * address the write's key fields give is read beside the entity) — and, once planned, who holds each unique key a
 * write wants (reservations.ts), read before anything is sent.
 */
import { valuesOf } from '../model/entity-codec';
import type { Model, WriteModel } from '../model/types';
import type { TableStore } from '../storage/table-store';
import type { EntityAddress, StorageObserver, StoredEntity } from '../storage/types';
import { addressKey } from './fanout-message';
import type { GroupState } from './group-plan';
import { classifyKey, pointsAt, type KeyState } from './reservations';
import { holderAddress, nextValues, summariesOf, type Values, type WritePlan } from './write-plan';

/** A write as the reads need it: what it writes, where, and the ids of its attempts. */
interface Reader {
  write: WriteModel;
  input: Values;
  address: EntityAddress;
  ownAttempts: ReadonlySet<string>;
}

/**
 * Reads every write's entity, and the summary holders `cached` lacks: those the key fields address in the same
 * wave as the entities, those only the entity's values address in a second.
 * @param cached holders as the committer last wrote them (not read again)
 */
export async function readGroupState(
  model: Model,
  store: TableStore,
  members: Reader[],
  cached: ReadonlyMap<string, StoredEntity | null>,
  observer?: StorageObserver,
): Promise<GroupState> {
  const entities = new Map<string, StoredEntity | null>();
  const holders = new Map(cached);
  const wanted = new Map<string, EntityAddress>();
  const fromKeys = new Map<string, EntityAddress>();
  for (const m of members) {
    for (const s of summariesOf(model, m.write)) {
      const keyed = [...s.via.partitionKey.bindings.values(), ...s.via.rowKey.bindings.values()].every((b) => m.write.entity.keyFields.includes(b.name));
      if (!keyed) continue;
      const a = holderAddress(s, m.input);
      if (!holders.has(addressKey(a))) fromKeys.set(addressKey(a), a);
    }
  }
  const addresses = new Map(members.map((m) => [addressKey(m.address), m.address]));
  await Promise.all([
    ...[...addresses].map(async ([key, a]) => entities.set(key, await store.getEntity(a, { observer }))),
    ...[...fromKeys].map(async ([key, a]) => holders.set(key, await store.getEntity(a, { observer }))),
  ]);
  // Holders that only the entity's current or next values name: a second wave.
  for (const m of members) {
    const current = entities.get(addressKey(m.address)) ?? null;
    let next: Values | null = null;
    try {
      next = nextValues(m.write, m.input, current);
    } catch {
      continue; // planGroup refuses it with the same error
    }
    for (const vals of [current ? valuesOf(m.write.entity, current.properties) : null, next]) {
      if (!vals) continue;
      for (const s of summariesOf(model, m.write)) {
        try {
          const a = holderAddress(s, vals);
          if (!holders.has(addressKey(a))) wanted.set(addressKey(a), a);
        } catch {
          // a value that cannot form the holder's key: planGroup refuses the write
        }
      }
    }
  }
  await Promise.all([...wanted].map(async ([key, a]) => holders.set(key, await store.getEntity(a, { observer }))));
  return { entities, holders };
}

/**
 * What is stored at every unique key a planned write wants, classified for that write (free, its own, busy with
 * another attempt of the same entity, or taken). Whether a reservation of the same entity is still pending depends
 * on the entity's state read after it, so the entity is read again then.
 */
export async function readUniqueKeys(store: TableStore, planned: Array<{ member: Reader; plan: WritePlan }>, observer?: StorageObserver): Promise<Map<string, KeyState>> {
  const states = new Map<string, KeyState>();
  await Promise.all(
    planned.flatMap(({ member, plan }) =>
      plan.reservations.map(async (r) => {
        const address = { table: r.table, partitionKey: r.entity.partitionKey, rowKey: r.entity.rowKey };
        await store.ensureTable(r.table);
        const existing = await store.getEntity(address, { observer });
        const entity = member.write.entity;
        const primaryNow = existing && pointsAt(entity, existing, member.address) ? await store.getEntity(member.address, { observer }) : null;
        states.set(addressKey(address), classifyKey(entity, existing, member.address, primaryNow, member.ownAttempts, Date.now()));
      }),
    ),
  );
  return states;
}
