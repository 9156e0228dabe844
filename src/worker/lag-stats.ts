/**
 * How far the worker runs behind the writes: the lag of a fan-out message is the time from its enqueueing to
 * the moment its derived entities were reconciled and it was deleted (the guide's "Eventually consistent
 * transactions pattern": this is the window in which an inter-partition index is stale).
 */

/** Percentiles over the lags of the recent window. All ms; zeros when nothing was recorded in it. */
export interface LagSummary {
  /** Lags in the window (at most the buffer's capacity). */
  count: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** The window the percentiles cover: lags recorded in the last `windowMs` ms. */
  windowMs: number;
  /** When the last lag was recorded, ms since the epoch (even if before the window). */
  lastAt?: number;
}

/**
 * A bounded ring buffer of the last `capacity` lags (ms), each with when it was recorded: memory stays constant
 * however long the worker runs, and the summary covers only a recent time window — an hour after a burst, the
 * burst's lags no longer show.
 */
export class LagStats {
  private readonly samples: Array<{ at: number; ms: number }> = [];
  private next = 0;
  private lastAt?: number;

  /**
   * @param capacity lags kept (default 1000); @param windowMs how far back the summary looks (ms, default 300000)
   * @param now the clock (ms since the epoch)
   * @throws RangeError unless capacity is a positive integer and windowMs positive
   */
  constructor(
    private readonly capacity = 1000,
    private readonly windowMs = 300_000,
    private readonly now: () => number = Date.now,
  ) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`capacity must be ≥ 1, not ${capacity}`);
    if (!(windowMs > 0)) throw new RangeError(`windowMs must be > 0, not ${windowMs}`);
  }

  /** Records one lag in ms; a negative lag (clock skew between writer and worker) counts as 0. */
  record(ms: number): void {
    const sample = { at: this.now(), ms: Number.isFinite(ms) ? Math.max(0, ms) : 0 };
    if (this.samples.length < this.capacity) this.samples.push(sample);
    else this.samples[this.next] = sample;
    this.next = (this.next + 1) % this.capacity;
    this.lastAt = sample.at;
  }

  /** Nearest-rank p50 and p99, and the maximum, of the lags recorded within the window. */
  summary(): LagSummary {
    const since = this.now() - this.windowMs;
    const sorted = this.samples.filter((s) => s.at >= since).map((s) => s.ms).sort((a, b) => a - b);
    const rank = (p: number): number => (sorted.length === 0 ? 0 : sorted[Math.ceil((p / 100) * sorted.length) - 1]);
    const out: LagSummary = { count: sorted.length, p50Ms: rank(50), p99Ms: rank(99), maxMs: sorted.at(-1) ?? 0, windowMs: this.windowMs };
    if (this.lastAt !== undefined) out.lastAt = this.lastAt;
    return out;
  }
}
