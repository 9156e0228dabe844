/**
 * `npm run load -- --type <Type> --file <path>` or `npm run load -- --manifest <path>`: loads CSV (a header of field
 * names) or NDJSON files into any schema's entity types (src/load/), on the configured storage or the embedded
 * Azurite. Progress on stderr (a bar on a terminal, log lines otherwise); the summary on stdout. Exit code 0 even
 * when rows were skipped (they are listed with their lines and reasons); 1 when an EGT was given up on after its
 * retries (its rows are listed: run it again) or on a fatal error. Loading the same files again changes nothing.
 */
import { TENANT_ID } from '../model/tenancy';
import path from 'node:path';
import { Command } from 'commander';
import { loadConfig } from '../runtime/config';
import { ErrorCode, TablegraphError } from '../errors';
import { acrossSteps, createImportProgress, estimateDataRows } from '../load/progress';
import { checkStepOrder, loadEntities, type LoadSummary } from '../load/load-entities';
import { fileFormat, readLoadRows } from '../load/load-rows';
import { readManifest, type ManifestStep } from '../load/manifest';
import { createLogger } from '../log';
import { compileConfiguredSchema } from '../runtime/configured-schema';
import { openStorage } from '../runtime/open-storage';
import { deployForWriting } from '../runtime/schema-deployment';
import { BULK_WRITE_RESTORABLE, startBulkWrite } from '../runtime/capture';
import { formatTotals, reportFailed, reportSkipped, retryMessage } from './load-report';
import { positiveIntArgument, runMain } from './run-main';

function formatSummary(s: LoadSummary): string {
  const lines = s.steps.map(
    (t) =>
      `${t.type.padEnd(16)} rows ${t.rows}, loaded ${t.loaded} (${t.unchanged} unchanged), kept ${t.kept}, skipped ${t.skipped.length}, ` +
      `stale index entities deleted ${t.staleDeleted}, summary holders ${t.holders}`,
  );
  return [...lines, ...formatTotals(s)].join('\n');
}

/** The steps the options give: a manifest's, or one file's. @throws TablegraphError BAD_USER_INPUT for options that do not go together */
function stepsOf(options: { type?: string; file?: string; manifest?: string; existing: string }): ManifestStep[] {
  if (options.manifest !== undefined) {
    if (options.type !== undefined || options.file !== undefined)
      throw new TablegraphError(ErrorCode.BAD_USER_INPUT, 'give either --manifest or --type and --file');
    return readManifest(path.resolve(options.manifest));
  }
  if (options.type === undefined || options.file === undefined) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, 'give --type and --file, or --manifest');
  if (options.existing !== 'replace' && options.existing !== 'keep') throw new TablegraphError(ErrorCode.BAD_USER_INPUT, '--existing is replace or keep');
  return [{ type: options.type, file: path.resolve(options.file), existing: options.existing }];
}

runMain(
  'load',
  async (log) => {
    const options = new Command('load')
      .description("load CSV or NDJSON files into the schema's entity types (idempotent)")
      .option('--type <Type>', 'the entity type of --file')
      .option('--file <path>', 'a .csv (header = field names) or .ndjson file of --type, or either gzip-compressed (.gz)')
      .option('--manifest <path>', 'a JSON manifest of several files in dependency order: { "steps": [ { "type", "file", "existing"? } ] }')
      .option('--existing <mode>', 'with --file: an entity already stored is replaced or kept', 'replace')
      .option('--concurrency <n>', 'EGTs in flight at once', positiveIntArgument, 8)
      .option('--tenant <id>', 'under @tenancy: the tenant the rows of tenant-scoped types go to')
      .parse()
      .opts<{ type?: string; file?: string; manifest?: string; existing: string; concurrency: number; tenant?: string }>();
    if (options.tenant !== undefined && !TENANT_ID.test(options.tenant)) {
      throw new TablegraphError(
        ErrorCode.BAD_USER_INPUT,
        `--tenant ${JSON.stringify(options.tenant)}: a tenant id is 1 to 63 lowercase letters, digits and hyphens`,
      );
    }
    const steps = stepsOf(options);
    const config = loadConfig();
    log.level = config.logLevel;
    const { schema, model, sdl } = compileConfiguredSchema(config);
    if (options.tenant !== undefined && !model.tenancy)
      throw new TablegraphError(ErrorCode.BAD_USER_INPUT, '--tenant is for a schema with @tenancy, and this one has none');
    // Checked before storage starts: types, their order, file formats, and that every file can be read.
    checkStepOrder(
      model,
      steps.map((s) => s.type),
    );
    let totalRows = 0;
    for (const s of steps) {
      const headerLines = fileFormat(s.file) === 'csv' ? 1 : 0;
      totalRows += await estimateDataRows(s.file, headerLines).catch((e: Error) => {
        throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `Cannot read ${s.file}: ${e.message}`, { file: s.file });
      });
    }
    const storage = await openStorage(config, log, model);
    try {
      // The schema the rows are written with, recorded before the first of them (schema-deployment.ts).
      await deployForWriting({ config, store: storage.store, model, schema, sdl, log, types: [...new Set(steps.map((s) => s.type))], command: 'npm run load' });
      // The tenant gets its row (on the default tier) if it has none, so its entities are found wherever they go.
      if (options.tenant !== undefined) await storage.tenants?.admit(options.tenant);
      const bulk = await startBulkWrite(config, storage.blobs, 'npm run load');
      log.info({ steps: steps.map((s) => `${s.type} ← ${s.file}`), storage: storage.target, concurrency: options.concurrency }, 'loading');
      const progress = createImportProgress({ totalRows, log });
      let summary: LoadSummary;
      try {
        summary = await loadEntities({
          store: storage.store,
          model,
          steps: steps.map((s) => ({
            type: s.type,
            rows: readLoadRows(s.file, model.entities.get(s.type)!, schema, options.tenant),
            existing: s.existing,
            source: s.file,
          })),
          concurrency: options.concurrency,
          onProgress: acrossSteps(progress),
          onRetry: (e, attempt) => log.warn({ attempt }, retryMessage(e, attempt)),
        });
      } finally {
        progress.stop();
      }
      await bulk.finish();
      if (config.backup.capture) log.info(BULK_WRITE_RESTORABLE);
      for (const step of summary.steps) {
        reportSkipped(log, step.skipped, {
          where: (line) => `${path.basename(step.source ?? '')}:${line}`,
          fields: { type: step.type },
          rows: `${step.type} rows`,
        });
      }
      process.stdout.write(`${formatSummary(summary)}\n`);
      reportFailed(log, summary.failed, `npm run load -- ${process.argv.slice(2).join(' ')}`);
    } finally {
      await storage.close();
    }
  },
  createLogger,
  'stderr',
);
