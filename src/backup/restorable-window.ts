/**
 * The restorable window of a backup container (docs/backup.md), as `npm run backup -- status`, `/health` and
 * `/metrics` tell it, and as `npm run restore -- --at` checks a time against it:
 *
 * - `latestRestorableTime`: when the latest complete capture pass started (changes/latest.json): every write
 *   acknowledged at or before it is in a durable segment.
 * - `earliestRestorableTime`: when the oldest usable snapshot finished — one started after capture began (the first
 *   pass), so that the changes since it are all captured.
 * - `lagMs`: now − latestRestorableTime: how far behind the backup is (what a disaster now would lose, at most).
 */
import type { BlobStore } from '../storage/blob-store';
import type { SnapshotManifest } from './backup-format';
import { listSnapshots, readJsonBlob } from './backup-blobs';
import { LATEST_PASS, type LatestPass } from './change-format';

/**
 * How far before a snapshot's start a restore replays changes (ms): an EGT sent before the snapshot started may be
 * applied up to its timeout later, and the fence of a lost answer decides for some minutes (src/write/change-fence.ts).
 */
export const REPLAY_MARGIN_MS = 10 * 60_000;

export interface RestorableWindow {
  /** ISO 8601; absent while no usable snapshot exists. */
  earliestRestorableTime?: string;
  /** ISO 8601; absent before the first complete capture pass. */
  latestRestorableTime?: string;
  /** now − latestRestorableTime (ms); absent with it. */
  lagMs?: number;
  /** The latest pass as recorded; absent before the first. */
  latestPass?: LatestPass;
  /** The usable snapshots, oldest first. */
  snapshots: SnapshotManifest[];
  /** The complete snapshots that are not usable (started before capture began, or no capture pass yet), oldest first. */
  unusable: SnapshotManifest[];
}

/**
 * Whether the changes since `snapshot` are all captured: it started after capture began. (A restore also replays the
 * changes from REPLAY_MARGIN_MS before it; any older than capture are in the snapshot already, and need no replay.)
 */
export function snapshotUsable(snapshot: SnapshotManifest, latest: LatestPass | undefined): boolean {
  return latest !== undefined && Date.parse(snapshot.startedAt) >= Date.parse(latest.firstPassAt);
}

/**
 * The window of the backup in `container` (see the file comment): one read of latest.json, and the snapshots' manifests.
 * @throws TablegraphError DATA_INTEGRITY (reason BackupCorrupt) for a bad manifest; STORAGE_UNAVAILABLE
 */
export async function restorableWindow(blobs: BlobStore, container: string, now = Date.now()): Promise<RestorableWindow> {
  const latest = await readJsonBlob<LatestPass>(blobs, container, LATEST_PASS);
  const complete = await listSnapshots(blobs, container);
  const snapshots = complete.filter((s) => snapshotUsable(s, latest));
  const unusable = complete.filter((s) => !snapshotUsable(s, latest));
  const earliest = snapshots.length > 0 ? snapshots.map((s) => s.finishedAt).sort()[0] : undefined;
  return {
    ...(earliest !== undefined && latest && earliest <= latest.startedAt && { earliestRestorableTime: earliest }),
    ...(latest && { latestRestorableTime: latest.startedAt, lagMs: now - Date.parse(latest.startedAt), latestPass: latest }),
    snapshots,
    unusable,
  };
}

/** The latest pass, read at most once per `cacheMs` however often asked (for /health and /metrics). */
export function latestPassReader(blobs: BlobStore, container: string, cacheMs = 5000): () => Promise<LatestPass | undefined> {
  let last: { at: number; value: LatestPass | undefined } | undefined;
  let running: Promise<LatestPass | undefined> | undefined;
  return () => {
    if (last && Date.now() - last.at < cacheMs) return Promise.resolve(last.value);
    running ??= readJsonBlob<LatestPass>(blobs, container, LATEST_PASS)
      .then((value) => {
        last = { at: Date.now(), value };
        return value;
      })
      .finally(() => (running = undefined));
    return running;
  };
}
