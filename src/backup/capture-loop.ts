/**
 * Runs capture passes (capture-pass.ts) every `intervalMs` in a worker, one deployment-wide at a time: a pass runs
 * under a blob lease (`changes/leader`, leader-lease.ts), and a worker that cannot take the lease skips
 * its turn — another worker's pass is under way. A pass that fails is logged and the next one reads the same changes
 * again (nothing is deleted before its segments are durable): periodic-job.ts. Stopping waits for the pass under way.
 */
import { CHANGES } from './change-format';
import { PeriodicJob } from './periodic-job';
import { runCapturePass, type CapturePassOptions, type PassResult } from './capture-pass';
import { asLeader } from './leader-lease';

/** The lease blob of the worker that runs passes (a tenant's purge takes it too: tenant-purge.ts). */
export const LEADER = `${CHANGES}/leader`;

export interface CaptureLoopOptions extends CapturePassOptions {
  /** Time between the end of a pass and the start of the next (ms). */
  intervalMs: number;
  /** Told after each pass that ran (metrics). */
  onPass?: (result: PassResult) => void;
}

/** The capture passes of one worker. */
export class CaptureLoop {
  private readonly job: PeriodicJob<PassResult | undefined>;

  constructor(private readonly opts: CaptureLoopOptions) {
    this.job = new PeriodicJob(() => this.leading(), {
      intervalMs: opts.intervalMs,
      log: opts.log,
      failure: 'backup: a capture pass failed; the next one copies the same changes',
    });
  }

  /** Starts the passes: the first one now. */
  start(): void {
    this.job.start();
  }

  /**
   * Runs a pass now (after the one under way, if any), as the leader.
   * @returns what it did; undefined when another worker holds the lease
   * @throws what runCapturePass throws
   */
  runOnce(): Promise<PassResult | undefined> {
    return this.job.runOnce();
  }

  /** Stops: no pass follows; the one under way ends first. */
  stop(): Promise<void> {
    return this.job.stop();
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
    this.opts.onPass?.(result);
    if (result.latest.changes > 0 || result.trimmed > 0)
      log?.debug({ changes: result.latest.changes, trimmed: result.trimmed, lagP99Ms: result.latest.lagP99Ms }, 'backup: capture pass');
    return result;
  }
}
