/**
 * `npm run rebuild-index -- <Type> <index> [--concurrency 8]`, e.g. `npm run rebuild-index -- Order byCustomer`:
 * makes one index equal to what the primary entities derive (src/maintenance/index-rebuild.ts); with `copies` for
 * <index>, makes the type's copies (`@copy`) equal to their targets (src/maintenance/copy-state.ts). It reads the
 * type's whole table and the index's whole table on purpose — a maintenance command, never a request path — and
 * writes only the index entities that are missing, different or orphaned. Safe while the server runs.
 * Progress on stderr (a counter on a terminal, log lines otherwise); the summary on stdout. Exit code 0 when
 * done, 1 on an error (an unknown type or index lists the known ones).
 */
import { Command } from 'commander';
import { loadConfig } from '../runtime/config';
import { createLogger } from '../log';
import { ErrorCode, TablegraphError } from '../errors';
import { repairCopies } from '../maintenance/copy-state';
import { rebuildIndex, type RebuildResult } from '../maintenance/index-rebuild';
import { createScanReporter } from '../maintenance/verify-derived';
import { resolveIndex } from '../maintenance/index-state';
import { compileConfiguredSchema } from '../runtime/configured-schema';
import { openStorage } from '../runtime/open-storage';
import { positiveIntArgument, runMain } from './run-main';

function formatSummary(r: RebuildResult): string {
  return [
    `index            ${r.type}.${r.index} (table ${r.table})`,
    `scanned          ${r.scanned}`,
    `primaries        ${r.primaries}`,
    `expected         ${r.expected}`,
    `upserted         ${r.upserted}`,
    `deleted          ${r.deleted}`,
    `skipped          ${r.skipped}   (changed by someone else since the scan)`,
    `unresolved       ${r.unresolved}   (duplicates or underivable primaries: run verify)`,
    `seconds          ${r.seconds.toFixed(2)}`,
  ].join('\n');
}

runMain(
  'rebuild-index',
  async (log) => {
    const command = new Command('rebuild-index')
      .description('rebuild one index from its primary entities; reads whole tables on purpose')
      .argument('<type>', 'the entity type, e.g. Order')
      .argument('<index>', 'one of its indexes, e.g. byLastName')
      .option('--concurrency <n>', 'EGTs and deletes in flight at once', positiveIntArgument, 8)
      .parse();
    const [type, index] = command.args;
    const { concurrency } = command.opts<{ concurrency: number }>();
    const config = loadConfig();
    log.level = config.logLevel;
    const { model } = compileConfiguredSchema(config);
    if (index === 'copies') {
      // `rebuild-index <Type> copies`: the type's copies (@copy) made equal to their targets.
      if (!model.entities.get(type)?.copies.size) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${type} holds no @copy field`);
      const storage = await openStorage(config, log, model);
      try {
        const r = await repairCopies(storage.store, model, type);
        process.stdout.write(`copies of ${type}: ${r.checked} entities checked, ${r.repaired} rewritten\n`);
      } finally {
        await storage.close();
      }
      return;
    }
    const target = resolveIndex(model, type, index); // an unknown name fails before storage starts
    const storage = await openStorage(config, log, model);
    try {
      log.info(
        { type, index, tables: [...new Set([target.entity.layout.table, target.layout.table])], storage: storage.target },
        'rebuilding: reading whole tables on purpose (a maintenance scan, not a request path)',
      );
      const progress = createScanReporter({ label: `rebuild ${type}.${index}`, log });
      let result: RebuildResult;
      try {
        result = await rebuildIndex({ store: storage.store, model, type, index, concurrency, onProgress: progress.update });
      } finally {
        progress.stop();
      }
      process.stdout.write(`${formatSummary(result)}\n`);
    } finally {
      await storage.close();
    }
  },
  createLogger,
  'stderr',
);
