/**
 * `@blob` fields' blobs in a backup (the guide's "Large entities pattern": the entity holds the blob's name). A
 * snapshot copies each blob an entity names to `snapshots/<id>/blobs/<EntityType>/<field>/<name>` in the backup
 * container, with its Content-Type; a restore copies it back into the field's container under the target prefix, its
 * name's table part renamed as src/model/blob-fields.ts names blobs (`[tenant=<id>/]<table>/<hash of the keys>/<field>/<uuid>`), so
 * that the restored entity's blobs are where its cleanup and `verify` look for them.
 */
import { TENANT_BLOB_SEGMENT } from '../model/blob-fields';
import type { BlobStore } from '../storage/blob-store';

/** Where a snapshot keeps the blob `name` of an entity's `field`. */
export function backupBlobName(snapshot: string, entityType: string, field: string, name: string): string {
  return `snapshots/${snapshot}/blobs/${entityType}/${field}/${name}`;
}

/** One end of a blob copy. */
export interface BlobEnd {
  store: BlobStore;
  container: string;
  name: string;
}

/**
 * Copies a blob (a read and a write: the two ends may be different accounts), with its Content-Type.
 * @returns false when the source does not exist (an upload URL handed out and never used): nothing is written
 * @throws TablegraphError STORAGE_UNAVAILABLE and others from either store
 */
export async function copyBlob(from: BlobEnd, to: BlobEnd): Promise<boolean> {
  const blob = await from.store.download(from.container, from.name);
  if (!blob) return false;
  await to.store.ensureContainer(to.container);
  await to.store.upload(to.container, to.name, blob.bytes, blob.contentType ?? 'application/octet-stream');
  return true;
}

/**
 * A blob name of an entity of table `from` as the same entity in table `to` names it: the table part replaced, after a
 * tenant-scoped entity's `tenant=<id>/`. A name that does not start so (written around tablegraph) is kept as it is.
 */
export function renamedBlob(name: string, from: string, to: string): string {
  const tenant = name.startsWith(TENANT_BLOB_SEGMENT) ? name.slice(0, name.indexOf('/') + 1) : '';
  const rest = name.slice(tenant.length);
  return rest.startsWith(`${from}/`) ? `${tenant}${to}${rest.slice(from.length)}` : name;
}
