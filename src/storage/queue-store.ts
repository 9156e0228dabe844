/**
 * The thin adapter over `@azure/storage-queue` that carries the fan-out messages of the guide's "Eventually consistent
 * transactions pattern" (docs/architecture.md, "Fan-out and reconciliation"): send before the EGT commits, receive,
 * hide again, delete. Limits are checked before a request leaves the process, the SDK's own retry policy is configured
 * (never re-written), and every SDK error becomes a TablegraphError here, through storage-errors.ts's mapping.
 */
import { QueueClient, QueueServiceClient, StorageRetryOptions } from '@azure/storage-queue';
import { ErrorCode, TablegraphError } from '../errors';
import { toTablegraphError } from './storage-errors';
import { CallTimers } from './call-timers';
import { inSpan } from '../telemetry/spans';
import type { CallTimer, ServiceAccess } from './storage-types';

/** The service's limit on a message's text: 64 KiB of UTF-8. */
export const MAX_MESSAGE_BYTES = 64 * 1024;
/** Messages per receive: the service's maximum. */
export const MAX_RECEIVE = 32;
/** The longest a message can be hidden (receive, update, initial delay): 7 days, in seconds. */
export const MAX_VISIBILITY_SECONDS = 7 * 24 * 3600;
const QUEUE_NAME = /^[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9]))*$/;

/** A standard Azure Storage connection string (the same one the tables use), or the Queue endpoint and a token credential. */
export type QueueStoreOptions = ServiceAccess & {
  /** The SDK's exponential retry policy (network errors, 500, 503). Defaults: 4 tries, 500 ms, max 4000 ms. */
  retry?: { maxTries?: number; retryDelayInMs?: number; maxRetryDelayInMs?: number; tryTimeoutInMs?: number };
  /** Per-call timeout in ms, SDK retries included (default 10000). */
  timeoutMs?: number;
};

/** A message in hand: `popReceipt` proves it, and changes with every defer. `dequeueCount` counts receives. */
export interface ReceivedMessage {
  id: string;
  popReceipt: string;
  text: string;
  dequeueCount: number;
  /** When the message was sent (the service keeps whole seconds). */
  insertedOn?: Date;
}

/** A message as sent or received: its id and the popReceipt that lets its holder delete or hide it. */
export type MessageRef = { id: string; popReceipt: string };
/** A renewing hold on a message; `release()` resolves with the popReceipt valid now. */
export type Lease = { release(): Promise<string> };

/**
 * `prefix-base`, lower-cased (`('tAbc12', 'fanout')` → `'tabc12-fanout'`; `('', 'fanout')` → `'fanout'`), so
 * one storage account can hold the queues of several deployments or test runs.
 * @throws CONFIG_INVALID unless the result is 3–63 characters of lowercase letters, digits and single hyphens
 * that neither start nor end with a hyphen (the Queue service's naming rule).
 */
export function queueName(prefix: string, base: string): string {
  const name = (prefix === '' ? base : `${prefix}-${base}`).toLowerCase();
  checkQueueName(name);
  return name;
}

/** @throws CONFIG_INVALID for a name the Queue service refuses (see {@link queueName}). */
export function checkQueueName(name: string): void {
  if (name.length < 3 || name.length > 63 || !QUEUE_NAME.test(name)) {
    throw new TablegraphError(
      ErrorCode.CONFIG_INVALID,
      `'${name}' is not a valid queue name: use 3–63 lowercase letters, digits and single hyphens, ` + 'starting and ending with a letter or digit.',
      { queue: name },
    );
  }
}

/**
 * One store per process and connection; caches a QueueClient per queue and which queues exist. Methods throw
 * TablegraphError only: CONFIG_INVALID (bad name, refused credentials), BAD_USER_INPUT (bad argument),
 * LIMIT_EXCEEDED (message over 64 KiB), NOT_FOUND (missing queue), CONFLICT (reason PopReceiptMismatch: the
 * message was received again by another consumer since), STORAGE_UNAVAILABLE (timeout, network, 5xx after
 * the SDK's retries).
 */
export class QueueStore {
  private readonly service: QueueServiceClient;
  private readonly timeoutMs: number;
  private readonly timers = new CallTimers();
  private readonly clients = new Map<string, QueueClient>();
  private readonly queues = new Map<string, Promise<void>>();

  /** Sends nothing. @throws CONFIG_INVALID for a malformed connection string. */
  constructor(opts: QueueStoreOptions) {
    this.timeoutMs = opts.timeoutMs ?? 10_000;
    const retryOptions: StorageRetryOptions = {
      maxTries: 4,
      retryDelayInMs: 500,
      maxRetryDelayInMs: 4000,
      ...opts.retry,
    };
    try {
      this.service =
        opts.url === undefined
          ? QueueServiceClient.fromConnectionString(opts.connectionString, { retryOptions })
          : new QueueServiceClient(opts.url, opts.credential, { retryOptions });
    } catch (cause) {
      throw new TablegraphError(ErrorCode.CONFIG_INVALID, 'The storage connection string is invalid.', {}, { cause });
    }
  }

  /** Creates the queue if missing (an existing one is fine) and remembers it; a failure is not remembered. */
  ensureQueue(name: string): Promise<void> {
    let created = this.queues.get(name);
    if (!created) {
      const client = this.client(name);
      const request = this.call('ensureQueue', name, (abortSignal) => client.createIfNotExists({ abortSignal }));
      created = request.then(() => undefined);
      created.catch(() => this.queues.delete(name));
      this.queues.set(name, created);
    }
    return created;
  }

  /**
   * Appends a message, hidden for `visibilityDelaySeconds` (default 0) and never expiring: a fan-out message
   * that expired would leave derived entities stale for good.
   * @returns the message's id and popReceipt: enough to delete it again before anyone received it
   * @throws LIMIT_EXCEEDED (before sending) when `text` is over 64 KiB of UTF-8; NOT_FOUND for a missing queue.
   */
  async send(name: string, text: string, opts?: { visibilityDelaySeconds?: number }): Promise<MessageRef> {
    checkText(name, text);
    const visibilityTimeout = opts?.visibilityDelaySeconds ?? 0;
    checkSeconds('visibilityDelaySeconds', visibilityTimeout, 0);
    const client = this.client(name);
    const sent = await this.call('send', name, (abortSignal) => client.sendMessage(text, { visibilityTimeout, messageTimeToLive: -1, abortSignal }));
    return { id: sent.messageId, popReceipt: sent.popReceipt };
  }

  /**
   * Receives up to `max` (1–32) messages and hides them for `visibilityTimeoutSeconds` (≥ 1); an empty array
   * when none is visible. Each receive adds one to a message's dequeueCount.
   * @throws BAD_USER_INPUT for a bad `max` or timeout; NOT_FOUND for a missing queue.
   */
  async receive(name: string, opts: { max: number; visibilityTimeoutSeconds: number }): Promise<ReceivedMessage[]> {
    if (!Number.isInteger(opts.max) || opts.max < 1 || opts.max > MAX_RECEIVE) {
      const message = `A receive takes 1–${MAX_RECEIVE} messages, not ${opts.max}.`;
      throw new TablegraphError(ErrorCode.BAD_USER_INPUT, message);
    }
    checkSeconds('visibilityTimeoutSeconds', opts.visibilityTimeoutSeconds, 1);
    const client = this.client(name);
    const options = { numberOfMessages: opts.max, visibilityTimeout: opts.visibilityTimeoutSeconds };
    const receive = (abortSignal: AbortSignal) => client.receiveMessages({ ...options, abortSignal });
    const response = await this.call('receive', name, receive);
    return response.receivedMessageItems.map((m) => ({
      id: m.messageId,
      popReceipt: m.popReceipt,
      text: m.messageText,
      dequeueCount: m.dequeueCount,
      insertedOn: m.insertedOn,
    }));
  }

  /**
   * Deletes a message in hand. One that is already gone (404: deleted, expired, queue dropped) is fine.
   * @throws CONFLICT (reason PopReceiptMismatch) when the message was received again since `m.popReceipt`.
   */
  async delete(name: string, m: MessageRef): Promise<void> {
    const client = this.client(name);
    try {
      await this.call('delete', name, (abortSignal) => client.deleteMessage(m.id, m.popReceipt, { abortSignal }));
    } catch (e) {
      if (!(e instanceof TablegraphError && e.code === ErrorCode.NOT_FOUND)) throw e;
    }
  }

  /**
   * Hides a message in hand again for `seconds` (0 = visible now, at most 7 days), optionally replacing its
   * text; returns the new popReceipt (the old one no longer works).
   * @throws LIMIT_EXCEEDED for a `text` over 64 KiB; NOT_FOUND when the message is gone; CONFLICT (reason
   * PopReceiptMismatch) when it was received again since.
   */
  async defer(name: string, m: MessageRef, seconds: number, text?: string): Promise<string> {
    if (text !== undefined) checkText(name, text);
    checkSeconds('seconds', seconds, 0);
    const client = this.client(name);
    const response = await this.call('defer', name, (abortSignal) => client.updateMessage(m.id, m.popReceipt, text, seconds, { abortSignal }));
    if (!response.popReceipt) {
      throw new TablegraphError(ErrorCode.STORAGE_BAD_REQUEST, `defer on queue '${name}': no popReceipt answered.`);
    }
    return response.popReceipt;
  }

  /**
   * Keeps a message in hand hidden while a long job runs: every `seconds / 2` it hides it again for `seconds`
   * (a lease renewal), so no other consumer receives it meanwhile. `release()` stops renewing and resolves with
   * the popReceipt now valid. A failed renewal goes to `onError` (the message may then reappear: at least once).
   */
  keepHidden(name: string, m: MessageRef, seconds: number, onError: (e: unknown) => void): Lease {
    let popReceipt = m.popReceipt;
    let renewing = Promise.resolve();
    const renew = async (): Promise<void> => {
      popReceipt = await this.defer(name, { id: m.id, popReceipt }, seconds).catch((e: unknown) => {
        onError(e);
        return popReceipt;
      });
    };
    const timer = setInterval(() => (renewing = renewing.then(renew)), (seconds * 1000) / 2);
    const release = async (): Promise<string> => {
      clearInterval(timer);
      await renewing;
      return popReceipt;
    };
    return { release };
  }

  /** The service's approximate count of messages in the queue (visible or not). @throws NOT_FOUND. */
  async approximateDepth(name: string): Promise<number> {
    const client = this.client(name);
    const props = await this.call('approximateDepth', name, (abortSignal) => client.getProperties({ abortSignal }));
    return props.approximateMessagesCount ?? 0;
  }

  /**
   * How many messages are visible now, up to `max` (at most 32; messages): one peek, which neither hides nor changes
   * them. Messages sent with a visibility delay, or received and not yet deleted, are not counted — unlike
   * approximateDepth, which counts them all. @throws NOT_FOUND.
   */
  async visibleCount(name: string, max = 32): Promise<number> {
    const client = this.client(name);
    const peeked = await this.call('peekMessages', name, (abortSignal) =>
      client.peekMessages({ numberOfMessages: Math.min(Math.max(1, max), 32), abortSignal }),
    );
    return peeked.peekedMessageItems.length;
  }

  /**
   * How long the message at the front of the queue has waited (ms since it was inserted; 0 when no message is
   * visible): one peek, which neither hides nor changes the message. @throws NOT_FOUND.
   */
  async oldestMessageAgeMs(name: string): Promise<number> {
    const client = this.client(name);
    const peeked = await this.call('peekMessages', name, (abortSignal) => client.peekMessages({ numberOfMessages: 1, abortSignal }));
    const insertedOn = peeked.peekedMessageItems[0]?.insertedOn;
    return insertedOn ? Math.max(0, Date.now() - insertedOn.getTime()) : 0;
  }

  /** Drops the queue and its messages; a missing queue is fine. */
  async deleteQueue(name: string): Promise<void> {
    const client = this.client(name);
    this.queues.delete(name);
    await this.call('deleteQueue', name, (abortSignal) => client.deleteIfExists({ abortSignal }));
  }

  /** One SDK call under the per-call timeout, its rejection mapped by {@link toQueueError}. */
  private call<T>(operation: string, queue: string, run: (signal: AbortSignal) => Promise<T>): Promise<T> {
    return inSpan(`queue.${operation}`, { 'messaging.system': 'azure.queue', 'messaging.destination.name': queue }, async () => {
      const started = performance.now();
      try {
        return await run(AbortSignal.timeout(this.timeoutMs));
      } catch (e) {
        throw toQueueError(e, operation, queue);
      } finally {
        const seconds = (performance.now() - started) / 1000;
        this.timers.time('queue', seconds);
      }
    });
  }

  /**
   * Tells `timer` the time of every later call of this store (s).
   * @returns a function that stops it
   */
  timeCalls(timer: CallTimer): () => void {
    return this.timers.add(timer);
  }

  private client(name: string): QueueClient {
    let client = this.clients.get(name);
    if (!client) {
      checkQueueName(name);
      client = this.service.getQueueClient(name);
      this.clients.set(name, client);
    }
    return client;
  }
}

/**
 * Maps an SDK error with storage-errors.ts's status rules (one place decides what a status means), then words
 * it for a queue. PopReceiptMismatch (400) becomes CONFLICT: another consumer holds the message now.
 * details: { operation, queue, status?, storageCode?, storageMessage?, reason? }; the SDK error is `cause`.
 */
export function toQueueError(e: unknown, operation: string, queue: string): TablegraphError {
  if (e instanceof TablegraphError) return e;
  const mapped = toTablegraphError(e, { operation, table: queue });
  const details: Record<string, unknown> = { ...mapped.details, queue };
  delete details.table;
  const reason = details.reason;
  let code = mapped.code;
  let what: string;
  if (details.storageCode === 'PopReceiptMismatch') {
    code = ErrorCode.CONFLICT;
    details.reason = 'PopReceiptMismatch';
    what = 'the message was received again by another consumer since (pop receipt mismatch)';
  } else if (reason === 'aborted') {
    what = 'timed out or was aborted';
  } else if (reason === 'network' || reason === 'noResponse') {
    what = `got no answer from the Queue service: ${errorMessage(e)}`;
  } else if (details.storageCode === 'QueueNotFound') {
    what = 'the queue does not exist';
  } else {
    const text = typeof details.storageMessage === 'string' ? details.storageMessage : errorMessage(e);
    what = `${text} (${String(details.status ?? 'no status')})`;
  }
  return new TablegraphError(code, `${operation} on queue '${queue}': ${what}`, details, { cause: e });
}

function errorMessage(e: unknown): string {
  return (e instanceof Error ? e.message : String(e)).split('\n')[0];
}

function checkText(queue: string, text: string): void {
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > MAX_MESSAGE_BYTES) {
    throw new TablegraphError(ErrorCode.LIMIT_EXCEEDED, `A message for queue '${queue}' is ${bytes} bytes; the limit is ${MAX_MESSAGE_BYTES} (64 KiB).`, {
      queue,
      bytes,
      limit: MAX_MESSAGE_BYTES,
    });
  }
}

function checkSeconds(what: string, seconds: number, min: number): void {
  if (!Number.isInteger(seconds) || seconds < min || seconds > MAX_VISIBILITY_SECONDS) {
    const range = `${min}–${MAX_VISIBILITY_SECONDS}`;
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${what} must be whole seconds in ${range}, not ${seconds}.`);
  }
}
