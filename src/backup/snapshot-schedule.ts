/**
 * Scheduled snapshots (docs/backup.md): in a worker, once a minute, a snapshot is due when capture has begun and no
 * snapshot is usable (none started after capture's first pass: then at once, and after every pass until one is), when
 * a bulk write (`npm run load`) finished after the newest one started, or when the newest finished `everyMs` ago. A
 * check reads three small documents, however many snapshots are kept: the newest snapshot's pointer, the latest pass
 * and the last bulk write. One worker at a time takes it, under the blob lease `snapshots/leader` (leader-lease.ts),
 * paced under the build budget; an unfinished snapshot of the schema (a worker killed in it) is resumed. After each,
 * the snapshots and passes past the retention expire (retention.ts). Stopping stops the snapshot under way after its
 * page (its progress is kept: the next one resumes it).
 */
import type { Logger } from '../log';
import type { SnapshotManifest } from './backup-format';
import { newestSnapshot, readJsonBlob, SNAPSHOTS, type SnapshotPointer } from './backup-blobs';
import { lastBulkWrite, type BulkWrite } from './bulk-writes';
import { LATEST_PASS, type LatestPass } from './change-format';
import { asLeader } from './leader-lease';
import { PeriodicJob } from './periodic-job';
import { expireSnapshots } from './retention';
import { SnapshotStopped, takeSnapshot, type SnapshotOptions } from './snapshot';

/** How often a worker checks whether a snapshot is due (ms). */
const CHECK_MS = 60_000;

export interface SnapshotScheduleOptions extends SnapshotOptions {
  /** Time between two snapshots (ms). */
  everyMs: number;
  /** How long snapshots are kept (days): expired after each snapshot. */
  retentionDays: number;
  log?: Logger;
}

/** What a due check reads: the newest complete snapshot, the latest capture pass, the bulk write that finished last. */
export interface ScheduleState {
  newest?: Pick<SnapshotPointer, 'startedAt' | 'finishedAt'>;
  latest?: LatestPass;
  bulk?: Pick<BulkWrite, 'finishedAt'>;
}

/** Whether a snapshot a restore can start from exists: one started after capture began (restorable-window.ts). */
export function usableSnapshotKnown(state: ScheduleState): boolean {
  return state.newest !== undefined && state.latest !== undefined && Date.parse(state.newest.startedAt) >= Date.parse(state.latest.firstPassAt);
}

/**
 * Whether a snapshot is due at `now` (ms; see the file comment). Capture off (no pass): every `everyMs` after the
 * newest, the first one taken by hand.
 */
export function snapshotDue(state: ScheduleState, everyMs: number, now: number): boolean {
  const { newest, latest, bulk } = state;
  if (!latest) return newest !== undefined && now - Date.parse(newest.finishedAt) >= everyMs;
  if (!newest || !usableSnapshotKnown(state)) return true;
  if (bulk?.finishedAt !== undefined && bulk.finishedAt > newest.startedAt) return true;
  return now - Date.parse(newest.finishedAt) >= everyMs;
}

/** The scheduled snapshots of one worker (periodic-job.ts). */
export class SnapshotSchedule {
  private readonly job: PeriodicJob<SnapshotManifest | undefined, number>;
  /** Whether the last check found a usable snapshot. */
  private usable = false;
  /** Aborted by stop(): the snapshot under way stops after its page. */
  private readonly stopping = new AbortController();

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
   * Told after a capture pass: while no usable snapshot is known, the check runs now, not at its next minute — so a
   * new deployment is restorable from its first pass on. Its failure is logged, as a scheduled check's.
   */
  afterPass(): void {
    if (this.usable) return;
    void this.runOnce().catch((err: unknown) =>
      this.opts.log?.warn({ err }, 'backup: a snapshot after the first capture pass failed; the next check resumes it'),
    );
  }

  /**
   * Takes a snapshot now when one is due at `now` (ms since the epoch; default the clock), and this worker leads.
   * @returns its manifest; undefined when none is due, or another worker takes it
   * @throws what takeSnapshot or expireSnapshots throw
   */
  runOnce(now?: number): Promise<SnapshotManifest | undefined> {
    return this.job.runOnce(now);
  }

  /** Stops: no snapshot follows; the one under way stops after its page (its progress kept: the next resumes it). */
  stop(): Promise<void> {
    this.stopping.abort();
    return this.job.stop();
  }

  private async ifDue(now: number): Promise<SnapshotManifest | undefined> {
    const { blobs, container, everyMs, log } = this.opts;
    const due = async () => {
      const [newest, latest, bulk] = await Promise.all([
        newestSnapshot(blobs, container),
        readJsonBlob<LatestPass>(blobs, container, LATEST_PASS),
        lastBulkWrite(blobs, container),
      ]);
      const state = { newest, latest, bulk };
      this.usable = usableSnapshotKnown(state);
      return snapshotDue(state, everyMs, now);
    };
    if (!(await due())) return undefined;
    const led = await asLeader(blobs, container, `${SNAPSHOTS}/leader`, async () => {
      // Asked again under the lease: another worker may have taken it meanwhile.
      if (!(await due())) return undefined;
      log?.info({ container }, 'backup: a scheduled snapshot is due: taking it');
      let manifest: SnapshotManifest;
      try {
        manifest = await takeSnapshot({ ...this.opts, signal: this.stopping.signal });
      } catch (e) {
        if (!(e instanceof SnapshotStopped)) throw e;
        log?.info({ snapshot: e.id }, 'backup: the snapshot under way stopped with the worker; the next one resumes it');
        return undefined;
      }
      const expired = await expireSnapshots({ blobs, container, retentionDays: this.opts.retentionDays });
      log?.info({ snapshot: manifest.id, rows: manifest.rows, expired }, 'backup: scheduled snapshot complete');
      return manifest;
    });
    return led.led ? led.value : undefined;
  }
}
