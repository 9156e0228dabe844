/**
 * Continuous backup in a worker process (docs/backup.md): its capture passes (src/backup/capture-loop.ts), when
 * TABLEGRAPH_BACKUP_CAPTURE is on, into the backup container (TABLEGRAPH_BACKUP_CONTAINER, on its own account when
 * TABLEGRAPH_BACKUP_CONNECTION_STRING names one).
 */
import { ErrorCode, TablegraphError } from '../errors';
import type { Logger } from '../log';
import type { Model } from '../model/types';
import { CaptureLoop, type CaptureLoopOptions } from '../backup/capture-loop';
import { recordBulkWrite } from '../backup/bulk-writes';
import { SnapshotSchedule } from '../backup/snapshot-schedule';
import type { BlobStore } from '../storage/blob-store';
import { backupBlobs } from './backup-account';
import type { Config } from './config';
import type { OpenStorage } from './open-storage';

/**
 * Continuous backup (on by default) keeps its copies in Blob storage: a process that writes with capture on, and no
 * Blob endpoint to copy to, would pile up change entities no pass ever copies or deletes. Checked at start-up.
 * @throws TablegraphError CONFIG_INVALID naming TABLEGRAPH_BACKUP_CAPTURE and what to set instead
 */
export function assertBackupReachable(config: Config, blobs: BlobStore): void {
  if (!config.backup.capture || backupBlobs(config, blobs).available()) return;
  throw new TablegraphError(
    ErrorCode.CONFIG_INVALID,
    'Continuous backup (TABLEGRAPH_BACKUP_CAPTURE, on by default) copies every write to Blob storage, and no Blob endpoint is configured: set TABLEGRAPH_BACKUP_CONNECTION_STRING, TABLEGRAPH_BLOB_CONNECTION_STRING or (with Microsoft Entra ID) TABLEGRAPH_BLOB_URL, or TABLEGRAPH_BACKUP_CAPTURE=false to run without it.',
    { errors: { TABLEGRAPH_BACKUP_CAPTURE: 'needs a Blob endpoint' } },
  );
}

/**
 * The worker's capture loop, not started; undefined when capture is off.
 * @param schemaHash the deployed schema's layout hash (each pass manifest records it)
 */
export function captureLoop(
  config: Config,
  storage: Pick<OpenStorage, 'store' | 'blobs'>,
  schema: { model: Model; schemaHash: string },
  log: Logger,
  hooks: Pick<CaptureLoopOptions, 'onPass' | 'onSegment'> = {},
): CaptureLoop | undefined {
  if (!config.backup.capture) return undefined;
  return new CaptureLoop({
    store: storage.store,
    blobs: backupBlobs(config, storage.blobs),
    container: config.backup.container,
    model: schema.model,
    tablePrefix: config.tablePrefix,
    schemaHash: schema.schemaHash,
    subscriptionRetentionMs: config.subscriptions.retentionMs,
    intervalMs: config.backup.captureIntervalMs,
    log: log.child({ component: 'backup' }),
    ...hooks,
  });
}

/**
 * The worker's scheduled snapshots (src/backup/snapshot-schedule.ts), not started; undefined with
 * TABLEGRAPH_BACKUP_SNAPSHOT_HOURS=0.
 * @param schema the deployed schema: its model, layout hash and SDL (each snapshot's manifest records them)
 */
export function snapshotSchedule(
  config: Config,
  storage: Pick<OpenStorage, 'store' | 'blobs'>,
  schema: { model: Model; schemaHash: string; sdl: string },
  log: Logger,
): SnapshotSchedule | undefined {
  if (config.backup.snapshotEveryMs === 0) return undefined;
  return new SnapshotSchedule({
    ...{ store: storage.store, blobs: backupBlobs(config, storage.blobs), entityBlobs: storage.blobs, container: config.backup.container },
    ...{ model: schema.model, tablePrefix: config.tablePrefix, schemaHash: schema.schemaHash, sdl: schema.sdl },
    ...{ entitiesPerSecond: config.builds.entitiesPerSecond, pageSize: config.builds.pageSize },
    everyMs: config.backup.snapshotEveryMs,
    retentionDays: config.backup.retentionDays,
    log: log.child({ component: 'backup' }),
  });
}

/** A worker's backup jobs: continuous backup's passes and the scheduled snapshots (either absent when off). */
export interface BackupJobs {
  capture?: CaptureLoop;
  snapshots?: SnapshotSchedule;
  start(): void;
  /** Waits for the pass or snapshot under way. */
  stop(): Promise<void>;
}

/** The backup jobs a worker runs beside its messages (see captureLoop, snapshotSchedule), not started. */
export function backupJobs(
  config: Config,
  storage: Pick<OpenStorage, 'store' | 'blobs'>,
  schema: { model: Model; schemaHash: string; sdl: string },
  log: Logger,
  hooks: Pick<CaptureLoopOptions, 'onPass' | 'onSegment'> = {},
): BackupJobs {
  const snapshots = snapshotSchedule(config, storage, schema, log);
  // After each pass, the schedule checks at once while no snapshot is usable: restorable from the first pass on.
  const onPass: CaptureLoopOptions['onPass'] = (result) => {
    hooks.onPass?.(result);
    snapshots?.afterPass();
  };
  const capture = captureLoop(config, storage, schema, log, { ...hooks, onPass });
  return {
    capture,
    snapshots,
    start() {
      capture?.start();
      snapshots?.start();
    },
    async stop() {
      await Promise.all([capture?.stop(), snapshots?.stop()]);
    },
  };
}

/**
 * A bulk write starting (`npm run load`, `npm run import`: their rows are not captured), recorded in the backup
 * container when capture is on (src/backup/bulk-writes.ts), so that a restore to a later time asks for a snapshot
 * taken after it. Call `finish` once its last row is written.
 * @throws TablegraphError STORAGE_UNAVAILABLE and others from the Blob service (before the command writes anything)
 */
export async function startBulkWrite(config: Config, blobs: BlobStore, command: string): Promise<{ finish(): Promise<void> }> {
  const backup = backupBlobs(config, blobs);
  if (!config.backup.capture || !backup.available()) return { finish: async () => undefined };
  return recordBulkWrite(backup, config.backup.container, command);
}

/** What a bulk write's command says once done, with capture on: when what it wrote becomes restorable. */
export const BULK_WRITE_RESTORABLE =
  'backup: a worker takes a snapshot within a minute of this write, and what it wrote is restorable once that snapshot completes (npm run backup -- status shows it)';
