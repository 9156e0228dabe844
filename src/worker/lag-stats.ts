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

/** Lags kept at most by default: 5 minutes at 400 messages a second (two Float64Arrays, about 1.9 MB). */
export const DEFAULT_LAG_CAPACITY = 120_000;

/**
 * A bounded ring buffer of the last `capacity` lags (ms), each with when it was recorded: memory stays constant
 * however long the worker runs, and the summary covers only a recent time window — an hour after a burst, the
 * burst's lags no longer show. The default capacity holds the whole default window at up to 400 messages a second;
 * past that, the summary covers the newest `capacity` lags of the window (`count` says how many).
 */
export class LagStats {
  private readonly at: Float64Array;
  private readonly ms: Float64Array;
  private size = 0;
  private next = 0;
  private lastAt?: number;

  /**
   * @param capacity lags kept (default DEFAULT_LAG_CAPACITY); @param windowMs how far back the summary looks (ms,
   *   default 300000); @param now the clock (ms since the epoch)
   * @throws RangeError unless capacity is a positive integer and windowMs positive
   */
  constructor(
    private readonly capacity = DEFAULT_LAG_CAPACITY,
    private readonly windowMs = 300_000,
    private readonly now: () => number = Date.now,
  ) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`capacity must be ≥ 1, not ${capacity}`);
    if (!(windowMs > 0)) throw new RangeError(`windowMs must be > 0, not ${windowMs}`);
    this.at = new Float64Array(capacity);
    this.ms = new Float64Array(capacity);
  }

  /** Records one lag in ms; a negative lag (clock skew between writer and worker) counts as 0. */
  record(ms: number): void {
    const at = this.now();
    this.at[this.next] = at;
    this.ms[this.next] = Number.isFinite(ms) ? Math.max(0, ms) : 0;
    this.next = (this.next + 1) % this.capacity;
    this.size = Math.min(this.size + 1, this.capacity);
    this.lastAt = at;
  }

  /** Nearest-rank p50 and p99, and the maximum, of the lags recorded within the window. */
  summary(): LagSummary {
    const since = this.now() - this.windowMs;
    const recent: number[] = [];
    for (let i = 0; i < this.size; i++) if (this.at[i] >= since) recent.push(this.ms[i]);
    const sorted = Float64Array.from(recent).sort();
    const rank = (p: number): number => (sorted.length === 0 ? 0 : sorted[Math.ceil((p / 100) * sorted.length) - 1]);
    const out: LagSummary = {
      count: sorted.length,
      p50Ms: rank(50),
      p99Ms: rank(99),
      maxMs: sorted.length ? sorted[sorted.length - 1] : 0,
      windowMs: this.windowMs,
    };
    if (this.lastAt !== undefined) out.lastAt = this.lastAt;
    return out;
  }
}
