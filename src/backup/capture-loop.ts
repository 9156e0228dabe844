/**
 * Runs capture passes (capture-pass.ts) every `intervalMs` in a worker, one deployment-wide at a time: a pass runs
 * under a blob lease (`changes/leader`, leader-lease.ts), and a worker that cannot take the lease skips
 * its turn — another worker's pass is under way. A pass that fails is logged and the next one reads the same changes
 * again (nothing is deleted before its segments are durable). Stopping waits for the pass under way.
 */
import { CHANGES, type LatestPass } from './change-format';
import { runCapturePass, type CapturePassOptions, type PassResult } from './capture-pass';
import { asLeader } from './leader-lease';

/** The lease blob of the worker that runs passes. */
const LEADER = `${CHANGES}/leader`;

export interface CaptureLoopOptions extends CapturePassOptions {
  /** Time between the end of a pass and the start of the next (ms). */
  intervalMs: number;
  /** Told after each pass that ran (metrics). */
  onPass?: (result: PassResult) => void;
}

/** The capture passes of one worker. */
export class CaptureLoop {
  private timer?: NodeJS.Timeout;
  private running?: Promise<PassResult | undefined>;
  private stopped = false;
  /** The last pass this worker ran, and the last error of one (absent after a pass succeeds). */
  last?: LatestPass;
  lastError?: unknown;

  constructor(private readonly opts: CaptureLoopOptions) {}

  /** Starts the passes: the first one now. */
  start(): void {
    this.schedule(0);
  }

  /**
   * Runs a pass now (after the one under way, if any), as the leader.
   * @returns what it did; undefined when another worker holds the lease
   * @throws what runCapturePass throws
   */
  async runOnce(): Promise<PassResult | undefined> {
    while (this.running) await this.running.catch(() => undefined);
    this.running = this.leading();
    try {
      return await this.running;
    } finally {
      this.running = undefined;
    }
  }

  /** Stops: no pass follows; the one under way ends first. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running?.catch(() => undefined);
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      void this.runOnce()
        .then(
          () => (this.lastError = undefined),
          (err: unknown) => {
            this.lastError = err;
            this.opts.log?.warn({ err }, 'backup: a capture pass failed; the next one copies the same changes');
          },
        )
        .finally(() => this.schedule(this.opts.intervalMs));
    }, delayMs);
    this.timer.unref();
  }

  /** One pass under the leader's lease (leader-lease.ts); undefined when another worker holds it. */
  private async leading(): Promise<PassResult | undefined> {
    const { blobs, container, log } = this.opts;
    const led = await asLeader(blobs, container, LEADER, () => runCapturePass(this.opts));
    if (!led.led) {
      log?.debug('backup: another worker runs the capture pass');
      return undefined;
    }
    const result = led.value;
    this.last = result.latest;
    this.opts.onPass?.(result);
    if (result.latest.changes > 0 || result.trimmed > 0)
      log?.debug({ changes: result.latest.changes, trimmed: result.trimmed, lagP99Ms: result.latest.lagP99Ms }, 'backup: capture pass');
    return result;
  }
}
