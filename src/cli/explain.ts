/**
 * `npm run explain [-- --json]`: compiles the schema (failing as the server would on a schema that needs a scan)
 * and prints each storage-reading field's access path and wave count, the summaries, references and mutations
 * (model/explain.ts; `--json`: the same as structured data). `--query '…'` (with `--variables '{…}'`)
 * prints instead the worst case of that operation — storage calls, entities read, response nodes — and whether the
 * configured budgets let it run (src/read/demand.ts). Touches no storage — unless `--states`, which reads the
 * catalogue (src/evolution/catalogue.ts) and adds each derived path's state after a schema change: building (and how
 * far), ready, failed or retired (docs/schema-changes.md).
 */
import { Command } from 'commander';
import { parse, validate, type FragmentDefinitionNode, type OperationDefinitionNode } from 'graphql';
import { loadConfig, type Config } from '../runtime/config';
import { ErrorCode, TablegraphError } from '../errors';
import { createLogger, type Logger } from '../log';
import { Catalogue } from '../evolution/catalogue';
import type { PathRecord } from '../evolution/catalogue-records';
import { formatStatus } from '../evolution/migration-report';
import { progressOf } from '../evolution/path-states';
import { openStorage } from '../runtime/open-storage';
import { explainModel, formatExplanation } from '../compiler/explanation';
import { estimateDemand, worstCaseMoney } from '../read/demand';
import { compileConfiguredSchema } from '../runtime/configured-schema';
import { runMain } from './run-main';

/** Every derived path's row in the catalogue of the configured storage. */
async function pathStates(config: Config, log: Logger): Promise<PathRecord[]> {
  const storage = await openStorage(config, log);
  try {
    const catalogue = new Catalogue(storage.store, config.tablePrefix);
    await catalogue.ensure();
    return await catalogue.paths();
  } finally {
    await storage.close();
  }
}

runMain(
  'explain',
  async (log) => {
    const options = new Command('explain')
      .description('print the access path and wave count of every field that reads storage, the summaries, references and mutations')
      .option('--json', 'print the plan as JSON')
      .option('--query <document>', 'print the worst case of this operation instead')
      .option('--variables <json>', "the operation's variables, as JSON", '{}')
      .option('--states', "read each derived path's state from storage's catalogue, and print it too")
      .parse()
      .opts<{ json?: boolean; query?: string; variables: string; states?: boolean }>();
    const config = loadConfig();
    const { schema, model } = compileConfiguredSchema(config);
    if (options.query !== undefined) {
      const document = parse(options.query);
      const errors = validate(schema, document);
      if (errors.length > 0)
        throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `The query is not valid against the schema: ${errors.map((e) => e.message).join('; ')}`);
      const operation = document.definitions.find((d): d is OperationDefinitionNode => d.kind === 'OperationDefinition')!;
      const fragments = Object.fromEntries(
        document.definitions.flatMap((d) => (d.kind === 'FragmentDefinition' ? [[d.name.value, d as FragmentDefinitionNode]] : [])),
      );
      const estimate = estimateDemand(schema, model, operation, fragments, JSON.parse(options.variables) as Record<string, unknown>);
      const budget = { maxStorageCalls: config.maxStorageCalls, maxNodes: config.maxNodes };
      const allowed = estimate.storageCalls <= budget.maxStorageCalls && estimate.nodes <= budget.maxNodes;
      const money = worstCaseMoney(estimate, operation.operation);
      const ru = money.cosmosRequestUnits === undefined ? '' : `, at most ${money.cosmosRequestUnits} RU on the Cosmos DB Table API`;
      process.stdout.write(
        options.json
          ? `${JSON.stringify({ estimate, money, budget, allowed }, null, 2)}\n`
          : `worst case: ${estimate.storageCalls} storage calls (budget ${budget.maxStorageCalls}), ${estimate.entitiesRead} entities read, ` +
              `${estimate.nodes} response nodes (budget ${budget.maxNodes}): ${allowed ? 'allowed' : 'refused with QUERY_TOO_COSTLY'}\n` +
              `in money: at most ${money.azureTransactions} Azure Table transactions (and one per continuation page)${ru}\n`,
      );
      return;
    }
    // With continuous backup on, every write's EGT holds a change entity (docs/backup.md).
    const explanation = explainModel(model, { capture: config.backup.capture });
    const paths = options.states ? await pathStates(config, log) : undefined;
    if (options.json) {
      process.stdout.write(
        `${JSON.stringify(paths ? { ...explanation, paths: paths.map((p) => ({ path: p.id, state: p.state, ...progressOf(p) })) } : explanation, null, 2)}\n`,
      );
      return;
    }
    process.stdout.write(`${formatExplanation(explanation)}\n`);
    // The heading on a line of its own, each path on one after it.
    if (paths) process.stdout.write(`\nDerived paths (the catalogue):\n${formatStatus(undefined, paths, []).split('\n').slice(1).join('\n')}\n`);
  },
  createLogger,
  'stderr',
);
