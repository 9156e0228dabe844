/**
 * The async iterator a subscription field returns (graphql-js `subscribe` reads it): events pushed by the change
 * poller wait here until the transport takes them. A subscriber that falls `maxBuffered` events behind is ended with
 * an error rather than buffered without bound.
 */
import { ErrorCode, TablegraphError } from '../../errors';

/** Events one subscriber may have waiting (events). */
export const MAX_BUFFERED_EVENTS = 1000;

export class EventQueue<T> implements AsyncIterableIterator<T> {
  private readonly buffer: T[] = [];
  private readonly waiting: Array<{ resolve: (r: IteratorResult<T>) => void; reject: (e: unknown) => void }> = [];
  private done = false;
  private failure?: unknown;

  /** @param onEnd called once when the subscriber ends (returns, fails or falls behind): stop feeding it */
  constructor(
    private readonly onEnd: () => void,
    private readonly maxBuffered = MAX_BUFFERED_EVENTS,
  ) {}

  push(...events: T[]): void {
    if (this.done) return;
    for (const event of events) {
      const next = this.waiting.shift();
      if (next) next.resolve({ value: event, done: false });
      else this.buffer.push(event);
    }
    if (this.buffer.length > this.maxBuffered) {
      this.fail(
        new TablegraphError(ErrorCode.OVERLOADED, `The subscriber fell more than ${this.maxBuffered} events behind: subscribe again with the last cursor.`),
      );
    }
  }

  /** Ends the subscription with an error (its transport sends it to the client). */
  fail(error: unknown): void {
    if (this.done) return;
    this.failure = error;
    this.finish();
    for (const w of this.waiting.splice(0)) w.reject(error);
  }

  next(): Promise<IteratorResult<T>> {
    if (this.buffer.length > 0) return Promise.resolve({ value: this.buffer.shift()!, done: false });
    if (this.failure !== undefined) {
      const e = this.failure;
      this.failure = undefined;
      return Promise.reject(e);
    }
    if (this.done) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
  }

  return(): Promise<IteratorResult<T>> {
    this.finish();
    this.buffer.length = 0;
    for (const w of this.waiting.splice(0)) w.resolve({ value: undefined, done: true });
    return Promise.resolve({ value: undefined, done: true });
  }

  throw(error: unknown): Promise<IteratorResult<T>> {
    this.fail(error);
    return Promise.reject(error);
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  private finish(): void {
    if (this.done) return;
    this.done = true;
    this.onEnd();
  }
}
