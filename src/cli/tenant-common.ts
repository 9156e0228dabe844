/** What the tenant commands share (tenant.ts, tenant-tiers.ts): the id check, the settle time, the opened storage. */
import { ErrorCode, TablegraphError } from '../errors';
import type { Logger } from '../log';
import { STATES_REFRESH_MS } from '../evolution/path-states';
import { TENANT_ID } from '../model/tenancy';
import { loadConfig, type Config } from '../runtime/config';
import { compileConfiguredSchema } from '../runtime/configured-schema';
import { openStorage } from '../runtime/open-storage';

/**
 * How long a delete waits after closing the tenant (ms): every process learns it within the refresh interval (twice,
 * for one that read just before), and a request or a message handled before then may still write for as long as a
 * request may run, or a message wait for its write, and a storage call take.
 */
export function settleMs(config: Config): number {
  return 2 * STATES_REFRESH_MS + Math.max(config.requestTimeoutMs, config.settleMs) + config.storageTimeoutMs;
}

/** @throws TablegraphError BAD_USER_INPUT for a text that is no tenant id */
export function checkTenantId(tenant: string): void {
  if (!TENANT_ID.test(tenant))
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${JSON.stringify(tenant)} is not a tenant id (1 to 63 lowercase letters, digits and hyphens)`);
}

/** The configuration, the schema (with @tenancy) and the storage a tenant command works on. */
export async function opened(log: Logger) {
  const config = loadConfig();
  log.level = config.logLevel;
  const { model } = compileConfiguredSchema(config);
  if (!model.tenancy) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, 'The schema has no @tenancy: it has no tenants.');
  const storage = await openStorage(config, log, model);
  return { config, model, storage };
}
