/**
 * A snapshot (docs/backup.md): every primary entity of every entity type, each table read once page by page for all
 * the types stored in it — a maintenance read off the request path, paced under the build budget — and written to
 * Blob storage as segments (one per type in a page) with a manifest (backup-format.ts). Derived entities (index entities, summaries' contributions, copies' sources,
 * change entities) are not copied: a restore rebuilds them from the primaries with the online build machinery.
 *
 * Resumable: after each page, the snapshot's progress (`snapshots/<id>/progress.json`: the segments written, the
 * table being read and its continuation token) is written; a snapshot run again finds the unfinished one of
 * the same schema and goes on from there. The manifest is written last: a snapshot without one is not complete; then
 * `snapshots/latest.json` names it (backup-blobs.ts NEWEST_SNAPSHOT), for the workers' due checks.
 *
 * Each row is the entity as its type's fields type it (entity-rows.ts), its `@encrypted` values sealed as the table
 * holds them; the blobs its `@blob` fields name are copied beside the segments (blob-copies.ts). A snapshot taken while writers run is a fuzzy copy — each entity as its page found it — and says so
 * (`latestEntityTimestamp` after `startedAt`).
 */
import { ErrorCode, TablegraphError } from '../errors';
import { blobFields } from '../model/blob-fields';
import { entityRows } from '../model/entity-rows';
import { renderKey } from '../model/key-template';
import { tableFamily, tablePeriod } from '../model/table-template';
import { ENTITY_TYPE_PROPERTY, type EntityModel, type Model } from '../model/types';
import type { BlobStore } from '../storage/blob-store';
import type { TableStore } from '../storage/table-store';
import type { StorageObserver, StoredEntity } from '../storage/storage-types';
import { readPrimary } from '../write/index-settle';
import { encodeSegment, BACKUP_FORMAT, type BackupRow, type SegmentRecord, type SnapshotManifest } from './backup-format';
import { NEWEST_SNAPSHOT, readJsonBlob, SNAPSHOTS, snapshotId, writeJsonBlob, type SnapshotPointer } from './backup-blobs';
import { backupBlobName, copyBlob } from './blob-copies';

/** Where a snapshot is, written after each segment. */
interface SnapshotProgress {
  id: string;
  schemaHash: string;
  startedAt: string;
  latestEntityTimestamp: string;
  rows: number;
  blobs: number;
  segments: SegmentRecord[];
  /** The table (in `units` order) being read, and where in it. */
  unit: number;
  token?: string;
  /** Units are tables, each read once for all its types (absent in a snapshot begun before: it starts over). */
  byTable?: true;
}

export interface SnapshotOptions {
  /** The tables' store: with the schema's cipher when it encrypts (rows are read opened and written sealed). */
  store: TableStore;
  /** The backup container's account. */
  blobs: BlobStore;
  /** The account of the schema's `@blob` fields: the blobs its entities name are copied into the snapshot. */
  entityBlobs: BlobStore;
  /** The backup container (created if missing). */
  container: string;
  model: Model;
  tablePrefix: string;
  /** The schema's layout hash (the catalogue's) and SDL, kept in the manifest. */
  schemaHash: string;
  sdl: string;
  /** Entities read per second at most (the build budget; 0: no limit). */
  entitiesPerSecond: number;
  /** Entities per page and segment (at most 1000, the default). */
  pageSize?: number;
  /** Told after each page and the progress are written (`entityType`: the types read in its table, by commas); awaited. */
  onProgress?: (p: { id: string; rows: number; segments: number; entityType: string }) => void | Promise<void>;
  /** Told of every table call (a benchmark counts them). */
  observer?: StorageObserver;
  /** Aborted: the snapshot stops after the page under way (SnapshotStopped), its progress kept for the next to resume. */
  signal?: AbortSignal;
}

/** A snapshot stopped by its signal (a worker stopping) after a page: the next one resumes it. */
export class SnapshotStopped extends Error {
  constructor(readonly id: string) {
    super(`snapshot ${id} stopped; the next one resumes it`);
  }
}

/** One type's rows in one table. */
interface Unit {
  entity: EntityModel;
  table: string;
}

/** One table and the stored types in it: what a snapshot reads, once per table, in this order. */
interface TableUnit {
  table: string;
  entities: EntityModel[];
}

/**
 * The tables of the types whose entities are stored (an interface's implementations, not the interface; a period
 * table family's existing tables), sorted, each with its types sorted by name.
 */
async function unitsOf(store: TableStore, model: Model): Promise<TableUnit[]> {
  const byTable = new Map<string, EntityModel[]>();
  const types = [...model.entities.values()].filter((e) => !e.implementations).sort((a, b) => a.name.localeCompare(b.name));
  for (const entity of types) {
    const template = entity.layout.tableTemplate;
    const tables = template ? (await store.listTables(tableFamily(template))).filter((t) => tablePeriod(template, t)) : [entity.layout.table];
    for (const table of tables) byTable.set(table, [...(byTable.get(table) ?? []), entity]);
  }
  return [...byTable.keys()].sort().map((table) => ({ table, entities: byTable.get(table)! }));
}

/** Every table that holds entities of the schema's stored types (a period table family's existing tables too), sorted. */
export async function entityTables(store: TableStore, model: Model): Promise<string[]> {
  return (await unitsOf(store, model)).map((u) => u.table);
}

/** Whether a row read is an entity's part 1 (a wide entity's other parts are read with it). */
function isEntityRow(entity: EntityModel, row: StoredEntity): boolean {
  if (!entity.wide) return true;
  try {
    return renderKey(entity.layout.rowKey, row.properties) === row.rowKey;
  } catch {
    return false;
  }
}

/**
 * The page's entities as backup rows (the prefix taken off their tables), the latest Timestamp among them, and how
 * many blobs their `@blob` fields name were copied (blob-copies.ts).
 */
async function pageRows(opts: SnapshotOptions, id: string, unit: Unit, page: StoredEntity[]): Promise<{ rows: BackupRow[]; latest: string; blobs: number }> {
  const rows: BackupRow[] = [];
  let latest = '';
  let blobs = 0;
  for (const row of page) {
    if (!isEntityRow(unit.entity, row)) continue;
    const at = { table: unit.table, partitionKey: row.partitionKey, rowKey: row.rowKey };
    const source = unit.entity.wide ? await readPrimary(opts.store, unit.entity, at, { observer: opts.observer }) : row;
    if (!source) continue; // deleted since the page was read
    let copy;
    try {
      copy = entityRows(unit.entity, source);
    } catch (e) {
      throw new TablegraphError(
        ErrorCode.DATA_INTEGRITY,
        `${unit.entity.name} at ${unit.table} ${row.partitionKey}/${row.rowKey} cannot be read as its type (${(e as Error).message}): fix or delete it, then run the snapshot again (it resumes).`,
        { reason: 'BackupCorrupt', where: `${unit.table}/${row.partitionKey}/${row.rowKey}` },
      );
    }
    for (const p of [source, ...(source.parts ?? [])]) if (p?.timestamp && p.timestamp > latest) latest = p.timestamp;
    for (const f of blobFields(unit.entity)) {
      const name = source.properties[f.name];
      if (typeof name !== 'string') continue;
      const to = { store: opts.blobs, container: opts.container, name: backupBlobName(id, unit.entity.entityType, f.name, name) };
      if (await copyBlob({ store: opts.entityBlobs, container: f.blob.container, name }, to)) blobs++;
    }
    const table = copy.table.slice(opts.tablePrefix.length);
    for (const entity of copy.rows) rows.push({ table, entity: opts.store.sealed(entity) });
  }
  return { rows, latest, blobs };
}

/** One page of a table: each of its types' rows as the snapshot's next segment (none for a type without any). */
async function writeTablePage(opts: SnapshotOptions, progress: SnapshotProgress, unit: TableUnit, page: StoredEntity[]): Promise<void> {
  for (const entity of unit.entities) {
    const mine = page.filter((e) => e.properties[ENTITY_TYPE_PROPERTY] === entity.entityType);
    if (mine.length > 0) await writePage(opts, progress, { entity, table: unit.table }, mine);
  }
}

/** One type's rows of a page as the snapshot's next segment (none for a page without entities of the type), its blobs copied. */
async function writePage(opts: SnapshotOptions, progress: SnapshotProgress, unit: Unit, page: StoredEntity[]): Promise<void> {
  const { rows, latest, blobs } = await pageRows(opts, progress.id, unit, page);
  progress.blobs += blobs;
  if (latest > progress.latestEntityTimestamp) progress.latestEntityTimestamp = latest;
  if (rows.length === 0) return;
  const { bytes, sha256 } = encodeSegment(rows);
  const name = `${SNAPSHOTS}/${progress.id}/${String(progress.segments.length + 1).padStart(6, '0')}-${unit.entity.entityType}.ndjson.gz`;
  await opts.blobs.upload(opts.container, name, bytes, 'application/gzip');
  progress.segments.push({ name, entityType: unit.entity.entityType, rows: rows.length, bytes: bytes.length, sha256 });
  progress.rows += rows.length;
}

/** The unfinished snapshot of this schema, if one is in the container (the newest). */
async function unfinished(opts: SnapshotOptions): Promise<SnapshotProgress | undefined> {
  const listed = await opts.blobs.list(opts.container, `${SNAPSHOTS}/`);
  const names = new Set(listed.map((b) => b.name));
  const open = listed
    .filter((b) => b.name.endsWith('/progress.json') && !names.has(b.name.replace(/progress\.json$/, 'manifest.json')))
    .map((b) => b.name)
    .sort()
    .reverse();
  for (const name of open) {
    const progress = await readJsonBlob<SnapshotProgress>(opts.blobs, opts.container, name);
    if (progress?.schemaHash === opts.schemaHash && progress.byTable) return progress;
  }
  return undefined;
}

/**
 * Takes a snapshot, or finishes the unfinished one of this schema (see the file comment).
 * @returns its manifest
 * @throws TablegraphError DATA_INTEGRITY (reason BackupCorrupt) for a stored entity its type cannot read;
 *   STORAGE_UNAVAILABLE and others from storage (run it again: it resumes); SnapshotStopped once `signal` is aborted
 */
export async function takeSnapshot(opts: SnapshotOptions): Promise<SnapshotManifest> {
  const units = await unitsOf(opts.store, opts.model);
  await opts.blobs.ensureContainer(opts.container);
  const started = new Date();
  const progress: SnapshotProgress = (await unfinished(opts)) ?? {
    id: snapshotId(started),
    schemaHash: opts.schemaHash,
    startedAt: started.toISOString(),
    latestEntityTimestamp: '',
    rows: 0,
    blobs: 0,
    segments: [],
    unit: 0,
    byTable: true,
  };
  const dir = `${SNAPSHOTS}/${progress.id}`;
  // A table not created yet holds nothing: one empty page.
  const read = (unit: number, token: string | undefined) =>
    opts.store
      .scanPage(units[unit].table, token, {
        entityTypes: units[unit].entities.map((e) => e.entityType),
        pageSize: opts.pageSize,
        observer: opts.observer,
      })
      .catch((e: unknown) => {
        if (e instanceof TablegraphError && e.code === ErrorCode.NOT_FOUND) return { entities: [] as StoredEntity[], continuationToken: undefined };
        throw e;
      });
  let next = progress.unit < units.length ? read(progress.unit, progress.token) : undefined;
  while (next) {
    const unit = units[progress.unit];
    const began = Date.now();
    const page = await next;
    // The next page is read while this one is encoded and written (its failure is met when it is awaited).
    const after = page.continuationToken ? progress.unit : progress.unit + 1;
    next = after < units.length && opts.entitiesPerSecond === 0 ? read(after, page.continuationToken) : undefined;
    next?.catch(() => undefined);
    await writeTablePage(opts, progress, unit, page.entities);
    progress.token = page.continuationToken;
    if (!progress.token) progress.unit++;
    await writeJsonBlob(opts.blobs, opts.container, `${dir}/progress.json`, progress);
    const entityType = unit.entities.map((e) => e.entityType).join(',');
    await opts.onProgress?.({ id: progress.id, rows: progress.rows, segments: progress.segments.length, entityType });
    // The build budget: a page of n entities takes at least n / entitiesPerSecond seconds (0: no limit).
    const due = opts.entitiesPerSecond > 0 ? (page.entities.length / opts.entitiesPerSecond) * 1000 - (Date.now() - began) : 0;
    if (due > 0) await new Promise((resolve) => setTimeout(resolve, due));
    if (opts.signal?.aborted) throw new SnapshotStopped(progress.id);
    if (!next && progress.unit < units.length) next = read(progress.unit, progress.token);
  }
  const manifest: SnapshotManifest = {
    format: BACKUP_FORMAT,
    kind: 'snapshot',
    id: progress.id,
    tablePrefix: opts.tablePrefix,
    schemaHash: opts.schemaHash,
    sdl: opts.sdl,
    startedAt: progress.startedAt,
    finishedAt: new Date().toISOString(),
    latestEntityTimestamp: progress.latestEntityTimestamp,
    rows: progress.rows,
    blobs: progress.blobs,
    segments: progress.segments,
  };
  await writeJsonBlob(opts.blobs, opts.container, `${dir}/manifest.json`, manifest);
  const pointer: SnapshotPointer = { id: manifest.id, startedAt: manifest.startedAt, finishedAt: manifest.finishedAt };
  await writeJsonBlob(opts.blobs, opts.container, NEWEST_SNAPSHOT, pointer);
  return manifest;
}
