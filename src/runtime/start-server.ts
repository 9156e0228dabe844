/**
 * Starts the whole server in this process: compile the schema (refusing to start on a schema that would scan),
 * create the tables, seed an empty store, serve HTTP; and stop it gracefully.
 */
import { createServer, type Server } from 'node:http';
import net from 'node:net';
import { clientErrorHandler } from '../server/http-errors';
import type { AddressInfo } from 'node:net';
import type { Config } from './config';
import type { Logger } from '../log';
import { CursorCodec } from '../read/cursor';
import { attachResolvers } from '../resolvers/attach';
import { clientSchema } from '../compiler/client-schema';
import { createGraphqlApp, type GraphqlApp } from '../server/app';
import { ideQueryOf } from '../server/ide';
import { attachCipher } from './encryption';
import { createMessageWorker, type MessageWorkerOptions } from '../worker/message-worker';
import { ensureWorkQueues, workQueueNames, queueSender } from '../queue/sender';
import type { QueueWorker } from '../worker/queue-worker';
import { ErrorCode, TablegraphError } from '../errors';
import { StorageAdmission } from '../read/admission';
import { RequestAdmission } from '../read/request-admission';
import { TenantBudgets } from '../server/tenant-budgets';
import { authConfigured, createAuthenticator, isLoopback, type Authenticator } from '../server/auth';
import { createRateLimit } from '../server/rate-limit';
import { partitionSasSigner, type PartitionSasSigner } from '../storage/sas';
import type { StorageAccess } from '../storage/storage-types';
import type { Model } from '../model/types';
import { WriteExecutor } from '../write/write-executor';
import { blobContainers } from '../model/blob-fields';
import type { CompiledSchema } from '../compiler/compile';
import { compileConfiguredSchema } from './configured-schema';
import { seedIfEmpty, seedManifestPath } from './seed';
import { startSchemaDeployment } from './schema-deployment';
import { attachTenants, placedSasSigner } from './tenants';
import type { TenantDirectory } from '../evolution/tenant-directory';
import type { PathStates } from '../evolution/path-states';
import { assertBackupReachable, backupJobs, type BackupJobs } from './capture';
import { backupBlobs } from './backup-account';
import { latestPassReader } from '../backup/restorable-window';
import { originPolicy } from '../server/request-origin';
import type { OpenStorage } from './open-storage';

export interface RunningServer {
  /** e.g. `http://127.0.0.1:4000/graphql` */
  url: string;
  port: number;
  /** The message worker running inside the server (TABLEGRAPH_WORKER=inline), if any. */
  worker?: QueueWorker;
  /** Continuous backup's passes and the scheduled snapshots, run beside the in-process worker, if any. */
  backup?: BackupJobs;
  /** Stops accepting connections, lets in-flight requests finish (at most `graceMs`, default 10000 ms), stops Apollo. */
  close(graceMs?: number): Promise<void>;
  /**
   * Reads the derived paths' states from the catalogue now, as the server does every 2 s by itself: afterwards its
   * reads follow the states written before the call (a build's end, say). For operators' tooling and tests.
   */
  refreshPathStates(): Promise<void>;
}

/**
 * The server's authentication, or none — on purpose (TABLEGRAPH_AUTH=off), or on a loopback interface (with a
 * warning: the quick start). A server reachable from other machines with no authentication does not start.
 * @throws TablegraphError CONFIG_INVALID for a non-loopback HOST with no authentication configured, and for a
 *   tenant-scoped schema (`@tenancy`) with none
 */
function authenticatorFor(config: Config, log: Logger, tenancy: Model['tenancy'], known: { tenants?: TenantDirectory }): Authenticator | undefined {
  if (authConfigured(config.auth)) {
    return createAuthenticator({
      ...config.auth,
      tenantClaim: tenancy?.claim,
      tenantClosed: (tenant) => known.tenants?.has(tenant) ?? false,
      admitTenant: async (tenant) => known.tenants?.admit(tenant),
    });
  }
  if (tenancy) {
    // Without a verified token there is no tenant, and a tenant-scoped schema has nothing to serve.
    throw new TablegraphError(
      ErrorCode.CONFIG_INVALID,
      `The schema is tenant-scoped (@tenancy(claim: "${tenancy.claim}")): each request's tenant comes from its verified token, so authentication is required. Set TABLEGRAPH_JWKS_URL (with TABLEGRAPH_JWT_ISSUER and TABLEGRAPH_JWT_AUDIENCE) or TABLEGRAPH_JWT_SECRET.`,
      { errors: { TABLEGRAPH_JWKS_URL: 'a tenant-scoped schema needs authentication' } },
    );
  }
  if (config.auth.off) {
    log.warn({ host: config.host }, 'TABLEGRAPH_AUTH=off: no authentication; anyone who reaches the port can read and write everything');
    return undefined;
  }
  if (!isLoopback(config.host)) {
    throw new TablegraphError(
      ErrorCode.CONFIG_INVALID,
      `Refusing to serve on ${config.host} without authentication: set TABLEGRAPH_JWKS_URL (with TABLEGRAPH_JWT_ISSUER and TABLEGRAPH_JWT_AUDIENCE) or TABLEGRAPH_JWT_SECRET, or TABLEGRAPH_AUTH=off to serve without it on purpose.`,
      { errors: { HOST: 'not loopback, and no authentication configured' } },
    );
  }
  log.warn({ host: config.host }, 'no authentication configured: serving on loopback only; anyone on this machine can read and write everything');
  return undefined;
}

/**
 * @param config PORT 0 picks a free port
 * @param compiled the schema already compiled from `config` (start.ts compiles it before storage starts);
 *   compiled here when absent
 * @throws TablegraphError SCHEMA_INVALID (the schema cannot be served without scans), CONFIG_INVALID (among
 *   others: a non-loopback HOST with no authentication; an @encrypted field without TABLEGRAPH_ENCRYPTION_KEYS off the
 *   development account),
 *   STORAGE_UNAVAILABLE (tables cannot be created); SCHEMA_INVALID also for a change the stored data refuses
 *   (src/evolution/deployment.ts)
 */
export async function startServer(config: Config, storage: OpenStorage, log: Logger, compiled?: CompiledSchema): Promise<RunningServer> {
  const { schema, model, sdl } = compiled ?? compileConfiguredSchema(config);
  // Refused before anything touches storage; the tenants are known before the first request is served.
  const known: { tenants?: TenantDirectory } = {};
  const authenticate = authenticatorFor(config, log, model.tenancy, known);
  attachResolvers(schema, model);
  // A store opened without the model (openStorage's caller decides) still seals what the schema encrypts, and places
  // the tenants' calls on their tiers.
  attachCipher(storage.store, model, config, storage.access, log);
  const tenants = await attachTenants(storage, model, { tablePrefix: config.tablePrefix, log });
  known.tenants = tenants;
  const signSas = placedSasSigner(checkStorageAccess(config, storage, model), storage.store);
  for (const table of model.tables) await storage.store.ensureTable(table);
  // What the stored data was written by, and what this schema changes in it: refused, or built online.
  const deployment = await startSchemaDeployment({
    config,
    store: storage.store,
    blobs: storage.blobs,
    model,
    schema,
    sdl,
    log,
    builds: config.worker === 'inline',
  });
  await ensureWorkQueues(storage.queues, config.tablePrefix);
  const queues = workQueueNames(config.tablePrefix);
  // A schema with @blob fields needs its containers (and a blob connection string) before it serves.
  for (const container of blobContainers(model)) await storage.blobs.ensureContainer(container);
  const writer = writerOf(config, storage, { model, gate: deployment.states }, log);
  await seedEmptyStore(config, storage, { model, schema }, log);
  if (!config.cursorSecret) log.warn('TABLEGRAPH_CURSOR_SECRET is not set: cursors are signed with a random key and expire when the server restarts');
  const app = await createGraphqlApp({
    ...appSettings(config, known),
    // Introspection and the IDE show the API, not its storage directives; /schema.graphql keeps them.
    schema: clientSchema(schema),
    model,
    store: storage.store,
    writer,
    log,
    storageTarget: storage.target,
    queues: storage.queues,
    queueNames: queues,
    worker: () => worker,
    sdl,
    authenticate,
    signSas,
    blobs: storage.blobs,
    paths: deployment.states,
    pathStates: () => deployment.states.all(),
    catalogue: () => deployment.catalogue.deployment(),
    ...(config.backup.capture && { backup: latestPassReader(backupBlobs(config, storage.blobs), config.backup.container) }),
  });
  const worker =
    config.worker === 'inline' ? inlineWorker(config, storage, { model, writer, gate: deployment.states, closedTenants: tenants }, log) : undefined;
  const backup = worker && backupJobs(config, storage, { model, schemaHash: deployment.schemaHash, sdl }, log);
  const server = httpServer(config, app, log);
  await listen(server, config, async () => {
    app.metrics?.close();
    await app.apollo.stop();
    await deployment.close();
    tenants?.stop();
  });
  const port = (server.address() as AddressInfo).port;
  worker?.start();
  backup?.start();
  return {
    url: `http://${config.host}:${port}/graphql`,
    port,
    worker,
    backup,
    close: (graceMs = 10000) => stop({ server, app, worker, backup, writer, deployment, tenants }, graceMs),
    refreshPathStates: () => deployment.states.refresh(),
  };
}

/** The write path of a server: its work queue, its blobs, its change log's retention, continuous backup's capture. */
function writerOf(config: Config, storage: OpenStorage, runtime: { model: Model; gate: PathStates }, log: Logger): WriteExecutor {
  return new WriteExecutor({
    model: runtime.model,
    store: storage.store,
    workQueue: queueSender(storage.queues, workQueueNames(config.tablePrefix).queue),
    blobs: { store: storage.blobs, cleanupDelaySeconds: config.blobCleanupDelaySeconds },
    changeRetentionMs: config.subscriptions.retentionMs,
    capture: config.backup.capture,
    tablePrefix: config.tablePrefix,
    log,
    gate: runtime.gate,
  });
}

/** Listens on the configured port and host; `undo` runs when it cannot (the port taken, …) before the error is thrown. */
async function listen(server: Server, config: Config, undo: () => Promise<void>): Promise<void> {
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', (e: NodeJS.ErrnoException) => reject(listenError(e, config.host, config.port)));
      server.listen(config.port, config.host, resolve);
    });
  } catch (e) {
    await undo();
    throw e;
  }
}

/** What the GraphQL app takes from the configuration alone: limits, admission, caching, subscriptions, the IDE. */
function appSettings(config: Config, known: { tenants?: TenantDirectory }) {
  return {
    cursors: new CursorCodec(config.cursorSecret),
    readConcurrency: config.readConcurrency,
    corsOrigins: config.corsOrigins,
    allowedHosts: originPolicy(config.host, config.allowedHosts, config.corsOrigins).allowedHosts,
    trustedDocumentsFile: config.trustedDocuments,
    httpCache: config.httpCache,
    // An acknowledged write's EGT is applied at most two storage calls after its change's time (the EGT, and when its
    // answer is lost, the read that finds it applied); a poll must still come after that, and the writers' clocks
    // may be up to a second apart (change-poller.ts).
    subscriptions: { ...config.subscriptions, overlapMs: 2 * config.storageTimeoutMs + config.subscriptions.pollMs + 1000 },
    introspection: config.introspection,
    ideQuery: ideQueryOf(config.schemaDir),
    metrics: config.metrics,
    maxBodyBytes: config.maxBodyBytes,
    budget: { maxStorageCalls: config.maxStorageCalls, maxNodes: config.maxNodes },
    rateLimit: createRateLimit(config.rateLimit),
    tenantBudgets: new TenantBudgets(config.tenantBudget, (tenant) => known.tenants?.record(tenant)?.budget),
    admission: new StorageAdmission({ maxInFlight: config.maxStorageInFlight, maxQueued: config.maxStorageQueue }),
    requestAdmission: new RequestAdmission({ maxHeavy: config.maxHeavyRequests, heavyCalls: config.heavyRequestCalls }),
    requestTimeoutMs: config.requestTimeoutMs,
    adminRole: config.adminRole,
  };
}

/**
 * A graceful stop. Beside each other: the worker finishes the messages in hand (never half-applied) and takes no new
 * one, builds stop after their step in hand (its checkpoint written); HTTP answers every request it took and refuses
 * the rest (closeHttp). The writer's fences of lost answers stop. Then its presence (the schema version it serves) goes — only once its requests have ended: a
 * build that waits for this version to leave (a summary it does not keep) must not recount while one of its writes
 * still commits — and last Apollo, which a request served until then still needed.
 */
async function stop(
  running: {
    server: Server;
    app: GraphqlApp;
    worker?: QueueWorker;
    /** Continuous backup's passes and the scheduled snapshots, beside the worker. */
    backup?: BackupJobs;
    writer: WriteExecutor;
    deployment: { close(): Promise<void> };
    /** Under `@tenancy`: the tenants' rows, refreshed until the stop. */
    tenants?: { stop(): void };
  },
  graceMs: number,
): Promise<void> {
  const { server, app, worker, deployment } = running;
  await Promise.all([worker?.stop(), running.backup?.stop(), closeHttp(server, app, graceMs)]);
  // The fences of answers lost: the attempt in hand ends, none follows (change-fence.ts).
  await running.writer.changeFences?.stop();
  await deployment.close();
  running.tenants?.stop();
  app.metrics?.close();
  await app.apollo.stop();
}

/**
 * The node:http server of the application. A request has TABLEGRAPH_BODY_TIMEOUT_MS to arrive whole (then 408,
 * http-errors.ts), checked every second rather than every 30 s (node's default), so a client dripping a body holds a
 * connection no longer than that.
 */
function httpServer(config: Config, app: Pick<GraphqlApp, 'handler' | 'upgrade'>, log: Logger): Server {
  const server = createServer({ requestTimeout: config.bodyTimeoutMs, connectionsCheckingInterval: 1000 }, app.handler);
  server.on('clientError', clientErrorHandler(log));
  if (app.upgrade) server.on('upgrade', app.upgrade);
  return server;
}

/**
 * The HTTP side's graceful stop (shutdown-gate.ts): no new connection, and every request from now on refused with
 * SHUTTING_DOWN; subscriptions told the server goes away and ended; the requests taken answered, each answer closing
 * its connection. A keep-alive connection idle meanwhile is not closed under its client — a request it is sending
 * would be lost — but left to end as keep-alive connections do: its client sends on it (refused, and closed) or lets it
 * go at the `Keep-Alive: timeout` the server announced. Only what is still open `graceMs` (ms) after the stop began
 * is cut.
 */
async function closeHttp(server: Server, app: Pick<GraphqlApp, 'gate' | 'closeSubscriptions'>, graceMs: number): Promise<void> {
  const started = Date.now();
  app.gate.drain();
  // net.Server's close, not http.Server's: that one also closes every idle connection at once, racing the requests
  // their clients are sending on them.
  const closed = new Promise<void>((resolve) => net.Server.prototype.close.call(server, () => resolve()));
  // WebSockets and event streams are not idle connections: they are told the server goes away, then closed.
  await app.closeSubscriptions();
  await app.gate.idle(graceMs);
  const cut = setTimeout(() => server.closeAllConnections(), Math.max(0, graceMs - (Date.now() - started)));
  await closed;
  clearTimeout(cut);
  // Now http.Server's own close, for what it does besides: it stops its timer of request timeouts.
  server.close();
}

/**
 * The schema's seed rows, loaded only into an empty store — and on the embedded Azurite only while no other command
 * (an import, say) uses it.
 */
async function seedEmptyStore(config: Config, storage: OpenStorage, compiled: Pick<CompiledSchema, 'model' | 'schema'>, log: Logger): Promise<void> {
  const seed = () => seedIfEmpty({ store: storage.store, model: compiled.model, schema: compiled.schema, schemaDir: config.schemaDir });
  const seeded = storage.azurite ? await storage.azurite.whenAlone(seed) : { ran: true as const, value: await seed() };
  if (seeded.ran && seeded.value > 0)
    log.info({ entities: seeded.value }, `empty store: loaded the schema's seed rows (${seedManifestPath(config.schemaDir)})`);
  if (!seeded.ran) log.info({ others: seeded.others }, 'not seeding: other tablegraph commands use this data folder');
}

/** The message worker that runs inside the server (TABLEGRAPH_WORKER=inline), started once the server listens. */
function inlineWorker(
  config: Config,
  storage: OpenStorage,
  runtime: { model: Model; writer: WriteExecutor; gate: MessageWorkerOptions['gate']; closedTenants?: MessageWorkerOptions['closedTenants'] },
  log: Logger,
): QueueWorker {
  const { model, writer, gate, closedTenants: closed } = runtime;
  return createMessageWorker({
    model,
    gate,
    closedTenants: closed,
    store: storage.store,
    queues: storage.queues,
    tablePrefix: config.tablePrefix,
    log: log.child({ component: 'worker' }),
    concurrency: config.workerConcurrency,
    maxDequeueCount: config.maxDequeueCount,
    settleMs: config.settleMs,
    visibilityTimeoutSeconds: config.visibilityTimeoutSeconds,
    writer,
    blobs: storage.blobs,
  });
}

/**
 * What the configured storage must give before the server starts: a Blob endpoint for continuous backup
 * (capture.ts assertBackupReachable), and the signer of `@sas` fields (sasSigner).
 * @throws TablegraphError CONFIG_INVALID naming what is missing
 */
function checkStorageAccess(config: Config, storage: OpenStorage, model: Model): PartitionSasSigner | undefined {
  assertBackupReachable(config, storage.blobs);
  return sasSigner(storage.access, model);
}

/**
 * The signer of `@sas` fields. A table SAS is signed with the account key, and Microsoft Entra ID gives none (the
 * Table service has no user delegation SAS), so a schema with `@sas` fields does not start under Entra ID — at
 * start-up, not at its first request.
 * @throws TablegraphError CONFIG_INVALID naming the `@sas` fields, under Entra ID
 */
function sasSigner(access: StorageAccess, model: Model): PartitionSasSigner | undefined {
  if (access.kind === 'connection-string') return partitionSasSigner(access.connectionString);
  if (model.sasFields.size === 0) return undefined;
  const fields = [...model.sasFields.keys()];
  throw new TablegraphError(
    ErrorCode.CONFIG_INVALID,
    `The schema has @sas fields (${fields.join(', ')}), and a table SAS can only be signed with an account key, which Microsoft Entra ID does not give: remove them, or reach storage with AZURE_STORAGE_CONNECTION_STRING.`,
    { fields, errors: { TABLEGRAPH_STORAGE_ACCOUNT_URL: '@sas fields need an account key' } },
  );
}

/** A failure to listen as a person can act on: which port, what may hold it, how to choose another. */
function listenError(e: NodeJS.ErrnoException, host: string, port: number): Error {
  if (e.code === 'EADDRINUSE') {
    return new TablegraphError(
      ErrorCode.CONFIG_INVALID,
      `Port ${port} on ${host} is already in use — by another process, perhaps another tablegraph server (\`lsof -i :${port}\` shows which). Stop it, or choose another port: PORT=${port + 1} npm start`,
      { port, host, reason: 'PortInUse' },
    );
  }
  if (e.code === 'EACCES') {
    return new TablegraphError(
      ErrorCode.CONFIG_INVALID,
      `Port ${port} on ${host} needs privileges this process does not have: choose a port above 1023, e.g. PORT=4000`,
      { port, host, reason: 'PortForbidden' },
    );
  }
  if (e.code === 'EADDRNOTAVAIL') {
    return new TablegraphError(
      ErrorCode.CONFIG_INVALID,
      `HOST ${host} is not an address of this machine: use 127.0.0.1 (this machine only) or 0.0.0.0 (every interface)`,
      { port, host, reason: 'HostNotAvailable' },
    );
  }
  return e;
}
