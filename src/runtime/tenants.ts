/**
 * A process's tenant directory (src/evolution/tenant-directory.ts), under `@tenancy`: made once per opened storage,
 * refreshed from the catalogue, and made the store's placement, so every call on a tenant-scoped table — a request's,
 * the worker's, a load's, a maintenance command's — goes to the tenant's tier.
 */
import type { TokenCredential } from '@azure/core-auth';
import type { Logger } from '../log';
import { Catalogue } from '../evolution/catalogue';
import { TenantDirectory } from '../evolution/tenant-directory';
import { tenantTables } from '../model/tenancy';
import type { Model } from '../model/types';
import { reachTenantAccount } from '../storage/tenant-accounts';
import type { TableStore } from '../storage/table-store';
import { partitionSasSigner, type PartitionSasSigner } from '../storage/sas';

/** What the directory is attached to: an opened storage (open-storage.ts). */
export interface TenantHost {
  store: TableStore;
  tenants?: TenantDirectory;
}

/**
 * The storage's tenant directory, made, read and started on the first call (none without `@tenancy`).
 * @param credential the Entra ID credential tenant accounts are reached with (default: `DefaultAzureCredential`)
 * @throws from the catalogue's first read
 */
export async function attachTenants(
  host: TenantHost,
  model: Model,
  opts: { tablePrefix: string; log?: Logger; credential?: TokenCredential },
): Promise<TenantDirectory | undefined> {
  if (!model.tenancy) return undefined;
  if (host.tenants) {
    host.tenants.start(); // again, after a server on this storage stopped it
    return host.tenants;
  }
  const directory = new TenantDirectory({
    registry: new Catalogue(host.store, opts.tablePrefix),
    store: host.store,
    tables: tenantTables(model),
    defaultIsolation: model.tenancy.isolation,
    reach: (account) => reachTenantAccount(account, opts.credential),
    log: opts.log,
  });
  await directory.refresh();
  directory.start();
  host.store.usePlacement(directory);
  host.tenants = directory;
  return directory;
}

/**
 * A `@sas` field's signer that signs where the partition is: a tenant on tier TABLE gets a SAS for its own table, one on
 * tier ACCOUNT a SAS of its own account, signed with that account's key (Microsoft Entra ID gives none: CONFIG_INVALID).
 * Undefined when there is no signer at all.
 */
export function placedSasSigner(signer: PartitionSasSigner | undefined, store: TableStore): PartitionSasSigner | undefined {
  if (!signer || !store.placed) return signer;
  const signers = new Map<string, PartitionSasSigner>();
  return (table, partitionKey, expiresInSeconds) => {
    const place = store.placeOf(table, partitionKey);
    if (place.store === store) return signer(table, partitionKey, expiresInSeconds);
    const key = place.store.connectionString ?? '';
    let own = signers.get(key);
    if (!own) signers.set(key, (own = partitionSasSigner(key)));
    return own(place.table, partitionKey, expiresInSeconds);
  };
}
