/**
 * Reservations of one group commit, made and confirmed together (reservations.ts has the protocol): the inserts of
 * reservations that share an index partition go out as one EGT, and so do their confirmations — the guide's "Entity
 * Group Transactions" used to cut storage calls, not for atomicity. A reservation whose operation fails the EGT is
 * taken out and made alone (reserveKey reads what is there and decides), and the rest is sent again, so each
 * reservation ends exactly as reserveKey alone would leave it.
 */
import { isTablegraphError } from '../errors';
import type { TableWrite } from '../model/entity-codec';
import type { TableStore } from '../storage/table-store';
import type { StorageObserver, TransactionOperation } from '../storage/storage-types';
import { addressKey } from '../storage/address-key';
import { sharedObserver } from '../storage/shared-observer';
import { reserveKey, type HeldReservation, type KeyClaim, type KeyState } from './reservations';

/** Operations in one EGT at most (the service's limit is 100; reservations are far below its 4 MiB). */
const MAX_BATCH = 100;

/** Times one batch is sent again after an operation of it failed, before the rest is made one by one. */
const MAX_BATCH_RETRIES = 3;

/** One reservation a write wants: what reserveKey takes. */
export interface ReservationRequest extends KeyClaim {
  /** What the write believes is at the key: only 'free' ones are batched; others go to reserveKey alone. */
  first: KeyState;
  /** Resolves true once the reservation may be made (its write's message is out), false if it must not be. */
  ready?: Promise<boolean>;
}

/** A request's outcome: the reservation held, the error reserveKey threw, or not made (`ready` said false). */
export type ReservationOutcome = { held: HeldReservation } | { error: unknown } | { skipped: true };

/**
 * Makes every reservation of `requests`: free keys of one index partition in EGTs of inserts, the others (and the
 * operations an EGT refused) with reserveKey. Never throws: each request gets its own outcome.
 * @returns one outcome per request, in order
 */
export async function reserveKeys(store: TableStore, requests: ReservationRequest[]): Promise<ReservationOutcome[]> {
  const outcomes: ReservationOutcome[] = new Array(requests.length);
  /** The requests of `members` whose `ready` said yes; the others are skipped. */
  const readyOf = async (members: number[]) => {
    const ready = await Promise.all(members.map((i) => requests[i].ready ?? true));
    members.forEach((i, j) => ready[j] || (outcomes[i] = { skipped: true }));
    return members.filter((_, j) => ready[j]);
  };
  const alone = async (i: number, first = requests[i].first) => {
    const r = requests[i];
    try {
      outcomes[i] = { held: await reserveKey(store, r, first) };
    } catch (error) {
      outcomes[i] = { error };
    }
  };
  const batches = new Map<string, number[]>();
  const single: number[] = [];
  const keys = new Set<string>();
  requests.forEach((r, i) => {
    const key = addressKey({ table: r.write.table, ...r.write.entity });
    // A second request for one key cannot share an EGT with the first (an EGT touches an entity once).
    if (r.first.kind !== 'free' || keys.has(key)) return void single.push(i);
    keys.add(key);
    const partition = JSON.stringify([r.write.table, r.write.entity.partitionKey]);
    batches.set(partition, [...(batches.get(partition) ?? []), i]);
  });
  const batchOf = async (all: number[]) => {
    let members = await readyOf(all);
    for (let retries = 0; members.length > 1 && retries <= MAX_BATCH_RETRIES; retries++) {
      const ops: TransactionOperation[] = members.map((i) => ({ kind: 'create', entity: requests[i].reservation }));
      const observer = sharedObserver(members.map((i) => requests[i].observer));
      try {
        const etags = await store.submitTransaction(requests[members[0]].write.table, ops, { observer });
        members.forEach((i, j) => {
          const { write } = requests[i];
          outcomes[i] = { held: { address: { table: write.table, ...keysOf(write) }, etag: etags[j] ?? '', inserted: true } };
        });
        return;
      } catch (error) {
        const index = isTablegraphError(error) ? error.details.operationIndex : undefined;
        if (typeof index !== 'number' || index < 0 || index >= members.length) break;
        // That key is not free after all: reserveKey reads it and decides; the rest is sent again.
        await alone(members[index]);
        members = members.filter((_, j) => j !== index);
      }
    }
    await Promise.all(members.map((i) => alone(i)));
  };
  const chunks = [...batches.values()].flatMap((members) => chunk(members, MAX_BATCH));
  await Promise.all([...chunks.map(batchOf), ...single.map(async (i) => (await readyOf([i])).length > 0 && (await alone(i)))]);
  return outcomes;
}

/**
 * Turns reservations into plain index entities (each rewritten whole, If-Match on the ETag its attempt holds: one
 * changed since is left as it is), those of one index partition in one EGT. A failure is left to the worker, which
 * confirms from the committed entity: this never throws.
 */
export async function confirmReservations(
  store: TableStore,
  held: Array<{ reservation: TableWrite; etag: string }>,
  observer?: StorageObserver,
): Promise<void> {
  const partitions = new Map<string, typeof held>();
  for (const h of held) {
    const partition = JSON.stringify([h.reservation.table, h.reservation.entity.partitionKey]);
    partitions.set(partition, [...(partitions.get(partition) ?? []), h]);
  }
  const one = ({ reservation, etag }: (typeof held)[number]) =>
    store.updateEntity(reservation.table, reservation.entity, 'replace', { observer, ifMatch: etag }).then(
      () => undefined,
      () => undefined,
    );
  const batchOf = async (members: typeof held) => {
    for (let retries = 0; members.length > 1 && retries <= MAX_BATCH_RETRIES; retries++) {
      const ops: TransactionOperation[] = members.map(({ reservation, etag }) => ({
        kind: 'update',
        entity: reservation.entity,
        mode: 'replace',
        ifMatch: etag,
      }));
      try {
        await store.submitTransaction(members[0].reservation.table, ops, { observer });
        return;
      } catch (error) {
        const index = isTablegraphError(error) ? error.details.operationIndex : undefined;
        if (typeof index !== 'number' || index < 0 || index >= members.length) break;
        // Changed since (412) or gone (404): not ours to confirm any more.
        members = members.filter((_, j) => j !== index);
      }
    }
    await Promise.all(members.map(one));
  };
  await Promise.all([...partitions.values()].flatMap((members) => chunk(members, MAX_BATCH)).map(batchOf));
}

function keysOf(w: TableWrite): { partitionKey: string; rowKey: string } {
  return { partitionKey: w.entity.partitionKey, rowKey: w.entity.rowKey };
}

function chunk<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
