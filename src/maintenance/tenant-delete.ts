/**
 * A tenant deleted (`npm run tenant -- delete <id> --yes`, docs/tenancy.md): every entity of its key range in every
 * place it can be — entities, index entities, summaries' contributions, change entities, in its own partitions, and any
 * table per period — and its blobs: those its entities' `@blob` fields name, then every one under its prefix
 * (`tenant=<id>/`), replaced values not yet cleaned up included; and its messages in the poison queue.
 *
 * The places read, on every tier: every table of the deployment's account and every tenant-scoped table of the schema,
 * through the store's placement (so on the tenant's tier: its own tables on `TABLE`, its own account on `ACCOUNT`);
 * the deployment's own tenant-scoped tables as well when the tenant is kept elsewhere (what a move cut short left
 * there); and on `ACCOUNT`, every table of its account. A table the deployment's account does not have (a tenant on
 * `ACCOUNT` may be the only one that ever wrote a type) is still read where the tenant keeps it.
 *
 * In order, so that nothing of it comes back:
 * 1. The tenant is closed in the catalogue (src/evolution/tenant-directory.ts): within the refresh interval every server refuses its
 *    tokens (FORBIDDEN, reason TenantClosed) and every worker drops its messages.
 * 2. `settleMs` is waited out: the refresh interval twice, and the longest a request or a message handled before that
 *    could still write.
 * 3. Passes over every place read its key range (a maintenance read) and delete what they find, in EGTs of one
 *    partition, until a pass finds nothing (at most MAX_PASSES).
 * 4. The tenant is recorded deleted, with what was deleted. Its id stays closed.
 *
 * The counts are what the passes deleted: an entity gone before its delete reached it (a write of the tenant's, before
 * it was closed) is not counted.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { ErrorCode, TablegraphError } from '../errors';
import { blobContainers, blobFields, tenantBlobPrefix } from '../model/blob-fields';
import { tenantPartitionRange, tenantTables, type TenantRecord, type TenantRegistry } from '../model/tenancy';
import { ENTITY_TYPE_PROPERTY, type EntityModel, type Model } from '../model/types';
import type { BlobStore } from '../storage/blob-store';
import { isReservedName } from '../storage/reserved-names';
import type { StorageObserver, StoredEntity } from '../storage/storage-types';
import type { TableStore } from '../storage/table-store';
import { limitsFor } from '../storage/limits';

/** Passes at most: the first deletes nearly everything; a later one what a straggling write made meanwhile. */
export const MAX_PASSES = 5;

export interface TenantDeleteOptions {
  store: TableStore;
  /** The blobs of `@blob` fields; absent: none deleted (a schema without `@blob`). */
  blobs?: BlobStore;
  model: Model;
  /** Where the tenant is closed, then recorded deleted: the catalogue. */
  catalogue: TenantRegistry;
  tablePrefix: string;
  tenant: string;
  /** The tables of the tenant's own (tier `TABLE`), dropped once they are empty; the table prefix included. */
  ownTables?: string[];
  /**
   * The deployment's account without a placement (TenantDirectory.sharedStore): when the tenant is kept elsewhere, its
   * tenant-scoped tables are read there too. Absent: only through `store`.
   */
  sharedStore?: TableStore;
  /** Tier `ACCOUNT`: the tenant's own account (a store without a placement), every table of which is read. */
  account?: TableStore;
  /**
   * Takes the tenant's messages out of the poison queue (tenant-messages.ts), once its entities are gone.
   * @returns the messages deleted
   */
  purgeMessages?(): Promise<number>;
  /**
   * Takes the tenant's changes and rows out of the backup (src/backup/tenant-purge.ts), called once its entities are
   * gone, with when that was (ms since the epoch); absent: the backup is left as it is.
   */
  purgeBackup?(deletedAt: number): Promise<NonNullable<NonNullable<TenantRecord['deleted']>['backup']>>;
  /** How long to wait between closing the tenant and deleting its entities (ms). */
  settleMs: number;
  observer?: StorageObserver;
  /** Told of each table's deletes in each pass. */
  onProgress?(p: { pass: number; table: string; entities: number }): void;
}

/**
 * Deletes one tenant.
 * @returns what was deleted: entities by table (the prefix left off), and blobs
 * @throws TablegraphError BAD_USER_INPUT for a schema without `@tenancy`; STORAGE_UNAVAILABLE when a pass still finds
 *   entities after MAX_PASSES, or (reason CaptureBehind) no capture pass ran to purge the backup after (run it again:
 *   it goes on where it is); storage errors as the store maps them
 */
export async function deleteTenant(opts: TenantDeleteOptions): Promise<NonNullable<TenantRecord['deleted']>> {
  if (!opts.model.tenancy) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, 'The schema has no @tenancy: it has no tenants to delete.');
  const known = (await opts.catalogue.tenants()).find((t) => t.tenant === opts.tenant);
  if (known?.move) {
    throw new TablegraphError(
      ErrorCode.BAD_USER_INPUT,
      `Tenant ${opts.tenant} is being moved to tier ${known.move.to}: run the move again to finish it (npm run tenant -- move ${opts.tenant} --isolation ${known.move.to}), then delete it.`,
    );
  }
  const closedAt = known?.closedAt ?? Date.now();
  const closed: TenantRecord = { ...(known ?? { tenant: opts.tenant, isolation: opts.model.tenancy.isolation }), state: 'closed', closedAt };
  if (known?.state !== 'closed' && known?.state !== 'deleted') await opts.catalogue.putTenant(closed);
  await sleep(Math.max(0, closedAt + opts.settleMs - Date.now()));
  const deleted: NonNullable<TenantRecord['deleted']> = { entities: {}, blobs: 0 };
  for (let pass = 1; pass <= MAX_PASSES; pass++) {
    const found = await deletePass(opts, pass, deleted);
    if (found === 0) {
      deleted.blobs += await deleteTenantBlobs(opts);
      if (opts.purgeMessages) deleted.messages = await opts.purgeMessages();
      if (opts.purgeBackup) deleted.backup = await opts.purgeBackup(Date.now());
      // A tenant on tier TABLE: its tables, empty now, go too.
      for (const table of opts.ownTables ?? []) await opts.store.deleteTable(table);
      await opts.catalogue.putTenant({ ...closed, state: 'deleted', deletedAt: Date.now(), deleted });
      return deleted;
    }
  }
  throw new TablegraphError(
    ErrorCode.STORAGE_UNAVAILABLE,
    `Entities of tenant ${opts.tenant} were still being written after ${MAX_PASSES} passes: run the delete again once every server and worker has been up for a while.`,
  );
}

/** One table read in a pass: in which store (absent: the placed store), by its name there, and as the schema names it. */
interface TableRead {
  store?: TableStore;
  table: string;
  name: string;
}

/**
 * Every place a pass reads: the deployment's tables and the schema's tenant-scoped ones through the placement, the
 * deployment's own tenant-scoped tables when the tenant is kept elsewhere, and every table of its own account.
 */
async function placesToRead(opts: TenantDeleteOptions): Promise<TableRead[]> {
  const prefix = opts.tablePrefix;
  const ours = (t: string) => t.startsWith(prefix) && !isReservedName(t.slice(prefix.length));
  const listed = (await opts.store.listTables(prefix)).filter(ours);
  const scoped = tenantTables(opts.model);
  const reads: TableRead[] = [...new Set([...listed, ...scoped])].sort().map((table) => ({ table, name: table.slice(prefix.length) }));
  if (opts.sharedStore && (opts.ownTables?.length || opts.account)) {
    const shared = new Set(listed);
    for (const table of scoped) if (shared.has(table)) reads.push({ store: opts.sharedStore, table, name: table.slice(prefix.length) });
  }
  if (opts.account) {
    for (const table of (await opts.account.listTables(prefix)).filter(ours)) reads.push({ store: opts.account, table, name: table.slice(prefix.length) });
  }
  return reads;
}

/** One pass over every place the tenant's entities can be: what it found of the tenant, deleted. @returns entities found */
async function deletePass(opts: TenantDeleteOptions, pass: number, deleted: { entities: Record<string, number>; blobs: number }): Promise<number> {
  let found = 0;
  for (const read of await placesToRead(opts)) {
    const store = read.store ?? opts.store;
    let entities = 0;
    const pages = store.scan(read.table, { partitionKeyRange: tenantPartitionRange(opts.tenant), observer: opts.observer });
    for await (const page of pages) {
      found += page.length;
      deleted.blobs += await deleteBlobs(opts, page);
      entities += await deleteEntities(store, read.table, page, opts.observer);
    }
    if (entities === 0) continue;
    deleted.entities[read.name] = (deleted.entities[read.name] ?? 0) + entities;
    opts.onProgress?.({ pass, table: read.name, entities });
  }
  return found;
}

/**
 * A page's entities deleted, in EGTs of one partition each.
 * @returns how many this call deleted: an entity gone already (a write of the tenant's, before it was closed, or
 *   another delete) is not counted
 */
export async function deleteEntities(store: TableStore, table: string, page: StoredEntity[], observer?: StorageObserver): Promise<number> {
  const byPartition = new Map<string, StoredEntity[]>();
  for (const e of page) byPartition.set(e.partitionKey, [...(byPartition.get(e.partitionKey) ?? []), e]);
  let deleted = 0;
  for (const [partitionKey, entities] of byPartition) {
    const most = limitsFor(store.target).maxTransactionOperations;
    for (let i = 0; i < entities.length; i += most) {
      const chunk = entities.slice(i, i + most);
      try {
        await store.submitTransaction(
          table,
          chunk.map((e) => ({ kind: 'delete' as const, partitionKey, rowKey: e.rowKey })),
          { observer },
        );
        deleted += chunk.length;
      } catch (e) {
        // One of them is gone already (a write of the tenant's, before it was closed): each on its own then.
        if (!(e instanceof TablegraphError) || e.code !== ErrorCode.NOT_FOUND) throw e;
        for (const one of chunk) if (await store.deleteEntity({ table, partitionKey, rowKey: one.rowKey }, { observer })) deleted++;
      }
    }
  }
  return deleted;
}

const typesOf = new WeakMap<Model, Map<string, EntityModel>>();
/** The model's stored entity types by their EntityType property (an interface's implementations, not the interface). */
function entityTypes(model: Model): Map<string, EntityModel> {
  let types = typesOf.get(model);
  if (!types) {
    types = new Map([...model.entities.values()].filter((e) => !e.implementations).map((e) => [e.entityType, e]));
    typesOf.set(model, types);
  }
  return types;
}

/**
 * Every blob under the tenant's prefix in every `@blob` container, deleted: values no entity names any longer (replaced
 * or cleared, their delayed cleanup not yet run) too, as the tenant's cleanup messages are dropped once it is closed.
 * @returns how many were there
 */
async function deleteTenantBlobs(opts: TenantDeleteOptions): Promise<number> {
  if (!opts.blobs) return 0;
  let deleted = 0;
  for (const container of blobContainers(opts.model)) {
    for (const b of await opts.blobs.list(container, tenantBlobPrefix(opts.tenant))) if (await opts.blobs.delete(container, b.name)) deleted++;
  }
  return deleted;
}

/** The blobs the page's entities name in their `@blob` fields, deleted. @returns how many were there */
async function deleteBlobs(opts: TenantDeleteOptions, page: StoredEntity[]): Promise<number> {
  if (!opts.blobs) return 0;
  let deleted = 0;
  const byType = entityTypes(opts.model);
  for (const row of page) {
    const entity = byType.get(String(row.properties[ENTITY_TYPE_PROPERTY]));
    for (const f of entity ? blobFields(entity) : []) {
      const name = row.properties[f.name];
      if (typeof name === 'string' && (await opts.blobs.delete(f.blob.container, name))) deleted++;
    }
  }
  return deleted;
}
