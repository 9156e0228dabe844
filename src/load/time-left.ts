/**
 * How long a long load has left. Not the average rate since the start carried on: a load slows as it goes — each
 * entity costs the service more as its tables grow — so that rate promises too early an end. The time taken so far is
 * fitted as a function of the work done (a curve when it bends upward), and the curve carried on to the end.
 */

/** A progress sample: when (ms, performance.now()), and how many were done. */
interface Sample {
  at: number;
  done: number;
}

/** Samples kept at most (one every 100 ms at most: ten minutes' worth before the oldest go). */
const MAX_SAMPLES = 6000;

/**
 * Estimates the time left from the work done so far and when.
 * @example
 * const left = new TimeLeft();
 * left.update(1200);       // rows (or entities) done so far, after each batch
 * left.seconds(32928);       // undefined at first, then e.g. 41.2
 */
export class TimeLeft {
  private readonly samples: Sample[] = [];
  private readonly startedAt: number;

  constructor(now: number = performance.now()) {
    this.startedAt = now;
    this.samples.push({ at: now, done: 0 });
  }

  /** Records that `done` (rows, entities: the unit of the total) are done at `now` (ms, performance.now()). */
  update(done: number, now: number = performance.now()): void {
    const last = this.samples[this.samples.length - 1];
    if (now - last.at < 100) {
      last.done = Math.max(last.done, done);
      return;
    }
    this.samples.push({ at: now, done });
    if (this.samples.length > MAX_SAMPLES) this.samples.splice(0, this.samples.length - MAX_SAMPLES);
  }

  /**
   * The seconds left to reach `total`: the time the work so far took, as a function of the work done, fitted and
   * carried on to `total` — a quadratic one when the work slows as it goes (each entity costs more as the tables grow),
   * a straight line otherwise — over the samples with work done (the last ten minutes' at most); undefined while that
   * cannot be told: under a
   * second of history, or nothing done.
   * @param total what is to be done in all (rows, entities)
   * @param now the time (ms, performance.now())
   */
  seconds(total: number, now: number = performance.now()): number | undefined {
    const latest = this.samples[this.samples.length - 1];
    if (latest.done >= total) return 0;
    const elapsed = now - this.startedAt;
    if (elapsed < 1000 || latest.done <= 0) return undefined;
    // A stall since the last sample counts: the time now is a sample of the work done.
    const points = [...this.samples.filter((s) => s.done > 0), { at: now, done: latest.done }];
    const fit = fitTime(points);
    if (!fit) return undefined;
    const at = (done: number) => fit.a + fit.b * done + fit.c * done * done;
    return Math.max(0, at(total) - at(latest.done)) / 1000;
  }
}

/**
 * The time (ms) as a function of the work done, least squares over `points`: `a + b·done + c·done²` with `c ≥ 0` (a
 * slowing), else a straight line; undefined without two distinct amounts of work.
 */
function fitTime(points: Sample[]): { a: number; b: number; c: number } | undefined {
  const n = points.length;
  const xs = points.map((p) => p.done);
  if (n < 2 || Math.min(...xs) === Math.max(...xs)) return undefined;
  // Scaled to the work done, so that the sums stay well within a double's precision.
  const scale = Math.max(...xs);
  const x = xs.map((v) => v / scale);
  const y = points.map((p) => p.at);
  const sum = (f: (i: number) => number) => points.reduce((acc, _p, i) => acc + f(i), 0);
  const [s1, sx, sx2, sx3, sx4] = [n, sum((i) => x[i]), sum((i) => x[i] ** 2), sum((i) => x[i] ** 3), sum((i) => x[i] ** 4)];
  const [sy, sxy, sx2y] = [sum((i) => y[i]), sum((i) => x[i] * y[i]), sum((i) => x[i] ** 2 * y[i])];
  const quadratic = n >= 3 ? solve3([s1, sx, sx2, sx, sx2, sx3, sx2, sx3, sx4], [sy, sxy, sx2y]) : undefined;
  if (quadratic && quadratic[2] >= 0 && quadratic.every(Number.isFinite)) {
    return { a: quadratic[0], b: quadratic[1] / scale, c: quadratic[2] / (scale * scale) };
  }
  const det = s1 * sx2 - sx * sx;
  const b = (s1 * sxy - sx * sy) / det;
  return { a: (sy - b * sx) / s1, b: b / scale, c: 0 };
}

/** The solution of a 3×3 linear system (row-major `m`), by Cramer's rule; undefined when it is singular. */
function solve3(m: number[], v: number[]): [number, number, number] | undefined {
  const det = (k: number[]) => k[0] * (k[4] * k[8] - k[5] * k[7]) - k[1] * (k[3] * k[8] - k[5] * k[6]) + k[2] * (k[3] * k[7] - k[4] * k[6]);
  const d = det(m);
  if (Math.abs(d) < 1e-12) return undefined;
  const column = (c: number) => m.map((value, i) => (i % 3 === c ? v[Math.floor(i / 3)] : value));
  return [det(column(0)) / d, det(column(1)) / d, det(column(2)) / d];
}

/**
 * A time left as a person reads it: `12s`, `3m05s`, `1h02m`; `…` for one that cannot be told yet — never a non-number.
 * @param seconds the time left (s), or undefined
 */
export function formatSeconds(seconds: number | undefined): string {
  if (seconds === undefined || !Number.isFinite(seconds) || seconds < 0) return '…';
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}
