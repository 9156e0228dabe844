/**
 * The reconciler (DESIGN.md §4.2): brings an entity's derived entities — its inter-partition index entities —
 * in line with the entity as it is now, whatever the message says happened. It reads the entity, upserts what it
 * derives, deletes the old derived entities it no longer derives (only where they still point at this entity),
 * then reads the entity again and repeats if it changed meanwhile. Every step is idempotent, so redelivered,
 * reordered and concurrently processed messages all converge ("Eventually consistent transactions pattern",
 * "Inter-partition secondary index pattern").
 */
import { ErrorCode, TablegraphError, isTablegraphError } from '../errors';
import { derive, primaryAddress, valuesOf, type TableWrite } from '../model/entity-codec';
import { ENTITY_TYPE_PROPERTY, VERSION_PROPERTY, type EntityModel, type Model } from '../model/types';
import type { TableStore } from '../storage/table-store';
import type { EntityAddress, StorageObserver, StoredEntity } from '../storage/types';
import { addressKey, type FanoutMessage } from '../write/fanout-message';

export interface ReconcileOptions {
  model: Model;
  store: TableStore;
  /**
   * How long after enqueueing a message waits for the write it announces to become visible (ms, default 30000).
   * Past it, the message is reconciled against whatever is there: its write failed or never happened.
   */
  settleMs?: number;
  /**
   * How long to keep a message in hand, re-reading the entity, when its write is not visible yet (ms, default
   * 500): the message is usually on the queue a few ms before its EGT commits, and deferring it costs a second.
   */
  holdMs?: number;
  /** Passes before giving up on an entity that keeps changing (passes, default 10); the message is then retried. */
  maxPasses?: number;
  observer?: StorageObserver;
  /** Called after the upserts of each pass: lets tests stop a worker mid-message. */
  afterUpserts?(message: FanoutMessage): void | Promise<void>;
  /** Told about a unique index entity that belongs to another entity (should not happen: reservations prevent it). */
  onUniqueConflict?(address: EntityAddress, message: FanoutMessage): void;
  now?(): number;
}

export type ReconcileResult =
  | { kind: 'done'; passes: number; upserted: number; deleted: number }
  | { kind: 'retryLater'; afterMs: number };

function versionOf(e: StoredEntity | null): number {
  return e ? Number(e.properties[VERSION_PROPERTY] ?? 0) : 0;
}

function pointsAt(entity: EntityModel, derived: StoredEntity, primary: EntityAddress): boolean {
  try {
    const a = primaryAddress(entity, derived.properties);
    return a.table === primary.table && a.partitionKey === primary.partitionKey && a.rowKey === primary.rowKey;
  } catch {
    return false;
  }
}

/**
 * Reconciles the derived entities of the entity a message names.
 * @returns done, or retryLater when the announced write is not visible yet and the settle time has not passed
 * @throws TablegraphError BAD_USER_INPUT when the message names an unknown entity type (it can never succeed);
 *   STORAGE_UNAVAILABLE and others from the store; an error when the entity kept changing for maxPasses passes
 */
export async function reconcile(message: FanoutMessage, opts: ReconcileOptions): Promise<ReconcileResult> {
  const entity = opts.model.entities.get(message.entity);
  if (!entity) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `fan-out message ${message.id} names ${message.entity}, which the schema does not have`);
  const { store } = opts;
  const call = { observer: opts.observer };
  const now = opts.now ?? Date.now;
  const indexTypes = new Set([...entity.indexes.values()].map((i) => i.entityType));
  const old = new Map(message.candidates.map((a) => [addressKey(a), a]));
  let upserted = 0;
  let deleted = 0;

  const settleMs = opts.settleMs ?? 30000;
  const isVisible = (e: StoredEntity | null) => (message.deleted ? !e || versionOf(e) >= message.version : versionOf(e) >= message.version);
  let current = await store.getEntity(message.primary, call);
  const holdUntil = now() + (opts.holdMs ?? 500);
  while (!isVisible(current) && now() < holdUntil && now() - message.enqueuedAt < settleMs) {
    await new Promise((r) => setTimeout(r, 20));
    current = await store.getEntity(message.primary, call);
  }
  const waited = now() - message.enqueuedAt;
  const settled = () => now() - message.enqueuedAt >= settleMs;
  // One deferral, to the settle deadline: each redelivery counts towards the poison threshold.
  if (!isVisible(current) && waited < settleMs) return { kind: 'retryLater', afterMs: settleMs - waited };

  for (let pass = 1; pass <= (opts.maxPasses ?? 10); pass++) {
    const want = derive(entity, current ? valuesOf(entity, current.properties) : null);
    const wanted = new Set<string>();
    for (const w of want) {
      const address = { table: w.table, partitionKey: w.entity.partitionKey, rowKey: w.entity.rowKey };
      wanted.add(addressKey(address));
      await store.ensureTable(w.table);
      if (!w.index.unique) await store.upsertEntity(w.table, w.entity, 'replace', call);
      else if (!(await claimUnique(store, entity, w, message.primary, call))) {
        opts.onUniqueConflict?.(address, message);
        continue;
      }
      upserted += 1;
      old.set(addressKey(address), address);
    }
    await opts.afterUpserts?.(message);
    for (const [key, address] of old) {
      if (wanted.has(key)) continue;
      if (await deleteIfPointsAt(store, entity, indexTypes, address, message.primary, call, (e) => isPendingReservation(e, current, message, settled()))) deleted += 1;
    }
    const again = await store.getEntity(message.primary, call);
    if ((again?.etag ?? null) === (current?.etag ?? null)) return { kind: 'done', passes: pass, upserted, deleted };
    current = again;
  }
  throw new TablegraphError(ErrorCode.STORAGE_UNAVAILABLE, `${message.entity} ${message.primary.partitionKey}/${message.primary.rowKey} kept changing while its derived entities were reconciled`, {
    messageId: message.id,
  });
}

/**
 * Writes a unique index entity only if it is free or already this entity's: an insert when absent, a replace
 * with If-Match on the ETag read when it points here. A check followed by an unconditional upsert could overwrite
 * a reservation another writer made in between (its conditional insert, write-executor.ts) and hand its key to
 * this entity — and a later pass would then delete it, leaving that writer's key unreserved.
 * @returns false when the key belongs to another entity
 * @throws TablegraphError STORAGE_UNAVAILABLE when the entity kept changing under the claim
 */
async function claimUnique(
  store: TableStore,
  entity: EntityModel,
  w: TableWrite,
  primary: EntityAddress,
  call: { observer?: StorageObserver },
): Promise<boolean> {
  const address = { table: w.table, partitionKey: w.entity.partitionKey, rowKey: w.entity.rowKey };
  for (let attempt = 1; attempt <= 5; attempt++) {
    const existing = await store.getEntity(address, call);
    if (existing && !pointsAt(entity, existing, primary)) return false;
    try {
      if (existing) await store.updateEntity(w.table, w.entity, 'replace', { ...call, ifMatch: existing.etag });
      else await store.createEntity(w.table, w.entity, call);
      return true;
    } catch (e) {
      // Created, changed or deleted since it was read: look again.
      if (!isTablegraphError(e, ErrorCode.CONFLICT) && !isTablegraphError(e, ErrorCode.NOT_FOUND)) throw e;
    }
  }
  throw new TablegraphError(ErrorCode.STORAGE_UNAVAILABLE, `unique index entity ${w.table} ${w.entity.partitionKey}/${w.entity.rowKey} kept changing`);
}

/**
 * A unique-index reservation made by a write the entity has not reached yet (its Version is above the entity's):
 * that write may still commit, so the reservation is not this reconciliation's to delete — unless it is this
 * message's own write, past the settle time (the write failed).
 */
function isPendingReservation(existing: StoredEntity, current: StoredEntity | null, message: FanoutMessage, settled: boolean): boolean {
  const reservedFor = Number(existing.properties[VERSION_PROPERTY] ?? 0);
  if (reservedFor <= versionOf(current)) return false;
  return !(settled && reservedFor === message.version);
}

/**
 * Deletes a derived entity if it still is an index entity of this entity type pointing at this entity and `keep`
 * does not hold it back.
 */
async function deleteIfPointsAt(
  store: TableStore,
  entity: EntityModel,
  indexTypes: Set<string>,
  address: EntityAddress,
  primary: EntityAddress,
  call: { observer?: StorageObserver },
  keep: (existing: StoredEntity) => boolean,
): Promise<boolean> {
  let existing: StoredEntity | null;
  try {
    existing = await store.getEntity(address, call);
  } catch (e) {
    if (isTablegraphError(e, ErrorCode.NOT_FOUND)) return false; // its table does not exist yet: nothing to delete
    throw e;
  }
  if (!existing || !indexTypes.has(String(existing.properties[ENTITY_TYPE_PROPERTY])) || !pointsAt(entity, existing, primary) || keep(existing)) return false;
  try {
    return await store.deleteEntity(address, { ...call, ifMatch: existing.etag });
  } catch (e) {
    // Rewritten since it was read: by a reconciliation of a newer state of this entity, or for another entity.
    if (isTablegraphError(e, ErrorCode.CONFLICT)) return false;
    throw e;
  }
}
