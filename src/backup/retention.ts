/**
 * Snapshots expire (docs/backup.md, "Retention"): a complete snapshot that finished more than the retention ago is
 * deleted — its manifest first, so that it is never found complete with a segment gone — then its segments, blobs and
 * progress; an unfinished one (no manifest) that started more than the retention ago is deleted too. The newest
 * complete snapshot is always kept, however old: retention never leaves nothing to restore.
 *
 * Captured changes expire with them (change-format.ts): a pass whose changes all precede the replay window of the
 * oldest snapshot kept, and that finished more than the retention ago, is deleted, manifest first; so is a pass that
 * never finished (a worker killed in it: segments and no manifest) once it started more than the retention ago.
 * Only what began before the retention's start is listed and read (expireSnapshots): the cost is what expires.
 */
import type { BlobStore } from '../storage/blob-store';
import { newestSnapshot, readJsonBlob, readSnapshot, SNAPSHOTS } from './backup-blobs';
import { parsePassManifest, CHANGES } from './change-format';
import { REPLAY_MARGIN_MS } from './restorable-window';

export interface ExpireOptions {
  blobs: BlobStore;
  container: string;
  /** How long a snapshot is kept (days, > 0). */
  retentionDays: number;
  /** The time now (ms since the epoch; default the clock). */
  now?: number;
}

/** What expired: the ids of the snapshots deleted, complete and unfinished, the capture passes, and the blobs deleted with them. */
export interface ExpireResult {
  complete: string[];
  unfinished: string[];
  passes: number;
  blobs: number;
}

/** Deletes every blob of snapshot `id`, its manifest first. @returns how many there were */
async function deleteSnapshot(blobs: BlobStore, container: string, id: string, folder = SNAPSHOTS): Promise<number> {
  const dir = `${folder}/${id}/`;
  const names = (await blobs.list(container, dir)).map((b) => b.name);
  const manifest = `${dir}manifest.json`;
  if (names.includes(manifest)) await blobs.delete(container, manifest);
  for (const name of names) if (name !== manifest) await blobs.delete(container, name);
  return names.length;
}

/** The id prefix of a time (snapshotId's form, to the second: `20261128T013000Z`): ids before it began earlier. */
function idPrefix(iso: string): string {
  return iso.replace(/[-:]/g, '').slice(0, 15) + 'Z';
}

/** The ids of the folders under `folder/` begun before `before` (ISO 8601), listed up to it only, in id order. */
async function idsBefore(blobs: BlobStore, container: string, folder: string, before: string): Promise<{ ids: string[]; names: Set<string> }> {
  const names = (await blobs.listBefore(container, `${folder}/`, `${folder}/${idPrefix(before)}`)).map((b) => b.name);
  const ids = [...new Set(names.map((n) => n.split('/')[1]).filter((id) => id && !Number.isNaN(passStart(id))))];
  return { ids, names: new Set(names) };
}

/**
 * Lists only what may expire — the snapshots and passes begun before the retention's start — and reads only their
 * manifests and progress (the newest snapshot from its pointer): its cost grows with what expires, not with what is
 * kept.
 * @throws TablegraphError DATA_INTEGRITY (reason BackupCorrupt) for a manifest or progress that does not read;
 *   STORAGE_UNAVAILABLE and others from the Blob service (run it again: what is left is deleted then)
 */
export async function expireSnapshots(opts: ExpireOptions): Promise<ExpireResult> {
  const { blobs, container } = opts;
  const before = new Date((opts.now ?? Date.now()) - opts.retentionDays * 24 * 3600_000).toISOString();
  const result: ExpireResult = { complete: [], unfinished: [], passes: 0, blobs: 0 };
  const newest = await newestSnapshot(blobs, container);
  const { ids, names } = await idsBefore(blobs, container, SNAPSHOTS, before);
  // When the oldest snapshot kept began (ms): a kept one listed here, else one begun after the listing's end.
  let oldestKept: number | undefined;
  for (const id of ids) {
    const complete = names.has(`${SNAPSHOTS}/${id}/manifest.json`);
    if (id === newest?.id || (complete && (await readSnapshot(blobs, container, id)).finishedAt >= before)) {
      oldestKept ??= passStart(id);
      continue;
    }
    if (!complete) {
      const progress = `${SNAPSHOTS}/${id}/progress.json`;
      if (!names.has(progress)) continue;
      const started = (await readJsonBlob<{ startedAt?: string }>(blobs, container, progress))?.startedAt ?? '';
      if (started >= before) continue;
    }
    result.blobs += await deleteSnapshot(blobs, container, id);
    (complete ? result.complete : result.unfinished).push(id);
  }
  // No snapshot at all: every pass is kept (a deployment begun empty is restored from its passes alone). One begun
  // after the listing's end began at the retention's start at the earliest (to the second).
  oldestKept ??= newest ? Date.parse(before) - 1000 : undefined;
  await expirePasses(opts, before, oldestKept === undefined ? 0 : oldestKept - REPLAY_MARGIN_MS, result);
  return result;
}

/** When a pass or snapshot started, from its id (snapshotId's form); NaN for a name that is not one. */
function passStart(id: string): number {
  const m = /^(\d{4})(\d\d)(\d\d)T(\d\d)(\d\d)(\d\d)Z-/.exec(id);
  return m ? Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6]) : Number.NaN;
}

/** Deletes the passes past the retention that no kept snapshot's replay needs (see the file comment). */
async function expirePasses(opts: ExpireOptions, before: string, needed: number, result: ExpireResult): Promise<void> {
  const { blobs, container } = opts;
  const { ids, names } = await idsBefore(blobs, container, CHANGES, before);
  for (const id of ids) {
    const manifest = names.has(`${CHANGES}/${id}/manifest.json`)
      ? parsePassManifest((await blobs.download(container, `${CHANGES}/${id}/manifest.json`))?.bytes.toString('utf8') ?? '', id)
      : undefined;
    if (manifest && (manifest.finishedAt >= before || manifest.lastAt >= needed)) continue;
    result.blobs += await deleteSnapshot(blobs, container, id, CHANGES);
    result.passes++;
  }
}
