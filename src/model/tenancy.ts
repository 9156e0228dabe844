/**
 * Tenants as a schema primitive (`extend schema @tenancy(claim: "tid")`, docs/tenancy.md). Every entity type not
 * marked `@global` is tenant-scoped: it has one more stored key field, `_tenant`, which no client sees or sets, and
 * every PartitionKey of it — the entity's, its index entities', the summaries and change entities in its partitions —
 * starts with `{_tenant}_`. The value comes from the request's verified token only: a read's `{_tenant}` is bound to
 * the token's claim (or to the parent entity's own `_tenant`, itself read within the tenant), a write's is set from
 * the token over whatever the input says. Since a tenant id holds no `_`, the PartitionKeys of one tenant are exactly
 * those from `<tenant>_` up to, not including, `<tenant>` followed by the character after `_` (0x60): the guide's
 * "Compound key pattern" and "Multitenancy" key-prefix model, a range a shared access signature can be scoped to.
 *
 * Every tier keeps these keys. A tenant on tier `TABLE` has its entities in tables of its own (tenantTable), one on
 * `ACCOUNT` in a storage account of its own; which tier a tenant is on is data, its row in the catalogue (TenantRecord),
 * and the store sends each call to the tenant's place (src/evolution/tenant-directory.ts).
 */
import { createHash } from 'node:crypto';
import { ErrorCode, TablegraphError } from '../errors';
import { parseKeyTemplate, type KeyTemplate } from './key-template';
import type { TenantAccount } from '../storage/tenant-accounts';
import type { Model, StoredField, TenantIsolation } from './types';

/** The stored key field (and property) that holds an entity's tenant id. Reserved: no schema may declare it. */
export const TENANT_FIELD = '_tenant';

/** The separator after the tenant id in a PartitionKey. */
export const TENANT_SEPARATOR = '_';

/**
 * A tenant id: 1 to 63 lowercase letters, digits and hyphens, starting with a letter or digit (an Entra ID `tid` is a
 * GUID of this form). No `_`, so no tenant's key prefix is another's; no upper case, so tenant ids that differ only in
 * case — which a table name would not tell apart — cannot both exist.
 */
export const TENANT_ID = /^[a-z0-9][a-z0-9-]{0,62}$/;

/** The hidden stored field every tenant-scoped entity type has. */
export function tenantField(): StoredField {
  return { name: TENANT_FIELD, graphqlType: 'String', edm: 'String', nonNull: true };
}

/** `t` with `{_tenant}_` in front: the PartitionKey template of a tenant-scoped layout (parsed, so it is canonical). */
export function withTenant(t: KeyTemplate): KeyTemplate {
  return startsWithTenant(t) ? t : parseKeyTemplate(`{${TENANT_FIELD}}${TENANT_SEPARATOR}${t.source}`);
}

/** Whether a PartitionKey template starts with the tenant placeholder. */
export function startsWithTenant(t: KeyTemplate): boolean {
  const first = t.segments[0];
  return first?.kind === 'placeholder' && first.name === TENANT_FIELD;
}

/**
 * The tenant a verified token names.
 * @param claims the token's claims
 * @param claim the claim `@tenancy(claim:)` names
 * @returns the tenant id, or why the token names none (for an UNAUTHENTICATED refusal)
 */
export function tenantOfClaims(claims: Record<string, unknown>, claim: string): { tenant: string } | { why: string } {
  const value = claims[claim];
  if (value === undefined || value === null || value === '') return { why: `the token has no ${claim} claim, which names its tenant` };
  if (typeof value !== 'string' || !TENANT_ID.test(value)) {
    return { why: `the token's ${claim} claim is not a tenant id (1 to 63 lowercase letters, digits and hyphens)` };
  }
  return { tenant: value };
}

/**
 * The tenant id a request acts for, as key templates need it.
 * @throws TablegraphError UNAUTHENTICATED when the request has none (the server checks every token at the door, so
 *   this names a request that reached a tenant-scoped path without one)
 */
export function requireTenant(tenant: string | undefined): string {
  if (tenant === undefined) throw new TablegraphError(ErrorCode.UNAUTHENTICATED, 'This schema is tenant-scoped: send a token that names a tenant.');
  return tenant;
}

/** The tenant a tenant-scoped PartitionKey belongs to: the text before its first `_` (undefined without one). */
export function tenantOfPartitionKey(partitionKey: string): string | undefined {
  const at = partitionKey.indexOf(TENANT_SEPARATOR);
  return at > 0 ? partitionKey.slice(0, at) : undefined;
}

/**
 * The PartitionKeys of one tenant, as a range: from `<tenant>_` (inclusive) to `<tenant>` + the character after `_`
 * (exclusive).
 */
export function tenantPartitionRange(tenant: string): { from: string; to: string } {
  return { from: `${tenant}${TENANT_SEPARATOR}`, to: `${tenant}${String.fromCharCode(TENANT_SEPARATOR.charCodeAt(0) + 1)}` };
}

export type { TenantIsolation };

/** The tiers, for messages and option checks. */
export const TENANT_ISOLATIONS: readonly TenantIsolation[] = ['PARTITION_PREFIX', 'TABLE', 'ACCOUNT'];

export type { TenantAccount };

/** A tenant's move between tiers (src/maintenance/tenant-move.ts), while it runs. */
export interface TenantMove {
  to: TenantIsolation;
  account?: TenantAccount;
  /**
   * `copy`: its entities are being copied, its writes go on at the old place; `freeze`: its writes are refused
   * (TENANT_MOVING, retryable) and its messages wait, while the last changes are copied. Reads are served at the old
   * place until the record names the new tier.
   */
  phase: 'copy' | 'freeze';
  /** When the phase began (ms since the epoch). */
  since: number;
  /** When the copy began (ms since the epoch): what changed at the old place after it is copied again once frozen. */
  copyFrom: number;
}

/**
 * A tenant's row in the catalogue's `tenant` partition: where its entities are kept, and its state — `open`; `closed`
 * while it is being deleted (its requests refused, its messages dropped); `deleted` once every entity of it is gone. A
 * tenant gets its row when a server first serves it (on the schema's default tier) or when `npm run tenant -- create`
 * makes it.
 */
export interface TenantRecord {
  tenant: string;
  state: 'open' | 'closed' | 'deleted';
  isolation: TenantIsolation;
  /** On tier `ACCOUNT`: how its account is reached. */
  account?: TenantAccount;
  /**
   * Its own budget a second (`npm run tenant -- budget`), instead of the deployment's (src/server/tenant-budgets.ts):
   * storage calls and entities read a second. Kept apart from the rest of the row: a move does not change it.
   */
  budget?: { transactionsPerSecond: number; entitiesPerSecond: number };
  /** A move between tiers under way. */
  move?: TenantMove;
  /** Where a finished move left the tenant's old entities, until they are deleted (the move run again deletes them). */
  leftover?: { isolation: TenantIsolation; account?: TenantAccount };
  /** Its requests are refused until then (ms since the epoch): until every process has learnt its tier. */
  readyAt?: number;
  /** When it was closed (ms since the epoch). */
  closedAt?: number;
  /** When its last entity was deleted (ms since the epoch). */
  deletedAt?: number;
  /**
   * What was deleted: entities by table (the table prefix left off), blobs, poison queue messages; and what was taken out of the backup:
   * capture passes and snapshots written again, their changes and rows, the snapshots' copies of blobs, the segments
   * of passes cut short; and the snapshots not yet complete, left as they were (src/backup/tenant-purge.ts).
   */
  deleted?: {
    entities: Record<string, number>;
    blobs: number;
    /** Its messages taken out of the poison queue. */
    messages?: number;
    backup?: { passes: number; snapshots: number; changes: number; rows: number; blobs: number; abandoned: number; incompleteSnapshots: string[] };
  };
}

/** Where tenants' states are kept (the catalogue, src/evolution/catalogue.ts). */
export interface TenantRegistry {
  tenants(): Promise<TenantRecord[]>;
  putTenant(record: TenantRecord): Promise<void>;
  /** Writes the tenant's first row. @returns false when it has one already (nothing written) */
  createTenant(record: TenantRecord): Promise<boolean>;
}

/** The characters of a tenant's table suffix (table names are letters and digits, compared without case). */
const TABLE_KEY_DIGITS = 'abcdefghijklmnopqrstuvwxyz234567';

/** Letters of a tenant's table suffix: 60 bits of a SHA-256 of its id, so no two tenants' tables meet in practice. */
export const TENANT_TABLE_KEY_LENGTH = 12;

/**
 * The table of `table` a tenant on tier `TABLE` has: the name, `t`, then 12 letters and digits of a hash of the tenant
 * id (a tenant id's hyphens cannot be in a table name, and names are compared without case). 13 characters longer.
 * @example tenantTable('tgShop', 'acme') // 'tgShopt…' (13 more characters)
 */
export function tenantTable(table: string, tenant: string): string {
  const digest = createHash('sha256').update(tenant).digest();
  let key = '';
  for (let i = 0; i < TENANT_TABLE_KEY_LENGTH; i++) key += TABLE_KEY_DIGITS[digest[i] & 31];
  return `${table}t${key}`;
}

/**
 * The tables of tenant-scoped types (the table prefix included): their entities' and index entities' tables, those a
 * tenant's tier places. Not the tables of a table template (a table per period): a schema with those keeps its tenants
 * on PARTITION_PREFIX (hasTenantTableTemplates).
 */
export function tenantTables(model: Model): string[] {
  const tables = new Set<string>();
  for (const e of model.entities.values()) {
    if (!e.tenantScoped) continue;
    if (!e.layout.tableTemplate) tables.add(e.layout.table);
    for (const i of e.indexes.values()) if (!i.layout.tableTemplate) tables.add(i.layout.table);
  }
  return [...tables].sort();
}

/** Whether a tenant-scoped type keeps a table per period (table-template.ts): its tenants stay on PARTITION_PREFIX. */
export function hasTenantTableTemplates(model: Model): boolean {
  return [...model.entities.values()].some((e) => e.tenantScoped && (e.layout.tableTemplate || [...e.indexes.values()].some((i) => i.layout.tableTemplate)));
}
