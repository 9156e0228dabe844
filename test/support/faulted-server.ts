/** A server on a schema written for a test whose Table calls go through the storage fault proxy (storage-proxy.ts). */
import { startSdlServer, uniquePrefix } from './harness';
import { startStorageProxy, type StorageProxy } from './storage-proxy';

/**
 * startSdlServer over a fault proxy seeded with `seed` (faults off until `proxy.setFaults`), its worker off (the test
 * delivers the messages), its tables its own, its rate limit out of the way.
 */
export async function startFaultedSdlServer(sdl: string, seed: number): Promise<Awaited<ReturnType<typeof startSdlServer>> & { proxy: StorageProxy }> {
  const proxy = await startStorageProxy(process.env.AZURE_STORAGE_CONNECTION_STRING!, { seed });
  try {
    const ctx = await startSdlServer(sdl, {
      TABLEGRAPH_WORKER: 'off',
      TABLEGRAPH_TABLE_PREFIX: uniquePrefix(),
      AZURE_STORAGE_CONNECTION_STRING: proxy.connectionString,
      TABLEGRAPH_RATE_LIMIT: '1000000',
    });
    return {
      ...ctx,
      proxy,
      async close() {
        await ctx.close();
        await proxy.close();
      },
    };
  } catch (e) {
    await proxy.close();
    throw e;
  }
}
