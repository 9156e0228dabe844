/**
 * What one attempt of a group commit does before its EGT, and undoes when it cannot commit (partition-committer.ts):
 * its writes' fan-out messages (one queue message for the group where they fit), then each write's unique keys'
 * reservations ("Eventually consistent transactions pattern";
 * reservations.ts, reservation-batches.ts). A crash after either leaves a message that names what to clean up.
 */
import { addressKey } from '../storage/address-key';
import { encodeBatches, entityMessage } from '../queue/messages';
import type { SentMessage } from '../queue/sender';
import { releaseReservations, reservationEntity, type HeldReservation, type KeyState } from './reservations';
import { reserveKeys, type ReservationRequest } from './reservation-batches';
import { sendDropCleanup } from './blob-cleanup-send';
import type { WritePlan } from './plan-types';
import type { CommitContext, PendingWrite } from './commit-types';

/**
 * A queue message sent for an attempt's writes, held by those of them that may still commit: withdrawn once none
 * does (each undone with its reservations released), kept while one may.
 */
export interface SharedMessage {
  sent: SentMessage | void;
  holders: Set<PendingWrite>;
}

/** One write's side effects made so far in an attempt, and the error that stopped it, if any. */
export interface Effects {
  sent?: SharedMessage;
  held: HeldReservation[];
  error?: unknown;
}

/**
 * Sends the fan-out messages of a group's planned writes — as few queue messages as the size limit allows
 * (messages.ts encodeBatches), Azure billing each one sent, received and deleted — after each write's blobs'
 * cleanup; records what it did in `effects` (each write's entry is there at once, before the first storage call).
 * @returns per write, whether it may go on to its reservations (its message is out)
 */
export function sendMessages(
  ctx: CommitContext,
  planned: Array<{ member: PendingWrite; plan: WritePlan }>,
  effects: Map<PendingWrite, Effects>,
): Map<PendingWrite, Promise<boolean>> {
  for (const { member } of planned) effects.set(member, { held: [] });
  const all = (async () => {
    const ready = await Promise.all(planned.map(({ member, plan }) => sendBlobCleanup(ctx, member, plan, effects.get(member)!)));
    const sending = planned.filter(({ plan }, i) => ready[i] && plan.fanout);
    const batches = encodeBatches(sending.map(({ plan }) => entityMessage(plan.fanout!)));
    let next = 0;
    await Promise.all(
      batches.map(async ({ text, items }) => {
        const members = sending.slice(next, (next += items.length)).map(({ member }) => member);
        try {
          const shared: SharedMessage = { sent: await ctx.workQueue.send(text), holders: new Set(members) };
          for (const m of members) effects.get(m)!.sent = shared;
        } catch (error) {
          for (const m of members) effects.get(m)!.error = error;
        }
      }),
    );
  })();
  return new Map(planned.map(({ member }) => [member, all.then(() => effects.get(member)!.error === undefined)]));
}

/** A write's blobs' cleanup message, when it drops a blob. @returns whether it may go on (no error) */
async function sendBlobCleanup(ctx: CommitContext, member: PendingWrite, plan: WritePlan, done: Effects): Promise<boolean> {
  try {
    member.sendBy ??= await sendDropCleanup(
      { entity: member.write.entity, address: member.address, previous: plan.previous, values: plan.values },
      ctx.workQueue,
      ctx.blobCleanupDelaySeconds,
    );
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
 * @param attempt.keys what the keys read before were found holding; a key not read is taken to be free
 */
export async function reserveKeysOf(
  ctx: CommitContext,
  planned: Array<{ member: PendingWrite; plan: WritePlan }>,
  attempt: {
    keys: Map<string, KeyState>;
    /** The end of the reservations' lease. */
    reservedUntil: Date;
    effects: Map<PendingWrite, Effects>;
    sent: Map<PendingWrite, Promise<boolean>>;
  },
): Promise<void> {
  const { keys, reservedUntil, effects, sent } = attempt;
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

/**
 * Releases an attempt's reservations and lets go of its message, withdrawn once no write it carries may commit: for
 * an attempt that can no longer commit.
 */
export async function undoEffects(ctx: CommitContext, member: PendingWrite, done: Effects): Promise<void> {
  const released = await releaseReservations(ctx.store, done.held, member.observer).catch(() => false);
  // A reservation left behind is the worker's to clear, and the message names it: keep the message then (the write
  // stays one of its holders).
  const shared = done.sent;
  if (released && shared) {
    shared.holders.delete(member);
    if (shared.holders.size === 0 && shared.sent && ctx.workQueue.withdraw) await ctx.workQueue.withdraw(shared.sent).catch(() => undefined);
  }
  done.held = [];
  done.sent = undefined;
}

/** What a key was found holding, or 'free' for one not read. */
export function keyState(keys: Map<string, KeyState>, r: { table: string; entity: { partitionKey: string; rowKey: string } }): KeyState {
  return keys.get(addressKey({ table: r.table, ...r.entity })) ?? { kind: 'free' };
}
