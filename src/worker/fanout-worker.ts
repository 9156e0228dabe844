/**
 * The fan-out worker: a QueueWorker whose handler decodes fan-out messages and reconciles the derived entities
 * they name (reconciler.ts), or cleans up the blobs of `@blob` fields (blob-cleanup.ts). Runs inside the server by
 * default and alone as `npm run worker`; several workers on one queue are competing consumers ("Eventually
 * consistent transactions pattern").
 */
import type { Logger } from '../log';
import type { Model } from '../model/types';
import { queueName, type QueueStore } from '../storage/queue-store';
import type { TableStore } from '../storage/table-store';
import { decodeFanout } from '../write/fanout-message';
import { decodeBlobCleanup } from '../write/blob-cleanup-message';
import type { BlobStore } from '../storage/blob-store';
import { cleanUpBlobs } from './blob-cleanup';
import type { FanoutSender } from '../write/write-executor';
import { QueueWorker } from './queue-worker';
import { reconcile, type ReconcileOptions } from './reconciler';

/** The fan-out queue and its poison queue, for a table prefix. */
export function fanoutQueueNames(tablePrefix: string): { queue: string; poison: string } {
  return { queue: queueName(tablePrefix, 'fanout'), poison: queueName(tablePrefix, 'fanout-poison') };
}

/**
 * Sends fan-out messages to the queue (what the WriteExecutor needs), and withdraws one whose write failed
 * before anyone received it (a receive changes the popReceipt: then it stays, and the worker finds nothing to do).
 */
export function queueSender(queues: QueueStore, queue: string): FanoutSender {
  return {
    send: (text, opts) => queues.send(queue, text, opts),
    withdraw: (sent) => queues.delete(queue, sent),
  };
}

export interface FanoutWorkerOptions {
  model: Model;
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
}

/** Creates (without starting) the fan-out worker; call ensureFanoutQueues first. */
export function createFanoutWorker(opts: FanoutWorkerOptions): QueueWorker {
  const names = fanoutQueueNames(opts.tablePrefix);
  return new QueueWorker({
    queues: opts.queues,
    queue: names.queue,
    poisonQueue: names.poison,
    maxDequeueCount: opts.maxDequeueCount,
    concurrency: opts.concurrency,
    visibilityTimeoutSeconds: opts.visibilityTimeoutSeconds,
    log: opts.log,
    enqueuedAt(text) {
      const cleanup = decodeBlobCleanup(text);
      if (cleanup) return cleanup.visibleAt;
      try {
        return decodeFanout(text).enqueuedAt;
      } catch {
        return undefined;
      }
    },
    async handle(text) {
      const cleanup = decodeBlobCleanup(text);
      if (cleanup) {
        const { deleted, kept, rejected } = await cleanUpBlobs(cleanup, { model: opts.model, store: opts.store, blobs: opts.blobs });
        opts.log?.debug({ messageId: cleanup.id, entity: cleanup.entity, deleted, kept }, 'blob cleanup');
        if (rejected > 0)
          opts.log?.warn(
            { messageId: cleanup.id, entity: cleanup.entity, rejected },
            "blob cleanup: deleted an uploaded blob over its field's maxBytes or of a content type it does not allow",
          );
        return { kind: 'done' };
      }
      const message = decodeFanout(text);
      const result = await reconcile(message, {
        model: opts.model,
        store: opts.store,
        settleMs: opts.settleMs,
        writer: opts.writer,
        afterUpserts: opts.afterUpserts,
        onUniqueConflict: (address) =>
          opts.log?.warn(
            { messageId: message.id, table: address.table, key: address.partitionKey },
            'a unique index entity belongs to another entity; left as it is',
          ),
      });
      if (result.kind === 'done' && result.outcome === 'abandoned') {
        const { primary, move } = message;
        opts.log?.warn(
          {
            messageId: message.id,
            entity: message.entity,
            from: `${primary.table}/${primary.partitionKey}/${primary.rowKey}`,
            to: `${move!.to.table}/${move!.to.partitionKey}/${move!.to.rowKey}`,
          },
          'move abandoned: its new address was taken after the move was requested; the entity stays at its old address',
        );
      }
      return result.kind === 'done' ? { kind: 'done' } : { kind: 'retryLater', afterMs: result.afterMs };
    },
  });
}

/** Creates the fan-out queue and its poison queue if missing. */
export async function ensureFanoutQueues(queues: QueueStore, tablePrefix: string): Promise<void> {
  const names = fanoutQueueNames(tablePrefix);
  await queues.ensureQueue(names.queue);
  await queues.ensureQueue(names.poison);
}
