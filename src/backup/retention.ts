/**
 * Snapshots expire (docs/backup.md, "Retention"): a complete snapshot that finished more than the retention ago is
 * deleted — its manifest first, so that it is never found complete with a segment gone — then its segments, blobs and
 * progress; an unfinished one (no manifest) that started more than the retention ago is deleted too. The newest
 * complete snapshot is always kept, however old: retention never leaves nothing to restore.
 *
 * Captured changes expire with them (change-format.ts): a pass whose changes all precede the replay window of the
 * oldest snapshot kept, and that finished more than the retention ago, is deleted, manifest first; so is a pass that
 * never finished (a worker killed in it: segments and no manifest) once it started more than the retention ago.
 */
import type { BlobStore } from '../storage/blob-store';
import { listSnapshots, readJsonBlob, SNAPSHOTS } from './backup-blobs';
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

/**
 * @throws TablegraphError DATA_INTEGRITY (reason BackupCorrupt) for a manifest or progress that does not read;
 *   STORAGE_UNAVAILABLE and others from the Blob service (run it again: what is left is deleted then)
 */
export async function expireSnapshots(opts: ExpireOptions): Promise<ExpireResult> {
  const { blobs, container } = opts;
  const before = new Date((opts.now ?? Date.now()) - opts.retentionDays * 24 * 3600_000).toISOString();
  const result: ExpireResult = { complete: [], unfinished: [], passes: 0, blobs: 0 };
  const complete = await listSnapshots(blobs, container);
  const newest = complete.at(-1)?.id;
  for (const m of complete) {
    if (m.id === newest || m.finishedAt >= before) continue;
    result.blobs += await deleteSnapshot(blobs, container, m.id);
    result.complete.push(m.id);
  }
  const done = new Set(complete.map((m) => m.id));
  const progress = (await blobs.list(container, `${SNAPSHOTS}/`)).filter((b) => b.name.endsWith('/progress.json'));
  for (const { name } of progress) {
    const id = name.slice(SNAPSHOTS.length + 1, -'/progress.json'.length);
    if (done.has(id)) continue;
    const started = (await readJsonBlob<{ startedAt?: string }>(blobs, container, name))?.startedAt ?? '';
    if (started >= before) continue;
    result.blobs += await deleteSnapshot(blobs, container, id);
    result.unfinished.push(id);
  }
  const oldestKept = complete.find((m) => !result.complete.includes(m.id));
  await expirePasses(opts, before, oldestKept ? Date.parse(oldestKept.startedAt) - REPLAY_MARGIN_MS : 0, result);
  return result;
}

/** When a pass started, from its id (snapshotId's form); NaN for a name that is not one. */
function passStart(id: string): number {
  const m = /^(\d{4})(\d\d)(\d\d)T(\d\d)(\d\d)(\d\d)Z-/.exec(id);
  return m ? Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6]) : Number.NaN;
}

/** Deletes the passes past the retention that no kept snapshot's replay needs (see the file comment). */
async function expirePasses(opts: ExpireOptions, before: string, needed: number, result: ExpireResult): Promise<void> {
  const { blobs, container } = opts;
  const names = (await blobs.list(container, `${CHANGES}/`)).map((b) => b.name);
  const ids = [...new Set(names.map((n) => n.split('/')[1]).filter((id) => id && !Number.isNaN(passStart(id))))];
  for (const id of ids) {
    if (passStart(id) >= Date.parse(before)) continue;
    const manifest = names.includes(`${CHANGES}/${id}/manifest.json`)
      ? parsePassManifest((await blobs.download(container, `${CHANGES}/${id}/manifest.json`))?.bytes.toString('utf8') ?? '', id)
      : undefined;
    if (manifest && (manifest.finishedAt >= before || manifest.lastAt >= needed)) continue;
    result.blobs += await deleteSnapshot(blobs, container, id, CHANGES);
    result.passes++;
  }
}
