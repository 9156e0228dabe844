/**
 * The catalogue: a table of the project's own (`<prefix>TablegraphCatalogue`) recording which schema wrote the stored
 * data, and the state of every derived access path (docs/schema-changes.md). Every change is a conditional write
 * (If-Match on the ETag read, or an insert refused when the row exists), so that servers starting at once agree on
 * one deployment, and only one worker at a time holds a build's lease.
 *
 * | PartitionKey | RowKey | what |
 * | --- | --- | --- |
 * | `deployment` | `current` | the deployed version: its number, layout hash, layout, accepted drops |
 * | `version` | `v000001` … | each deployed version: its SDL and layout (gzip, base64), when |
 * | `path` | a path id (`index:Order.byCustomer`, `rekey:Order`) | the path's state, build checkpoint, progress, lease |
 * | `server` | an instance id | a running server's or worker's version, and when it last said so |
 * | `tenant` | a tenant id | under `@tenancy`, a tenant's tier (and account), a move under way, its state (open, closed while being deleted, deleted) and what was deleted |
 */
import { ErrorCode, isTablegraphError } from '../errors';
import type { TableStore } from '../storage/table-store';
import type { EntityToWrite } from '../storage/storage-types';
import {
  date,
  decodeDeployment,
  decodePath,
  decodeServer,
  encodePath,
  int,
  packed,
  str,
  unpacked,
  versionRowKey,
  type Deployment,
  type PathRecord,
  type ServerRecord,
} from './catalogue-records';
import { decodeTenant, encodeBudget, encodeTenant } from './tenant-records';
import type { TenantRecord } from '../model/tenancy';

/** The catalogue table's name under a table prefix. */
export function catalogueTable(tablePrefix: string): string {
  return `${tablePrefix}TablegraphCatalogue`;
}

/** The catalogue of one table prefix. Every method is one or two storage calls; none scans beyond a partition. */
export class Catalogue {
  readonly table: string;

  constructor(
    readonly store: TableStore,
    tablePrefix: string,
  ) {
    this.table = catalogueTable(tablePrefix);
  }

  /** Creates the table when it does not exist. */
  async ensure(): Promise<void> {
    await this.store.ensureTable(this.table);
  }

  /** The deployed version, or null before the first deployment. */
  async deployment(): Promise<Deployment | null> {
    const e = await this.store.getEntity({ table: this.table, partitionKey: 'deployment', rowKey: 'current' });
    return e ? decodeDeployment(this.table, e) : null;
  }

  /**
   * Records `next` as the deployed version, with its SDL kept under `version/v<NNNNNN>`: an insert when `ifMatch` is
   * absent (the first deployment), else a replace on that ETag.
   * @returns false when another process deployed first (the row exists, or its ETag changed): read it again
   */
  async deploy(next: Deployment, sdl: string, ifMatch?: string): Promise<boolean> {
    const properties = {
      Version: int(next.version),
      Hash: str(next.hash),
      ...packed('Layout', JSON.stringify(next.layout)),
      Drops: str(JSON.stringify(next.drops)),
      DeployedAt: date(next.deployedAt),
    };
    const current: EntityToWrite = { partitionKey: 'deployment', rowKey: 'current', properties };
    try {
      if (ifMatch) await this.store.updateEntity(this.table, current, 'replace', { ifMatch });
      else await this.store.createEntity(this.table, current);
    } catch (e) {
      if (isTablegraphError(e, ErrorCode.CONFLICT) || isTablegraphError(e, ErrorCode.NOT_FOUND)) return false;
      throw e;
    }
    await this.store.upsertEntity(
      this.table,
      { partitionKey: 'version', rowKey: versionRowKey(next.version), properties: { ...properties, ...packed('Sdl', sdl) } },
      'replace',
    );
    return true;
  }

  /**
   * Adds coordinates to the deployment's drops (`migrate apply --drop`): a merge of that one property, If-Match on
   * the deployment's ETag. @returns false when another process changed the deployment first
   */
  async recordDrops(current: Deployment, drops: string[]): Promise<boolean> {
    const all = [...new Set([...current.drops, ...drops])].sort();
    try {
      await this.store.updateEntity(this.table, { partitionKey: 'deployment', rowKey: 'current', properties: { Drops: str(JSON.stringify(all)) } }, 'merge', {
        ifMatch: current.etag,
      });
      return true;
    } catch (e) {
      if (isTablegraphError(e, ErrorCode.CONFLICT)) return false;
      throw e;
    }
  }

  /** A recorded version's SDL, or null when it was never recorded. */
  async sdlOf(version: number): Promise<string | null> {
    const e = await this.store.getEntity({ table: this.table, partitionKey: 'version', rowKey: versionRowKey(version) });
    return e ? unpacked('Sdl', { table: this.table, entity: e }) : null;
  }

  /** A recorded version's layout hash, or null when it was never recorded. */
  async versionHash(version: number): Promise<string | null> {
    const e = await this.store.getEntity({ table: this.table, partitionKey: 'version', rowKey: versionRowKey(version) }, { select: ['Hash'] });
    return e ? String(e.properties.Hash) : null;
  }

  /** Every path's row (one range query over the `path` partition). */
  async paths(): Promise<PathRecord[]> {
    const out: PathRecord[] = [];
    let after: string | undefined;
    for (;;) {
      const page = await this.store.queryRange({ table: this.table, partitionKey: 'path', rowKeyAfter: after, limit: 1000 });
      out.push(...page.entities.map((e) => decodePath(this.table, e)));
      if (!page.more || page.entities.length === 0) return out;
      after = page.entities[page.entities.length - 1].rowKey;
    }
  }

  /** One path's row, or null. */
  async path(id: string): Promise<PathRecord | null> {
    const e = await this.store.getEntity({ table: this.table, partitionKey: 'path', rowKey: id });
    return e ? decodePath(this.table, e) : null;
  }

  /**
   * Writes a path's row: an insert when `record.etag` is absent, else a replace If-Match on it.
   * @returns the row with its new ETag, or null when another process wrote it first
   */
  async putPath(record: PathRecord): Promise<PathRecord | null> {
    const entity = encodePath(record);
    try {
      const etag = record.etag
        ? await this.store.updateEntity(this.table, entity, 'replace', { ifMatch: record.etag })
        : await this.store.createEntity(this.table, entity);
      return { ...record, etag: etag as string };
    } catch (e) {
      if (isTablegraphError(e, ErrorCode.CONFLICT) || isTablegraphError(e, ErrorCode.NOT_FOUND)) return null;
      throw e;
    }
  }

  /** Says that `server` runs `version` now (an unconditional upsert: each instance writes only its own row). */
  async heartbeat(server: ServerRecord): Promise<void> {
    await this.store.upsertEntity(
      this.table,
      {
        partitionKey: 'server',
        rowKey: server.instance,
        properties: { Version: int(server.version), Hash: str(server.hash), SeenAt: date(server.seenAt) },
      },
      'replace',
    );
  }

  /** Removes a server's row (it stopped). */
  async leave(instance: string): Promise<void> {
    await this.store.deleteEntity({ table: this.table, partitionKey: 'server', rowKey: instance });
  }

  /**
   * Records a tenant's tier and state (an unconditional merge: one command at a time changes a tenant), leaving its
   * own budget as it is.
   */
  async putTenant(record: TenantRecord): Promise<void> {
    await this.store.upsertEntity(this.table, { partitionKey: 'tenant', rowKey: record.tenant, properties: encodeTenant(record) }, 'merge');
  }

  /**
   * Sets a tenant's own budget, or (undefined) gives it the default again; its row must exist.
   * @throws TablegraphError NOT_FOUND when the tenant has no row
   */
  async putTenantBudget(tenant: string, budget: TenantRecord['budget']): Promise<void> {
    const row = { partitionKey: 'tenant', rowKey: tenant, properties: encodeBudget(budget) };
    // A merge: a replace of the whole row could undo a move's write of it.
    await this.store.updateEntity(this.table, row, 'merge');
  }

  /** Writes a tenant's first row. @returns false when it has one already (nothing written) */
  async createTenant(record: TenantRecord): Promise<boolean> {
    try {
      await this.store.createEntity(this.table, { partitionKey: 'tenant', rowKey: record.tenant, properties: encodeTenant(record) });
      return true;
    } catch (e) {
      if (isTablegraphError(e) && e.code === ErrorCode.CONFLICT) return false;
      throw e;
    }
  }

  /** The tenant's row, or undefined (one point query). */
  async tenant(tenant: string): Promise<TenantRecord | undefined> {
    const row = await this.store.getEntity({ table: this.table, partitionKey: 'tenant', rowKey: tenant });
    return row ? decodeTenant(row) : undefined;
  }

  /** Every tenant's row (range queries over the `tenant` partition, every page). */
  async tenants(): Promise<TenantRecord[]> {
    const page = await this.store.queryRange({ table: this.table, partitionKey: 'tenant', limit: 1_000_000 });
    return page.entities.map(decodeTenant);
  }

  /** Every server's row (one range query over the `server` partition). */
  async servers(): Promise<ServerRecord[]> {
    const page = await this.store.queryRange({ table: this.table, partitionKey: 'server', limit: 1000 });
    return page.entities.map(decodeServer);
  }
}
