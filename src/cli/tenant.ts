/**
 * The tenants of a schema with `@tenancy` (docs/tenancy.md), on the configured storage or the embedded Azurite:
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
import { Catalogue } from '../evolution/catalogue';
import { STATES_REFRESH_MS } from '../evolution/path-states';
import { TENANT_ID } from '../model/tenancy';
import { loadConfig, type Config } from '../runtime/config';
import { compileConfiguredSchema } from '../runtime/configured-schema';
import { openStorage } from '../runtime/open-storage';
import { runMain } from './run-main';

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

/**
 * How long a delete waits after closing the tenant (ms): every process learns it within the refresh interval (twice,
 * for one that read just before), and a request or a message handled before then may still write for as long as a
 * request may run, or a message wait for its write, and a storage call take.
 */
function settleMs(config: Config): number {
  return 2 * STATES_REFRESH_MS + Math.max(config.requestTimeoutMs, config.settleMs) + config.storageTimeoutMs;
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
    const deleted = await deleteTenant({
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
    process.stdout.write(`${[...lines, `tenant ${tenant} deleted: ${total} entities, ${deleted.blobs} blobs; its id stays closed`].join('\n')}\n`);
  } finally {
    await storage.close();
  }
}

/** @throws TablegraphError BAD_USER_INPUT for a text that is no tenant id */
function checkTenantId(tenant: string): void {
  if (!TENANT_ID.test(tenant))
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${JSON.stringify(tenant)} is not a tenant id (1 to 63 lowercase letters, digits and hyphens)`);
}

/** The configuration, the schema (with @tenancy) and the storage a tenant command works on. */
async function opened(log: Logger) {
  const config = loadConfig();
  log.level = config.logLevel;
  const { model } = compileConfiguredSchema(config);
  if (!model.tenancy) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, 'The schema has no @tenancy: it has no tenants.');
  const storage = await openStorage(config, log, model);
  return { config, model, storage };
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
