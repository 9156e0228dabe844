/** The backup container's account (docs/backup.md), for `npm run backup` and `npm run restore`. */
import type { Config } from './config';
import { BlobStore } from '../storage/blob-store';

/** The backup container's store: its own account when one is configured, else the blobs'. */
export function backupBlobs(config: Pick<Config, 'backup' | 'storageTimeoutMs'>, blobs: BlobStore): BlobStore {
  const { connectionString } = config.backup;
  return connectionString ? new BlobStore({ connectionString, timeoutMs: config.storageTimeoutMs }) : blobs;
}
