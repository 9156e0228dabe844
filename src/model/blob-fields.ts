/**
 * `@blob` fields at run time (the guide's "Large entities pattern"; compiled by src/compiler/blob-directives.ts): a
 * nullable String field whose value is kept in Blob storage, the entity holding the blob's name. Names the blobs: every
 * value a new name under its entity's prefix, so a blob is never overwritten by another value and the cleanup
 * (src/worker/blob-cleanup.ts) can tell the blobs its entity no longer names by listing the prefix.
 */
import { createHash, randomUUID } from 'node:crypto';
import type { EntityAddress } from '../storage/storage-types';
import type { BlobSpec, Model } from './types';
import { tenantOfPartitionKey } from './tenancy';

/** What the names of tenant-scoped entities' blobs start with, before the tenant id: no table name holds `=`. */
export const TENANT_BLOB_SEGMENT = 'tenant=';

/** What names a blob besides its address: whether its entity type is tenant-scoped (`@tenancy`, not `@global`). */
export interface BlobOwner {
  tenantScoped?: true;
}

/**
 * The prefix of every blob of one entity's field: `<table>/<40 hex digits of SHA-256 of PartitionKey,
 * RowKey>/<field>/`. Hashed: keys may hold up to 1 KiB each, a blob name at most 1,024 characters. A tenant-scoped
 * entity's blobs are under its tenant's prefix first (tenantBlobPrefix), so a tenant's delete finds every blob of
 * the tenant by listing one prefix, a value replaced and not yet cleaned up included.
 */
export function blobPrefix(owner: BlobOwner, address: EntityAddress, field: string): string {
  const hash = createHash('sha256').update(address.partitionKey).update('\u0000').update(address.rowKey).digest('hex').slice(0, 40);
  const tenant = owner.tenantScoped && tenantOfPartitionKey(address.partitionKey);
  return `${tenant ? tenantBlobPrefix(tenant) : ''}${address.table}/${hash}/${field}/`;
}

/** The prefix of every blob of one tenant's entities, in every container: `tenant=<id>/`. */
export function tenantBlobPrefix(tenant: string): string {
  return `${TENANT_BLOB_SEGMENT}${tenant}/`;
}

/** A blob name read back: the tenant (tenant-scoped entities'), the table and the `@blob` field it belongs to. */
export interface BlobNameParts {
  tenant?: string;
  table: string;
  field: string;
}

/** The parts of a name blobPrefix made; undefined for a name it cannot have made. */
export function parseBlobName(name: string): BlobNameParts | undefined {
  const parts = name.split('/');
  const tenant = parts[0].startsWith(TENANT_BLOB_SEGMENT) ? parts.shift()!.slice(TENANT_BLOB_SEGMENT.length) : undefined;
  if (parts.length < 4) return undefined;
  return { ...(tenant !== undefined && { tenant }), table: parts[0], field: parts[2] };
}

/** A new blob name for a value of `field` of the entity at `address`: never used before. */
export function newBlobName(owner: BlobOwner, address: EntityAddress, field: string): string {
  return `${blobPrefix(owner, address, field)}${randomUUID()}`;
}

/** The `@blob` fields of an entity type, by name. */
export function blobFields(entity: { fields: Map<string, { name: string; blob?: BlobSpec }> }): Array<{ name: string; blob: BlobSpec }> {
  return [...entity.fields.values()].filter((f): f is { name: string; blob: BlobSpec } => f.blob !== undefined);
}

/** The containers the model's `@blob` fields use. */
export function blobContainers(model: Model): string[] {
  return [...new Set([...model.entities.values()].flatMap((e) => blobFields(e).map((f) => f.blob.container)))].sort();
}
