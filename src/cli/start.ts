/**
 * `npm start`: the GraphQL server on PORT (default 4000) at /graphql, with /health. Without
 * AZURE_STORAGE_CONNECTION_STRING it starts (or re-attaches to) the embedded Azurite under the data folder, and
 * stops it on SIGTERM/SIGINT after in-flight requests finish.
 */
import { loadConfig } from '../runtime/config';
import { createLogger } from '../log';
import { compileConfiguredSchema } from '../runtime/configured-schema';
import { openStorage } from '../runtime/open-storage';
import { startServer } from '../runtime/start-server';
import { onShutdownSignal, runMain } from './run-main';
import { startTracing } from '../telemetry/tracing';

runMain(
  'server',
  async (log) => {
    const config = loadConfig();
    log.level = config.logLevel;
    // A schema that cannot be served stops the start before Azurite is started.
    const compiled = compileConfiguredSchema(config);
    const tracing = config.tracing && startTracing(config.tracing, 'tablegraph-server');
    const storage = await openStorage(config, log, compiled.model);
    let server;
    try {
      server = await startServer(config, storage, log, compiled);
    } catch (e) {
      await storage.close();
      throw e;
    }
    // Azurite killed under it is started again on the same ports, so the server's clients carry on.
    storage.azurite?.watch(log);
    log.info({ url: server.url, storage: storage.target, embedded: Boolean(storage.azurite) }, `tablegraph is serving ${server.url}`);
    onShutdownSignal(log, async (signal) => {
      log.info({ signal }, 'shutting down: finishing in-flight requests and fan-out messages in hand');
      await server.close();
      await storage.close();
      await tracing?.shutdown();
      log.info('stopped');
    });
  },
  (opts) => createLogger({ ...opts, sync: false }),
);
