/**
 * `@blob` blobs checked against their entities (the guide's "Large entities pattern"): every entity of a type with
 * `@blob` fields is read (a scan of its table, on purpose: a maintenance command) for the blob names it holds, and
 * the blobs of its table in each field's container are listed. A blob no entity names is an orphan once it is
 * older than the cleanup delay (TABLEGRAPH_BLOB_CLEANUP_DELAY_SECONDS): its cleanup message was due by then.
 * A younger one may still belong to a write in flight or a cleanup not yet due, and is only counted.
 */
import { blobFields, parseBlobName, TENANT_BLOB_SEGMENT } from '../model/blob-fields';
import { ENTITY_TYPE_PROPERTY, type EntityModel, type Model } from '../model/types';
import type { BlobStore, ListedBlob } from '../storage/blob-store';
import type { TableStore } from '../storage/table-store';
import type { StorageObserver } from '../storage/storage-types';

/** How the blobs of one `@blob` field compare with the entities that name them. */
export interface BlobDiff {
  /** `Type.field`, e.g. `Product.imageUrl`. */
  field: string;
  container: string;
  /** Entities naming a blob (entities). */
  named: number;
  /** Blobs listed for the field (blobs). */
  listed: number;
  /** Blobs no entity names, younger than the cleanup delay: possibly in flight (blobs). */
  pending: number;
  /** Blobs no entity names, older than the cleanup delay. */
  orphaned: Array<{ name: string; lastModified: string }>;
}

/**
 * @param cleanupDelaySeconds TABLEGRAPH_BLOB_CLEANUP_DELAY_SECONDS (s)
 * @throws storage errors from the scans and listings
 */
export async function readBlobState(opts: {
  store: TableStore;
  blobs: BlobStore;
  model: Model;
  types?: string[];
  cleanupDelaySeconds: number;
  observer?: StorageObserver;
  now?: number;
}): Promise<BlobDiff[]> {
  const diffs: BlobDiff[] = [];
  const before = (opts.now ?? Date.now()) - opts.cleanupDelaySeconds * 1000;
  for (const entity of opts.model.entities.values()) {
    const fields = blobFields(entity);
    if (fields.length === 0 || (opts.types && !opts.types.includes(entity.name))) continue;
    const named = new Map(fields.map((f) => [f.name, new Set<string>()]));
    for await (const page of opts.store.scan(entity.layout.table, { observer: opts.observer })) {
      for (const e of page) {
        if (e.properties[ENTITY_TYPE_PROPERTY] !== entity.entityType) continue;
        for (const f of fields) {
          const v = e.properties[f.name];
          if (typeof v === 'string') named.get(f.name)!.add(v);
        }
      }
    }
    for (const { name, blob } of fields) {
      const mine = named.get(name)!;
      const listed = await listFieldBlobs(opts.blobs, blob.container, entity, name);
      const unnamed = listed.filter((b) => !mine.has(b.name));
      const orphaned = unnamed.filter((b) => b.lastModified.getTime() < before);
      diffs.push({
        field: `${entity.name}.${name}`,
        container: blob.container,
        named: mine.size,
        listed: listed.length,
        pending: unnamed.length - orphaned.length,
        orphaned: orphaned.map((b) => ({ name: b.name, lastModified: b.lastModified.toISOString() })),
      });
    }
  }
  return diffs;
}

/**
 * The blobs of one `@blob` field of a type: names `<table>/<hash>/<field>/<uuid>`, under `tenant=<id>/` for a
 * tenant-scoped type (src/model/blob-fields.ts), whose blobs of every tenant are listed.
 */
async function listFieldBlobs(blobs: BlobStore, container: string, entity: EntityModel, field: string): Promise<ListedBlob[]> {
  const table = entity.layout.table;
  const prefixes = entity.tenantScoped ? [`${table}/`, TENANT_BLOB_SEGMENT] : [`${table}/`];
  const listed: ListedBlob[] = [];
  for (const prefix of prefixes) listed.push(...(await blobs.list(container, prefix)));
  return listed.filter((b) => {
    const parts = parseBlobName(b.name);
    return parts?.table === table && parts.field === field;
  });
}
