/**
 * `npm run tenant -- export <id> --out <folder>`: a tenant's entities, under `@tenancy`, as NDJSON files and a load
 * manifest (src/maintenance/tenant-export.ts, docs/tenancy.md), on the configured storage or the embedded Azurite. It
 * reads the tenant's key range of each table on purpose — a maintenance read, never a request path. Progress on stderr;
 * what was written on stdout. Exit code 0 once every file and the manifest are written, 1 on an error.
 */
import path from 'node:path';
import { Command } from 'commander';
import { ErrorCode, TablegraphError } from '../errors';
import { createLogger, type Logger } from '../log';
import { exportTenant } from '../maintenance/tenant-export';
import { TENANT_ID } from '../model/tenancy';
import { loadConfig } from '../runtime/config';
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
    program.parse();
    await done;
  },
  createLogger,
  'stderr',
);

async function exportCommand(log: Logger, tenant: string, out: string): Promise<void> {
  if (!TENANT_ID.test(tenant))
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${JSON.stringify(tenant)} is not a tenant id (1 to 63 lowercase letters, digits and hyphens)`);
  const config = loadConfig();
  log.level = config.logLevel;
  const { model } = compileConfiguredSchema(config);
  if (!model.tenancy) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, 'The schema has no @tenancy: it has no tenants.');
  const storage = await openStorage(config, log, model);
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
