/**
 * The async iterator a subscription field returns (graphql-js `subscribe` reads it): events pushed by the change
 * poller wait here until the transport takes them. A subscriber that falls `maxBuffered` events behind is ended with
 * an error rather than buffered without bound: the error comes as a last event (`failed(error)`), which the field's
 * resolver throws, so the client gets it as a GraphQL error with its code before the subscription completes.
 */
import { ErrorCode, TablegraphError } from '../errors';

/** Events one subscriber may have waiting (events). */
export const MAX_BUFFERED_EVENTS = 1000;

export class EventQueue<T> implements AsyncIterableIterator<T> {
  private readonly buffer: T[] = [];
  private readonly waiting: Array<{ resolve: (r: IteratorResult<T>) => void }> = [];
  private done = false;
  private failure?: unknown;

  /**
   * @param onEnd called once when the subscriber ends (returns, fails or falls behind): stop feeding it
   * @param failed the last event that carries an error to the subscriber
   */
  constructor(
    private readonly onEnd: () => void,
    private readonly failed: (error: unknown) => T,
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

  /** Ends the subscription with an error: a last event that carries it, after those already waiting. */
  fail(error: unknown): void {
    if (this.done) return;
    this.failure = error;
    this.finish();
    const next = this.waiting.shift();
    if (next) {
      this.failure = undefined;
      next.resolve({ value: this.failed(error), done: false });
    }
    for (const w of this.waiting.splice(0)) w.resolve({ value: undefined, done: true });
  }

  next(): Promise<IteratorResult<T>> {
    if (this.buffer.length > 0) return Promise.resolve({ value: this.buffer.shift()!, done: false });
    if (this.failure !== undefined) {
      const e = this.failure;
      this.failure = undefined;
      return Promise.resolve({ value: this.failed(e), done: false });
    }
    if (this.done) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => this.waiting.push({ resolve }));
  }

  return(): Promise<IteratorResult<T>> {
    this.finish();
    this.buffer.length = 0;
    for (const w of this.waiting.splice(0)) w.resolve({ value: undefined, done: true });
    return Promise.resolve({ value: undefined, done: true });
  }

  throw(error: unknown): Promise<IteratorResult<T>> {
    void this.return();
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
