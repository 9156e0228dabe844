/**
 * `npm run repair-summaries [-- Customer.spent ...]`: rewrites every summary value that differs from a recount
 * of what it summarises (src/maintenance/summary-state.ts) — all summaries by default. It reads whole tables on
 * purpose (a maintenance command, never a request path); each repair recounts one partition and writes with
 * If-Match on the holder's ETag, so it is safe while the server serves. Progress on stderr; the summary on stdout.
 * Exit code 0 when every drifted value was repaired, 1 when some kept changing (run it again) or on an error.
 */
import { Command } from 'commander';
import { loadConfig } from '../runtime/config';
import { createLogger } from '../log';
import { repairSummaries, resolveSummaries } from '../maintenance/summary-state';
import { createScanReporter } from '../maintenance/verify-derived';
import { formatRepair } from '../maintenance/repair-report';
import { compileConfiguredSchema } from '../runtime/configured-schema';
import { openStorage } from '../runtime/open-storage';
import { runMain } from './run-main';

runMain(
  'repair-summaries',
  async (log) => {
    const command = new Command('repair-summaries')
      .description('recount summary values and rewrite the ones that drifted; reads whole tables on purpose')
      .argument('[summaries...]', 'Holder.field coordinates, e.g. Customer.spent (default: all)')
      .parse();
    const names = command.args;
    const config = loadConfig();
    log.level = config.logLevel;
    const { model } = compileConfiguredSchema(config);
    const summaries = resolveSummaries(model, names); // an unknown name fails before storage starts
    const storage = await openStorage(config, log, model);
    try {
      log.info(
        { summaries: summaries.map((s) => `${s.holder.name}.${s.field}`), storage: storage.target },
        'repairing summaries: reading whole tables on purpose',
      );
      const progress = createScanReporter({ label: 'repair-summaries', log });
      let result: Awaited<ReturnType<typeof repairSummaries>>;
      try {
        result = await repairSummaries({ store: storage.store, model, summaries: names, onProgress: progress.update });
      } finally {
        progress.stop();
      }
      process.stdout.write(`${formatRepair(result).join('\n')}\n`);
      if (result.busy.length > 0) process.exitCode = 1;
    } finally {
      await storage.close();
    }
  },
  createLogger,
  'stderr',
);
