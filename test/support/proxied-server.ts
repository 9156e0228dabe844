/**
 * A test server on a schema of its own behind the storage fault proxy (storage-proxy.ts): its Table, Queue and Blob
 * calls all go through the proxy, whose faults the test sets, from a printed seed.
 */
import { startSdlServer } from './harness';
import { startStorageProxy, type StorageProxy } from './storage-proxy';

export interface ProxiedServer {
  proxy: StorageProxy;
  ctx: Awaited<ReturnType<typeof startSdlServer>>;
  /** Stops the server, then the proxy. */
  close(): Promise<void>;
}

/**
 * @param opts.seed the fault schedule's seed; opts.prefix the table prefix; opts.env more of the server's environment
 */
export async function startProxiedServer(sdl: string, opts: { seed: number; prefix: string; env?: Record<string, string> }): Promise<ProxiedServer> {
  const proxy = await startStorageProxy(process.env.AZURE_STORAGE_CONNECTION_STRING!, { seed: opts.seed });
  const ctx = await startSdlServer(sdl, {
    TABLEGRAPH_AUTH: 'off',
    TABLEGRAPH_TABLE_PREFIX: opts.prefix,
    AZURE_STORAGE_CONNECTION_STRING: proxy.connectionString,
    TABLEGRAPH_STORAGE_TIMEOUT_MS: '10000',
    TABLEGRAPH_RATE_LIMIT: '1000000',
    ...opts.env,
  });
  return {
    proxy,
    ctx,
    async close() {
      await ctx.close();
      await proxy.close();
    },
  };
}
