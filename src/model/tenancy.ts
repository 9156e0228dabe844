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
 * Tier `PARTITION_PREFIX` (shared tables, the tenant in the PartitionKey) is what this file implements; `TABLE` and
 * `ACCOUNT` are refused by the compiler until they are built.
 */
import { ErrorCode, TablegraphError } from '../errors';
import { parseKeyTemplate, type KeyTemplate } from './key-template';
import type { StoredField } from './types';

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

/**
 * A tenant's row in the catalogue's `tenant` partition: `closed` while it is being deleted — its requests refused, its
 * messages dropped — and `deleted` once every entity of its key range is gone. A tenant without a row is open.
 */
export interface TenantRecord {
  tenant: string;
  state: 'closed' | 'deleted';
  /** When it was closed (ms since the epoch). */
  closedAt: number;
  /** When its last entity was deleted (ms since the epoch). */
  deletedAt?: number;
  /** What was deleted: entities by table (the table prefix left off), and blobs. */
  deleted?: { entities: Record<string, number>; blobs: number };
}

/** Where tenants' states are kept (the catalogue, src/evolution/catalogue.ts). */
export interface TenantRegistry {
  tenants(): Promise<TenantRecord[]>;
  putTenant(record: TenantRecord): Promise<void>;
}
