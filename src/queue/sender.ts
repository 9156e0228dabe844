/**
 * The work queue as writers see it: its names, and the one sender every writer sends its messages through
 * (messages.ts), which can withdraw a message whose write then failed.
 */
import { queueName, type QueueStore } from '../storage/queue-store';

/** A reference to a sent message, by which it can be withdrawn. */
export type SentMessage = { id: string; popReceipt: string };

/** Where queue messages go (the queue adapter, or anything with the same methods). */
export interface WorkQueueSender {
  /** Sends one message, hidden for `visibilityDelaySeconds` (s, default 0); may return a reference to withdraw it by. */
  send(text: string, opts?: { visibilityDelaySeconds?: number }): Promise<SentMessage | void>;
  /** Deletes a message sent for a write that then failed (best effort). */
  withdraw?(sent: SentMessage): Promise<void>;
}

/** The work queue and its poison queue, for a table prefix. */
export function workQueueNames(tablePrefix: string): { queue: string; poison: string } {
  return { queue: queueName(tablePrefix, 'fanout'), poison: queueName(tablePrefix, 'fanout-poison') };
}

/**
 * Sends messages to the queue (what the WriteExecutor needs), and withdraws one whose write failed before anyone
 * received it (a receive changes the popReceipt: then it stays, and the worker finds nothing to do).
 */
export function queueSender(queues: QueueStore, queue: string): WorkQueueSender {
  return {
    send: (text, opts) => queues.send(queue, text, opts),
    withdraw: (sent) => queues.delete(queue, sent),
  };
}

/** Creates the work queue and its poison queue if missing. */
export async function ensureWorkQueues(queues: QueueStore, tablePrefix: string): Promise<void> {
  const names = workQueueNames(tablePrefix);
  await queues.ensureQueue(names.queue);
  await queues.ensureQueue(names.poison);
}
