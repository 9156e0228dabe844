/**
 * What a running process knows of a `@tenancy` schema's tenants (docs/tenancy.md): each one's tier and state, read from
 * the catalogue's `tenant` partition at start-up and every `refreshMs` after, as the paths' states are
 * (path-states.ts). It is the store's placement (src/storage/table-placement.ts): a call on a tenant-scoped table goes
 * to the tenant's own table (tier `TABLE`) or account (tier `ACCOUNT`), by the tenant its PartitionKey starts with; a
 * write of a tenant being frozen by a move is refused as throttled (STORAGE_BUSY, reason TenantMoving), so every
 * writer — a request, the worker, a load — waits and tries again.
 *
 * A tenant gets its row when a process first serves it (admit), on the schema's default tier, or when
 * `npm run tenant -- create` makes it; so every tenant that has entities has a row, and a scan of a whole table finds
 * every place. A failed refresh keeps the last known rows; a tenant once closed stays closed here.
 */
import { ErrorCode, TablegraphError } from '../errors';
import type { Logger } from '../log';
import { tenantOfPartitionKey, tenantTable, type TenantAccount, type TenantRecord, type TenantRegistry } from '../model/tenancy';
import type { TenantIsolation } from '../model/types';
import type { ScanPlace, TablePlace, TablePlacement } from '../storage/table-placement';
import type { TableStore } from '../storage/table-store';
import type { ServiceAccess, StorageTarget } from '../storage/storage-types';
import { STATES_REFRESH_MS } from './path-states';

/** How a process reaches a tenant's own account (src/storage/tenant-accounts.ts). */
export type ReachAccount = (account: TenantAccount) => Promise<ServiceAccess & { target?: StorageTarget }>;

export interface TenantDirectoryOptions {
  registry: TenantRegistry & { tenant(tenant: string): Promise<TenantRecord | undefined> };
  /** The deployment's store: the shared tables, and the account of tier `TABLE`. */
  store: TableStore;
  /** The tenant-scoped tables, the table prefix included: those placed. */
  tables: Iterable<string>;
  /** The tier of a tenant without a row of its own (`@tenancy(isolation:)`). */
  defaultIsolation: TenantIsolation;
  reach: ReachAccount;
  refreshMs?: number;
  log?: Logger;
}

/** How long a writer waits before trying a frozen tenant again (ms): a refresh interval. */
const MOVING_RETRY_MS = STATES_REFRESH_MS;

export class TenantDirectory implements TablePlacement<TableStore> {
  private records = new Map<string, TenantRecord>();
  private readonly closed = new Set<string>();
  private readonly tables: Set<string>;
  /** The stores of tenants' accounts, by their reference (JSON). */
  private readonly accounts = new Map<string, TableStore>();
  /** The deployment's account without a placement: the shared tables themselves, and the tables of tier TABLE. */
  readonly sharedStore: TableStore;
  private timer?: NodeJS.Timeout;

  constructor(private readonly opts: TenantDirectoryOptions) {
    this.tables = new Set(opts.tables);
    this.sharedStore = opts.store.sibling();
  }

  /** Whether `tenant` is closed or deleted (its requests refused, its messages dropped). */
  has(tenant: string): boolean {
    return this.closed.has(tenant);
  }

  /** Whether the tenant's writes wait: a move is copying its last changes (TenantMove `freeze`). */
  frozen(tenant: string): boolean {
    return this.records.get(tenant)?.move?.phase === 'freeze';
  }

  /** The tenant's row as last read; undefined when it has none. */
  record(tenant: string): TenantRecord | undefined {
    return this.records.get(tenant);
  }

  /** The tier the tenant's entities are served from now. */
  isolationOf(tenant: string): TenantIsolation {
    return this.records.get(tenant)?.isolation ?? this.opts.defaultIsolation;
  }

  /**
   * Makes sure the tenant has a row (on the default tier, when it has none yet) and that its place can be reached:
   * called once per tenant and process before its first request is served.
   * @throws TablegraphError FORBIDDEN (reason TenantNotCreated) when the default tier is ACCOUNT and the tenant has no
   *   row (`npm run tenant -- create` gives it its account); STORAGE_BUSY (reason TenantMoving) until a tenant just
   *   created is known everywhere; CONFIG_INVALID when its account cannot be reached
   */
  async admit(tenant: string): Promise<void> {
    let record = this.records.get(tenant);
    if (!record) {
      if (this.opts.defaultIsolation === 'ACCOUNT') record = await this.opts.registry.tenant(tenant);
      else {
        const fresh: TenantRecord = { tenant, state: 'open', isolation: this.opts.defaultIsolation };
        record = (await this.opts.registry.createTenant(fresh)) ? fresh : await this.opts.registry.tenant(tenant);
      }
      if (!record) {
        throw new TablegraphError(ErrorCode.FORBIDDEN, `Tenant ${tenant} has no account yet: npm run tenant -- create ${tenant} --isolation ACCOUNT …`, {
          reason: 'TenantNotCreated',
        });
      }
      this.learn(record);
    }
    await this.reachAll(record);
    if (record.readyAt !== undefined && record.readyAt > Date.now()) throw moving(tenant, record.readyAt - Date.now());
  }

  /** TablePlacement: the tenant's own table or account for a tenant-scoped table; undefined for the shared one. */
  placeOf(table: string, partitionKey: string, forWrite = false): TablePlace<TableStore> | undefined {
    if (!this.tables.has(table)) return undefined;
    const tenant = tenantOfPartitionKey(partitionKey);
    if (tenant === undefined) return undefined;
    const record = this.records.get(tenant);
    if (forWrite && record?.move?.phase === 'freeze') throw moving(tenant, MOVING_RETRY_MS);
    return this.placeOn(table, tenant, record ?? { isolation: this.opts.defaultIsolation });
  }

  /**
   * Where `record`'s tenant keeps `table` on its current tier (or on `isolation`/`account` given: a move's target).
   * @throws TablegraphError STORAGE_UNAVAILABLE when its account is not reached yet
   */
  placeOn(table: string, tenant: string, record: Pick<TenantRecord, 'isolation' | 'account'>): TablePlace<TableStore> | undefined {
    if (record.isolation === 'PARTITION_PREFIX') return undefined;
    if (record.isolation === 'TABLE') return { store: this.sharedStore, table: tenantTable(table, tenant) };
    const store = record.account && this.accounts.get(JSON.stringify(record.account));
    if (!store) {
      throw new TablegraphError(ErrorCode.STORAGE_UNAVAILABLE, `The account of tenant ${tenant} is not reached yet: try again in a few seconds.`, {
        tenant,
      });
    }
    return { store, table };
  }

  /** TablePlacement: the shared table (without the tenants kept elsewhere), then each tenant's own, by tenant id. */
  scanPlaces(table: string): Array<ScanPlace<TableStore>> | undefined {
    if (!this.tables.has(table)) return undefined;
    const shared: ScanPlace<TableStore> = { key: '', keep: (pk) => this.isolationOf(tenantOfPartitionKey(pk) ?? '') === 'PARTITION_PREFIX' };
    const own = [...this.records.values()]
      .filter((r) => r.isolation !== 'PARTITION_PREFIX' && r.state !== 'deleted')
      .sort((a, b) => (a.tenant < b.tenant ? -1 : 1))
      .map((r): ScanPlace<TableStore> => ({ key: r.tenant, place: this.placeOn(table, r.tenant, r), keep: (pk) => tenantOfPartitionKey(pk) === r.tenant }));
    return [shared, ...own];
  }

  /** Reads every tenant's row now, and reaches the accounts they name. @throws from the catalogue */
  async refresh(): Promise<void> {
    const rows = await this.opts.registry.tenants().catch((e: unknown) => {
      // No catalogue yet (the first start): no tenant has a row.
      if (e instanceof TablegraphError && e.code === ErrorCode.NOT_FOUND) return [];
      throw e;
    });
    const next = new Map<string, TenantRecord>();
    for (const r of rows) next.set(r.tenant, r);
    // A tenant admitted here since the read began keeps its row.
    for (const [tenant, r] of this.records) if (!next.has(tenant)) next.set(tenant, r);
    this.records = next;
    for (const r of rows) {
      this.learn(r);
      await this.reachAll(r).catch((e: unknown) => this.opts.log?.warn({ err: e, tenant: r.tenant }, 'tenants: an account could not be reached'));
    }
  }

  /** Refreshes every `refreshMs` (default STATES_REFRESH_MS) until `stop`. */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      this.refresh().catch((e: unknown) => this.opts.log?.warn({ err: e }, 'tenants: the catalogue did not answer; keeping the last known'));
    }, this.opts.refreshMs ?? STATES_REFRESH_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private learn(record: TenantRecord): void {
    this.records.set(record.tenant, record);
    if (record.state !== 'open') this.closed.add(record.tenant);
  }

  /** The stores of the accounts the record names (its own, and a move's target), made once. */
  private async reachAll(record: TenantRecord): Promise<void> {
    for (const account of [record.account, record.move?.account]) {
      if (!account || this.accounts.has(JSON.stringify(account))) continue;
      const access = await this.opts.reach(account);
      this.accounts.set(JSON.stringify(account), this.opts.store.sibling(access));
    }
  }
}

/** A frozen tenant's write refused as throttled, so that every writer tries it again after `ms`. */
function moving(tenant: string, ms: number): TablegraphError {
  return new TablegraphError(ErrorCode.STORAGE_BUSY, `Tenant ${tenant} is moving between tiers: try again in a few seconds.`, {
    reason: 'TenantMoving',
    retryAfterMs: Math.max(1000, Math.ceil(ms)),
  });
}
