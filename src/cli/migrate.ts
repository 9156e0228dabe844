/**
 * `npm run migrate -- plan | apply | status` (docs/schema-changes.md): a schema change on live data, seen and done
 * from the command line.
 *
 * - `plan [--json]`: the configured schema against the recorded one — each change, its class, and for each build
 *   the entities it reads and writes, its transactions, Cosmos DB request units and time at the budget. Writes
 *   nothing (the catalogue table is created if missing). Exit code 1 when a change is refused.
 * - `apply [--drop <Type|Type.field>]… [--retry <path>]… [--budget <entities/s>]`: records the schema (as a
 *   server's start would), then runs its builds here until each is ready or failed, with progress. `--drop` says a
 *   removed stored type or field may go: a type's stored entities are deleted first (EGTs per partition), a field's
 *   values stay, unread. `--retry` starts a failed build again from its checkpoint.
 * - `status [--json]`: the recorded version, the processes running which version, and each path's state and progress.
 *
 * Errors are printed as a sentence with their code (run-main.ts); exit code 1.
 */
import { Command } from 'commander';
import { loadConfig, type Config } from '../runtime/config';
import { createLogger, type Logger } from '../log';
import { ErrorCode, TablegraphError } from '../errors';
import { runBuildsHere } from '../evolution/run-builds';
import { Catalogue } from '../evolution/catalogue';
import { presenceBoard } from '../evolution/presence';
import { deploySchema, schemaLayout } from '../evolution/deployment';
import { planMigration } from '../evolution/migration-plan';
import { progressOf } from '../evolution/path-states';
import { formatPlan, formatStatus } from '../evolution/migration-report';
import { dropStoredType } from '../evolution/drop-type';
import { compileConfiguredSchema } from '../runtime/configured-schema';
import { openStorage } from '../runtime/open-storage';
import { positiveIntArgument, runMain } from './run-main';

const collect = (value: string, previous: string[]) => [...previous, value];

async function plan(config: Config, log: Logger, json: boolean): Promise<void> {
  const { model, schema } = compileConfiguredSchema(config);
  const storage = await openStorage(config, log, model);
  try {
    const result = await planMigration(new Catalogue(storage.store, config.tablePrefix), schemaLayout(model, schema), model, config.builds.entitiesPerSecond);
    process.stdout.write(json ? `${JSON.stringify(result, (k, v: unknown) => (k === 'node' ? undefined : v), 2)}\n` : formatPlan(result));
    if (result.changes.some((c) => c.class === 'refused')) process.exitCode = 1;
  } finally {
    await storage.close();
  }
}

async function apply(config: Config, log: Logger, opts: { drop: string[]; retry: string[]; budget?: number }): Promise<void> {
  const { model, schema, sdl } = compileConfiguredSchema(config);
  const storage = await openStorage(config, log, model);
  try {
    const catalogue = new Catalogue(storage.store, config.tablePrefix);
    await catalogue.ensure();
    if (opts.drop.length > 0) await drop(catalogue, opts.drop, log);
    for (const id of opts.retry) await retry(catalogue, id);
    const layout = schemaLayout(model, schema);
    // apply alone may start a re-key: the servers of the recorded version serve the type until it is done.
    const deployed = await deploySchema({ catalogue, schema: layout, sdl, log, rekeys: true });
    process.stdout.write(`version ${deployed.version}: ${deployed.outcome}${deployed.changes.length > 0 ? `, ${deployed.changes.length} change(s)` : ''}\n`);
    const rows = await runBuildsHere({
      catalogue,
      store: storage.store,
      blobs: storage.blobs,
      model,
      layout,
      config,
      log,
      budget: opts.budget,
      command: 'migrate',
    });
    process.stdout.write(formatStatus(deployed.version, rows, []));
    if (rows.some((p) => p.state === 'failed')) process.exitCode = 1;
  } finally {
    await storage.close();
  }
}

/** `--drop`: a removed type's stored entities deleted, then every coordinate recorded as dropped. */
async function drop(catalogue: Catalogue, coordinates: string[], log: Logger): Promise<void> {
  const current = await catalogue.deployment();
  if (!current) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, 'No deployment is recorded: there is nothing to drop.', { reason: 'NothingDeployed' });
  for (const c of coordinates) {
    const [type, field] = c.split('.');
    const recorded = current.layout.types[type];
    if (!recorded || (field && !recorded.fields[field])) {
      throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `--drop ${c}: the recorded version ${current.version} stores no ${field ? 'field' : 'type'} ${c}.`, {
        reason: 'UnknownCoordinate',
      });
    }
    if (!field) {
      const deleted = await dropStoredType(catalogue.store, current.layout, type);
      log.info({ type, table: recorded.table, deleted }, 'dropped: the type’s stored entities are deleted');
    }
  }
  if (!(await catalogue.recordDrops(current, coordinates)))
    throw new TablegraphError(ErrorCode.CONFLICT, 'The deployment changed meanwhile: run the command again.');
}

/** `--retry`: a failed build set to building again, from its checkpoint, to end with a repair pass. */
async function retry(catalogue: Catalogue, id: string): Promise<void> {
  const row = await catalogue.path(id);
  if (!row)
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `--retry ${id}: no such path (npm run migrate -- status lists them).`, { reason: 'UnknownPath' });
  if (row.state !== 'failed') return;
  const next = await catalogue.putPath({ ...row, state: 'building', problem: undefined, needsRepair: true, leaseOwner: undefined, leaseUntil: undefined });
  if (!next) throw new TablegraphError(ErrorCode.CONFLICT, `${id} changed meanwhile: run the command again.`);
}

async function status(config: Config, log: Logger, json: boolean): Promise<void> {
  const storage = await openStorage(config, log);
  try {
    const catalogue = new Catalogue(storage.store, config.tablePrefix);
    await catalogue.ensure();
    const board = presenceBoard(catalogue, storage.blobs, config.tablePrefix);
    const [deployment, paths, servers] = await Promise.all([catalogue.deployment(), catalogue.paths(), board.servers()]);
    if (json) {
      const rows = paths.map((p) => ({ path: p.id, state: p.state, ...progressOf(p), problem: p.problem, leaseOwner: p.leaseOwner }));
      process.stdout.write(`${JSON.stringify({ version: deployment?.version ?? null, servers, paths: rows }, null, 2)}\n`);
    } else process.stdout.write(formatStatus(deployment?.version, paths, servers));
  } finally {
    await storage.close();
  }
}

runMain(
  'migrate',
  async (log) => {
    const program = new Command('migrate').description('change a schema on live data: plan it, apply it, watch it');
    const config = () => {
      const c = loadConfig();
      log.level = c.logLevel;
      return c;
    };
    program
      .command('plan')
      .description('what deploying the configured schema would do, and what it costs; writes nothing')
      .option('--json', 'print the plan as JSON')
      .action((o: { json?: boolean }) => plan(config(), log, !!o.json));
    program
      .command('apply')
      .description('record the configured schema and run its builds here until they are done')
      .option('--drop <coordinate>', 'a removed type (its entities are deleted) or field (its values stay, unread) that may go; repeatable', collect, [])
      .option('--retry <path>', 'start a failed build again from its checkpoint; repeatable', collect, [])
      .option('--budget <n>', 'entities written per second at most', positiveIntArgument)
      .action((o: { drop: string[]; retry: string[]; budget?: number }) => apply(config(), log, o));
    program
      .command('status')
      .description('the recorded version, the processes running, and each path’s state')
      .option('--json', 'print the status as JSON')
      .action((o: { json?: boolean }) => status(config(), log, !!o.json));
    await program.parseAsync();
  },
  createLogger,
  'stderr',
);
