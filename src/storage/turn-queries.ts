/**
 * Reads asked during one turn of the event loop, each distinct one sent once when the turn ends, its answer shared by
 * every caller that asked it. A read is sent after every one of its callers asked, so its answer is as fresh as a
 * read of each caller's own would be: a write acknowledged before any of them asked is in it. Many requests reading
 * one hot entity, or one hot page of a range, at once then cost one storage call. Used by point-reader.ts and
 * range-reader.ts; no I/O of its own.
 */

import { AbortLatch, type Abortable } from './abort-latch';

/** Sends one read (`request`), to be aborted by `abort` (once every caller has left); its answer, shared as it is. */
export type SendRead<R, A> = (request: R, abort: Abortable) => Promise<A>;

export class TurnQueries<R, A> {
  /** Reads asked during this turn of the event loop, not sent yet, by key. */
  private readonly asked = new Map<string, SharedRead<R, A>>();

  constructor(private readonly send: SendRead<R, A>) {}

  /**
   * A caller's read: `key` names it exactly (two requests with one key are the same read). The answer is shared by
   * all the callers of the key: a caller must not change it.
   * @throws an AbortError when `abort` aborts before the answer (the caller's timeout)
   */
  ask(key: string, request: R, abort: Abortable): Promise<A> {
    let shared = this.asked.get(key);
    if (!shared) {
      if (this.asked.size === 0) setImmediate(() => this.sendAsked());
      shared = new SharedRead(request);
      this.asked.set(key, shared);
    }
    return shared.join(abort);
  }

  /** Sends the reads asked during the turn that ended, each once. */
  private sendAsked(): void {
    const asked = [...this.asked.values()];
    this.asked.clear();
    for (const shared of asked) shared.settle(this.send(shared.request, shared.abort));
  }
}

/**
 * One read and the callers waiting for it: each leaves when its own Abortable aborts; the read is aborted once all
 * have left. A read of one caller (most of them) is sent with that caller's own Abortable, which aborts it exactly
 * then: no latch of its own is made for it.
 */
class SharedRead<R, A> {
  /** Made for a read of several callers, or once every caller has left before it was sent. */
  private latch?: AbortLatch;
  /** The first caller's Abortable, and how many callers joined in all (callers). */
  private first?: Abortable;
  private joined = 0;
  private waiting = 0;
  private readonly answer: Promise<A>;
  private resolve!: (answer: Promise<A>) => void;

  constructor(readonly request: R) {
    this.answer = new Promise((resolve) => (this.resolve = resolve));
    // A caller that left has stopped listening; a failure after all have left must not go unhandled.
    this.answer.catch(() => undefined);
  }

  /** What the read is sent with (asked once every caller has joined): aborted once every caller has left. */
  get abort(): Abortable {
    if (this.joined === 1 && this.first) return this.first;
    const latch = (this.latch ??= new AbortLatch());
    if (this.waiting === 0) latch.abort(); // nobody waits: every caller left, or none came with time left
    return latch;
  }

  /** The answer, to be given by settle(). */
  settle(answer: Promise<A>): void {
    this.resolve(answer);
  }

  /** A caller's wait for the answer. @throws an AbortError when `abort` aborts first, or what the read threw */
  join(abort: Abortable): Promise<A> {
    if (abort.aborted) return Promise.reject(abortError());
    this.waiting += 1;
    this.joined += 1;
    this.first ??= abort;
    return new Promise((resolve, reject) => {
      const stop = abort.onAbort(() => {
        if (--this.waiting === 0) (this.latch ??= new AbortLatch()).abort();
        reject(abortError());
      });
      this.answer.then(
        (answer) => {
          stop();
          resolve(answer);
        },
        (e: unknown) => {
          stop();
          reject(e);
        },
      );
    });
  }
}

/** What the SDK throws when a call is aborted, so that the caller maps it as it maps the SDK's (storage-errors.ts). */
function abortError(): Error {
  const e = new Error('The read was aborted (its time was up).');
  e.name = 'AbortError';
  return e;
}
