/**
 * `npm run import -- --file examples/hr/data/chicago-employees.csv.gz [--concurrency 8]`: loads the Chicago employee
 * file — a path, or an http(s) address such as the data portal's CSV export, downloaded first into `<data
 * folder>/downloads/` — into the HR schema's tables (see import-employees.ts) on the configured storage, or
 * the embedded Azurite. Progress on stderr (a bar on a terminal, log lines otherwise); the summary on stdout. Exit code
 * 0 even when rows were skipped (they are listed with their line numbers); 1 when an EGT was not stored after its
 * attempts, each read back (its rows are listed: run it again), or on a fatal error. Running it again with the same file changes no
 * entity's properties, and removes the index entities of employees renamed since.
 */
import path from 'node:path';
import { Command } from 'commander';
import { loadConfig } from '../../../src/runtime/config';
import { ErrorCode, TablegraphError } from '../../../src/errors';
import { downloadToFile, isAddress } from './download';
import { importEmployees, type ImportSummary } from './import-employees';
import { createImportProgress, estimateDataRows } from '../../../src/load/progress';
import { createLogger } from '../../../src/log';
import { compileConfiguredSchema } from '../../../src/runtime/configured-schema';
import { openStorage } from '../../../src/runtime/open-storage';
import { deployForWriting } from '../../../src/runtime/schema-deployment';
import { BULK_WRITE_RESTORABLE, startBulkWrite } from '../../../src/runtime/capture';
import { formatTotals, reportFailed, reportSkipped, retryMessage } from '../../../src/cli/load-report';
import { positiveIntArgument, runMain } from '../../../src/cli/run-main';

function formatSummary(s: ImportSummary): string {
  return [
    `rows             ${s.rows}`,
    `imported         ${s.imported}`,
    `skipped          ${s.skipped.length}`,
    `stale deleted    ${s.staleDeleted}   (index entities of rewritten employees' earlier states)`,
    `departments      ${s.departments}`,
    ...formatTotals(s),
  ].join('\n');
}

runMain(
  'import',
  async (log) => {
    const options = new Command('import')
      .description('import the City of Chicago employee CSV into the HR schema (idempotent)')
      .requiredOption(
        '--file <path or address>',
        'the CSV file (.csv, or gzip-compressed .csv.gz), e.g. examples/hr/data/chicago-employees.csv.gz, or its http(s) address',
      )
      .option('--concurrency <n>', 'EGTs in flight at once', positiveIntArgument, 8)
      .parse()
      .opts<{ file: string; concurrency: number }>();
    const config = loadConfig();
    log.level = config.logLevel;
    const { model, schema, sdl } = compileConfiguredSchema(config);
    const file = isAddress(options.file) ? await downloadToFile(options.file, path.join(config.dataDir, 'downloads'), { log }) : path.resolve(options.file);
    // Read once before storage starts: an unreadable file fails fast, and the bar gets its total.
    const totalRows = await estimateDataRows(file).catch((e: Error) => {
      throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `Cannot read ${file}: ${e.message}`, { file });
    });
    const storage = await openStorage(config, log, model);
    try {
      for (const table of model.tables) await storage.store.ensureTable(table);
      // The schema the employees are written with, recorded before the first of them.
      await deployForWriting({ config, store: storage.store, model, schema, sdl, log, types: [...model.entities.keys()], command: 'npm run import' });
      // Continuous backup does not capture an import's rows: a restore to a time after it needs a snapshot taken after it.
      const bulk = await startBulkWrite(config, storage.blobs, 'npm run import');
      log.info({ file, storage: storage.target, embedded: Boolean(storage.azurite), concurrency: options.concurrency }, 'importing');
      const progress = createImportProgress({ totalRows, log });
      let summary: ImportSummary;
      try {
        summary = await importEmployees({
          store: storage.store,
          model,
          file,
          concurrency: options.concurrency,
          onProgress: progress.update,
          onRetry: (e, attempt) => log.warn({ attempt }, retryMessage(e, attempt)),
        });
      } finally {
        progress.stop();
      }
      await bulk.finish();
      if (config.backup.capture) log.info(BULK_WRITE_RESTORABLE);
      reportSkipped(log, summary.skipped, { where: (line) => `line ${line}` });
      process.stdout.write(`${formatSummary(summary)}\n`);
      reportFailed(log, summary.failed, `npm run import -- --file ${options.file}`);
    } finally {
      await storage.close();
    }
  },
  createLogger,
  'stderr',
);
