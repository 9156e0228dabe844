/**
 * The message worker: a QueueWorker whose handler decodes each message of the queue (src/queue/messages.ts) and
 * sends each kind straight to its handler: a write's derived entities reconciled (reconciler.ts), a move carried out
 * (carry-out-move.ts), the blobs of `@blob` fields cleaned up (blob-cleanup.ts), or a batch's items (one group
 * commit's writes) each as the message it holds. Runs inside the server by default and alone as `npm run worker`;
 * several workers on one queue are competing consumers ("Eventually consistent transactions pattern").
 */
import type { Logger } from '../log';
import { tenantOfPartitionKey } from '../model/tenancy';
import type { Model } from '../model/types';
import type { QueueStore } from '../storage/queue-store';
import type { TableStore } from '../storage/table-store';
import pLimit from 'p-limit';
import {
  decodeMessage,
  encodeBatches,
  type BatchMessage,
  type BlobCleanupMessage,
  type EntityMessage,
  type FanoutMessage,
  type MoveMessage,
} from '../queue/messages';
import { contextOf, inSpan } from '../telemetry/spans';
import { workQueueNames } from '../queue/sender';
import type { BlobStore } from '../storage/blob-store';
import { cleanUpBlobs } from './blob-cleanup';
import { QueueWorker, type HandlerResult } from './queue-worker';
import { reconcile, type ReconcileOptions } from './reconciler';
import { carryOutMove, type MoveOptions } from './carry-out-move';
import { ErrorCode, isTablegraphError } from '../errors';
import type { PathGate } from '../read/path-gate';
import { typesTouchedByEntity } from '../write/touched-types';

export interface MessageWorkerOptions {
  model: Model;
  /** Under `@tenancy`: the tenants closed (src/evolution/tenant-directory.ts): their messages are dropped, nothing written for them. */
  closedTenants?: { has(tenant: string): boolean; frozen?(tenant: string): boolean };
  store: TableStore;
  queues: QueueStore;
  tablePrefix: string;
  log?: Logger;
  /** Messages handled at once (messages, default 8). */
  concurrency?: number;
  /** Receives before a message goes to the poison queue (default 5). */
  maxDequeueCount?: number;
  /** How long a message waits for its write to become visible (ms, default 30000); see reconciler.ts. */
  settleMs?: number;
  /** Seconds a received message stays invisible to other workers (default 30). */
  visibilityTimeoutSeconds?: number;
  /** Blob storage of `@blob` fields, for blob cleanup messages (blob-cleanup.ts). */
  blobs?: BlobStore;
  /** The write path, to carry out moves (`@write(action: MOVE)`). */
  writer?: ReconcileOptions['writer'];
  /** Test hook, see ReconcileOptions.afterUpserts. */
  afterUpserts?: ReconcileOptions['afterUpserts'];
  /** Told of every Table storage call the reconciliation makes (e.g. to count calls per message). */
  observer?: ReconcileOptions['observer'];
  /**
   * Which entity types this process serves now, and the moves a re-key carried over (src/evolution/path-states.ts): a
   * message touching a type being re-keyed waits until it is done. Absent: every type.
   */
  gate?: Pick<PathGate, 'assertServed'> & { movedTo?: MoveOptions['movedTo'] };
}

/** Receives before a message goes to the poison queue, when not given (QueueWorker's default). */
const DEFAULT_MAX_DEQUEUE_COUNT = 5;

/** How long a message touching a type being re-keyed waits before it is tried again (ms). */
const REKEY_WAIT_MS = 5000;

/** Creates (without starting) the message worker; call ensureWorkQueues first. */
export function createMessageWorker(opts: MessageWorkerOptions): QueueWorker {
  const names = workQueueNames(opts.tablePrefix);
  return new QueueWorker({
    queues: opts.queues,
    queue: names.queue,
    poisonQueue: names.poison,
    maxDequeueCount: opts.maxDequeueCount,
    concurrency: opts.concurrency,
    visibilityTimeoutSeconds: opts.visibilityTimeoutSeconds,
    log: opts.log,
    enqueuedAt(text) {
      try {
        const m = decodeMessage(text);
        return m.kind === 'blobCleanup' ? m.visibleAt : m.enqueuedAt;
      } catch {
        return undefined;
      }
    },
    // The one dispatcher: every message of the queue by its kind (src/queue/messages.ts).
    async handle(text, meta) {
      const message = decodeMessage(text);
      if (message.kind !== 'batch') return inMessageSpan(message, () => dispatch(message));
      const each = (item: EntityMessage) => inMessageSpan(item, () => dispatch(item));
      return handleBatch(message, each, meta.dequeueCount, opts.maxDequeueCount ?? DEFAULT_MAX_DEQUEUE_COUNT);
    },
  });

  /** Each kind straight to its handler. */
  function dispatch(message: EntityMessage | BlobCleanupMessage): Promise<HandlerResult> {
    const tenant = message.kind === 'blobCleanup' ? undefined : tenantOf(opts, message);
    if (tenant !== undefined && opts.closedTenants?.has(tenant)) return Promise.resolve({ kind: 'done' });
    // A tenant being moved between tiers takes no writes for a few seconds: its messages wait, uncounted.
    if (tenant !== undefined && opts.closedTenants?.frozen?.(tenant)) return Promise.resolve({ kind: 'retryLater', afterMs: FROZEN_RETRY_MS });
    switch (message.kind) {
      case 'blobCleanup':
        return handleBlobCleanup(message, opts);
      case 'fanout':
        return handleFanout(message, opts);
      case 'move':
        return handleMove(message, opts);
    }
  }
}

/**
 * The tenant of the message's entity, under `@tenancy`. A closed tenant's messages are dropped: a tenant being deleted
 * gets nothing written again by the worker (a summary's holder, an index entity), so its delete finds nothing left.
 */
function tenantOf(opts: MessageWorkerOptions, message: EntityMessage): string | undefined {
  if (!opts.closedTenants || !opts.model.entities.get(message.entity)?.tenantScoped) return undefined;
  return tenantOfPartitionKey(message.primary.partitionKey);
}

/** How long a frozen tenant's message waits before it is tried again (ms): about the catalogue's refresh interval. */
const FROZEN_RETRY_MS = 2000;

/** A span of its own trace, linked to the request whose write sent the message (spans.ts). */
function inMessageSpan<T>(message: EntityMessage | BlobCleanupMessage, run: () => Promise<T>): Promise<T> {
  const attributes = { 'messaging.message.id': message.id, 'tablegraph.message.kind': message.kind, 'tablegraph.entity': message.entity };
  return inSpan('worker.message', attributes, run, { parent: 'root', links: [contextOf(message.traceparent)] });
}

/** How many of a batch's items are handled at once (messages). */
const BATCH_CONCURRENCY = 16;

/**
 * A batch's items (the writes of one group commit), each handled as the message it is, at most BATCH_CONCURRENCY at
 * once. Done when all are. Otherwise the message keeps only the items not done (HandlerResult `partly`): those that
 * failed (each counted as a failure; the message's receives go on counting towards the poison queue) and those told
 * to wait. Once the next receive would take it to the poison queue, the waiting ones go on as a message of their
 * own instead, so that only the failing ones are poisoned.
 * @param receives the message's receives so far (its dequeueCount); `maxReceives`: the poison threshold
 */
async function handleBatch(
  batch: BatchMessage,
  handle: (item: EntityMessage) => Promise<HandlerResult>,
  receives: number,
  maxReceives: number,
): Promise<HandlerResult> {
  const limit = pLimit(BATCH_CONCURRENCY);
  const outcomes = await Promise.all(
    batch.messages.map((item) =>
      limit(() =>
        handle(item).then(
          (result) => ({ item, result, error: undefined }),
          (error: unknown) => ({ item, result: undefined, error: error ?? new Error('handler failed') }),
        ),
      ),
    ),
  );
  const failed = outcomes.filter((o) => o.error !== undefined);
  const waiting = outcomes.flatMap((o) => (o.result?.kind === 'retryLater' ? [{ item: o.item, afterMs: o.result.afterMs }] : []));
  if (failed.length === 0 && waiting.length === 0) return { kind: 'done' };
  const afterMs = Math.max(0, ...waiting.map((w) => w.afterMs));
  const text = (items: EntityMessage[]) => encodeBatches(items, Infinity, batch.enqueuedAt)[0].text;
  const errors = failed.map((o) => o.error);
  if (failed.length > 0 && waiting.length > 0 && receives >= maxReceives) {
    return { kind: 'partly', rest: text(failed.map((o) => o.item)), failed: errors, afterMs, fresh: { text: text(waiting.map((w) => w.item)), afterMs } };
  }
  return { kind: 'partly', rest: text([...failed.map((o) => o.item), ...waiting.map((w) => w.item)]), failed: errors, afterMs };
}

/** A `@blob` field's cleanup (blob-cleanup.ts). */
async function handleBlobCleanup(cleanup: BlobCleanupMessage, opts: MessageWorkerOptions): Promise<{ kind: 'done' }> {
  const { deleted, kept, rejected } = await cleanUpBlobs(cleanup, { model: opts.model, store: opts.store, blobs: opts.blobs });
  opts.log?.debug({ messageId: cleanup.id, entity: cleanup.entity, deleted, kept }, 'blob cleanup');
  if (rejected > 0)
    opts.log?.warn(
      { messageId: cleanup.id, entity: cleanup.entity, rejected },
      "blob cleanup: deleted an uploaded blob over its field's maxBytes or of a content type it does not allow",
    );
  return { kind: 'done' };
}

/**
 * Whether the message touches a type this process does not serve now (a re-key under way): its entity's, a move's
 * target's, or one its derived entities read or write (touched-types.ts).
 */
function waitsForRekey(message: EntityMessage, opts: MessageWorkerOptions): boolean {
  const { gate, model } = opts;
  const entity = model.entities.get(message.entity);
  if (!gate || !entity) return false;
  const target = message.kind === 'move' && message.move.entity ? model.entities.get(message.move.entity) : undefined;
  try {
    for (const type of [...typesTouchedByEntity(model, entity), ...(target ? typesTouchedByEntity(model, target) : [])])
      gate.assertServed(type, message.entity);
    return false;
  } catch (e) {
    if (isTablegraphError(e, ErrorCode.ACCESS_PATH_BUILDING)) return true;
    throw e;
  }
}

/** What the reconciler and a move are both given of the worker's options. */
function handlerOptions(opts: MessageWorkerOptions): Pick<ReconcileOptions, 'model' | 'store' | 'settleMs' | 'writer' | 'afterUpserts' | 'observer'> {
  const { model, store, settleMs, writer, afterUpserts, observer } = opts;
  return { model, store, settleMs, writer, afterUpserts, observer };
}

/** A write's derived entities reconciled (reconciler.ts). */
async function handleFanout(message: FanoutMessage, opts: MessageWorkerOptions): Promise<HandlerResult> {
  if (waitsForRekey(message, opts)) return { kind: 'retryLater', afterMs: REKEY_WAIT_MS };
  const result = await reconcile(message, {
    ...handlerOptions(opts),
    onUniqueConflict: (address) =>
      opts.log?.warn(
        { messageId: message.id, table: address.table, key: address.partitionKey },
        'a unique index entity belongs to another entity; left as it is',
      ),
  });
  return result.kind === 'done' ? { kind: 'done' } : result;
}

/** A move carried out (carry-out-move.ts); an abandoned one logged. */
async function handleMove(message: MoveMessage, opts: MessageWorkerOptions): Promise<HandlerResult> {
  if (waitsForRekey(message, opts)) return { kind: 'retryLater', afterMs: REKEY_WAIT_MS };
  const result = await carryOutMove(message, {
    ...handlerOptions(opts),
    movedTo: opts.gate?.movedTo && ((type, moveId, enqueuedAt) => opts.gate!.movedTo!(type, moveId, enqueuedAt)),
  });
  if (result.kind === 'retryLater') return result;
  if (result.outcome === 'abandoned') {
    const { primary, move } = message;
    opts.log?.warn(
      {
        messageId: message.id,
        entity: message.entity,
        from: `${primary.table}/${primary.partitionKey}/${primary.rowKey}`,
        to: `${move.to.table}/${move.to.partitionKey}/${move.to.rowKey}`,
      },
      'move abandoned: its new address was taken after the move was requested; the entity stays at its old address',
    );
  }
  return { kind: 'done' };
}
