/**
 * `npm run verify [-- --type Order] [--json] [--limit 50]`: checks that every index entity equals what its
 * primary entity derives (src/maintenance/verify-derived.ts). It reads whole tables on purpose — a maintenance command,
 * never a request path. Inter-partition indexes lag behind by the work queue: run it once the queue drained.
 * Progress on stderr (a counter on a terminal, log lines otherwise); the report on stdout (text, or JSON with
 * --json). Exit code 0 when everything matches, 1 when anything differs or on an error — usable in CI and ops.
 */
import { Command } from 'commander';
import { loadConfig } from '../runtime/config';
import { createLogger } from '../log';
import { createScanReporter, formatVerifyReport, verifyDerived, type VerifyReport } from '../maintenance/verify-derived';
import { resolveEntity } from '../maintenance/index-state';
import { compileConfiguredSchema } from '../runtime/configured-schema';
import { openStorage } from '../runtime/open-storage';
import { positiveIntArgument, runMain } from './run-main';

const collect = (value: string, previous: string[]) => [...previous, value];

runMain(
  'verify',
  async (log) => {
    const options = new Command('verify')
      .description('check every index against its primary entities; reads whole tables on purpose')
      .option('--type <name>', 'check only this entity type (repeatable)', collect, [] as string[])
      .option('--json', 'print the report as JSON')
      .option('--limit <n>', 'problem entities listed per index', positiveIntArgument, 50)
      .parse()
      .opts<{ type: string[]; json?: boolean; limit: number }>();
    const config = loadConfig();
    log.level = config.logLevel;
    const { model } = compileConfiguredSchema(config);
    const types = options.type.length > 0 ? options.type : undefined;
    types?.forEach((t) => resolveEntity(model, t)); // an unknown name fails before storage starts
    const storage = await openStorage(config, log, model);
    let report: VerifyReport;
    try {
      log.info(
        { types: types ?? [...model.entities.keys()], storage: storage.target },
        'verifying: reading whole tables on purpose (a maintenance scan, not a request path); run it once the work queue drained',
      );
      const progress = createScanReporter({ label: 'verify', log });
      try {
        report = await verifyDerived({
          store: storage.store,
          model,
          types,
          onProgress: progress.update,
          blobs: { store: storage.blobs, cleanupDelaySeconds: config.blobCleanupDelaySeconds },
        });
      } finally {
        progress.stop();
      }
    } finally {
      await storage.close();
    }
    process.stdout.write(options.json ? `${JSON.stringify(report, null, 2)}\n` : `${formatVerifyReport(report, options.limit)}\n`);
    if (!report.ok) process.exitCode = 1;
  },
  createLogger,
  'stderr',
);
