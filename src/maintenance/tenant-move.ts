/**
 * A tenant moved between tiers online (`npm run tenant -- move <id> --isolation TABLE|ACCOUNT|PARTITION_PREFIX`,
 * docs/tenancy.md "Moving a tenant"). Its entities keep their keys on every tier, so a move copies them as they are:
 * 1. `copy`: the move is recorded in the tenant's catalogue row; every entity of the tenant's key range in every
 *    tenant-scoped table is copied to the new place, while reads and writes go on at the old one.
 * 2. `freeze`: the row says so; within the refresh interval every process refuses the tenant's writes as throttled
 *    (STORAGE_BUSY, reason TenantMoving: clients and the worker try again) and serves its reads at the old place.
 *    `freezeMs` is waited out, so no write sent before can still land; then what changed at the old place since the
 *    copy began is copied again, and what the new place holds that the old one no longer does is deleted.
 * 3. The row names the new tier, in one write: a process that reads it serves reads and writes there; one that has not
 *    yet still refuses writes and reads the old place, which is left as it is.
 * 4. After `settleMs` more (no read of the old place can still be running), the old place's entities are deleted
 *    (a tenant's own tables dropped).
 * Each step is recorded before it is taken, so a move cut short goes on where it stopped when run again.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { ErrorCode, TablegraphError } from '../errors';
import { hasTenantTableTemplates, tenantPartitionRange, tenantTables, type TenantAccount, type TenantRecord, type TenantRegistry } from '../model/tenancy';
import type { Model, TenantIsolation } from '../model/types';
import type { TablePlace } from '../storage/table-placement';
import type { TableStore } from '../storage/table-store';
import type { EntityToWrite, StoredEntity, TypedValue } from '../storage/storage-types';
import { deleteEntities } from './tenant-delete';
import { limitsFor } from '../storage/limits';

/** Slack for the service's clock against this one (ms): a change this much before the copy began is copied again. */
const CLOCK_SLACK_MS = 5 * 60_000;

/** What a move needs of the process's tenant directory (src/evolution/tenant-directory.ts). */
export interface TenantPlaces {
  /** Reads the tenants' rows again, and reaches the accounts they name. */
  refresh(): Promise<void>;
  /** Where the tenant keeps `table` on a tier; undefined for the shared table. */
  placeOn(table: string, tenant: string, tier: Pick<TenantRecord, 'isolation' | 'account'>): TablePlace<TableStore> | undefined;
  /** The deployment's account without a placement: the shared tables themselves. */
  readonly sharedStore: TableStore;
}

export interface TenantMoveOptions {
  registry: TenantRegistry & { tenant(tenant: string): Promise<TenantRecord | undefined> };
  /** The process's directory: it reaches the new place (its account), and is refreshed as the row changes. */
  directory: TenantPlaces;
  model: Model;
  tenant: string;
  to: TenantIsolation;
  /** Tier ACCOUNT: how the new account is reached. */
  account?: TenantAccount;
  /**
   * How long after the freeze no write of the tenant can still land (ms): every process has read the row (twice the
   * refresh interval), and a storage call sent before has ended (the storage timeout).
   */
  freezeMs: number;
  /** How long after the switch no read of the old place can still be running (ms): the refresh, a request, a call. */
  settleMs: number;
  onProgress?(p: { step: 'copy' | 'freeze' | 'switched' | 'cleaned'; table?: string; entities?: number }): void;
}

/** What a move did: entities copied in each step, and those deleted at the old place. */
export interface TenantMoveResult {
  from: TenantIsolation;
  to: TenantIsolation;
  copied: number;
  recopied: number;
  removed: number;
  /** How long the tenant's writes were refused (ms). */
  frozenMs: number;
}

/**
 * Moves one tenant; run again, goes on where a move cut short stopped.
 * @throws TablegraphError BAD_USER_INPUT for a tenant closed or deleted, a move to another tier under way, tier ACCOUNT
 *   without an account, a schema whose tenant-scoped types keep a table per period; storage errors as mapped
 */
export async function moveTenant(opts: TenantMoveOptions): Promise<TenantMoveResult> {
  let record = await startingRecord(opts);
  const result: TenantMoveResult = { from: record.isolation, to: opts.to, copied: 0, recopied: 0, removed: 0, frozenMs: 0 };
  if (record.move === undefined && sameTier(record, opts)) {
    await removeLeftover(opts, record, result);
    return result;
  }
  if (record.move === undefined) {
    const now = Date.now();
    record = { ...record, move: { to: opts.to, ...(opts.account && { account: opts.account }), phase: 'copy', since: now, copyFrom: now } };
    await opts.registry.putTenant(record);
  }
  await opts.directory.refresh(); // reaches the new account
  const move = record.move!;
  if (move.phase === 'copy') {
    for (const table of tenantTables(opts.model)) result.copied += await copyTable(opts, record, table, {});
    record = { ...record, move: { ...move, phase: 'freeze', since: Date.now() } };
    await opts.registry.putTenant(record);
    opts.onProgress?.({ step: 'freeze' });
  }
  const frozen = record.move!.since;
  await sleep(Math.max(0, frozen + opts.freezeMs - Date.now()));
  for (const table of tenantTables(opts.model)) {
    result.recopied += await copyTable(opts, record, table, { since: new Date(record.move!.copyFrom - CLOCK_SLACK_MS) });
    result.removed += await removeStale(opts, record, table);
  }
  const switched: TenantRecord = {
    tenant: record.tenant,
    state: record.state,
    isolation: opts.to,
    ...(opts.to === 'ACCOUNT' && { account: record.move!.account }),
    leftover: { isolation: record.isolation, ...(record.account && { account: record.account }) },
  };
  await opts.registry.putTenant(switched);
  result.frozenMs = Date.now() - frozen;
  opts.onProgress?.({ step: 'switched' });
  await sleep(opts.settleMs);
  await opts.directory.refresh();
  await removeLeftover(opts, switched, result);
  return result;
}

/** The tenant's row, checked for the move asked (made, on the default tier, when it has none). */
async function startingRecord(opts: TenantMoveOptions): Promise<TenantRecord> {
  if (hasTenantTableTemplates(opts.model)) {
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, 'A tenant-scoped type keeps a table per period: its tenants stay on PARTITION_PREFIX.');
  }
  if (opts.to === 'ACCOUNT' && !opts.account) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, 'A move to tier ACCOUNT needs --account.');
  let record = await opts.registry.tenant(opts.tenant);
  if (!record) {
    record = { tenant: opts.tenant, state: 'open', isolation: opts.model.tenancy!.isolation };
    if (!(await opts.registry.createTenant(record))) record = (await opts.registry.tenant(opts.tenant))!;
  }
  if (record.state !== 'open') throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `Tenant ${opts.tenant} is ${record.state}: it cannot be moved.`);
  if (record.move && (record.move.to !== opts.to || JSON.stringify(record.move.account) !== JSON.stringify(opts.account))) {
    throw new TablegraphError(
      ErrorCode.BAD_USER_INPUT,
      `Tenant ${opts.tenant} is being moved to tier ${record.move.to}: run that move again to finish it first.`,
    );
  }
  return record;
}

function sameTier(record: TenantRecord, opts: TenantMoveOptions): boolean {
  return record.isolation === opts.to && JSON.stringify(record.account) === JSON.stringify(opts.account);
}

/** Where `record`'s tenant keeps `table` on a tier: its own table or account, or the shared table (no placement). */
function placeOf(opts: TenantMoveOptions, table: string, tier: Pick<TenantRecord, 'isolation' | 'account'>): TablePlace<TableStore> {
  return opts.directory.placeOn(table, opts.tenant, tier) ?? { store: opts.directory.sharedStore, table };
}

/** The tenant's entities of `table` at the old place (changed `since`, when given) written at the new one. @returns how many */
async function copyTable(opts: TenantMoveOptions, record: TenantRecord, table: string, filter: { since?: Date }): Promise<number> {
  const from = placeOf(opts, table, record);
  const to = placeOf(opts, table, { isolation: record.move!.to, account: record.move!.account });
  await to.store.ensureTable(to.table);
  await from.store.ensureTable(from.table);
  let copied = 0;
  const range = { partitionKeyRange: tenantPartitionRange(opts.tenant), ...(filter.since && { committedSince: filter.since }) };
  for await (const page of from.store.scan(from.table, range)) {
    await writePage(to, page.map(writable));
    copied += page.length;
    opts.onProgress?.({ step: filter.since ? 'freeze' : 'copy', table, entities: copied });
  }
  return copied;
}

/** Entities upserted (replaced whole) in EGTs of one partition; one by one where a batch is over the EGT's limits. */
async function writePage(to: TablePlace<TableStore>, entities: EntityToWrite[]): Promise<void> {
  const byPartition = new Map<string, EntityToWrite[]>();
  for (const e of entities) byPartition.set(e.partitionKey, [...(byPartition.get(e.partitionKey) ?? []), e]);
  for (const group of byPartition.values()) {
    const most = limitsFor(to.store.target).maxTransactionOperations;
    for (let i = 0; i < group.length; i += most) {
      const chunk = group.slice(i, i + most);
      try {
        await to.store.submitTransaction(
          to.table,
          chunk.map((entity) => ({ kind: 'upsertReplace' as const, entity })),
        );
      } catch (e) {
        if (!(e instanceof TablegraphError) || e.code !== ErrorCode.LIMIT_EXCEEDED) throw e;
        for (const entity of chunk) await to.store.upsertEntity(to.table, entity, 'replace');
      }
    }
  }
}

/** What the new place holds of `table` and the old one no longer does (deleted there since the copy), deleted. */
async function removeStale(opts: TenantMoveOptions, record: TenantRecord, table: string): Promise<number> {
  const from = placeOf(opts, table, record);
  const to = placeOf(opts, table, { isolation: record.move!.to, account: record.move!.account });
  const keys = { partitionKeyRange: tenantPartitionRange(opts.tenant), select: [] as string[] };
  const live = new Set<string>();
  for await (const page of from.store.scan(from.table, keys)) for (const e of page) live.add(`${e.partitionKey}\n${e.rowKey}`);
  let removed = 0;
  for await (const page of to.store.scan(to.table, keys)) {
    const stale = page.filter((e) => !live.has(`${e.partitionKey}\n${e.rowKey}`));
    await deleteEntities(to.store, to.table, stale);
    removed += stale.length;
  }
  return removed;
}

/** The entities a finished move left at the old place, deleted (a tenant's own tables dropped); the row cleared. */
async function removeLeftover(opts: TenantMoveOptions, record: TenantRecord, result: TenantMoveResult): Promise<void> {
  const old = record.leftover;
  if (!old) return;
  for (const table of tenantTables(opts.model)) {
    const at = placeOf(opts, table, old);
    if (old.isolation === 'TABLE') {
      await at.store.deleteTable(at.table);
      continue;
    }
    for await (const page of at.store.scan(at.table, { partitionKeyRange: tenantPartitionRange(opts.tenant), select: [] })) {
      await deleteEntities(at.store, at.table, page);
    }
  }
  const { leftover: _gone, ...rest } = record;
  await opts.registry.putTenant(rest);
  opts.onProgress?.({ step: 'cleaned' });
  result.from = old.isolation;
}

/**
 * A read entity as it is written again: each property's EDM type from its value — a number Int32 when it is an integer
 * that fits, else Double (a whole Double reads back as the same number either way).
 */
function writable(e: StoredEntity): EntityToWrite {
  const properties: Record<string, TypedValue> = {};
  for (const [name, value] of Object.entries(e.properties)) {
    if (typeof value === 'string') properties[name] = { type: 'String', value };
    else if (typeof value === 'number') properties[name] = { type: Number.isInteger(value) && Math.abs(value) < 2 ** 31 ? 'Int32' : 'Double', value };
    else if (typeof value === 'bigint') properties[name] = { type: 'Int64', value };
    else if (typeof value === 'boolean') properties[name] = { type: 'Boolean', value };
    else if (value instanceof Date) properties[name] = { type: 'DateTime', value };
    else if (value instanceof Uint8Array) properties[name] = { type: 'Binary', value };
  }
  return { partitionKey: e.partitionKey, rowKey: e.rowKey, properties };
}
