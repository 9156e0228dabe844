/**
 * Opens the storage every command uses: the configured connection string, or the embedded default (an Azurite
 * kept under the data folder, started or attached to), and a TableStore over it with the target's limits.
 */
import type { Config } from '../config';
import type { Logger } from '../log';
import type { Model } from '../model/types';
import { attachCipher } from './encryption';
import { ensureEmbeddedAzurite, type EmbeddedAzurite } from '../storage/embedded-azurite';
import { resolveTarget } from '../storage/connection';
import { QueueStore } from '../storage/queue-store';
import { BlobStore } from '../storage/blob-store';
import { TableStore } from '../storage/table-store';
import type { StorageTarget } from '../storage/types';

export interface OpenStorage {
  store: TableStore;
  /** The queues of the same account (fan-out messages). */
  queues: QueueStore;
  /** The blobs of `@blob` fields (TABLEGRAPH_BLOB_CONNECTION_STRING, else the same account). */
  blobs: BlobStore;
  connectionString: string;
  target: StorageTarget;
  /** The embedded Azurite, when no connection string is configured (shared with the folder's other commands). */
  azurite?: EmbeddedAzurite;
  /** Releases what this process holds: it detaches from the embedded Azurite, which stops when no other process uses it. */
  close(): Promise<void>;
}

/**
 * @param model the compiled schema: its `@encrypted` fields are sealed and opened by the store (encryption.ts)
 * @throws TablegraphError STORAGE_UNAVAILABLE when the embedded Azurite cannot be started; CONFIG_INVALID when the
 *   model encrypts and no key is configured (encryption.ts)
 */
export async function openStorage(config: Config, log: Logger, model?: Model): Promise<OpenStorage> {
  const azurite = config.connectionString ? undefined : await ensureEmbeddedAzurite(config.dataDir, { log });
  const connectionString = config.connectionString ?? azurite!.connectionString;
  const target = resolveTarget(connectionString, config.target);
  const store = new TableStore({ connectionString, target, timeoutMs: config.storageTimeoutMs });
  if (model) attachCipher(store, model, config, connectionString, log);
  return {
    store,
    queues: new QueueStore({ connectionString, timeoutMs: config.storageTimeoutMs }),
    blobs: new BlobStore({ connectionString: config.blobConnectionString ?? connectionString, timeoutMs: config.storageTimeoutMs }),
    connectionString,
    target,
    azurite,
    async close() {
      await azurite?.release();
    },
  };
}
