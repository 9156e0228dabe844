/** The timers a store tells the time of each of its calls (`timeCalls`): the metrics' storage-latency histogram. */
import type { CallTimer, TimedOperation } from './storage-types';

export class CallTimers {
  private timers: CallTimer[] = [];

  /** Adds `timer`. @returns a function that removes it */
  add(timer: CallTimer): () => void {
    this.timers = [...this.timers, timer];
    return () => {
      this.timers = this.timers.filter((t) => t !== timer);
    };
  }

  /** Tells every timer one call's time (s). */
  time(operation: TimedOperation, seconds: number): void {
    for (const timer of this.timers) timer(operation, seconds);
  }
}
