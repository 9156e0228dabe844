/**
 * What one attempt of a group commit does before its EGT, and undoes when it cannot commit (partition-committer.ts):
 * each write's fan-out message, then its unique keys' reservations ("Eventually consistent transactions pattern";
 * reservations.ts, reservation-batches.ts). A crash after either leaves a message that names what to clean up.
 */
import { addressKey } from '../storage/address-key';
import { encodeMessage, entityMessage } from '../queue/messages';
import type { SentMessage } from '../queue/sender';
import { releaseReservations, reservationEntity, type HeldReservation, type KeyState } from './reservations';
import { reserveKeys, type ReservationRequest } from './reservation-batches';
import { sendDropCleanup } from './blob-cleanup-send';
import type { WritePlan } from './write-plan';
import type { CommitContext, PendingWrite } from './commit-types';

/** One write's side effects made so far in an attempt, and the error that stopped it, if any. */
export interface Effects {
  sent?: SentMessage | void;
  held: HeldReservation[];
  error?: unknown;
}

/**
 * Sends a planned write's fan-out message (and its blobs' cleanup); records what it did in `effects` (its entry
 * is there at once, before the first storage call). @returns whether the write may go on to its reservations
 */
export async function sendMessage(ctx: CommitContext, member: PendingWrite, plan: WritePlan, effects: Map<PendingWrite, Effects>): Promise<boolean> {
  const { fanout } = ctx;
  const done: Effects = { held: [] };
  effects.set(member, done);
  try {
    member.sendBy ??= await sendDropCleanup(member.write.entity, member.address, plan.previous, plan.values, fanout, ctx.blobCleanupDelaySeconds);
    if (plan.fanout) done.sent = await fanout.send(encodeMessage(entityMessage(plan.fanout)));
    return true;
  } catch (error) {
    done.error = error;
    return false;
  }
}

/**
 * Makes the reservations of every planned write, each once its message is out (`sent`), those of one index
 * partition together (reservation-batches.ts); records them in `effects`, in each plan's order, and a write's
 * first error. Never throws.
 * @param keys what the keys read before were found holding; a key not read is taken to be free
 */
export async function reserveKeysOf(
  ctx: CommitContext,
  planned: Array<{ member: PendingWrite; plan: WritePlan }>,
  keys: Map<string, KeyState>,
  reservedUntil: Date,
  effects: Map<PendingWrite, Effects>,
  sent: Map<PendingWrite, Promise<boolean>>,
): Promise<void> {
  const requests: ReservationRequest[] = [];
  const owners: Array<{ done: Effects; index: number }> = [];
  for (const { member, plan } of planned) {
    const done = effects.get(member)!;
    plan.reservations.forEach((r, index) => {
      requests.push({
        entity: member.write.entity,
        write: r,
        reservation: reservationEntity(r, plan, reservedUntil),
        primary: member.address,
        first: keyState(keys, r),
        ownAttempts: member.ownAttempts,
        observer: member.observer,
        takeOverFrom: member.takeOverFrom,
        ready: sent.get(member),
      });
      owners.push({ done, index });
    });
  }
  await Promise.all([...new Set(requests.map((r) => r.write.table))].map((t) => ctx.store.ensureTable(t)));
  const outcomes = await reserveKeys(ctx.store, requests);
  outcomes.forEach((outcome, k) => {
    const { done, index } = owners[k];
    if ('held' in outcome) done.held[index] = outcome.held;
    else if ('error' in outcome) done.error ??= outcome.error;
  });
  // A write with a refused reservation keeps only those it holds, to release.
  for (const done of effects.values()) if (done.error !== undefined) done.held = done.held.filter(Boolean);
}

/** Withdraws an attempt's message and releases its reservations: for an attempt that can no longer commit. */
export async function undoEffects(ctx: CommitContext, member: PendingWrite, done: Effects): Promise<void> {
  const released = await releaseReservations(ctx.store, done.held, member.observer).catch(() => false);
  // A reservation left behind is the worker's to clear, and the message names it: keep the message then.
  if (released && done.sent && ctx.fanout.withdraw) await ctx.fanout.withdraw(done.sent).catch(() => undefined);
  done.held = [];
  done.sent = undefined;
}

/** What a key was found holding, or 'free' for one not read. */
export function keyState(keys: Map<string, KeyState>, r: { table: string; entity: { partitionKey: string; rowKey: string } }): KeyState {
  return keys.get(addressKey({ table: r.table, ...r.entity })) ?? { kind: 'free' };
}
