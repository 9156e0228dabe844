/**
 * How far the worker runs behind the writes: the lag of a fan-out message is the time from its enqueueing to
 * the moment its derived entities were reconciled and it was deleted (the guide's "Eventually consistent
 * transactions pattern": this is the window in which an inter-partition index is stale).
 */

/** Percentiles over the lags held. All ms; zeros when nothing was recorded. */
export interface LagSummary {
  /** Lags held (at most the buffer's capacity). */
  count: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** When the last lag was recorded, ms since the epoch. */
  lastAt?: number;
}

/**
 * A bounded ring buffer of the last `capacity` lags (ms): memory stays constant however long the worker runs,
 * and the summary describes recent behaviour rather than the whole history.
 */
export class LagStats {
  private readonly samples: number[] = [];
  private next = 0;
  private lastAt?: number;

  /** @param capacity lags kept (default 1000); throws RangeError unless a positive integer. */
  constructor(private readonly capacity = 1000) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`capacity must be ≥ 1, not ${capacity}`);
  }

  /** Records one lag in ms; a negative lag (clock skew between writer and worker) counts as 0. */
  record(ms: number): void {
    const lag = Number.isFinite(ms) ? Math.max(0, ms) : 0;
    if (this.samples.length < this.capacity) this.samples.push(lag);
    else this.samples[this.next] = lag;
    this.next = (this.next + 1) % this.capacity;
    this.lastAt = Date.now();
  }

  /** Nearest-rank p50 and p99, and the maximum, of the lags held. */
  summary(): LagSummary {
    const sorted = [...this.samples].sort((a, b) => a - b);
    const rank = (p: number): number => (sorted.length === 0 ? 0 : sorted[Math.ceil((p / 100) * sorted.length) - 1]);
    const out: LagSummary = { count: sorted.length, p50Ms: rank(50), p99Ms: rank(99), maxMs: sorted.at(-1) ?? 0 };
    if (this.lastAt !== undefined) out.lastAt = this.lastAt;
    return out;
  }
}
