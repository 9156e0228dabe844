/**
 * Where backups live in Blob storage (docs/backup.md): one container (config.backup.container), snapshots under `snapshots/<id>/`, a
 * restore's progress under `restores/<target prefix>/`. JSON documents are read and written whole.
 */
import { ErrorCode, TablegraphError } from '../errors';
import type { BlobStore } from '../storage/blob-store';
import { parseManifest, type SnapshotManifest } from './backup-format';

/** One line of a snapshot: its id, times, size, and whether it is a point in time. */
export function describeSnapshot(m: SnapshotManifest): string {
  const bytes = m.segments.reduce((n, s) => n + s.bytes, 0);
  const quiet = m.latestEntityTimestamp === '' || m.latestEntityTimestamp < m.startedAt;
  return (
    `${m.id}  ${m.startedAt} → ${m.finishedAt}  ${m.rows.toLocaleString('en-US')} entities, ${m.blobs} blobs, ${m.segments.length} segments, ` +
    `${(bytes / 1024).toFixed(0)} KiB; ${quiet ? 'no entity changed while it was read' : `entities changed while it was read (latest ${m.latestEntityTimestamp})`}`
  );
}

/** The folder of every snapshot. */
export const SNAPSHOTS = 'snapshots';

/**
 * The newest complete snapshot, named by a small document written after its manifest (`snapshots/latest.json`): what
 * a worker's due check reads, one blob however many snapshots are kept. Absent in a container whose snapshots are
 * all older than it: then the manifests are listed once (newestSnapshot).
 */
export const NEWEST_SNAPSHOT = `${SNAPSHOTS}/latest.json`;

/** The newest complete snapshot's id and times (ISO 8601). */
export interface SnapshotPointer {
  id: string;
  startedAt: string;
  finishedAt: string;
}

/**
 * The newest complete snapshot: the pointer, or — none written yet — the newest manifest listed; undefined for none.
 * @throws TablegraphError DATA_INTEGRITY for a pointer or manifest that does not read
 */
export async function newestSnapshot(blobs: BlobStore, container: string): Promise<SnapshotPointer | undefined> {
  const pointer = await readJsonBlob<SnapshotPointer>(blobs, container, NEWEST_SNAPSHOT);
  if (pointer && typeof pointer.startedAt === 'string' && typeof pointer.finishedAt === 'string') return pointer;
  const newest = (await listSnapshots(blobs, container)).at(-1);
  return newest && { id: newest.id, startedAt: newest.startedAt, finishedAt: newest.finishedAt };
}

/** A snapshot's id: its start time, sortable (`20261128T013000Z`), and 4 random hex digits. */
export function snapshotId(at: Date): string {
  const time = at
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
  return `${time}-${Math.floor(Math.random() * 0x10000)
    .toString(16)
    .padStart(4, '0')}`;
}

/** A JSON blob's value, or undefined when it does not exist. @throws TablegraphError DATA_INTEGRITY when not JSON */
export async function readJsonBlob<T>(blobs: BlobStore, container: string, name: string): Promise<T | undefined> {
  const blob = await blobs.download(container, name);
  if (!blob) return undefined;
  try {
    return JSON.parse(blob.bytes.toString('utf8')) as T;
  } catch {
    throw new TablegraphError(ErrorCode.DATA_INTEGRITY, `${container}/${name} is not JSON.`, { reason: 'BackupCorrupt', where: name });
  }
}

/** Writes `value` as a JSON blob (replacing it). */
export async function writeJsonBlob(blobs: BlobStore, container: string, name: string, value: unknown): Promise<void> {
  await blobs.upload(container, name, Buffer.from(JSON.stringify(value), 'utf8'), 'application/json');
}

/** Every complete snapshot in the container, oldest first. @throws TablegraphError DATA_INTEGRITY for a bad manifest */
export function listSnapshots(blobs: BlobStore, container: string): Promise<SnapshotManifest[]> {
  return listManifests(blobs, container, SNAPSHOTS, parseManifest);
}

/**
 * The `manifest.json` of every complete run under `<folder>/` (a snapshot, a capture pass), in name order — oldest
 * first, the names starting with their time — each parsed by `parse` (given its text and its blob's name).
 * @throws what `parse` throws for a bad manifest (DATA_INTEGRITY)
 */
export async function listManifests<T>(blobs: BlobStore, container: string, folder: string, parse: (json: string, name: string) => T): Promise<T[]> {
  const names = (await blobs.list(container, `${folder}/`)).map((b) => b.name).filter((n) => n.endsWith('/manifest.json'));
  const manifests: T[] = [];
  for (const name of names.sort()) {
    const blob = await blobs.download(container, name);
    if (blob) manifests.push(parse(blob.bytes.toString('utf8'), name));
  }
  return manifests;
}

/**
 * One complete snapshot's manifest.
 * @throws TablegraphError NOT_FOUND (reason SnapshotNotFound) when no complete snapshot has that id; DATA_INTEGRITY
 */
export async function readSnapshot(blobs: BlobStore, container: string, id: string): Promise<SnapshotManifest> {
  const name = `${SNAPSHOTS}/${id}/manifest.json`;
  const blob = /^[0-9TZ]+-[0-9a-f]{4}$/.test(id) ? await blobs.download(container, name) : null;
  if (!blob) {
    throw new TablegraphError(ErrorCode.NOT_FOUND, `No complete snapshot ${id} in container ${container} (npm run backup -- list lists them).`, {
      reason: 'SnapshotNotFound',
      snapshot: id,
    });
  }
  const manifest = parseManifest(blob.bytes.toString('utf8'), name);
  if (manifest.id !== id)
    throw new TablegraphError(ErrorCode.DATA_INTEGRITY, `${name} names snapshot ${manifest.id}.`, { reason: 'BackupCorrupt', where: name });
  return manifest;
}
