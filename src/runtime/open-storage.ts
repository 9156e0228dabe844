/**
 * Opens the storage every command uses: the configured connection string, the account URLs reached with Microsoft
 * Entra ID (`DefaultAzureCredential`), or the embedded default (an Azurite kept under the data folder, started or
 * attached to); and a TableStore over it with the target's limits.
 */
import fs from 'node:fs';
import path from 'node:path';
import { DefaultAzureCredential } from '@azure/identity';
import type { TokenCredential } from '@azure/core-auth';
import type { Config } from './config';
import type { Logger } from '../log';
import type { Model } from '../model/types';
import { attachCipher } from './encryption';
import { ensureEmbeddedAzurite, type EmbeddedAzurite } from '../storage/embedded-azurite';
import { checkTarget, resolveTarget, targetOfEndpoint } from '../storage/connection';
import { QueueStore } from '../storage/queue-store';
import { BlobStore } from '../storage/blob-store';
import { TableStore } from '../storage/table-store';
import type { StorageAccess, StorageTarget } from '../storage/storage-types';
import type { TenantDirectory } from '../evolution/tenant-directory';
import { attachTenants } from './tenants';

export interface OpenStorage {
  store: TableStore;
  /** The queues of the same account (fan-out messages). */
  queues: QueueStore;
  /** The blobs of `@blob` fields (TABLEGRAPH_BLOB_CONNECTION_STRING, else the same account). */
  blobs: BlobStore;
  access: StorageAccess;
  target: StorageTarget;
  /** The embedded Azurite, when no storage is configured (shared with the folder's other commands). */
  azurite?: EmbeddedAzurite;
  /** Under `@tenancy`: the tenants' tiers and states, the store's placement (tenants.ts). */
  tenants?: TenantDirectory;
  /** Releases what this process holds: it detaches from the embedded Azurite, which stops when no other process uses it. */
  close(): Promise<void>;
}

/**
 * Says where the embedded default keeps this schema's data — and, when the folder is the default, where the data of
 * an earlier version's single `.data` folder is, which is no longer served without TABLEGRAPH_DATA_DIR.
 */
function sayDataDir(config: Config, log: Logger): void {
  const shown = path.relative(process.cwd(), config.dataDir) || '.';
  if (!config.dataDirDefaulted) {
    log.info({ dataDir: config.dataDir }, `embedded Azurite: data in ${shown} (TABLEGRAPH_DATA_DIR)`);
    return;
  }
  log.info(
    { dataDir: config.dataDir },
    `embedded Azurite: the data of schema folder ${path.basename(config.schemaDir)} is kept in ${shown}, apart from other schemas' (TABLEGRAPH_DATA_DIR chooses another folder)`,
  );
  const earlier = path.dirname(config.dataDir);
  if (fs.existsSync(path.join(earlier, 'azurite.json')) || fs.existsSync(path.join(earlier, 'azurite'))) {
    log.warn(
      { dataDir: earlier },
      `${path.relative(process.cwd(), earlier) || '.'} holds data of one schema for all (an earlier layout): TABLEGRAPH_DATA_DIR=${earlier} serves it`,
    );
  }
}

/**
 * @param model the compiled schema: its `@encrypted` fields are sealed and opened by the store (encryption.ts)
 * @param credential the token credential of the Entra ID path (default: `DefaultAzureCredential`, which finds a
 *   managed identity, workload identity, environment variables or a developer's `az login`); tests pass their own
 * @throws TablegraphError STORAGE_UNAVAILABLE when the embedded Azurite cannot be started; CONFIG_INVALID when the
 *   model encrypts and no key is configured (encryption.ts), or the embedded Azurite is not installed
 */
export async function openStorage(config: Config, log: Logger, model?: Model, credential?: TokenCredential): Promise<OpenStorage> {
  const timeoutMs = config.storageTimeoutMs;
  if (config.accountUrls) {
    checkTarget(config.target);
    const urls = config.accountUrls;
    const token = credential ?? new DefaultAzureCredential();
    const target = config.target ?? targetOfEndpoint(urls.table);
    const store = new TableStore({ url: urls.table, credential: token, target, timeoutMs });
    const access: StorageAccess = { kind: 'entra-id', urls, credential: token };
    if (model) attachCipher(store, model, config, access, log);
    const blobs = config.blobConnectionString
      ? new BlobStore({ connectionString: config.blobConnectionString, timeoutMs })
      : // No Blob endpoint (a Cosmos DB table URL with a queue URL): '' makes the first blob call say so (CONFIG_INVALID).
        new BlobStore({ url: urls.blob ?? '', credential: token, timeoutMs });
    log.info({ table: urls.table, queue: urls.queue, blob: urls.blob }, 'storage: Microsoft Entra ID (no account key)');
    const queues = new QueueStore({ url: urls.queue, credential: token, timeoutMs });
    const opened: OpenStorage = { store, queues, blobs, access, target, close: async () => opened.tenants?.stop() };
    if (model) await attachTenants(opened, model, { tablePrefix: config.tablePrefix, log, credential: token });
    return opened;
  }
  const azurite = config.connectionString ? undefined : await ensureEmbeddedAzurite(config.dataDir, { log });
  if (azurite) sayDataDir(config, log);
  const connectionString = config.connectionString ?? azurite!.connectionString;
  const target = resolveTarget(connectionString, config.target);
  const store = new TableStore({ connectionString, target, timeoutMs });
  const access: StorageAccess = { kind: 'connection-string', connectionString };
  if (model) attachCipher(store, model, config, access, log);
  const opened: OpenStorage = {
    store,
    queues: new QueueStore({ connectionString, timeoutMs }),
    blobs: new BlobStore({ connectionString: config.blobConnectionString ?? connectionString, timeoutMs }),
    access,
    target,
    azurite,
    async close() {
      opened.tenants?.stop();
      await azurite?.release();
    },
  };
  if (model) await attachTenants(opened, model, { tablePrefix: config.tablePrefix, log });
  return opened;
}
