/**
 * A job a worker runs over and over (a capture pass, a snapshot check): the next run `intervalMs` after the end of the
 * one before, one at a time in the process; a run that fails is logged and the next one comes all the same. Stopping
 * waits for the run under way.
 */
import type { Logger } from '../log';

export interface PeriodicJobOptions {
  /** Time from the end of a run to the start of the next (ms). */
  intervalMs: number;
  log?: Logger;
  /** What the log says when a run fails (the error beside it). */
  failure: string;
}

/** One job's runs in one process; `A`: what a run asked for by hand is given (scheduled runs are given nothing). */
export class PeriodicJob<T, A = never> {
  private timer?: NodeJS.Timeout;
  private running?: Promise<T>;
  private stopped = false;

  constructor(
    private readonly run: (arg?: A) => Promise<T>,
    private readonly opts: PeriodicJobOptions,
  ) {}

  /** Starts the runs: the first one now. */
  start(): void {
    this.schedule(0);
  }

  /**
   * Runs the job now, after the run under way if any.
   * @returns what the run returns
   * @throws what the run throws
   */
  async runOnce(arg?: A): Promise<T> {
    while (this.running) await this.running.catch(() => undefined);
    this.running = this.run(arg);
    try {
      return await this.running;
    } finally {
      this.running = undefined;
    }
  }

  /** Stops: no run follows; the one under way ends first. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running?.catch(() => undefined);
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      void this.runOnce()
        .catch((err: unknown) => this.opts.log?.warn({ err }, this.opts.failure))
        .finally(() => this.schedule(this.opts.intervalMs));
    }, delayMs);
    this.timer.unref();
  }
}
