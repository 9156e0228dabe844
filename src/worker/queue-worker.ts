/**
 * The competing-consumer loop that drives fan-out messages (the guide's "Eventually consistent transactions pattern",
 * docs/architecture.md, "Fan-out and reconciliation") through any handler: receive, handle, then delete, hide again, or
 * move to the poison queue. It knows nothing about entities: the reconciler is the handler. Every step is safe to
 * repeat, because the queue delivers at least once and several workers may share one queue.
 */
import { setTimeout as delay } from 'node:timers/promises';
import pino from 'pino';
import { ErrorCode, isTablegraphError, isTransientStorageError, TablegraphError, type ReasonName } from '../errors';
import type { Logger } from '../log';
import { checkQueueName, MAX_MESSAGE_BYTES, MAX_RECEIVE, MAX_VISIBILITY_SECONDS } from '../storage/queue-store';
import type { QueueStore, ReceivedMessage } from '../storage/queue-store';
import { LagStats, LagSummary } from './lag-stats';

/**
 * What a handler decided: the message is done (deleted); or it must come back after `afterMs` ms; or it is done in
 * part (a batch of which some items are done): `rest` replaces its text and it comes back — after the failures'
 * back-off when `failed` holds errors (each counted as a failed message, the receives counted on towards the poison
 * queue), else after `afterMs` ms — and `fresh`, when given, is sent as a new message shown after its `afterMs`.
 */
export type HandlerResult =
  | { kind: 'done' }
  | { kind: 'retryLater'; afterMs: number }
  | { kind: 'partly'; rest: string; failed: unknown[]; afterMs: number; fresh?: { text: string; afterMs: number } };

export interface QueueWorkerOptions {
  queues: QueueStore;
  queue: string;
  poisonQueue: string;
  /** Handles one message; a throw is a failure: the message comes back after a back-off. */
  handle(text: string, meta: { id: string; dequeueCount: number; insertedOn?: Date }): Promise<HandlerResult>;
  /** a message received more than this many times is moved to the poison queue (default 5) */
  maxDequeueCount?: number;
  /** messages per receive (default 16, ≤ 32); a receive never asks for more than the free handler slots */
  batchSize?: number;
  /** messages handled at once (default 8) */
  concurrency?: number;
  /** how long a received message stays hidden, in s (default 30); renewed while its handler runs */
  visibilityTimeoutSeconds?: number;
  /** polling back-off in ms when the queue is empty or failing (default 50..1000, doubling) */
  idleBackoffMs?: { min: number; max: number };
  log?: Logger;
  /** for lag stats: when the message was enqueued (ms since epoch) — parsed from the text by the caller */
  enqueuedAt?(text: string): number | undefined;
}

/** Messages since construction: `failed` counts handler throws, `retried` retryLater answers. */
type Counts = { handled: number; failed: number; poisoned: number; retried: number };
/** What stats() returns: counts, recent lags (ms from enqueue to delete), whether the loop runs, last error. */
export type QueueWorkerStats = Counts & {
  lag: LagSummary;
  running: boolean;
  /** The last error's message (for logs and tests: it can name hosts and ports, so /health shows only the next two). */
  lastError?: string;
  /** When it happened (ms since the epoch). */
  lastErrorAt?: number;
  /** Its `extensions.code` (TablegraphError), or `ERROR`. */
  lastErrorCode?: string;
};
type Settings = Required<Omit<QueueWorkerOptions, 'log' | 'enqueuedAt'>> & Pick<QueueWorkerOptions, 'enqueuedAt'>;

const MAX_REMEMBERED_ERRORS = 1000;
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * One worker per queue and process; more processes on one queue are competing consumers.
 * @throws CONFIG_INVALID from the constructor for an invalid queue name or option.
 */
export class QueueWorker {
  private readonly o: Settings;
  private readonly log: Logger;
  private readonly counts: Counts = { handled: 0, failed: 0, poisoned: 0, retried: 0 };
  private readonly lag = new LagStats();
  private readonly inFlight = new Set<Promise<void>>();
  /** Last handler error per message id, oldest first (bounded), so a poison entry can say why. */
  private readonly lastErrors = new Map<string, string>();
  /** Messages this worker hid again: id → when they become visible (ms since epoch). For drain(). */
  private readonly deferred = new Map<string, number>();
  private loop?: Promise<void>;
  private stopping = false;
  private receives = 0;
  private idleAt = 0;
  private wake?: AbortController;
  private lastError?: { message: string; at: number; code: string; receiving: boolean };

  constructor(opts: QueueWorkerOptions) {
    const given = Object.fromEntries(Object.entries(opts).filter(([, v]) => v !== undefined)) as QueueWorkerOptions;
    const defaults = { maxDequeueCount: 5, batchSize: 16, concurrency: 8, visibilityTimeoutSeconds: 30 };
    const o: Settings = { ...defaults, idleBackoffMs: { min: 50, max: 1000 }, ...given };
    [o.queue, o.poisonQueue].forEach(checkQueueName);
    const int = (n: number, min: number, max = Infinity): boolean => Number.isInteger(n) && n >= min && n <= max;
    const problems = [
      o.queue === o.poisonQueue && 'poisonQueue must differ from queue',
      !int(o.batchSize, 1, MAX_RECEIVE) && `batchSize must be 1–${MAX_RECEIVE}`,
      !int(o.concurrency, 1) && 'concurrency must be an integer ≥ 1',
      !int(o.maxDequeueCount, 1) && 'maxDequeueCount must be an integer ≥ 1',
      !int(o.visibilityTimeoutSeconds, 1, MAX_VISIBILITY_SECONDS) && 'visibilityTimeoutSeconds must be 1 s–7 days',
      !(o.idleBackoffMs.min > 0 && o.idleBackoffMs.max >= o.idleBackoffMs.min) && 'idleBackoffMs: 0 < min ≤ max',
    ].filter((p): p is string => typeof p === 'string');
    if (problems.length > 0) {
      const message = `Queue worker options: ${problems.join('; ')}.`;
      throw new TablegraphError(ErrorCode.CONFIG_INVALID, message, { problems });
    }
    this.o = o;
    this.log = opts.log ?? pino({ level: 'silent' });
  }

  /** Runs the loop in the background until stop(); does nothing while it runs. Never throws. */
  start(): void {
    if (this.loop) return;
    this.stopping = false;
    this.loop = this.run().finally(() => (this.loop = undefined));
  }

  /**
   * Stops receiving; messages a receive returns after the stop are made visible again at once; waits for the
   * handlers in hand to finish and their messages to be deleted or hidden again. Resolves when idle; never
   * rejects; idempotent: safe to call from a SIGTERM handler.
   */
  stop(): Promise<void> {
    this.stopping = true;
    this.wake?.abort();
    return this.loop ?? Promise.resolve();
  }

  /**
   * Processes until the queue is drained: a receive issued after the call returns nothing, nothing is in hand,
   * and no message this worker hid again becomes visible within `settleMs` (default: the visibility timeout, so
   * failing messages' back-offs are waited for, long retryLater delays are not). Starts the loop if it is not
   * running and then stops it again. Resolves with this drain's counts.
   * @throws STORAGE_UNAVAILABLE, reason 'drainTimeout' when not drained within `timeoutMs` (default 60000),
   * reason 'stopped' when stop() ends the loop first.
   */
  async drain(opts: { timeoutMs?: number; settleMs?: number } = {}): Promise<Omit<Counts, 'failed'>> {
    const before = { ...this.counts };
    const settleMs = opts.settleMs ?? this.o.visibilityTimeoutSeconds * 1000;
    const timeoutMs = opts.timeoutMs ?? 60_000;
    const deadline = Date.now() + timeoutMs;
    const sinceReceive = this.receives;
    const ownLoop = !this.loop;
    this.start();
    try {
      // Polls the loop's state (no I/O): simpler than a wake-up protocol, and 20 ms is nothing to a drain.
      while (!(this.idleAt > sinceReceive && this.inFlight.size === 0 && !this.dueWithin(settleMs))) {
        const fail = (reason: ReasonName, what: string): TablegraphError =>
          new TablegraphError(ErrorCode.STORAGE_UNAVAILABLE, `Queue '${this.o.queue}' ${what}.`, { reason, ...this.counts });
        if (this.stopping || !this.loop) throw fail('stopped', 'stopped before it was drained');
        if (Date.now() > deadline) throw fail('drainTimeout', `was not drained within ${timeoutMs} ms`);
        await delay(20);
      }
    } finally {
      if (ownLoop) await this.stop();
    }
    const since = (k: keyof Counts): number => this.counts[k] - before[k];
    return { handled: since('handled'), poisoned: since('poisoned'), retried: since('retried') };
  }

  /** Counts since construction, recent lags (ms from enqueue to delete), whether the loop runs, the last error. */
  stats(): QueueWorkerStats {
    const running = !!this.loop && !this.stopping;
    const e = this.lastError;
    return { ...this.counts, lag: this.lag.summary(), running, ...(e && { lastError: e.message, lastErrorAt: e.at, lastErrorCode: e.code }) };
  }

  private async run(): Promise<void> {
    const { queues, queue, idleBackoffMs } = this.o;
    let idleMs = idleBackoffMs.min;
    let ready = false;
    while (!this.stopping) {
      try {
        if (!ready) await Promise.all([queues.ensureQueue(queue), queues.ensureQueue(this.o.poisonQueue)]);
        ready = true;
        const free = this.o.concurrency - this.inFlight.size;
        if (free <= 0) {
          await this.sleep(MAX_TIMER_MS); // a finishing handler or stop() wakes it
          continue;
        }
        const seq = ++this.receives;
        const max = Math.min(this.o.batchSize, free);
        const visibilityTimeoutSeconds = this.o.visibilityTimeoutSeconds;
        const messages = await queues.receive(queue, { max, visibilityTimeoutSeconds });
        if (this.lastError?.receiving) this.lastError = undefined; // the queue answers again: that error is over
        if (this.stopping) {
          // Received after stop(): visible again at once for another worker (else back after the timeout).
          await Promise.all(messages.map((m) => queues.defer(queue, m, 0).catch(() => undefined)));
          break;
        }
        // drain() reads this: the latest receive found the queue empty with nothing in hand.
        this.idleAt = messages.length === 0 && this.inFlight.size === 0 ? seq : 0;
        if (messages.length > 0) {
          idleMs = idleBackoffMs.min;
          for (const m of messages) {
            const p: Promise<void> = this.process(m).finally(() => this.inFlight.delete(p) && this.wake?.abort());
            this.inFlight.add(p);
          }
          continue;
        }
      } catch (e) {
        // The SDK's retry policy already retried the call: back off and go on, never end the loop.
        this.log.warn({ err: e, queue }, `queue worker: receive failed: ${this.noteError(e, true)}`);
      }
      await this.sleep(idleMs);
      idleMs = Math.min(idleMs * 2, idleBackoffMs.max);
    }
    await Promise.all(this.inFlight);
  }

  /** One message, start to end; never rejects (errors are logged and counted). */
  private async process(m: ReceivedMessage): Promise<void> {
    const { queues, queue } = this.o;
    this.deferred.delete(m.id);
    if (m.dequeueCount > this.o.maxDequeueCount) return this.poison(m);
    const lease = queues.keepHidden(queue, m, this.o.visibilityTimeoutSeconds, (e) =>
      this.log.warn({ err: e, queue, messageId: m.id }, 'queue worker: could not renew the visibility timeout'),
    );
    let result: HandlerResult | undefined;
    let failure: unknown;
    try {
      result = await this.o.handle(m.text, { id: m.id, dequeueCount: m.dequeueCount, insertedOn: m.insertedOn });
      if (result?.kind !== 'done' && result?.kind !== 'retryLater' && result?.kind !== 'partly') failure = new Error('no HandlerResult returned');
    } catch (e) {
      failure = e;
    }
    const ref = { id: m.id, popReceipt: await lease.release() };
    try {
      if (failure === undefined && result?.kind === 'done') {
        await queues.delete(queue, ref);
        this.counts.handled++;
        this.lastErrors.delete(m.id);
        this.recordLag(m);
      } else if (failure === undefined && result?.kind === 'partly') {
        await this.partly(m, ref, result);
      } else if (failure === undefined && result?.kind === 'retryLater') {
        this.counts.retried++;
        const afterSeconds = Math.max(1, Math.ceil(result.afterMs / 1000));
        // A message told to wait (for a write to show, a re-key to end) is no faulty one: at the poison threshold a
        // fresh copy, its receives counted anew, takes its place.
        if (m.dequeueCount >= this.o.maxDequeueCount) await this.sendAgainFresh(m.text, ref, afterSeconds);
        else await this.hide(ref, afterSeconds);
      } else {
        await this.failed(m, ref, [failure], m.text);
      }
    } catch (e) {
      // The message reappears when its visibility timeout ends; handlers are idempotent, so that is safe.
      this.log.warn({ err: e, queue, messageId: m.id }, `queue worker: no delete or hide: ${this.noteError(e)}`);
    }
  }

  /**
   * A message the handler failed on (`errors`: one, or each failed item of a batch, each counted): it comes back as
   * `text` after an exponential back-off per delivery.
   */
  private async failed(m: ReceivedMessage, ref: { id: string; popReceipt: string }, errors: unknown[], text: string): Promise<void> {
    const { queue } = this.o;
    for (const failure of errors) {
      this.counts.failed++;
      this.lastErrors.delete(m.id); // re-inserted as the newest; the oldest goes past the bound
      this.lastErrors.set(m.id, this.noteError(failure));
      if (this.lastErrors.size > MAX_REMEMBERED_ERRORS) this.lastErrors.delete(this.lastErrors.keys().next().value!);
      this.log.warn({ err: failure, queue, messageId: m.id, dequeueCount: m.dequeueCount }, 'queue worker: handler failed');
    }
    if (errors.every(isTransientStorageError) && m.dequeueCount >= this.o.maxDequeueCount) {
      // Storage failing for now (no answer, throttling) is no fault of the message: rather than the poison queue
      // at its next receive, a fresh copy (its receives counted anew) shown after a visibility timeout. Handlers
      // are idempotent, so the copy is as good as the original.
      await this.sendAgainFresh(text, ref, this.o.visibilityTimeoutSeconds);
      this.counts.retried++;
    }
    // Exponential back-off per delivery, capped so a failing message is retried at least once per timeout.
    else await this.hide(ref, Math.min(this.o.visibilityTimeoutSeconds, 2 ** (m.dequeueCount - 1)), text === m.text ? undefined : text);
  }

  /** A message done in part (HandlerResult `partly`). */
  private async partly(m: ReceivedMessage, ref: { id: string; popReceipt: string }, result: Extract<HandlerResult, { kind: 'partly' }>): Promise<void> {
    if (result.fresh) await this.sendPart(result.fresh.text, Math.ceil(result.fresh.afterMs / 1000));
    if (result.failed.length > 0) return this.failed(m, ref, result.failed, result.rest);
    this.counts.retried++;
    const afterSeconds = Math.max(1, Math.ceil(result.afterMs / 1000));
    if (m.dequeueCount >= this.o.maxDequeueCount) await this.sendAgainFresh(result.rest, ref, afterSeconds);
    else await this.hide(ref, afterSeconds, result.rest);
  }

  /** Replaces a message by `text` shown after `delaySeconds` (s), whose receives are counted from 0. */
  private async sendAgainFresh(text: string, ref: { id: string; popReceipt: string }, delaySeconds: number): Promise<void> {
    await this.sendPart(text, delaySeconds);
    await this.o.queues.delete(this.o.queue, ref);
  }

  /** Sends `text` as a new message shown after `delaySeconds` (s, at most 7 days), remembered for drain(). */
  private async sendPart(text: string, delaySeconds: number): Promise<void> {
    const s = Math.min(Math.max(0, delaySeconds), MAX_VISIBILITY_SECONDS);
    const copy = await this.o.queues.send(this.o.queue, text, { visibilityDelaySeconds: s });
    this.deferred.set(copy.id, Date.now() + s * 1000);
  }

  /** Sends `{ message, id, dequeueCount, error?, poisonedAt }` to the poison queue, then deletes the original. */
  private async poison(m: ReceivedMessage): Promise<void> {
    const { queues, queue, poisonQueue } = this.o;
    try {
      await queues.send(poisonQueue, poisonEntry(m, this.lastErrors.get(m.id)));
      await queues.delete(queue, m);
      this.counts.poisoned++;
      this.lastErrors.delete(m.id);
      this.log.error({ queue, poisonQueue, messageId: m.id, dequeueCount: m.dequeueCount }, 'queue worker: poisoned');
    } catch (e) {
      this.log.warn({ err: e, queue, messageId: m.id }, `queue worker: could not poison: ${this.noteError(e)}`);
    }
  }

  /**
   * Hides the message for `seconds` (at most the service's 7 days), its text replaced by `text` when given, and
   * remembers when it is due again.
   */
  private async hide(ref: { id: string; popReceipt: string }, seconds: number, text?: string): Promise<void> {
    const s = Math.min(seconds, MAX_VISIBILITY_SECONDS);
    const hidden = this.o.queues.defer(this.o.queue, ref, s, text);
    // When the defer fails, the message still stays hidden until its visibility timeout ends.
    const due = await hidden.then(
      () => s,
      () => this.o.visibilityTimeoutSeconds,
    );
    this.deferred.set(ref.id, Date.now() + due * 1000);
    await hidden;
  }

  /** True if a message this worker hid again becomes visible within `ms`; forgets long-overdue ones. */
  private dueWithin(ms: number): boolean {
    const now = Date.now();
    const grace = Math.max(ms, 2000); // overdue longer: another consumer took the message, or it is gone
    for (const [id, due] of this.deferred) if (due < now - grace) this.deferred.delete(id);
    return [...this.deferred.values()].some((due) => due <= now + ms);
  }

  /** Waits `ms` at most: stop() and finishing handlers wake it early. */
  private async sleep(ms: number): Promise<void> {
    if (this.stopping) return;
    this.wake = new AbortController();
    await delay(ms, undefined, { signal: this.wake.signal }).catch(() => undefined);
  }

  /** Lag from the caller's enqueue time, else the service's insertedOn (whole seconds). */
  private recordLag(m: ReceivedMessage): void {
    const parsed = (): number | undefined => {
      try {
        return this.o.enqueuedAt?.(m.text);
      } catch {
        return undefined; // an unparsable text still has insertedOn
      }
    };
    const at = parsed() ?? m.insertedOn?.getTime();
    if (at !== undefined && Number.isFinite(at)) this.lag.record(Date.now() - at);
  }

  /** Keeps the error for stats(); `receiving`: a failed receive, forgotten once a receive succeeds. */
  private noteError(e: unknown, receiving = false): string {
    const message = e instanceof Error ? e.message : String(e);
    this.lastError = { message, at: Date.now(), code: isTablegraphError(e) ? e.code : 'ERROR', receiving };
    return message;
  }
}

/** The poison entry's JSON; the original text is cut (messageTruncated: true) only if it would not fit 64 KiB. */
function poisonEntry(m: ReceivedMessage, error: string | undefined): string {
  const poisonedAt = new Date().toISOString();
  const entry = { message: m.text, id: m.id, dequeueCount: m.dequeueCount, error: error?.slice(0, 2000), poisonedAt };
  let json = JSON.stringify(entry);
  for (let size = Buffer.byteLength(json); size > MAX_MESSAGE_BYTES; size = Buffer.byteLength(json)) {
    // Shrinks in proportion to the overshoot, from the text cut last time, so it always converges.
    const keep = Math.max(0, Math.floor((entry.message.length * MAX_MESSAGE_BYTES) / size) - 256);
    Object.assign(entry, { message: entry.message.slice(0, keep), messageTruncated: true });
    json = JSON.stringify(entry);
  }
  return json;
}
