/**
 * The unique values of a transaction's items (docs/reads-and-writes.md, "Transactions"), reserved before its EGT as a
 * single mutation reserves them (reservations.ts has the protocol; the guide's "Eventually consistent transactions
 * pattern"): each item's new unique index entities are inserted as reservations once the items' fan-out messages are
 * out, confirmed once the EGT is applied, and released when it is known not to be. A reservation left behind (a crash,
 * a lost answer) is named by a message the worker settles on what is stored.
 */
import { ErrorCode, isTablegraphError, TablegraphError } from '../errors';
import type { EntityModel } from '../model/types';
import type { TableStore } from '../storage/table-store';
import type { EntityAddress, StorageObserver } from '../storage/storage-types';
import type { WritePlan } from './plan-types';
import { releaseReservations, reservationEntity, type HeldReservation } from './reservations';
import { confirmReservations, reserveKeys, type ReservationRequest } from './reservation-batches';
import { itemError } from './transaction-plan';

/** One item as it claims its keys: its type, its entity's address, and the ids of its attempts so far. */
export interface ItemClaimant {
  entity: EntityModel;
  address: EntityAddress;
  /** Every attempt of this call made for the item: a reservation one of them left is the item's own. */
  ownAttempts: ReadonlySet<string>;
}

/** An attempt's reservations: each with the write it stands for, to confirm or release. */
export type HeldKeys = Array<{ reservation: WritePlan['reservations'][number]; held: HeldReservation }>;

/**
 * What reserving came to: every key held; or an error (`busy`: another attempt of the same entity still holds a key, so
 * try again), with what could not be released (`released` false: the messages must stay, naming it).
 */
export type ReserveOutcome = { held: HeldKeys } | { error: TablegraphError | unknown; busy: boolean; released: boolean };

/**
 * Reserves every item's new unique values, those of one index partition in one EGT (reservation-batches.ts); on any
 * refusal releases what this attempt holds.
 * @param reservedUntil the end of the reservations' lease (reservations.ts leaseMs)
 * @returns the keys held, or the first refusal (CONFLICT UniqueKeyTaken with `itemIndex`; ReservationBusy; a storage
 *   error) — never throws
 */
export async function reserveItemKeys(
  store: TableStore,
  plans: WritePlan[],
  claimants: ItemClaimant[],
  opts: { reservedUntil: Date; observer?: StorageObserver },
): Promise<ReserveOutcome> {
  const requests: ReservationRequest[] = [];
  const owners: Array<{ item: number; reservation: WritePlan['reservations'][number] }> = [];
  plans.forEach((plan, i) => {
    for (const r of plan.reservations) {
      const { entity, address, ownAttempts } = claimants[i];
      const reservation = reservationEntity(r, plan, opts.reservedUntil);
      requests.push({ entity, write: r, reservation, primary: address, first: { kind: 'free' }, ownAttempts, observer: opts.observer });
      owners.push({ item: i, reservation: r });
    }
  });
  if (requests.length === 0) return { held: [] };
  try {
    await Promise.all([...new Set(requests.map((r) => r.write.table))].map((t) => store.ensureTable(t)));
  } catch (error) {
    return { error, busy: false, released: true };
  }
  const outcomes = await reserveKeys(store, requests);
  const held: HeldKeys = [];
  let refused: { item: number; error: unknown } | undefined;
  outcomes.forEach((o, k) => {
    if ('held' in o) held.push({ reservation: owners[k].reservation, held: o.held });
    else if ('error' in o) refused ??= { item: owners[k].item, error: o.error };
  });
  if (!refused) return { held };
  const released = await releaseItemKeys(store, held, opts.observer);
  const { item, error } = refused;
  const busy = isTablegraphError(error, ErrorCode.CONFLICT) && error.details.reason === 'ReservationBusy';
  return { error: isTablegraphError(error, ErrorCode.CONFLICT) ? itemError(item, error) : error, busy, released };
}

/**
 * Releases an attempt's reservations: for one that can no longer commit.
 * @returns whether every one is gone (false: its messages stay, for the worker to clear what is left) — never throws
 */
export function releaseItemKeys(store: TableStore, held: HeldKeys, observer?: StorageObserver): Promise<boolean> {
  if (held.length === 0) return Promise.resolve(true);
  return releaseReservations(
    store,
    held.map((h) => h.held),
    observer,
  ).catch(() => false);
}

/**
 * Turns a committed attempt's reservations into plain index entities (reservation-batches.ts confirmReservations):
 * one left unconfirmed is confirmed by the worker from the committed entity. Never throws.
 */
export function confirmItemKeys(store: TableStore, held: HeldKeys, observer?: StorageObserver): Promise<void> {
  if (held.length === 0) return Promise.resolve();
  return confirmReservations(
    store,
    held.map((h) => ({ reservation: h.reservation, etag: h.held.etag })),
    observer,
  );
}
