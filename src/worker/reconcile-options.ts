/**
 * What the reconciler (reconciler.ts) and the moves it carries out (move.ts) are given and answer: the options of
 * one reconciliation and its result, apart from both so that neither imports the other for them.
 */
import type { Model } from '../model/types';
import type { TableStore } from '../storage/table-store';
import type { EntityAddress, StorageObserver } from '../storage/types';
import type { EntityMessage } from '../queue/messages';
import type { WriteExecutor } from '../write/write-executor';

/** What a move message came to: carried out now, nothing left to do, or given up (the new address was taken). */
export type MoveOutcome = 'moved' | 'nothingToDo' | 'abandoned';

export interface ReconcileOptions {
  model: Model;
  store: TableStore;
  /**
   * How long after enqueueing a message waits for the write it announces while the entity is still in the state
   * that write was based on (ms, default 30000). Past it, the message is reconciled against whatever is there:
   * its write failed or never happened. (Reservations are guarded by their own lease, not by this.)
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
  afterUpserts?(message: EntityMessage): void | Promise<void>;
  /**
   * The write path, for the moves the queue carries (move.ts) — without it a move message fails (poison) — and for
   * the join entities of a deleted entity (joins.ts), left as they are without it.
   */
  writer?: WriteExecutor;
  /**
   * After a re-key (src/evolution/rekey-build.ts): whether entity type `type` was re-keyed after `enqueuedAt` (ms since
   * 1970), and if so where the entity of move `moveId`, under way then, was carried (absent: not under way then).
   */
  movedTo?(type: string, moveId: string, enqueuedAt: number): { rekeyed: boolean; address?: EntityAddress };
  /** Told about a unique index entity that belongs to another entity (should not happen: reservations prevent it). */
  onUniqueConflict?(address: EntityAddress, message: EntityMessage): void;
  now?(): number;
}

export type ReconcileResult =
  | { kind: 'done'; passes: number; upserted: number; deleted: number; /** A move message's (move.ts). */ outcome?: MoveOutcome }
  | { kind: 'retryLater'; afterMs: number };
