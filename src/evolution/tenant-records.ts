/**
 * A tenant's row in the catalogue (catalogue.ts, partition `tenant`), under `@tenancy` (docs/tenancy.md): a tenant
 * `closed` is being deleted — its requests are refused and the worker drops its messages — and `deleted` once every
 * entity of its key range is gone. A tenant without a row is open.
 */
import type { StoredEntity } from '../storage/storage-types';
import type { TenantRecord } from '../model/tenancy';

export function decodeTenant(e: StoredEntity): TenantRecord {
  const at = (v: unknown) => (v instanceof Date ? v.getTime() : new Date(String(v)).getTime());
  const state = e.properties.State === 'deleted' ? 'deleted' : 'closed';
  return {
    tenant: e.rowKey,
    state,
    closedAt: at(e.properties.ClosedAt),
    ...(e.properties.DeletedAt !== undefined && { deletedAt: at(e.properties.DeletedAt) }),
    ...(typeof e.properties.Deleted === 'string' && { deleted: JSON.parse(e.properties.Deleted) as TenantRecord['deleted'] }),
  };
}
