/**
 * A tenant's entities written out (`npm run tenant -- export <id> --out <folder>`, docs/tenancy.md): for each
 * tenant-scoped entity type, its entities in the tenant's key range — one range of PartitionKeys per table, read page
 * by page, filtered by EntityType by the service: a maintenance read, never a request's — as one NDJSON file of field
 * values, and a load manifest listing the files in dependency order. The rows do not name their tenant:
 * `npm run load -- --manifest <folder>/manifest.json --tenant <id>` loads them into the tenant it names, the same one
 * or another.
 *
 * Written are the fields a load takes: not summary values or copies (the load keeps them from what they summarise
 * and copy) and not `@blob` fields (a blob is uploaded by a mutation; the export counts the blobs it leaves out). A
 * type that load cannot write — a wide entity, a table per period — is refused before anything is read. Index
 * entities, summaries' contributions and change entities are derived, and not written. `@encrypted` values are
 * written opened, as the store reads them: the files hold the tenant's data in the clear.
 */
import { createWriteStream, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { once } from 'node:events';
import { ErrorCode, TablegraphError } from '../errors';
import { checkLoadable, typeNeeds } from '../model/load-order';
import { valuesOf } from '../model/entity-codec';
import { TENANT_FIELD, tenantPartitionRange } from '../model/tenancy';
import { ENTITY_TYPE_PROPERTY, type EntityModel, type Model } from '../model/types';
import type { TableStore } from '../storage/table-store';
import type { StorageObserver } from '../storage/storage-types';

export interface TenantExportOptions {
  store: TableStore;
  model: Model;
  tenant: string;
  /** The folder the files and the manifest go to (made if missing). */
  out: string;
  observer?: StorageObserver;
  /** Told after each page: the type and the entities written of it so far. */
  onProgress?(p: { type: string; entities: number }): void;
}

/** What an export wrote: per type, its file and entities, and the `@blob` values it left out. */
export interface TenantExport {
  manifest: string;
  types: Array<{ type: string; file: string; entities: number; blobsLeftOut: number }>;
}

/**
 * Exports one tenant.
 * @throws TablegraphError BAD_USER_INPUT for a schema without `@tenancy`, or a tenant-scoped type load cannot write;
 *   storage errors as the store maps them (a partial file may then stay: export again)
 */
export async function exportTenant(opts: TenantExportOptions): Promise<TenantExport> {
  if (!opts.model.tenancy) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, 'The schema has no @tenancy: it has no tenants to export.');
  const types = loadOrder(opts.model);
  mkdirSync(opts.out, { recursive: true });
  const written: TenantExport['types'] = [];
  for (const entity of types) written.push(await exportType(opts, entity));
  const manifest = path.join(opts.out, 'manifest.json');
  writeFileSync(manifest, `${JSON.stringify({ steps: written.map((t) => ({ type: t.type, file: path.basename(t.file) })) }, null, 2)}\n`);
  return { manifest, types: written };
}

/** The tenant-scoped stored types, each after the types its rows need (load-entities.ts typeNeeds). */
function loadOrder(model: Model): EntityModel[] {
  const scoped = [...model.entities.values()].filter((e) => e.tenantScoped && !e.implementations).sort((a, b) => a.name.localeCompare(b.name));
  for (const e of scoped) checkLoadable(model, e.name);
  const ordered: EntityModel[] = [];
  const visit = (e: EntityModel, path: string[]) => {
    if (ordered.includes(e) || path.includes(e.name)) return; // a cycle of references is the load's to refuse
    for (const need of typeNeeds(model, e.name)) {
      const other = model.entities.get(need);
      if (other?.tenantScoped) visit(other, [...path, e.name]);
    }
    ordered.push(e);
  };
  for (const e of scoped) visit(e, []);
  return ordered;
}

/** A value as a load reads it back: a Long as its digits (a DateTime is written by its own toJSON). */
function jsonValue(_key: string, value: unknown): unknown {
  return typeof value === 'bigint' ? value.toString() : value;
}

/** @throws TablegraphError CONFIG_INVALID when a value is still sealed (bytes: the store had no key to open it) */
function checkOpened(entity: EntityModel, line: Record<string, unknown>): void {
  const sealed = Object.keys(line).find((k) => line[k] instanceof Uint8Array);
  if (sealed === undefined) return;
  throw new TablegraphError(
    ErrorCode.CONFIG_INVALID,
    `${entity.name}.${sealed} is @encrypted and this process has no key to open it: set TABLEGRAPH_ENCRYPTION_KEYS to export it`,
  );
}

/** One type's entities of the tenant, as NDJSON rows of the fields a load takes. */
async function exportType(opts: TenantExportOptions, entity: EntityModel): Promise<TenantExport['types'][number]> {
  const file = path.join(opts.out, `${entity.name}.ndjson`);
  const stream = createWriteStream(file, { encoding: 'utf8' });
  // Not the tenant either: the files are the tenant's data, loaded into whichever tenant `--tenant` names.
  const fields = [...entity.fields.values()].filter(
    (f) => f.name !== TENANT_FIELD && !entity.summaryFields.has(f.name) && !entity.copies.has(f.name) && !f.blob,
  );
  const blobs = [...entity.fields.values()].filter((f) => f.blob);
  let entities = 0;
  let blobsLeftOut = 0;
  try {
    const pages = opts.store.scan(entity.layout.table, {
      partitionKeyRange: tenantPartitionRange(opts.tenant),
      entityType: entity.entityType,
      observer: opts.observer,
    });
    for await (const page of pages) {
      for (const row of page) {
        if (row.properties[ENTITY_TYPE_PROPERTY] !== entity.entityType) continue;
        const values = valuesOf(entity, row.properties);
        const line = Object.fromEntries(fields.map((f) => [f.name, values[f.name]]));
        checkOpened(entity, line);
        blobsLeftOut += blobs.filter((f) => typeof row.properties[f.name] === 'string').length;
        if (!stream.write(`${JSON.stringify(line, jsonValue)}\n`)) await once(stream, 'drain');
        entities++;
      }
      opts.onProgress?.({ type: entity.name, entities });
    }
  } finally {
    stream.end();
    await once(stream, 'close');
  }
  return { type: entity.name, file, entities, blobsLeftOut };
}
