/**
 * A tenant's row in the catalogue (catalogue.ts, partition `tenant`), under `@tenancy` (docs/tenancy.md): its tier and
 * state as one JSON property, `Record`, beside `State` for a reader's eye, and its own budget, if any, as `Budget`
 * (JSON), written apart (encodeBudget) so that neither write undoes the other. A row written before tiers existed has
 * `State` (`closed` or `deleted`), `ClosedAt`, `DeletedAt` and `Deleted` alone: its tenant was on the shared tables.
 */
import type { StoredEntity, TypedValue } from '../storage/storage-types';
import type { TenantRecord } from '../model/tenancy';

/** The row's properties for `record`. */
export function encodeTenant(record: TenantRecord): Record<string, TypedValue> {
  const { budget: _apart, ...rest } = record;
  return { State: { type: 'String', value: record.state }, Record: { type: 'String', value: JSON.stringify(rest) } };
}

/** The `Budget` property of a tenant's own budget; empty for the default (a merge cannot remove a property). */
export function encodeBudget(budget: TenantRecord['budget']): Record<string, TypedValue> {
  return { Budget: { type: 'String', value: budget ? JSON.stringify(budget) : '' } };
}

/** The tenant's own budget the row holds, if any. */
function decodeBudget(e: StoredEntity): Pick<TenantRecord, 'budget'> {
  return typeof e.properties.Budget === 'string' && e.properties.Budget !== '' ? { budget: JSON.parse(e.properties.Budget) as TenantRecord['budget'] } : {};
}

/** The record a row holds. */
export function decodeTenant(e: StoredEntity): TenantRecord {
  if (typeof e.properties.Record === 'string') return { ...(JSON.parse(e.properties.Record) as TenantRecord), tenant: e.rowKey, ...decodeBudget(e) };
  const at = (v: unknown) => (v instanceof Date ? v.getTime() : new Date(String(v)).getTime());
  const state = e.properties.State === 'deleted' ? 'deleted' : 'closed';
  return {
    tenant: e.rowKey,
    state,
    isolation: 'PARTITION_PREFIX',
    closedAt: at(e.properties.ClosedAt),
    ...(e.properties.DeletedAt !== undefined && { deletedAt: at(e.properties.DeletedAt) }),
    ...(typeof e.properties.Deleted === 'string' && { deleted: JSON.parse(e.properties.Deleted) as TenantRecord['deleted'] }),
  };
}
