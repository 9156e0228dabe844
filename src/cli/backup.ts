/**
 * `npm run backup -- snapshot | list | expire` (docs/backup.md):
 *
 * - `snapshot [--budget <entities/s>]`: copies every primary entity of the configured schema (the deployed one)
 *   into the backup container as a snapshot (src/backup/snapshot.ts), paced under the build budget, with progress on
 *   stderr; an unfinished snapshot of the same schema is resumed. Prints the snapshot's id and what it holds.
 * - `list [--json]`: the complete snapshots, oldest first: id, times, entities, segments and bytes, and whether
 *   entities changed while it was read.
 * - `status [--json]`: the restorable window — earliestRestorableTime, latestRestorableTime (every write acknowledged
 *   at or before it is in a durable segment) — and the lag (src/backup/restorable-window.ts).
 * - `expire`: deletes the snapshots older than TABLEGRAPH_BACKUP_RETENTION_DAYS (src/backup/retention.ts); the
 *   newest complete one is always kept.
 *
 * Errors are printed as a sentence with their code (run-main.ts); exit code 1.
 */
import { Command } from 'commander';
import { ErrorCode, TablegraphError } from '../errors';
import { createLogger, type Logger } from '../log';
import { describeSnapshot, listSnapshots } from '../backup/backup-blobs';
import { backupBlobs } from '../runtime/backup-account';
import { expireSnapshots } from '../backup/retention';
import { restorableWindow } from '../backup/restorable-window';
import type { SnapshotManifest } from '../backup/backup-format';
import type { LatestPass } from '../backup/change-format';
import { takeSnapshot } from '../backup/snapshot';
import { Catalogue } from '../evolution/catalogue';
import { schemaLayout } from '../evolution/deployment';
import { loadConfig, type Config } from '../runtime/config';
import { compileConfiguredSchema } from '../runtime/configured-schema';
import { openStorage } from '../runtime/open-storage';
import { positiveIntArgument, runMain } from './run-main';
import { holdIfAsked } from './test-hold';

async function snapshot(config: Config, log: Logger, budget?: number): Promise<void> {
  const { model, schema, sdl } = compileConfiguredSchema(config);
  const storage = await openStorage(config, log, model);
  try {
    const layout = schemaLayout(model, schema);
    // No catalogue table yet: nothing is deployed.
    const deployed = await new Catalogue(storage.store, config.tablePrefix).deployment().catch((e: unknown) => {
      if (e instanceof TablegraphError && e.code === ErrorCode.NOT_FOUND) return undefined;
      throw e;
    });
    if (deployed && deployed.hash !== layout.hash) {
      throw new TablegraphError(
        ErrorCode.SCHEMA_INVALID,
        `The configured schema is not the deployed one (version ${deployed.version}): a snapshot records the schema its entities were written with. Run it with the deployed schema.`,
        { reason: 'SnapshotOfOtherSchema', version: deployed.version },
      );
    }
    const blobs = backupBlobs(config, storage.blobs);
    const started = Date.now();
    log.info({ container: config.backup.container }, 'snapshot: reading every entity type’s table page by page (a maintenance read, under the build budget)');
    const manifest = await takeSnapshot({
      store: storage.store,
      blobs,
      entityBlobs: storage.blobs,
      container: config.backup.container,
      model,
      tablePrefix: config.tablePrefix,
      schemaHash: layout.hash,
      sdl,
      entitiesPerSecond: budget ?? config.builds.entitiesPerSecond,
      pageSize: config.builds.pageSize,
      onProgress: async (p) => {
        log.info(p, `snapshot ${p.id}: ${p.rows} entities in ${p.segments} segments (reading ${p.entityType})`);
        await holdIfAsked(config, 'snapshot', p.segments, log);
      },
    });
    process.stdout.write(`snapshot ${manifest.id}: complete in ${((Date.now() - started) / 1000).toFixed(1)} s\n${describeSnapshot(manifest)}\n`);
  } finally {
    await storage.close();
  }
}

async function list(config: Config, log: Logger, json: boolean): Promise<void> {
  const storage = await openStorage(config, log);
  try {
    const manifests = await listSnapshots(backupBlobs(config, storage.blobs), config.backup.container);
    if (json) {
      const rows = manifests.map(({ sdl: _sdl, segments, ...m }) => ({ ...m, segments: segments.length, bytes: segments.reduce((n, s) => n + s.bytes, 0) }));
      process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
    } else {
      process.stdout.write(
        manifests.length === 0 ? `no snapshot in container ${config.backup.container}\n` : `${manifests.map(describeSnapshot).join('\n')}\n`,
      );
    }
  } finally {
    await storage.close();
  }
}

/** Why no time is restorable yet, and what brings one. */
function noSnapshotYet(capture: boolean, latest: LatestPass | undefined): string {
  if (!capture) return 'capture is off: only a snapshot itself can be restored (npm run backup -- snapshot)';
  if (!latest) return 'no capture pass yet: a worker runs one at its start, and then takes the first snapshot';
  return `no snapshot since capture began at ${latest.firstPassAt}: a worker takes one after its next pass, or run npm run backup -- snapshot`;
}

/** Why a complete snapshot cannot start a restore to a time. */
function whyUnusable(snapshot: SnapshotManifest, latest: LatestPass | undefined): string {
  if (!latest) return `${snapshot.id} is restorable as it is, but no capture pass has run: no time after it can be restored`;
  return `${snapshot.id} started at ${snapshot.startedAt}, before capture began at ${latest.firstPassAt}: the changes before that are not captured`;
}

async function status(config: Config, log: Logger, json: boolean): Promise<void> {
  const storage = await openStorage(config, log);
  try {
    const window = await restorableWindow(backupBlobs(config, storage.blobs), config.backup.container);
    const { snapshots, unusable, latestPass, ...times } = window;
    const capture = config.backup.capture ? 'on' : 'off (TABLEGRAPH_BACKUP_CAPTURE=false: writes are not captured)';
    if (json) {
      const json = { capture: config.backup.capture, ...times, snapshots: snapshots.length, unusableSnapshots: unusable.length, latestPass };
      process.stdout.write(`${JSON.stringify(json, null, 2)}\n`);
      return;
    }
    const lines = [
      `continuous backup: ${capture}; container ${config.backup.container}`,
      `earliestRestorableTime: ${times.earliestRestorableTime ?? `— (${noSnapshotYet(config.backup.capture, latestPass)})`}`,
      `latestRestorableTime:   ${times.latestRestorableTime ?? '— (no capture pass yet: a worker runs them)'}`,
    ];
    if (latestPass && times.lagMs !== undefined)
      lines.push(
        `lag: ${(times.lagMs / 1000).toFixed(1)} s behind now; the latest pass copied ${latestPass.changes} changes, lag p99 ${(latestPass.lagP99Ms / 1000).toFixed(1)} s, max ${(latestPass.lagMaxMs / 1000).toFixed(1)} s`,
      );
    if (latestPass?.rpo)
      lines.push(
        `RPO (a write's commit → restorable), the latest pass's ${latestPass.rpo.writes} writes: p99 ${(latestPass.rpo.p99Ms / 1000).toFixed(1)} s, max ${(latestPass.rpo.maxMs / 1000).toFixed(1)} s`,
      );
    lines.push(`usable snapshots: ${snapshots.length}`);
    if (unusable.length > 0) lines.push(`not usable: ${unusable.length} (${whyUnusable(unusable.at(-1)!, latestPass)})`);
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    await storage.close();
  }
}

async function expire(config: Config, log: Logger): Promise<void> {
  const storage = await openStorage(config, log);
  try {
    const days = config.backup.retentionDays;
    const result = await expireSnapshots({ blobs: backupBlobs(config, storage.blobs), container: config.backup.container, retentionDays: days });
    const ids = [...result.complete, ...result.unfinished];
    process.stdout.write(
      ids.length === 0
        ? `no snapshot is older than ${days} days (the newest complete one is always kept)\n`
        : `deleted ${result.complete.length} complete and ${result.unfinished.length} unfinished snapshot(s) older than ${days} days: ${ids.join(', ')}\n`,
    );
    process.stdout.write(`${result.passes} capture pass(es) no kept snapshot needs expired; ${result.blobs} blobs deleted in all\n`);
  } finally {
    await storage.close();
  }
}

runMain(
  'backup',
  async (log) => {
    const program = new Command('backup').description('copy the primary entities to Blob storage, and list the copies');
    const config = () => {
      const c = loadConfig();
      log.level = c.logLevel;
      return c;
    };
    program
      .command('snapshot')
      .description('copy every primary entity into a snapshot (resumes an unfinished one)')
      .option('--budget <n>', 'entities read per second at most (default: the build budget)', positiveIntArgument)
      .action((o: { budget?: number }) => snapshot(config(), log, o.budget));
    program
      .command('list')
      .description('the complete snapshots, oldest first')
      .option('--json', 'print them as JSON')
      .action((o: { json?: boolean }) => list(config(), log, !!o.json));
    program
      .command('status')
      .description('the restorable window (earliest and latest restorable time) and the backup lag')
      .option('--json', 'print it as JSON')
      .action((o: { json?: boolean }) => status(config(), log, !!o.json));
    program
      .command('expire')
      .description('delete the snapshots older than TABLEGRAPH_BACKUP_RETENTION_DAYS (the newest complete one is kept)')
      .action(() => expire(config(), log));
    await program.parseAsync();
  },
  createLogger,
  'stderr',
);
