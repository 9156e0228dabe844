/**
 * `npm run explain [-- --json]`: compiles the schema (failing as the server would on a schema that needs a scan)
 * and prints each storage-reading field's access path and wave count. Touches no storage.
 */
import { Command } from 'commander';
import { loadConfig } from '../config';
import { createLogger } from '../log';
import { explainModel, formatPlan } from '../model/explain';
import { compileConfiguredSchema } from '../runtime/configured-schema';
import { runMain } from './run-main';

runMain(
  'explain',
  async () => {
    const options = new Command('explain')
      .description('print the access path and wave count of every field that reads storage')
      .option('--json', 'print the plan as JSON')
      .parse()
      .opts<{ json?: boolean }>();
    const config = loadConfig();
    const { model } = compileConfiguredSchema(config);
    const plans = explainModel(model);
    process.stdout.write(options.json ? `${JSON.stringify(plans, null, 2)}\n` : `${formatPlan(plans)}\n`);
  },
  createLogger,
  'stderr',
);
