/**
 * The tenants of a schema with `@tenancy` (docs/tenancy.md), on the configured storage or the embedded Azurite:
 * - `npm run tenant -- create <id> [--isolation TABLE|ACCOUNT|PARTITION_PREFIX] [--account <reference>]`: the tenant's
 *   row, on a tier, before its first request;
 * - `npm run tenant -- list`: every tenant with a row, its tier, account reference and state;
 * - `npm run tenant -- move <id> --isolation … [--account <reference>]`: the tenant moved to another tier, online
 *   (src/maintenance/tenant-move.ts);
 * - `npm run tenant -- budget <id> --transactions-per-second N --entities-per-second M | --default`: its own budget;
 * - `npm run tenant -- export <id> --out <folder>`: the tenant's entities as NDJSON files and a load manifest
 *   (src/maintenance/tenant-export.ts);
 * - `npm run tenant -- delete <id> --yes`: the tenant closed, then every entity of its key range and the blobs they
 *   name deleted (src/maintenance/tenant-delete.ts).
 * Each reads the tenant's key range of each table on purpose — a maintenance read, never a request path. Progress on
 * stderr; what was done on stdout. Exit code 0 once done, 1 on an error.
 */
import path from 'node:path';
import { Command } from 'commander';
import { ErrorCode, TablegraphError } from '../errors';
import { createLogger, type Logger } from '../log';
import { exportTenant } from '../maintenance/tenant-export';
import { deleteTenant } from '../maintenance/tenant-delete';
import { purgeTenantMessages } from '../maintenance/tenant-messages';
import { workQueueNames } from '../queue/sender';
import { Catalogue } from '../evolution/catalogue';
import { tenantTable, tenantTables } from '../model/tenancy';
import { budgetCommand, createCommand, listCommand, moveCommand } from './tenant-tiers';
import { checkTenantId, opened, settleMs } from './tenant-common';
import { runMain } from './run-main';
import { backupBlobs } from '../runtime/backup-account';
import { purgeTenantFromBackup } from '../backup/tenant-purge';
import type { Config } from '../runtime/config';

runMain(
  'tenant',
  async (log) => {
    const program = new Command('tenant').description('the tenants of a schema with @tenancy');
    let done: Promise<void> = Promise.resolve();
    program
      .command('export <id>')
      .description("write the tenant's entities as NDJSON files and a load manifest (npm run load -- --manifest <folder>/manifest.json --tenant <id>)")
      .requiredOption('--out <folder>', 'the folder the files go to (made if missing)')
      .action((id: string, opts: { out: string }) => {
        done = exportCommand(log, id, path.resolve(opts.out));
      });
    program
      .command('create <id>')
      .description("give the tenant its row, on a tier, before its first request (a tenant without one gets the schema's default tier when first served)")
      .option('--isolation <tier>', "PARTITION_PREFIX, TABLE or ACCOUNT (default: the schema's)")
      .option('--account <reference>', 'tier ACCOUNT: env:<VARIABLE>, keyvault:<secret URL> or entra:<Table endpoint> (never a connection string)')
      .action((id: string, opts: { isolation?: string; account?: string }) => {
        done = createCommand(log, id, opts);
      });
    program
      .command('list')
      .description('every tenant with a row: its tier, account reference, state and any move under way')
      .action(() => {
        done = listCommand(log);
      });
    program
      .command('move <id>')
      .description('move the tenant to another tier online: reads go on throughout; its writes wait a few seconds while the last changes are copied')
      .requiredOption('--isolation <tier>', 'PARTITION_PREFIX, TABLE or ACCOUNT')
      .option('--account <reference>', 'tier ACCOUNT: env:<VARIABLE>, keyvault:<secret URL> or entra:<Table endpoint>')
      .action((id: string, opts: { isolation: string; account?: string }) => {
        done = moveCommand(log, id, opts);
      });
    program
      .command('budget <id>')
      .description("give the tenant a budget a second of its own, instead of the deployment's (TABLEGRAPH_TENANT_*_PER_SECOND)")
      .option('--transactions-per-second <n>', "storage calls a second (default: the deployment's)")
      .option('--entities-per-second <n>', "entities read a second (default: the deployment's)")
      .option('--default', "the deployment's budget again")
      .action((id: string, opts: { transactionsPerSecond?: string; entitiesPerSecond?: string; default?: boolean }) => {
        done = budgetCommand(log, id, opts);
      });
    program
      .command('delete <id>')
      .description('close the tenant (its requests refused, its messages dropped), then delete every entity of its key range and the blobs they name')
      .option('--yes', 'delete: without it, nothing is done')
      .action((id: string, opts: { yes?: boolean }) => {
        done = deleteCommand(log, id, opts.yes === true);
      });
    program.parse();
    await done;
  },
  createLogger,
  'stderr',
);

/** How long a delete waits for a capture pass after the tenant's entities are gone (ms): six intervals, at least a minute. */
function captureWaitMs(config: Config): number {
  return Math.max(60_000, 6 * config.backup.captureIntervalMs);
}

async function deleteCommand(log: Logger, tenant: string, yes: boolean): Promise<void> {
  checkTenantId(tenant);
  if (!yes) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `Deleting tenant ${tenant} cannot be undone: run it again with --yes.`);
  const { config, model, storage } = await opened(log);
  try {
    const wait = settleMs(config);
    log.info(
      { tenant, waitSeconds: Math.round(wait / 1000) },
      `closing tenant ${tenant}: its requests are refused from now on; deleting its entities in ${Math.round(wait / 1000)} s, once no write of it can be in flight`,
    );
    const directory = storage.tenants!;
    const record = directory.record(tenant);
    const ownTables = record?.isolation === 'TABLE' ? tenantTables(model).map((t) => tenantTable(t, tenant)) : [];
    const backup = backupBlobs(config, storage.blobs);
    const deleted = await deleteTenant({
      ownTables,
      sharedStore: directory.sharedStore,
      ...(record?.isolation === 'ACCOUNT' && { account: directory.placeOn(tenantTables(model)[0], tenant, record)!.store }),
      purgeMessages: () => purgeTenantMessages(storage.queues, workQueueNames(config.tablePrefix).poison, model, tenant),
      // Its changes and rows out of the backup, after a capture pass (with capture off here, none is waited for).
      ...(backup.available() && {
        purgeBackup: (deletedAt: number) =>
          purgeTenantFromBackup({
            blobs: backup,
            container: config.backup.container,
            model,
            tenant,
            deletedAt,
            captureWaitMs: config.backup.capture ? captureWaitMs(config) : 0,
            onProgress: (p) => log.info(p, `backup: ${p.removed} of its ${p.kind === 'pass' ? 'changes' : 'rows'} taken out of ${p.kind} ${p.id}`),
          }),
      }),
      store: storage.store,
      blobs: storage.blobs,
      model,
      catalogue: new Catalogue(storage.store, config.tablePrefix),
      tablePrefix: config.tablePrefix,
      tenant,
      settleMs: wait,
      onProgress: (p) => log.info(p, `pass ${p.pass}: deleted ${p.entities} entities of ${p.table}`),
    });
    const lines = Object.entries(deleted.entities).map(([table, n]) => `${table.padEnd(24)} ${String(n).padStart(8)} entities deleted`);
    const total = Object.values(deleted.entities).reduce((a, b) => a + b, 0);
    const b = deleted.backup;
    const fromBackup = b
      ? [
          `backup: ${b.changes} changes out of ${b.passes} capture passes, ${b.rows} rows and ${b.blobs} blob copies out of ${b.snapshots} snapshots, ${b.abandoned} segments of passes cut short deleted`,
          ...b.incompleteSnapshots.map(
            (id) => `warning: snapshot ${id} is not complete (under way, or cut short) and may hold the tenant's rows: run this delete again once it is`,
          ),
        ]
      : [];
    const messages = deleted.messages ?? 0;
    process.stdout.write(
      `${[...lines, ...fromBackup, `tenant ${tenant} deleted: ${total} entities, ${deleted.blobs} blobs, ${messages} poison queue messages; its id stays closed`].join('\n')}\n`,
    );
  } finally {
    await storage.close();
  }
}

async function exportCommand(log: Logger, tenant: string, out: string): Promise<void> {
  checkTenantId(tenant);
  const { model, storage } = await opened(log);
  try {
    log.info(
      { tenant, out, storage: storage.target },
      "exporting: reading the tenant's key range of each table on purpose (a maintenance read, not a request path)",
    );
    const result = await exportTenant({
      store: storage.store,
      model,
      tenant,
      out,
      onProgress: (p) => log.info({ type: p.type, entities: p.entities }, `exported ${p.entities} ${p.type}`),
    });
    const lines = result.types.map(
      (t) =>
        `${t.type.padEnd(16)} ${String(t.entities).padStart(8)} entities → ${path.relative(process.cwd(), t.file)}${t.blobsLeftOut > 0 ? ` (${t.blobsLeftOut} @blob values left out)` : ''}`,
    );
    const total = result.types.reduce((n, t) => n + t.entities, 0);
    process.stdout.write(
      `${[...lines, `${total} entities of tenant ${tenant}; load them with: npm run load -- --manifest ${path.relative(process.cwd(), result.manifest)} --tenant <id>`].join('\n')}\n`,
    );
  } finally {
    await storage.close();
  }
}
