/**
 * The reconciler (docs/architecture.md, "Fan-out and reconciliation"): brings an entity's derived entities — its
 * inter-partition index entities, and its contributions to summaries held in other partitions (src/derived/reconcile-contributions.ts) —
 * in line with the entity as it is now, whatever the message says happened. It reads the entity, upserts what it
 * derives, deletes the old derived entities it no longer derives (only where they still point at this entity), then
 * reads the entity again and repeats if it changed meanwhile. Every step is idempotent, so redelivered, reordered
 * and concurrently processed messages all converge ("Eventually consistent transactions pattern", "Inter-partition
 * secondary index pattern").
 */
import { ErrorCode, TablegraphError } from '../errors';
import { CONTRIBUTION_ROW_KEY_PREFIX } from '../model/contributions';
import { addressOfWrite, derive, valuesOf } from '../model/entity-codec';
import { ENTITY_TYPE_PROPERTY } from '../model/types';
import type { EntityAddress, StorageObserver, StoredEntity } from '../storage/storage-types';
import type { Model } from '../model/types';
import type { TableStore } from '../storage/table-store';
import type { WriteExecutor } from '../write/write-executor';
import { addressKey } from '../storage/address-key';
import { stateId, type EntityMessage, type FanoutMessage } from '../queue/messages';
import { reconcileContributions } from '../derived/reconcile-contributions';
import { reconcileCopies } from '../derived/copy-refresh';
import { refreshSummaryChains } from '../derived/summary-chains';
import { claimUnique, deleteIfPointsAt } from '../derived/index-entities';
import { deleteDependents } from '../derived/dependent-upkeep';
import type { DerivedTarget } from '../derived/derived-target';

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
  /** The write path, for copies and the join entities of a deleted entity (src/derived/copy-refresh.ts, dependent-upkeep.ts); without it they are left as they are. */
  writer?: WriteExecutor;
  /** Told about a unique index entity that belongs to another entity (should not happen: reservations prevent it). */
  onUniqueConflict?(address: EntityAddress, message: EntityMessage): void;
  now?(): number;
}

/** Done, with its passes and the derived entities it wrote (entities); or to be tried again after `afterMs` (ms). */
export type ReconcileResult = { kind: 'done'; passes: number; upserted: number; deleted: number } | { kind: 'retryLater'; afterMs: number };

/**
 * Reconciles the derived entities of the entity a message names.
 * @returns done, or retryLater when the announced write is not visible yet and the settle time has not passed
 * @throws TablegraphError BAD_USER_INPUT when the message names an unknown entity type (it can never succeed);
 *   STORAGE_UNAVAILABLE and others from the store; STORAGE_UNAVAILABLE (reason Contention) when the entity kept
 *   changing for maxPasses passes (the message is delivered again later)
 */
export async function reconcile(message: FanoutMessage, opts: ReconcileOptions): Promise<ReconcileResult> {
  const entity = opts.model.entities.get(message.entity);
  if (!entity) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `fan-out message ${message.id} names ${message.entity}, which the schema does not have`);
  const { store } = opts;
  const target: DerivedTarget = { model: opts.model, store, entity, primary: message.primary, observer: opts.observer, writer: opts.writer };
  const call = { observer: opts.observer };
  const now = opts.now ?? Date.now;
  const old = new Map(message.candidates.map((a) => [addressKey(a), a]));
  let upserted = 0;
  let deleted = 0;

  const settleMs = opts.settleMs ?? 30000;
  // The write may still commit while the entity is in the state it read (write ids are never reused, so that
  // state never comes back — absence excepted). Any other state: it committed, or was superseded, or failed.
  const isVisible = (e: StoredEntity | null) => stateId(e) !== message.basedOn;
  let current = await store.getEntity(message.primary, call);
  const holdUntil = now() + (opts.holdMs ?? 500);
  while (!isVisible(current) && now() < holdUntil && now() - message.enqueuedAt < settleMs) {
    await new Promise((r) => setTimeout(r, 20));
    current = await store.getEntity(message.primary, call);
  }
  const waited = now() - message.enqueuedAt;
  // One deferral, to the settle deadline: each redelivery counts towards the poison threshold.
  if (!isVisible(current) && waited < settleMs) return { kind: 'retryLater', afterMs: settleMs - waited };

  for (let pass = 1; pass <= (opts.maxPasses ?? 10); pass++) {
    // An entity of a sibling type at the address (the guide's "Inheritance relationships") derives nothing of this type.
    const want = derive(entity, current && current.properties[ENTITY_TYPE_PROPERTY] === entity.entityType ? valuesOf(entity, current.properties) : null);
    const wanted = new Set<string>();
    // Each index entity on its own (their order does not matter, only that all are written before anything is
    // deleted): at once, so a message takes one round trip's latency for them, not one per index.
    await Promise.all(
      want.map(async (w) => {
        const address = addressOfWrite(w);
        wanted.add(addressKey(address));
        await store.ensureTable(w.table);
        if (!w.index.unique) await store.upsertEntity(w.table, w.entity, 'replace', call);
        else if (!(await claimUnique(target, w, now))) {
          opts.onUniqueConflict?.(address, message);
          return;
        }
        upserted += 1;
        old.set(addressKey(address), address);
      }),
    );
    upserted += await reconcileContributions(target, current, old, message.holderLookups ?? []);
    upserted += await reconcileCopies(target, current, [...old.values()]);
    deleted += await deleteDependents(target, current, [...old.values()]);
    await opts.afterUpserts?.(message);
    let leaseEnds = 0;
    // Stale index entities, each decided on its own: at once too.
    await Promise.all(
      [...old]
        .filter(([key, address]) => !wanted.has(key) && !address.rowKey.startsWith(CONTRIBUTION_ROW_KEY_PREFIX))
        .map(async ([, address]) => {
          const outcome = await deleteIfPointsAt(target, address, now);
          if (outcome === 'deleted') deleted += 1;
          else if (outcome instanceof Date) leaseEnds = Math.max(leaseEnds, outcome.getTime());
        }),
    );
    const again = await store.getEntity(message.primary, call);
    if ((again?.etag ?? null) === (current?.etag ?? null)) {
      // A pending reservation was kept: its write may still commit. If it does not, nobody but a later delivery of
      // this message would remove it, so come back when its lease has ended.
      if (leaseEnds > 0) return { kind: 'retryLater', afterMs: Math.max(leaseEnds - now(), 0) + 1000 };
      upserted += await refreshHolders(message, opts);
      return { kind: 'done', passes: pass, upserted, deleted };
    }
    current = again;
  }
  throw new TablegraphError(
    ErrorCode.STORAGE_UNAVAILABLE,
    `${message.entity} ${message.primary.partitionKey}/${message.primary.rowKey} kept changing while its derived entities were reconciled`,
    {
      messageId: message.id,
      reason: 'Contention',
    },
  );
}

/**
 * The summary holders a message's write changed in its EGT whose values other summaries sum: their contributions to
 * those follow, now that the write is visible (src/derived/summary-chains.ts).
 * @returns contribution entities changed (entities)
 */
async function refreshHolders(message: FanoutMessage, opts: ReconcileOptions): Promise<number> {
  let changed = 0;
  for (const h of message.summaryHolders ?? []) {
    const holder = opts.model.entities.get(h.entity);
    if (holder) changed += await refreshSummaryChains(opts.model, opts.store, holder, h.address, opts.observer);
  }
  return changed;
}
