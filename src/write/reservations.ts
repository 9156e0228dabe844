/**
 * Reservations of unique inter-partition keys (an e-mail address): the "Inter-partition secondary index pattern" with a
 * uniqueness rule, kept with the guide's "Eventually consistent transactions pattern" (docs/architecture.md, "Unique
 * values").
 *
 * A write that gives its entity a unique value first inserts the index entity conditionally — the reservation —
 * then commits its EGT. The reservation carries the write's id (WriteId), the state the write read (BasedOn) and
 * a lease (ReservedUntil). The rules that keep two entities from ever owning one value:
 * - A reservation is *pending* while its write may still commit: the entity is still in the state the write read
 *   (or still absent, for a create) and the lease has not ended. The writer sends its EGT only while a whole
 *   storage timeout remains of the lease, so after the lease it can no longer commit.
 * - Nobody deletes a pending reservation; a reservation that is not pending may be deleted only after the entity
 *   was read *after* the reservation (never on a stale read), when that fresh state does not derive it, and only
 *   with If-Match on the ETag the reservation was read with.
 * - A writer releases only reservations its own attempt made and still holds (their ETag unchanged), once that
 *   attempt can no longer commit.
 */
import { addressOfWrite } from '../model/entity-codec';
import { ErrorCode, isTablegraphError, TablegraphError } from '../errors';
import { derivesIndexEntity, primaryAddress, valuesIfOf, type TableWrite } from '../model/entity-codec';
import { BASED_ON_PROPERTY, RESERVED_UNTIL_PROPERTY, WRITE_ID_PROPERTY, type EntityModel, type IndexModel } from '../model/types';
import type { TableStore } from '../storage/table-store';
import type { EntityAddress, EntityToWrite, StorageObserver, StoredEntity } from '../storage/storage-types';
import { stateId } from '../queue/messages';

/** A reservation an attempt holds: where, the ETag its insert or rewrite returned, and whether it was inserted. */
export interface HeldReservation {
  address: EntityAddress;
  etag: string;
  /**
   * True when this attempt inserted it; false when it took over an index entity of the same entity (from an
   * earlier state, or an attempt that can no longer commit) — that one may be what a committed state needs, so
   * the attempt never deletes it: the worker, reading the entity, decides.
   */
  inserted: boolean;
}

/** Margin for clocks of different processes that disagree (ms), added to every lease. */
const CLOCK_SKEW_MS = 5000;

/** Room kept between the last moment an EGT may be sent and the end of its reservations' lease (ms). */
export const CLOCK_MARGIN_MS = 1000;

/**
 * How long a reservation's lease lasts (ms): two storage timeouts — one for the EGT, sent at the latest when
 * one timeout is left, one for everything before it — plus a margin for clock skew between processes.
 */
export function leaseMs(storageTimeoutMs: number): number {
  return 2 * storageTimeoutMs + CLOCK_SKEW_MS;
}

/** Whether a stored derived entity's key fields name the entity at `primary`. */
export function pointsAt(entity: EntityModel, derived: StoredEntity, primary: EntityAddress): boolean {
  try {
    const a = primaryAddress(entity, derived.properties);
    return a.table === primary.table && a.partitionKey === primary.partitionKey && a.rowKey === primary.rowKey;
  } catch {
    return false;
  }
}

/**
 * Whether `reservation` belongs to a write that may still commit, given the state of its entity read *after*
 * the reservation was read (see the module comment). A plain index entity (no WriteId) is never pending.
 * @param nowMs the reader's clock (ms since the epoch)
 */
export function isPendingReservation(reservation: StoredEntity, primaryNow: StoredEntity | null, nowMs: number): boolean {
  const writeId = reservation.properties[WRITE_ID_PROPERTY];
  const until = reservation.properties[RESERVED_UNTIL_PROPERTY];
  if (typeof writeId !== 'string' || !(until instanceof Date)) return false;
  if (nowMs >= until.getTime()) return false;
  const now = stateId(primaryNow);
  if (now === writeId) return false; // committed: the entity derives it
  const basedOn = reservation.properties[BASED_ON_PROPERTY];
  return now === (typeof basedOn === 'string' ? basedOn : null);
}

/** The reservation entity: the index entity with the attempt's id, the state it read and its lease. */
export function reservationEntity(w: TableWrite, attempt: { writeId: string; basedOn: string | null }, reservedUntil: Date): EntityToWrite {
  return {
    ...w.entity,
    properties: {
      ...w.entity.properties,
      [WRITE_ID_PROPERTY]: { type: 'String', value: attempt.writeId },
      [BASED_ON_PROPERTY]: attempt.basedOn === null ? null : { type: 'String', value: attempt.basedOn },
      [RESERVED_UNTIL_PROPERTY]: { type: 'DateTime', value: reservedUntil },
    },
  };
}

/** What a write finds at a unique key it wants. */
export type KeyState =
  | { kind: 'free' }
  /** Held for this same entity and not by a pending write: this attempt may take it over (If-Match etag). */
  | { kind: 'ours'; etag: string }
  /** Held by another attempt of this same entity that may still commit, until `heldUntil` at the latest. */
  | { kind: 'busy'; heldUntil?: Date }
  /**
   * Another entity's; `heldUntil` when only a write of it that may still commit holds it: free again then, unless
   * that write commits.
   */
  | { kind: 'taken'; heldUntil?: Date };

/** The write that wants a unique key: its entity's type and address, its earlier attempts, and a move's old address. */
export interface KeyClaimant {
  entity: EntityModel;
  /** The entity's address. */
  primary: EntityAddress;
  /** The ids of this write's earlier attempts: their reservations are its own. */
  ownAttempts: ReadonlySet<string>;
  /** A move's create (worker/carry-out-move.ts): the old address, whose keys it takes over. */
  takeOverFrom?: EntityAddress;
}

/**
 * Classifies what is stored at a unique key (`existing`) for the write `claimant`. `primaryNow` must be read after
 * `existing`; `nowMs` is the time (ms since 1970) a pending reservation's lease is judged at.
 */
export function classifyKey(claimant: KeyClaimant, existing: StoredEntity | null, primaryNow: StoredEntity | null, nowMs: number): KeyState {
  const { entity, primary, ownAttempts, takeOverFrom } = claimant;
  if (!existing) return { kind: 'free' };
  // A move's create takes over what the entity holds at its old address (worker/carry-out-move.ts).
  if (takeOverFrom && pointsAt(entity, existing, takeOverFrom)) return { kind: 'ours', etag: existing.etag };
  if (!pointsAt(entity, existing, primary)) return { kind: 'taken' };
  const holder = existing.properties[WRITE_ID_PROPERTY];
  if (typeof holder === 'string' && !ownAttempts.has(holder) && isPendingReservation(existing, primaryNow, nowMs)) {
    return { kind: 'busy', heldUntil: existing.properties[RESERVED_UNTIL_PROPERTY] as Date };
  }
  return { kind: 'ours', etag: existing.etag };
}

/** Until when a key is held by a write that may still commit (a busy or taken key's lease); undefined otherwise. */
export function heldUntilOf(state: KeyState): Date | undefined {
  return state.kind === 'busy' || state.kind === 'taken' ? state.heldUntil : undefined;
}

/** Whether a stored index entity is a reservation not yet confirmed: its write's id and lease are still on it. */
function unconfirmed(existing: StoredEntity): boolean {
  return typeof existing.properties[WRITE_ID_PROPERTY] === 'string' && existing.properties[RESERVED_UNTIL_PROPERTY] instanceof Date;
}

/**
 * What is stored at a unique key (`existing`, just read), for the write `claimant`, with what that takes read after it:
 * the claimant's own entity when the key names it (classifyKey); the other entity when the key is another's
 * reservation not yet confirmed. That one's write may have failed: a reservation no longer pending whose entity does
 * not derive it is deleted (If-Match on the ETag it was read with: the module's rule), and the key is free; one still
 * pending holds the key until its lease ends (`heldUntil`).
 * @throws storage errors of the reads and the delete
 */
export async function readKeyState(
  store: TableStore,
  claimant: KeyClaimant & { index: IndexModel },
  existing: StoredEntity | null,
  observer?: StorageObserver,
): Promise<KeyState> {
  const { entity, primary, takeOverFrom } = claimant;
  if (existing && !pointsAt(entity, existing, primary) && !(takeOverFrom && pointsAt(entity, existing, takeOverFrom))) {
    if (!unconfirmed(existing)) return { kind: 'taken' };
    return lapsedReservation(store, claimant, existing, observer);
  }
  const primaryNow = existing ? await store.getEntity(primary, { observer }) : null;
  return classifyKey(claimant, existing, primaryNow, Date.now());
}

/** Another entity's reservation not confirmed (readKeyState): held while pending or derived, else deleted and free. */
async function lapsedReservation(
  store: TableStore,
  claimant: { entity: EntityModel; index: IndexModel },
  existing: StoredEntity,
  observer?: StorageObserver,
): Promise<KeyState> {
  const { entity, index } = claimant;
  const other = primaryAddress(entity, existing.properties);
  const fresh = await store.getEntity(other, { observer });
  if (isPendingReservation(existing, fresh, Date.now())) return { kind: 'taken', heldUntil: existing.properties[RESERVED_UNTIL_PROPERTY] as Date };
  if (fresh && stateId(fresh) === existing.properties[WRITE_ID_PROPERTY]) return { kind: 'taken' }; // committed, not yet confirmed
  const address = { table: index.layout.table, partitionKey: existing.partitionKey, rowKey: existing.rowKey };
  if (derivesIndexEntity(index, valuesIfOf(entity, fresh), address)) return { kind: 'taken' };
  try {
    await store.deleteEntity(address, { observer, ifMatch: existing.etag });
    return { kind: 'free' };
  } catch (e) {
    if (isTablegraphError(e, ErrorCode.CONFLICT)) return { kind: 'taken' }; // rewritten since: someone holds it now
    throw e;
  }
}

/**
 * The CONFLICT a write gets when a unique value it wants belongs to another entity — or, with `heldUntil`, is held by a
 * write of another entity that may still commit: free again by then if it does not (`extensions.heldUntil`, ISO 8601).
 */
export function uniqueKeyTaken(entityName: string, w: TableWrite & { index: IndexModel }, heldUntil?: Date): TablegraphError {
  const fields = [...new Set([...w.index.layout.partitionKey.fields, ...w.index.layout.rowKey.fields])];
  const taken = fields.map((f) => `${f} ${JSON.stringify(String(w.entity.properties[f]?.value))}`).join(', ');
  const why = heldUntil
    ? `is held by a write of another ${entityName} not yet settled (unique index ${w.index.name}): free again at ${heldUntil.toISOString()} unless that write is stored`
    : `is already taken (unique index ${w.index.name})`;
  return new TablegraphError(ErrorCode.CONFLICT, `${entityName}: ${taken} ${why}`, {
    reason: 'UniqueKeyTaken',
    index: w.index.name,
    fields,
    ...(heldUntil && { heldUntil: heldUntil.toISOString() }),
  });
}

/**
 * The CONFLICT of a write whose unique value another attempt of the same entity holds, one that may still commit
 * (its answer lost, say), until `heldUntil` at the latest (`extensions.heldUntil`, ISO 8601): try again after it.
 */
export function reservationBusy(entityName: string, w: TableWrite & { index: IndexModel }, heldUntil?: Date): TablegraphError {
  const until = heldUntil ? `, until ${heldUntil.toISOString()} at the latest` : '';
  return new TablegraphError(
    ErrorCode.CONFLICT,
    `${entityName}: another write of this entity, not yet settled, holds ${w.index.name} ${w.entity.rowKey}${until}: try again then`,
    { reason: 'ReservationBusy', ...(heldUntil && { heldUntil: heldUntil.toISOString() }) },
  );
}

/** One reservation to make: the claimant's key (`write`, of a unique index) and the reservation entity to store there. */
export interface KeyClaim extends KeyClaimant {
  write: TableWrite & { index: IndexModel };
  reservation: EntityToWrite;
  /** Told of every Table storage call made for it. */
  observer?: StorageObserver;
}

/**
 * Makes one reservation: a conditional insert when the key was free, a rewrite with If-Match when it was ours.
 * Someone else's insert, rewrite or delete in between (409, 412, 404) is answered by reading again and deciding
 * again, a bounded number of times.
 * @returns the reservation held, with the ETag to release it by
 * @throws TablegraphError CONFLICT (reason UniqueKeyTaken) when the key belongs to another entity; CONFLICT
 *   (reason ReservationBusy) when another attempt of this entity still holds it; storage errors
 */
export async function reserveKey(store: TableStore, claim: KeyClaim, first: KeyState): Promise<HeldReservation> {
  const { entity, write: w, reservation, observer } = claim;
  const address = addressOfWrite(w);
  let state = first;
  for (let attempt = 1; ; attempt++) {
    if (state.kind === 'taken') throw uniqueKeyTaken(entity.name, w, state.heldUntil);
    if (state.kind === 'busy' || attempt > 5) throw reservationBusy(entity.name, w, heldUntilOf(state));
    try {
      const etag =
        state.kind === 'free'
          ? await store.createEntity(w.table, reservation, { observer })
          : await store.updateEntity(w.table, reservation, 'replace', { observer, ifMatch: state.etag });
      return { address, etag, inserted: state.kind === 'free' };
    } catch (e) {
      if (!isTablegraphError(e, ErrorCode.CONFLICT) && !isTablegraphError(e, ErrorCode.NOT_FOUND)) throw e;
    }
    state = await readKeyState(store, { ...claim, index: w.index }, await store.getEntity(address, { observer }), observer);
  }
}

/**
 * Deletes reservations an attempt inserted and still holds (If-Match on the ETag it got): only for an attempt that
 * can no longer commit. One it took over is left to the worker (see HeldReservation.inserted), and so is one that
 * could not be deleted; one rewritten since belongs to another attempt. The attempt's fan-out message names them.
 * @returns whether every one was released (or already gone): false means the message must stay
 */
export async function releaseReservations(store: TableStore, held: HeldReservation[], observer?: StorageObserver): Promise<boolean> {
  const results = await Promise.all(
    held.map((r) =>
      !r.inserted
        ? Promise.resolve(false)
        : store.deleteEntity(r.address, { observer, ifMatch: r.etag }).then(
            () => true,
            (e: unknown) => isTablegraphError(e, ErrorCode.CONFLICT), // rewritten since: not ours any more
          ),
    ),
  );
  return results.every(Boolean);
}
