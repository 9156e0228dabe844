/**
 * Settling one entity's index entity after a bulk insert that may have raced a write (the guide's "Index Entities
 * Pattern"): an online build (src/evolution/index-build.ts) or a rebuild (src/maintenance/index-rebuild.ts) read the
 * entity, and inserted the index entity that state derives; a write made between the read and the insert may have
 * removed that index entity already. Settling reads the entity again and brings its index entity in line with it.
 */
import { ErrorCode, isTablegraphError } from '../errors';
import { addressOfWrite, derivesIndexEntity, indexWrites, primaryAddress, valuesIfOf, type TableWrite } from '../model/entity-codec';
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

/** An index entity a build inserted, and the ETag its insert returned. */
export interface OwnIndexEntity {
  address: EntityAddress;
  etag: string;
}

/**
 * Brings one primary's index entities in line with its current state, undoing the build's own inserts that state no
 * longer derives and rewriting those it does (their included values were an older state's); again while the state
 * changes under it (at most 5 passes: a primary written faster than that is left to its writers, whose reconciliation
 * keeps the index too). A primary derives one index entity, or one per element over a list (IndexModel.element).
 * @param own the index entities the build inserted for the primary's older state, with the ETags their inserts returned
 * @returns the unique value it holds twice with another entity, if so
 */
export async function settlePrimary(
  store: TableStore,
  index: IndexModel,
  at: EntityAddress,
  own: readonly OwnIndexEntity[],
  call: { observer?: StorageObserver },
): Promise<HeldTwice | undefined> {
  const entity = index.entity;
  let mine = new Map(own.map((o) => [addressKey(o.address), o]));
  let current = await readPrimary(store, entity, at, call);
  for (let pass = 1; pass <= 5; pass++) {
    let writes: TableWrite[];
    try {
      const values = valuesIfOf(entity, current);
      writes = values ? indexWrites(index, values) : [];
    } catch {
      writes = []; // underivable now: its writer was refused the same; nothing to insert
    }
    const wanted = new Map(writes.map((w) => [addressKey(addressOfWrite(w)), w]));
    const kept = new Map<string, OwnIndexEntity>();
    for (const [key, m] of mine) {
      const write = wanted.get(key);
      // The same address, but made of an older state: its included values may be stale.
      const rewritten = write ? await rewriteIfUnchanged(store, write, m.etag, call) : await deleteIfUnchanged(store, m.address, m.etag, call);
      if (rewritten) kept.set(key, rewritten);
    }
    mine = kept;
    for (const [key, write] of wanted) {
      if (mine.has(key)) continue;
      const held = await insertOwn(store, { index, at, write }, mine, call);
      if (held) return held;
    }
    const again = await readPrimary(store, entity, at, call);
    if ((again?.etag ?? null) === (current?.etag ?? null)) return undefined;
    current = again;
  }
  return undefined;
}

/**
 * Inserts an index entity the primary derives and records it in `mine`; one that exists is left (a newer write made
 * it), unless it is a unique value another entity holds.
 * @returns that value, held twice
 */
async function insertOwn(
  store: TableStore,
  wanted: { index: IndexModel; at: EntityAddress; write: TableWrite },
  mine: Map<string, OwnIndexEntity>,
  call: { observer?: StorageObserver },
): Promise<HeldTwice | undefined> {
  const { index, at, write } = wanted;
  const address = addressOfWrite(write);
  try {
    mine.set(addressKey(address), { address, etag: await store.createEntity(write.table, write.entity, call) });
  } catch (e) {
    if (!isTablegraphError(e, ErrorCode.CONFLICT)) throw e;
    if (index.unique) {
      const holder = await store.getEntity(address, call);
      if (holder && !pointsAt(index.entity, holder, at)) return { index: address, primaries: [primaryOf(index.entity, holder), at] };
    }
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
  if (derivesIndexEntity(index, valuesIfOf(entity, now), address)) return;
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

/**
 * Deletes an entity only if it still has the ETag the build's insert gave it (a newer write's is left).
 * @returns undefined: it is no longer the build's own either way
 */
async function deleteIfUnchanged(store: TableStore, address: EntityAddress, etag: string, call: { observer?: StorageObserver }): Promise<undefined> {
  try {
    await store.deleteEntity(address, { ...call, ifMatch: etag });
  } catch (e) {
    if (!isTablegraphError(e, ErrorCode.CONFLICT)) throw e;
  }
  return undefined;
}

/** The primary an index entity points at (its key fields are projected onto it). */
export function primaryOf(entity: EntityModel, holder: StoredEntity): EntityAddress {
  try {
    return primaryAddress(entity, holder.properties);
  } catch {
    return { table: '?', partitionKey: '?', rowKey: '?' };
  }
}
