/**
 * What a storage call is aborted by — its timeout, or every caller of a shared read having left — as cheap as a flag
 * when nobody asks for more. The Azure SDK takes an AbortSignal: `signal` makes one on first use. The lean readers
 * (shared-key-rest.ts, turn-queries.ts) listen with `onAbort` instead: on a point query, an AbortController and the
 * EventTarget listeners of its signal cost more than the parsing of the answer (measured: `npm run bench -- peer`).
 */

/** Something that may abort: listened to by the lean readers. */
export interface Abortable {
  /** Whether it has aborted. */
  readonly aborted: boolean;
  /**
   * Calls `listener` once when it aborts; at once when it has already.
   * @returns a function that stops listening (nothing once it has aborted)
   */
  onAbort(listener: () => void): () => void;
}

/**
 * An Abortable aborted by `abort()`.
 * @example
 *   const latch = new AbortLatch(() => new Error('timed out'));
 *   const timer = setTimeout(() => latch.abort(), 5000);
 *   await client.getEntity(pk, rk, { abortSignal: latch.signal }); // the SDK's call, aborted with the latch
 *   clearTimeout(timer);
 */
export class AbortLatch implements Abortable {
  aborted = false;
  /** Listeners to call on abort, in the order they came; undefined once they were called. */
  private listeners: Array<() => void> | undefined;
  private controller?: AbortController;

  /** @param reason what an AbortSignal made by `signal` is aborted with (the SDK maps it: storage-errors.ts) */
  constructor(private readonly reason?: () => unknown) {}

  /** Aborts: every listener is called, and the signal, if one was made, is aborted. Once; later calls do nothing. */
  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    const listeners = this.listeners;
    this.listeners = undefined;
    this.controller?.abort(this.reason?.());
    for (const listener of listeners ?? []) listener();
  }

  onAbort(listener: () => void): () => void {
    if (this.aborted) {
      listener();
      return () => undefined;
    }
    (this.listeners ??= []).push(listener);
    return () => {
      const i = this.listeners?.indexOf(listener) ?? -1;
      if (i >= 0) this.listeners!.splice(i, 1);
    };
  }

  /** An AbortSignal that aborts with this latch (made on first use; already aborted when the latch is). */
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.aborted) this.controller.abort(this.reason?.());
    }
    return this.controller.signal;
  }

  /** The signal, if `signal` made one: the SDK's calls of this latch were sent with it. */
  get madeSignal(): AbortSignal | undefined {
    return this.controller?.signal;
  }
}
