/**
 * Settling one entity's index entity after a bulk insert that may have raced a write (the guide's "Index Entities
 * Pattern"): an online build (src/evolution/index-build.ts) or a rebuild (src/maintenance/index-rebuild.ts) read the
 * entity, and inserted the index entity that state derives; a write made between the read and the insert may have
 * removed that index entity already. Settling reads the entity again and brings its index entity in line with it.
 */
import { ErrorCode, isTablegraphError } from '../errors';
import { addressOfWrite, indexWrite, primaryAddress, valuesOf, type TableWrite } from '../model/entity-codec';
import { ENTITY_TYPE_PROPERTY, type EntityModel, type IndexModel } from '../model/types';
import { mergeParts, partAddresses } from '../model/wide-entities';
import { addressKey } from '../storage/address-key';
import type { TableStore } from '../storage/table-store';
import type { EntityAddress, StorageObserver, StoredEntity } from '../storage/storage-types';
import { pointsAt } from './reservations';

/** A unique value two entities hold: the index entity's address, and both entities' addresses. */
export interface HeldTwice {
  index: EntityAddress;
  primaries: EntityAddress[];
}

/** One primary as it is now (a wide entity's parts merged), or null. */
export async function readPrimary(
  store: TableStore,
  entity: EntityModel,
  at: EntityAddress,
  call: { observer?: StorageObserver },
): Promise<StoredEntity | null> {
  if (!entity.wide) return store.getEntity(at, call);
  return mergeParts(await Promise.all(partAddresses(entity.wide, at).map((a) => store.getEntity(a, call))));
}

/**
 * Brings one primary's index entity in line with its current state, undoing the build's own insert when that state
 * no longer derives it and rewriting it when it does (its included values were an older state's); again while the
 * state changes under it (at most 5 passes: a primary written faster than that is left to its writers, whose
 * reconciliation keeps the index too).
 * @param own the index entity the build inserted for the primary's older state, and the ETag its insert returned
 * @returns the unique value it holds twice with another entity, if so
 */
export async function settlePrimary(
  store: TableStore,
  index: IndexModel,
  at: EntityAddress,
  own: { address: EntityAddress; etag: string } | undefined,
  call: { observer?: StorageObserver },
): Promise<HeldTwice | undefined> {
  const entity = index.entity;
  let mine = own;
  let current = await readPrimary(store, entity, at, call);
  for (let pass = 1; pass <= 5; pass++) {
    let write: TableWrite | undefined;
    try {
      const values = current && current.properties[ENTITY_TYPE_PROPERTY] === entity.entityType ? valuesOf(entity, current.properties) : null;
      write = values ? indexWrite(index, values) : undefined;
    } catch {
      write = undefined; // underivable now: its writer was refused the same; nothing to insert
    }
    const want = write && addressOfWrite(write);
    if (mine && write && want && addressKey(want) === addressKey(mine.address)) {
      // The same address, but made of an older state: its included values may be stale.
      mine = await rewriteIfUnchanged(store, write, mine.etag, call);
    } else if (mine) {
      await deleteIfUnchanged(store, mine.address, mine.etag, call);
      mine = undefined;
    }
    if (write && want && !mine) {
      try {
        mine = { address: want, etag: await store.createEntity(write.table, write.entity, call) };
      } catch (e) {
        if (!isTablegraphError(e, ErrorCode.CONFLICT)) throw e;
        if (index.unique) {
          const holder = await store.getEntity(want, call);
          if (holder && !pointsAt(entity, holder, at)) return { index: want, primaries: [primaryOf(entity, holder), at] };
        }
      }
    }
    const again = await readPrimary(store, entity, at, call);
    if ((again?.etag ?? null) === (current?.etag ?? null)) return undefined;
    current = again;
  }
  return undefined;
}

/**
 * After a write whose EGT went without the delete of an index entity that was not there (an index being built):
 * the build may have inserted it since, from the entity's older state. Deletes it — If-Match on the ETag read —
 * unless the entity as it is now (read after it) derives it.
 * @param entity the written entity's type; `primary` its address
 */
export async function deleteUnlessDerived(
  store: TableStore,
  entity: EntityModel,
  address: EntityAddress,
  primary: EntityAddress,
  call: { observer?: StorageObserver },
): Promise<void> {
  const found = await store.getEntity(address, call);
  if (!found) return;
  const index = [...entity.indexes.values()].find((i) => i.entityType === found.properties[ENTITY_TYPE_PROPERTY]);
  if (!index) return;
  const now = await readPrimary(store, entity, primary, call);
  let derived: TableWrite | undefined;
  try {
    derived = now && now.properties[ENTITY_TYPE_PROPERTY] === entity.entityType ? indexWrite(index, valuesOf(entity, now.properties)) : undefined;
  } catch {
    derived = undefined;
  }
  if (derived && addressKey(addressOfWrite(derived)) === addressKey(address)) return;
  await deleteIfUnchanged(store, address, found.etag, call);
}

/**
 * Replaces an index entity with what the current state derives, only if it still has the ETag the build's own write
 * gave it. @returns its new ETag; undefined when someone else wrote or deleted it since (theirs is newer: left)
 */
async function rewriteIfUnchanged(
  store: TableStore,
  write: TableWrite,
  etag: string,
  call: { observer?: StorageObserver },
): Promise<{ address: EntityAddress; etag: string } | undefined> {
  try {
    return { address: addressOfWrite(write), etag: await store.updateEntity(write.table, write.entity, 'replace', { ...call, ifMatch: etag }) };
  } catch (e) {
    if (isTablegraphError(e, ErrorCode.CONFLICT) || isTablegraphError(e, ErrorCode.NOT_FOUND)) return undefined;
    throw e;
  }
}

/** Deletes an entity only if it still has the ETag the build's insert gave it (a newer write's is left). */
async function deleteIfUnchanged(store: TableStore, address: EntityAddress, etag: string, call: { observer?: StorageObserver }): Promise<void> {
  try {
    await store.deleteEntity(address, { ...call, ifMatch: etag });
  } catch (e) {
    if (!isTablegraphError(e, ErrorCode.CONFLICT)) throw e;
  }
}

/** The primary an index entity points at (its key fields are projected onto it). */
export function primaryOf(entity: EntityModel, holder: StoredEntity): EntityAddress {
  try {
    return primaryAddress(entity, holder.properties);
  } catch {
    return { table: '?', partitionKey: '?', rowKey: '?' };
  }
}
