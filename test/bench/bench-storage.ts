/**
 * The storage a benchmark's server runs on: its own in-memory Azurite's tables, queues and blobs, which the
 * benchmark closes itself (the server's `close` leaves them).
 */
import type { OpenStorage } from '../../src/runtime/open-storage';
import { BlobStore } from '../../src/storage/blob-store';
import { QueueStore } from '../../src/storage/queue-store';
import { TableStore } from '../../src/storage/table-store';

/**
 * @param parts a table store or queue store the benchmark made itself (to count its calls), used instead of new ones
 * @example
 * const server = await startServer(config, benchStorage(azurite.connectionString, { store }), log);
 */
export function benchStorage(connectionString: string, parts: Partial<Pick<OpenStorage, 'store' | 'queues'>> = {}): OpenStorage {
  return {
    store: parts.store ?? new TableStore({ connectionString, target: 'azurite' }),
    queues: parts.queues ?? new QueueStore({ connectionString }),
    blobs: new BlobStore({ connectionString }),
    access: { kind: 'connection-string', connectionString },
    target: 'azurite',
    close: async () => {},
  };
}
