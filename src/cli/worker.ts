/**
 * `npm run worker`: the message worker alone, for scaling out (several workers on one queue are competing
 * consumers). Start the server with TABLEGRAPH_WORKER=off to leave all fan-out to such workers. Stops gracefully
 * on SIGTERM/SIGINT: messages in hand are finished, none is half-applied.
 */
import { loadConfig } from '../runtime/config';
import { createLogger } from '../log';
import { compileConfiguredSchema } from '../runtime/configured-schema';
import { openStorage } from '../runtime/open-storage';
import { createMessageWorker } from '../worker/message-worker';
import { ensureWorkQueues, workQueueNames, queueSender } from '../queue/sender';
import { WriteExecutor } from '../write/write-executor';
import { onShutdownSignal, runMain } from './run-main';
import { startTracing } from '../telemetry/tracing';
import { startSchemaDeployment } from '../runtime/schema-deployment';
import { assertBackupReachable, backupJobs } from '../runtime/capture';
import { holdIfAsked } from './test-hold';

runMain(
  'worker',
  async (log) => {
    const config = loadConfig();
    log.level = config.logLevel;
    const { model, schema, sdl } = compileConfiguredSchema(config);
    const tracing = config.tracing && startTracing(config.tracing, 'tablegraph-worker');
    const storage = await openStorage(config, log, model);
    assertBackupReachable(config, storage.blobs);
    for (const table of model.tables) await storage.store.ensureTable(table);
    await ensureWorkQueues(storage.queues, config.tablePrefix);
    // The schema's deployment: refused changes stop the worker here; builds it needs are driven from here too.
    const deployment = await startSchemaDeployment({ config, store: storage.store, blobs: storage.blobs, model, schema, sdl, log, builds: true });
    // Moves are carried out through the write path, its own messages sent to the same queue.
    const blobs = { store: storage.blobs, cleanupDelaySeconds: config.blobCleanupDelaySeconds };
    const writer = new WriteExecutor({
      model,
      store: storage.store,
      workQueue: queueSender(storage.queues, workQueueNames(config.tablePrefix).queue),
      blobs,
      changeRetentionMs: config.subscriptions.retentionMs,
      capture: config.backup.capture,
      tablePrefix: config.tablePrefix,
      log,
      gate: deployment.states,
    });
    const worker = createMessageWorker({
      writer,
      gate: deployment.states,
      closedTenants: storage.tenants,
      model,
      store: storage.store,
      queues: storage.queues,
      tablePrefix: config.tablePrefix,
      log,
      concurrency: config.workerConcurrency,
      maxDequeueCount: config.maxDequeueCount,
      settleMs: config.settleMs,
      visibilityTimeoutSeconds: config.visibilityTimeoutSeconds,
      blobs: storage.blobs,
    });
    worker.start();
    // Continuous backup's passes and the scheduled snapshots run in the workers (one at a time deployment-wide).
    const backup = backupJobs(config, storage, { model, schemaHash: deployment.schemaHash, sdl }, log, {
      onSegment: (n) => holdIfAsked(config, 'capture', n, log),
    });
    backup.start();
    storage.azurite?.watch(log);
    log.info({ queue: workQueueNames(config.tablePrefix).queue, concurrency: config.workerConcurrency }, 'message worker started');
    const report = setInterval(() => log.info(worker.stats(), 'message worker'), 60000);
    report.unref();
    onShutdownSignal(log, async (signal) => {
      log.info({ signal }, 'stopping: finishing the messages in hand');
      await Promise.all([worker.stop(), backup.stop()]);
      await deployment.close();
      await storage.close();
      await tracing?.shutdown();
      log.info(worker.stats(), 'stopped');
    });
  },
  (opts) => createLogger({ ...opts, sync: false }),
);
