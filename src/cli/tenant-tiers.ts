/**
 * The commands of `npm run tenant` (tenant.ts) on tenants' rows: `create`, `list`, `move` (docs/tenancy.md, "Tiers")
 * and `budget` ("Noisy neighbours"). Text a person reads on stdout, progress on stderr.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { ErrorCode, TablegraphError } from '../errors';
import type { Logger } from '../log';
import { Catalogue } from '../evolution/catalogue';
import { STATES_REFRESH_MS } from '../evolution/path-states';
import { moveTenant } from '../maintenance/tenant-move';
import { hasTenantTableTemplates, TENANT_ISOLATIONS, tenantTables, type TenantAccount, type TenantRecord } from '../model/tenancy';
import type { TenantIsolation } from '../model/types';
import { formatTenantAccount, parseTenantAccount } from '../storage/tenant-accounts';
import { checkTenantId, opened, settleMs } from './tenant-common';

/** The tier and account a command is given. @throws TablegraphError BAD_USER_INPUT for a tier or reference it cannot take */
function tierOf(opts: { isolation?: string; account?: string }, fallback: TenantIsolation): { isolation: TenantIsolation; account?: TenantAccount } {
  const isolation = (opts.isolation ?? fallback) as TenantIsolation;
  if (!TENANT_ISOLATIONS.includes(isolation)) {
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `--isolation ${opts.isolation} is not a tier: give ${TENANT_ISOLATIONS.join(', ')}.`);
  }
  if (isolation === 'ACCOUNT' && !opts.account) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, 'Tier ACCOUNT needs --account <reference>.');
  if (isolation !== 'ACCOUNT' && opts.account) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `--account is for tier ACCOUNT, not ${isolation}.`);
  return { isolation, ...(opts.account && { account: parseTenantAccount(opts.account) }) };
}

/** One line of `list`. */
function describe(r: TenantRecord): string {
  const where = r.account ? `${r.isolation} (${formatTenantAccount(r.account)})` : r.isolation;
  const move = r.move ? `, moving to ${r.move.to} (${r.move.phase})` : r.leftover ? `, old entities at ${r.leftover.isolation} not yet deleted` : '';
  const budget = r.budget ? `, its own budget: ${r.budget.transactionsPerSecond} calls/s, ${r.budget.entitiesPerSecond} entities/s` : '';
  return `${r.tenant.padEnd(40)} ${where.padEnd(24)} ${r.state}${move}${budget}`;
}

/**
 * `create <id>`: the tenant's row on a tier, its tables made there; returns once every process has had time to read
 * it (its requests are refused as busy until then).
 */
export async function createCommand(log: Logger, tenant: string, opts: { isolation?: string; account?: string }): Promise<void> {
  checkTenantId(tenant);
  const { config, model, storage } = await opened(log);
  try {
    const tier = tierOf(opts, model.tenancy!.isolation);
    if (tier.isolation !== 'PARTITION_PREFIX' && hasTenantTableTemplates(model)) {
      throw new TablegraphError(ErrorCode.BAD_USER_INPUT, 'A tenant-scoped type keeps a table per period: its tenants stay on PARTITION_PREFIX.');
    }
    const catalogue = new Catalogue(storage.store, config.tablePrefix);
    // A tenant may be created before the first server has started on the account (and made the catalogue).
    await catalogue.ensure();
    const readyAt = Date.now() + 2 * STATES_REFRESH_MS;
    const record: TenantRecord = { tenant, state: 'open', ...tier, readyAt };
    if (!(await catalogue.createTenant(record))) {
      const known = await catalogue.tenant(tenant);
      throw new TablegraphError(
        ErrorCode.CONFLICT,
        `Tenant ${tenant} exists already (${known?.isolation}, ${known?.state}): npm run tenant -- move ${tenant} --isolation … puts it on another tier.`,
      );
    }
    const tenants = storage.tenants!;
    await tenants.refresh(); // reaches its account
    for (const table of tenantTables(model)) {
      const place = tenants.placeOn(table, tenant, tier);
      if (place) await place.store.ensureTable(place.table);
    }
    log.info(
      { tenant, isolation: tier.isolation },
      `tenant ${tenant} created on ${tier.isolation}; servers learn it within ${(2 * STATES_REFRESH_MS) / 1000} s`,
    );
    await sleep(Math.max(0, readyAt - Date.now()));
    process.stdout.write(`tenant ${tenant} created on tier ${tier.isolation}${tier.account ? ` (${formatTenantAccount(tier.account)})` : ''}\n`);
  } finally {
    await storage.close();
  }
}

/** `list`: every tenant with a row. */
export async function listCommand(log: Logger): Promise<void> {
  const { config, storage } = await opened(log);
  try {
    const rows = await new Catalogue(storage.store, config.tablePrefix).tenants();
    const lines = rows.sort((a, b) => (a.tenant < b.tenant ? -1 : 1)).map(describe);
    process.stdout.write(`${[`${'tenant'.padEnd(40)} ${'tier'.padEnd(24)} state`, ...lines, `${rows.length} tenants`].join('\n')}\n`);
  } finally {
    await storage.close();
  }
}

/** A budget option's value: a whole number of 1 or more. @throws TablegraphError BAD_USER_INPUT otherwise */
function perSecond(option: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < 1) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${option} takes a whole number of 1 or more, not ${text}.`);
  return n;
}

/**
 * `budget <id>`: the tenant's own budget a second, or (`--default`) the deployment's again. Servers apply it within
 * their refresh (2 s).
 */
export async function budgetCommand(
  log: Logger,
  tenant: string,
  opts: { transactionsPerSecond?: string; entitiesPerSecond?: string; default?: boolean },
): Promise<void> {
  checkTenantId(tenant);
  const given = opts.transactionsPerSecond !== undefined || opts.entitiesPerSecond !== undefined;
  if (given === (opts.default === true)) {
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, 'Give --transactions-per-second and/or --entities-per-second, or --default.');
  }
  const { config, storage } = await opened(log);
  try {
    const fallback = config.tenantBudget;
    const budget = opts.default
      ? undefined
      : {
          transactionsPerSecond: perSecond('--transactions-per-second', opts.transactionsPerSecond, fallback.transactionsPerSecond),
          entitiesPerSecond: perSecond('--entities-per-second', opts.entitiesPerSecond, fallback.entitiesPerSecond),
        };
    const catalogue = new Catalogue(storage.store, config.tablePrefix);
    if (!(await catalogue.tenant(tenant))) {
      throw new TablegraphError(ErrorCode.NOT_FOUND, `Tenant ${tenant} has no row yet: npm run tenant -- create ${tenant} makes it.`);
    }
    await catalogue.putTenantBudget(tenant, budget);
    const what = budget ? `${budget.transactionsPerSecond} storage calls and ${budget.entitiesPerSecond} entities read a second` : 'the default budget';
    process.stdout.write(`tenant ${tenant}: ${what}; servers apply it within ${STATES_REFRESH_MS / 1000} s\n`);
  } finally {
    await storage.close();
  }
}

/** `move <id>`: the tenant moved to another tier online (src/maintenance/tenant-move.ts). */
export async function moveCommand(log: Logger, tenant: string, opts: { isolation: string; account?: string }): Promise<void> {
  checkTenantId(tenant);
  const { config, model, storage } = await opened(log);
  try {
    const tier = tierOf(opts, model.tenancy!.isolation);
    // Writes sent before every process read the freeze end within a storage call; reads of the old place within a request.
    const freezeMs = 2 * STATES_REFRESH_MS + config.storageTimeoutMs;
    log.info(
      { tenant, to: tier.isolation },
      `moving tenant ${tenant} to ${tier.isolation}: its writes wait about ${Math.round(freezeMs / 1000)} s once its entities are copied`,
    );
    const result = await moveTenant({
      registry: new Catalogue(storage.store, config.tablePrefix),
      directory: storage.tenants!,
      model,
      tenant,
      to: tier.isolation,
      ...(tier.account && { account: tier.account }),
      freezeMs,
      settleMs: settleMs(config),
      onProgress: (p) => log.info(p, p.table ? `${p.step}: ${p.entities} entities of ${p.table}` : `${p.step}`),
    });
    process.stdout.write(
      `tenant ${tenant} moved from ${result.from} to ${result.to}: ${result.copied} entities copied, ${result.recopied} copied again and ${result.removed} removed while its writes waited ${(result.frozenMs / 1000).toFixed(1)} s\n`,
    );
  } finally {
    await storage.close();
  }
}
