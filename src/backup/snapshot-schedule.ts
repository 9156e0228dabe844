/**
 * Scheduled snapshots (docs/backup.md): in a worker, once a minute, a snapshot is due when the newest complete one
 * finished `everyMs` ago or more — or, none yet, when capture began that long ago (the first is taken by hand, `npm
 * run backup -- snapshot`, or then). One worker at a time takes it, under the blob lease `snapshots/leader`
 * (leader-lease.ts), paced under the build budget; an unfinished snapshot of the schema (a worker killed in it) is
 * resumed. After each, the snapshots and passes past the retention expire (retention.ts). Stopping waits for the
 * snapshot under way (its progress is kept: the next one resumes it).
 */
import type { Logger } from '../log';
import type { SnapshotManifest } from './backup-format';
import { listSnapshots, readJsonBlob, SNAPSHOTS } from './backup-blobs';
import { LATEST_PASS, type LatestPass } from './change-format';
import { asLeader } from './leader-lease';
import { PeriodicJob } from './periodic-job';
import { expireSnapshots } from './retention';
import { takeSnapshot, type SnapshotOptions } from './snapshot';

/** How often a worker checks whether a snapshot is due (ms). */
const CHECK_MS = 60_000;

export interface SnapshotScheduleOptions extends SnapshotOptions {
  /** Time between two snapshots (ms). */
  everyMs: number;
  /** How long snapshots are kept (days): expired after each snapshot. */
  retentionDays: number;
  log?: Logger;
}

/** Whether a snapshot is due at `now` (ms): the newest finished `everyMs` ago, or none and capture began that long ago. */
export function snapshotDue(newest: SnapshotManifest | undefined, latest: LatestPass | undefined, everyMs: number, now: number): boolean {
  if (newest) return now - Date.parse(newest.finishedAt) >= everyMs;
  return latest !== undefined && now - Date.parse(latest.firstPassAt) >= everyMs;
}

/** The scheduled snapshots of one worker (periodic-job.ts). */
export class SnapshotSchedule {
  private readonly job: PeriodicJob<SnapshotManifest | undefined, number>;

  constructor(private readonly opts: SnapshotScheduleOptions) {
    this.job = new PeriodicJob((now) => this.ifDue(now ?? Date.now()), {
      intervalMs: CHECK_MS,
      log: opts.log,
      failure: 'backup: a scheduled snapshot failed; the next check resumes it',
    });
  }

  start(): void {
    this.job.start();
  }

  /**
   * Takes a snapshot now when one is due at `now` (ms since the epoch; default the clock), and this worker leads.
   * @returns its manifest; undefined when none is due, or another worker takes it
   * @throws what takeSnapshot or expireSnapshots throw
   */
  runOnce(now?: number): Promise<SnapshotManifest | undefined> {
    return this.job.runOnce(now);
  }

  /** Stops: no snapshot follows; the one under way ends first. */
  stop(): Promise<void> {
    return this.job.stop();
  }

  private async ifDue(now: number): Promise<SnapshotManifest | undefined> {
    const { blobs, container, everyMs, log } = this.opts;
    const due = async () =>
      snapshotDue((await listSnapshots(blobs, container)).at(-1), await readJsonBlob<LatestPass>(blobs, container, LATEST_PASS), everyMs, now);
    if (!(await due())) return undefined;
    const led = await asLeader(blobs, container, `${SNAPSHOTS}/leader`, async () => {
      // Asked again under the lease: another worker may have taken it meanwhile.
      if (!(await due())) return undefined;
      log?.info({ container }, 'backup: a scheduled snapshot is due: taking it');
      const manifest = await takeSnapshot(this.opts);
      const expired = await expireSnapshots({ blobs, container, retentionDays: this.opts.retentionDays });
      log?.info({ snapshot: manifest.id, rows: manifest.rows, expired }, 'backup: scheduled snapshot complete');
      return manifest;
    });
    return led.led ? led.value : undefined;
  }
}
