/**
 * `@blob` fields at run time (the guide's "Large entities pattern"; compiled by src/compiler/blob-directives.ts): a
 * nullable String field whose value is kept in Blob storage, the entity holding the blob's name. Names the blobs: every
 * value a new name under its entity's prefix, so a blob is never overwritten by another value and the cleanup
 * (src/worker/blob-cleanup.ts) can tell the blobs its entity no longer names by listing the prefix.
 */
import { createHash, randomUUID } from 'node:crypto';
import type { EntityAddress } from '../storage/storage-types';
import type { BlobSpec, Model } from './types';

/**
 * The prefix of every blob of one entity's field: `<table>/<40 hex digits of SHA-256 of PartitionKey,
 * RowKey>/<field>/`. Hashed: keys may hold up to 1 KiB each, a blob name at most 1,024 characters.
 */
export function blobPrefix(address: EntityAddress, field: string): string {
  const hash = createHash('sha256').update(address.partitionKey).update('\u0000').update(address.rowKey).digest('hex').slice(0, 40);
  return `${address.table}/${hash}/${field}/`;
}

/** A new blob name for a value of `field` of the entity at `address`: never used before. */
export function newBlobName(address: EntityAddress, field: string): string {
  return `${blobPrefix(address, field)}${randomUUID()}`;
}

/** The `@blob` fields of an entity type, by name. */
export function blobFields(entity: { fields: Map<string, { name: string; blob?: BlobSpec }> }): Array<{ name: string; blob: BlobSpec }> {
  return [...entity.fields.values()].filter((f): f is { name: string; blob: BlobSpec } => f.blob !== undefined);
}

/** The containers the model's `@blob` fields use. */
export function blobContainers(model: Model): string[] {
  return [...new Set([...model.entities.values()].flatMap((e) => blobFields(e).map((f) => f.blob.container)))].sort();
}
