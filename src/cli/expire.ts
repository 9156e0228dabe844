/**
 * `npm run expire -- --type Visit --older-than 60d [--dry-run] [--json]`: deletes the tables of a type with a
 * table per period (`@entity(table: "LoginAttempts{at:yyyyMMdd}")`) whose whole period is older than the given age —
 * the guide's "High volume delete pattern": one storage operation per table, however many entities it holds.
 * `--older-than` takes a duration as `60d`, `12h` or `2w`. Each table is logged as it goes (stderr); the report on
 * stdout. Exit code 0, or 1 on an error (tables deleted before it stay deleted; running it again goes on).
 */
import { Command, InvalidArgumentError } from 'commander';
import ms from 'ms';
import { loadConfig } from '../runtime/config';
import { createLogger } from '../log';
import { expireTables } from '../maintenance/expire-tables';
import { resolveEntity } from '../maintenance/index-state';
import { compileConfiguredSchema } from '../runtime/configured-schema';
import { openStorage } from '../runtime/open-storage';
import { runMain } from './run-main';

/** A duration (`60d`, `12h`, `2w`) → ms, at least one hour. */
function durationArgument(value: string): number {
  const parsed = ms(value as ms.StringValue) as number | undefined;
  if (typeof parsed !== 'number' || !Number.isFinite(parsed) || parsed < 3_600_000) {
    throw new InvalidArgumentError('a duration of at least an hour, as 60d, 12h or 2w');
  }
  return parsed;
}

runMain(
  'expire',
  async (log) => {
    const options = new Command('expire')
      .description("delete the tables of a type's periods older than a duration: one storage operation per table")
      .requiredOption('--type <name>', 'the entity type, declared with a table per period')
      .requiredOption('--older-than <duration>', 'age of the newest entity a deleted table may hold, as 60d', durationArgument)
      .option('--dry-run', 'list the tables to delete, delete nothing')
      .option('--json', 'print the report as JSON')
      .parse()
      .opts<{ type: string; olderThan: number; dryRun?: boolean; json?: boolean }>();
    const config = loadConfig();
    log.level = config.logLevel;
    const { model } = compileConfiguredSchema(config);
    const entity = resolveEntity(model, options.type); // an unknown name fails before storage starts
    const cutoff = new Date(Date.now() - options.olderThan);
    const storage = await openStorage(config, log, model);
    try {
      const report = await expireTables({
        store: storage.store,
        entity,
        cutoff,
        dryRun: options.dryRun,
        onTable: (p) => log.info({ table: p.table, from: p.start.toISOString(), to: p.end.toISOString() }, options.dryRun ? 'would delete' : 'deleted'),
      });
      const text =
        `${report.dryRun ? 'would delete' : 'deleted'} ${report.expired.length} table(s) of ${report.type} older than ${report.cutoff}; kept ${report.kept.length}` +
        report.expired.map((t) => `\n  ${t}`).join('');
      process.stdout.write(options.json ? `${JSON.stringify(report, null, 2)}\n` : `${text}\n`);
    } finally {
      await storage.close();
    }
  },
  createLogger,
  'stderr',
);
