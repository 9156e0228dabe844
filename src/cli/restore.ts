/**
 * `npm run restore -- (--snapshot <id> | --at <time>) --table-prefix <prefix> [--type <EntityType>]… [--partition <PartitionKey>]…`
 * (docs/backup.md): a snapshot's primary entities — with `--at`, as they were at that time: the latest snapshot before
 * it and the captured changes up to it (src/backup/change-replay.ts) — written under a new table prefix (src/backup/restore.ts), the
 * schema that wrote them recorded in that prefix's catalogue as a first deployment over stored entities, every
 * derived path built from them here with the online build machinery (four at once, without the live build budget:
 * the new prefix serves nobody yet), then `verify`. It never writes into the tables
 * it comes from. Run again after a kill, it resumes: the segments written are skipped, the builds go on from their
 * checkpoints. `--type` and `--partition` restore a subset (one customer's partition, one type).
 *
 * The configured schema must be the snapshot's (its SDL is in the manifest). Progress on stderr; the report on
 * stdout. Exit code 0 when every path is ready and verify is clean; 1 otherwise, or on an error (a sentence with its
 * code, run-main.ts).
 */
import { Command } from 'commander';
import { ErrorCode, TablegraphError } from '../errors';
import { createLogger, type Logger } from '../log';
import { readSnapshot, writeJsonBlob } from '../backup/backup-blobs';
import { backupBlobs } from '../runtime/backup-account';
import { restoreProgress, restoreProgressName, restoreRows, type RestoreFilter } from '../backup/restore';
import { changesAsOf, pointInTime } from '../backup/change-replay';
import { Catalogue, catalogueTable } from '../evolution/catalogue';
import { deploySchema, schemaLayout } from '../evolution/deployment';
import { formatStatus } from '../evolution/migration-report';
import { runBuildsHere, UNSERVED_PREFIX_BUILDS } from '../evolution/run-builds';
import { formatVerifyReport, verifyDerived } from '../maintenance/verify-derived';
import { loadConfig, type Config } from '../runtime/config';
import { compileConfiguredSchema } from '../runtime/configured-schema';
import { openStorage, type OpenStorage } from '../runtime/open-storage';
import type { SnapshotManifest } from '../backup/backup-format';
import type { TableStore } from '../storage/table-store';
import { positiveIntArgument, runMain } from './run-main';
import { holdIfAsked } from './test-hold';

interface RestoreArgs {
  snapshot?: string;
  at?: string;
  tablePrefix: string;
  type: string[];
  partition: string[];
  concurrency: number;
}

const collect = (value: string, previous: string[]) => [...previous, value];

/** @throws TablegraphError SCHEMA_INVALID (reason SnapshotOfOtherSchema) when the configured schema is not the snapshot's */
function checkSchema(config: Config, manifest: SnapshotManifest): void {
  const { model, schema } = compileConfiguredSchema({ ...config, tablePrefix: manifest.tablePrefix });
  if (schemaLayout(model, schema).hash !== manifest.schemaHash) {
    throw new TablegraphError(
      ErrorCode.SCHEMA_INVALID,
      `Snapshot ${manifest.id} was taken with another schema than the configured one: configure the snapshot's (its SDL is in snapshots/${manifest.id}/manifest.json) and run the restore again.`,
      { reason: 'SnapshotOfOtherSchema' },
    );
  }
}

/** @throws TablegraphError CONFLICT (reason RestoreTargetInUse) when the target prefix holds this schema's tables or a catalogue */
async function checkTargetFree(store: TableStore, tables: string[], prefix: string): Promise<void> {
  const existing = new Set(await store.listTables(prefix));
  const held = [catalogueTable(prefix), ...tables].filter((t) => existing.has(t));
  if (held.length > 0) {
    throw new TablegraphError(
      ErrorCode.CONFLICT,
      `Table prefix "${prefix}" is in use (${held.slice(0, 3).join(', ')}${held.length > 3 ? ', …' : ''}): a restore writes into new tables only. Give another --table-prefix.`,
      { reason: 'RestoreTargetInUse', tables: held },
    );
  }
}

async function restore(config: Config, log: Logger, args: RestoreArgs): Promise<void> {
  if (!/^[A-Za-z0-9]+$/.test(args.tablePrefix)) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, '--table-prefix is letters and digits (at least one).');
  const target = { ...config, tablePrefix: args.tablePrefix };
  const { model, schema, sdl } = compileConfiguredSchema(target);
  const raw: OpenStorage = await openStorage(target, log);
  const sealed: OpenStorage = await openStorage(target, log, model);
  try {
    const blobs = backupBlobs(config, raw.blobs);
    const container = config.backup.container;
    const filter: RestoreFilter = {
      ...(args.type.length > 0 && { types: args.type }),
      ...(args.partition.length > 0 && { partitions: args.partition }),
    };
    const pit = args.at === undefined ? undefined : await pointInTime(blobs, container, args.at);
    const manifest = pit ? pit.snapshot : await readSnapshot(blobs, container, args.snapshot!);
    checkSchema(config, manifest);
    const progress = await restoreProgress({ blobs, container, manifest, targetPrefix: args.tablePrefix, filter, at: args.at });
    const changes = pit && (await changesAsOf(blobs, container, pit, filter));
    if (pit && changes)
      log.info(
        { snapshot: manifest.id, passes: pit.passes.length, entities: changes.size },
        `restore to ${args.at}: snapshot ${manifest.id}, then the last change of ${changes.size} entities`,
      );
    const tables = [...new Set([...model.entities.values()].flatMap((e) => [e.layout.table, ...[...e.indexes.values()].map((i) => i.layout.table)]))];
    if (progress.written.length === 0 && !progress.deploying) await checkTargetFree(raw.store, tables, args.tablePrefix);
    const started = Date.now();
    log.info({ snapshot: manifest.id, target: args.tablePrefix, filter }, `restoring ${manifest.rows} entities of snapshot ${manifest.id}`);
    await restoreRows(
      {
        ...{ target: raw.store, model, blobs, entityBlobs: raw.blobs, container, manifest, targetPrefix: args.tablePrefix, filter },
        ...(changes && { pointInTime: { at: args.at!, changes } }),
        concurrency: args.concurrency,
        onProgress: async (p) => {
          log.info(p, `restore: segment ${p.segments} of ${p.of} written (${p.rows} entities)`);
          await holdIfAsked(config, 'restore', p.segments, log);
        },
      },
      progress,
    );
    const wrote = Date.now();
    // The schema, recorded over what was written: every derived path is built from the stored entities.
    const catalogue = new Catalogue(sealed.store, args.tablePrefix);
    const resumed = progress.deploying === true;
    progress.deploying = true;
    await writeJsonBlob(blobs, container, restoreProgressName(args.tablePrefix), progress);
    const layout = schemaLayout(model, schema);
    const deployed = await deploySchema({ catalogue, schema: layout, sdl, log });
    if (deployed.outcome !== 'deployed' && !resumed) {
      throw new TablegraphError(
        ErrorCode.CONFLICT,
        `Another process recorded a schema under table prefix "${args.tablePrefix}" while the restore wrote: its paths may miss restored entities. Restore under another prefix.`,
        { reason: 'RestoreTargetInUse' },
      );
    }
    // The new prefix serves nobody until the restore is done: its builds go at once, without the live budget.
    const rows = await runBuildsHere({
      ...{ catalogue, store: sealed.store, blobs: sealed.blobs, model, layout, config: target, log, command: 'restore' },
      ...UNSERVED_PREFIX_BUILDS,
    });
    const built = Date.now();
    const report = await verifyDerived({ store: sealed.store, model });
    const seconds = (t: number) => ((t - started) / 1000).toFixed(1);
    process.stdout.write(
      `restore of ${args.at ? `${args.at} (snapshot ${manifest.id} and the changes after it)` : `snapshot ${manifest.id}`} into table prefix "${args.tablePrefix}": ${progress.rows.toLocaleString('en-US')} entities written in ${seconds(wrote)} s, ` +
        `derived paths built by ${seconds(built)} s\n${formatStatus(deployed.version, rows, [])}${formatVerifyReport(report)}\n`,
    );
    if (!report.ok || rows.some((p) => p.state === 'failed')) process.exitCode = 1;
  } finally {
    await sealed.close();
    await raw.close();
  }
}

runMain(
  'restore',
  async (log) => {
    const options = new Command('restore')
      .description('restore a snapshot under a new table prefix, rebuild its derived paths, and verify')
      .option('--snapshot <id>', 'the snapshot (npm run backup -- list)')
      .option('--at <time>', 'the point in time, ISO 8601 (npm run backup -- status prints the restorable window)')
      .requiredOption('--table-prefix <prefix>', 'the new tables’ prefix (letters and digits): never the snapshot’s own')
      .option('--type <EntityType>', 'restore only entities of this type (repeatable)', collect, [])
      .option('--partition <PartitionKey>', 'restore only entities of this partition (repeatable)', collect, [])
      .option('--concurrency <n>', 'EGTs in flight at once', positiveIntArgument, 8)
      .parse()
      .opts<RestoreArgs>();
    if ((options.snapshot === undefined) === (options.at === undefined))
      throw new TablegraphError(ErrorCode.BAD_USER_INPUT, 'Give either --snapshot <id> or --at <time>: what to restore.');
    const config = loadConfig();
    log.level = config.logLevel;
    await restore(config, log, options);
  },
  createLogger,
  'stderr',
);
