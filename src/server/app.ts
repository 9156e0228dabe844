/**
 * The HTTP application: Apollo Server on `/graphql` — JSON POSTs served on node:http in front of Express
 * (graphql-post.ts), the rest through Express — (with the storage cost plugin, error formatting, request ids,
 * the request log line and the mutation audit, and the document limits), GraphiQL for a browser on `/graphql` and
 * the SDL on `/schema.graphql` (ide.ts), CORS for the origins allowed and none by default, Prometheus metrics on
 * `/metrics` (metrics.ts), and `/health`, which says whether storage answers (never what it said: that is logged).
 * Every failure is answered as GraphQL-over-HTTP JSON with a code and the request id (http-errors.ts).
 */
import { ApolloServer, type ApolloServerPlugin } from '@apollo/server';
import { expressMiddleware } from '@as-integrations/express5';
import cors from 'cors';
import express from 'express';
import { ApolloServerPluginLandingPageDisabled } from '@apollo/server/plugin/disabled';
import { ApolloServerPluginCacheControl } from '@apollo/server/plugin/cacheControl';
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { GraphQLSchema } from 'graphql';
import type { Logger } from '../log';
import { createRequestContext, type ContextDeps, type RequestContext } from '../resolvers/context';
import type { PathRecord } from '../evolution/catalogue-records';
import type { QueueStore } from '../storage/queue-store';
import type { QueueWorker } from '../worker/queue-worker';
import { GraphQLError } from 'graphql';
import { ErrorCode } from '../errors';
import type { Authenticator } from './auth';
import type { RateLimit } from './rate-limit';
import { costPlugin } from './cost-plugin';
import { storageBusyPlugin } from './storage-busy-plugin';
import { DEFAULT_DEMAND_BUDGET, demandPlugin, type DemandBudget } from './demand-plugin';
import { formatError, formatErrorWithoutSuggestions } from './format-error';
import { DEFAULT_QUERY_LIMITS, queryLimits, type QueryLimits } from './query-limits';
import { httpErrorHandler, notFoundHandler, sendHttpError } from './http-errors';
import { assignRequestId, recordContext, recordDoorRefusal, requestIdMiddleware, requestIdOf, requestLineMiddleware, requestLogPlugin } from './request-log';
import { originRefusal, type OriginPolicy, type OriginRefusal } from './request-origin';
import { Metrics } from './metrics';
import { mountHealth } from './health';
import { mountProbes } from './probes';
import type { LatestPass } from '../backup/change-format';
import { ShutdownGate } from './shutdown-gate';
import type { RequestAdmission } from '../read/request-admission';
import { isLoopback } from './auth';
import { mountIde, schemaSdlHandler } from './ide';
import { graphqlPostHandler } from './graphql-post';
import { PreparedDocuments } from './prepared-documents';
import { queryLane } from './query-lane';
import type { TenantBudgets } from './tenant-budgets';
import { startRequestSpan, tracingOn } from '../telemetry/spans';
import { loadTrustedDocuments, type TrustedDocuments } from './trusted-documents';
import { trustedDocumentsMiddleware } from './trusted-documents-http';
import { DEFAULT_HTTP_CACHE, httpCachePlugin, type HttpCacheOptions } from './http-cache';
import type { Duplex } from 'node:stream';
import { liveSubscriptions, streamHandler, subscriptionsElsewhere, type SubscriptionSettings } from './subscriptions/serve-subscriptions';
import type { ChangePollerStats } from '../read/change-poller';

/** Deepest query accepted (selection-set nesting levels); deeper ones fail validation before any storage call. */
export const MAX_QUERY_DEPTH = DEFAULT_QUERY_LIMITS.maxDepth;

export interface AppDeps extends ContextDeps {
  /** The compiled schema with resolvers attached. */
  schema: GraphQLSchema;
  log: Logger;
  /** Shown by /health. */
  storageTarget: string;
  /** For /health: the work queue's depth and its poison queue's. */
  queues?: QueueStore;
  queueNames?: { queue: string; poison: string };
  /** For /health: the worker running in this process, if any (a function: it is created after the app). */
  worker?: () => QueueWorker | undefined;
  /** For /health and /metrics: continuous backup's latest pass (src/backup/restorable-window.ts); absent: capture off. */
  backup?: () => Promise<LatestPass | undefined>;
  /** Origins a browser may call /graphql from (CORS); none when empty or absent. */
  corsOrigins?: string[];
  /**
   * Host names a request may name (request-origin.ts); absent: any. Requests whose `Origin` is neither the server's
   * own nor in `corsOrigins` are refused either way.
   */
  allowedHosts?: readonly string[];
  /**
   * Whether the schema can be introspected, and the IDE and `/schema.graphql` are served (default true); off also
   * blocks suggestions.
   */
  introspection?: boolean;
  /** The query the IDE shows first (ide.ts ideQueryOf; default GENERIC_IDE_QUERY). */
  ideQuery?: string;
  /** The compiled SDL, served as `/schema.graphql` when introspection is on. */
  sdl?: string;
  /** Who may read `/metrics` (default 'loopback': requests from this machine only). */
  metrics?: 'loopback' | 'on' | 'off';
  /** Document limits (default DEFAULT_QUERY_LIMITS). */
  limits?: QueryLimits;
  /** Largest request body accepted (bytes, default 262144). */
  maxBodyBytes?: number;
  /** The worst case an operation may have (default DEFAULT_DEMAND_BUDGET). */
  budget?: DemandBudget;
  /** Verifies each request's bearer token; absent: no authentication. */
  authenticate?: Authenticator;
  /** Counts each request against its caller's rate (subject, or IP address); absent: no limit. */
  rateLimit?: RateLimit;
  /** Takes heavy queries a few at a time and refuses early those that could not finish in time; absent: none. */
  requestAdmission?: RequestAdmission;
  /** Under `@tenancy`: each tenant's budget of storage calls and entities a second (tenant-budgets.ts); absent: none. */
  tenantBudgets?: TenantBudgets;
  /**
   * A manifest of trusted documents (trusted-documents.ts): when given, only the operations it lists run, parsed and
   * validated here, once; absent: any operation within the limits and the demand budget.
   */
  trustedDocumentsFile?: string;
  /** Subscriptions (subscriptions/): served when the schema has `@subscribe` fields. */
  subscriptions?: SubscriptionSettings;
  /** Ages of cached GET answers (http-cache.ts; default DEFAULT_HTTP_CACHE). */
  httpCache?: Partial<Omit<HttpCacheOptions, 'authenticated'>>;
  /** For /health and /metrics: the derived access paths' states (src/evolution/path-states.ts); absent: none shown. */
  pathStates?: () => PathRecord[];
  /** The role whose tokens see /health's details when authentication is on (TABLEGRAPH_ADMIN_ROLE; default `admin`). */
  adminRole?: string;
  /** For /readyz: one read of the schema catalogue (probes.ts); absent: storage's answer alone. */
  catalogue?: () => Promise<unknown>;
}

export interface GraphqlApp {
  /** The whole application, to hand to `http.createServer`: JSON POSTs to /graphql first, then `app`. */
  handler: RequestListener;
  /** The Express part: every request but JSON POSTs to /graphql. */
  app: express.Express;
  apollo: ApolloServer<RequestContext>;
  /** The server's metrics (absent with metrics 'off'). */
  metrics?: Metrics;
  /** The trusted documents, when a manifest was given. */
  trusted?: TrustedDocuments;
  /** A node:http server's `upgrade` listener (WebSocket subscriptions); absent when the schema has none. */
  upgrade?: (req: IncomingMessage, socket: Duplex, head: Buffer) => void;
  /** Ends every subscription (WebSockets closed 1001, event streams ended) and stops polling. */
  closeSubscriptions(): Promise<void>;
  /** Takes requests until the server starts to stop, then refuses them (SHUTTING_DOWN) and says when those taken are answered. */
  gate: ShutdownGate;
}

/** Builds and starts (in the Apollo sense) the application; the caller listens and stops. */
export async function createGraphqlApp(deps: AppDeps): Promise<GraphqlApp> {
  const introspection = deps.introspection ?? true;
  const limits = queryLimits(deps.limits ?? DEFAULT_QUERY_LIMITS, introspection);
  const trusted =
    deps.trustedDocumentsFile === undefined
      ? undefined
      : loadTrustedDocuments(deps.trustedDocumentsFile, deps.schema, { validationRules: limits.validationRules, parseOptions: limits.parseOptions });
  const apollo = apolloServer(deps, introspection, limits, trusted);
  await apollo.start();
  const live = deps.model.subscriptions.size > 0 ? liveSubscriptions(deps, limits, trusted) : undefined;
  const app = express();
  app.disable('x-powered-by');
  // An ETag of every response body (a hash per response) is no use to GraphQL over POST.
  app.disable('etag');
  app.use(requestIdMiddleware);
  const metrics = mountOperations(app, deps, live && (() => live.poller.stats()));
  if (introspection) {
    mountIde(app, '/graphql', deps.ideQuery);
    if (deps.sdl !== undefined) app.get('/schema.graphql', schemaSdlHandler(deps.sdl, deps.authenticate));
  }
  const origins = deps.corsOrigins ?? [];
  const corsMiddleware = origins.length > 0 ? cors({ origin: origins }) : undefined;
  const context = contextFunction(deps);
  const maxBodyBytes = deps.maxBodyBytes ?? 262_144;
  // JSON POSTs (nearly every request) are served in front of Express (graphql-post.ts); the rest comes here.
  app.use(
    '/graphql',
    requestLineMiddleware(deps.log, metrics),
    noStoreByDefault,
    // No origin allowed: no CORS headers to add, and no middleware to run for it.
    ...(corsMiddleware ? [corsMiddleware] : []),
    express.json({ limit: maxBodyBytes }),
    singleParameters,
    ...(trusted ? [trustedDocumentsMiddleware(trusted)] : []),
    expressMiddleware(apollo, { context }),
  );
  app.use(notFoundHandler);
  app.use(httpErrorHandler(deps.log));
  const lane = queryLane({
    prepared: new PreparedDocuments({ schema: deps.schema, model: deps.model, validationRules: limits.validationRules, parseOptions: limits.parseOptions }),
    model: deps.model,
    context,
    log: deps.log,
    budget: deps.budget ?? DEFAULT_DEMAND_BUDGET,
    admission: deps.requestAdmission,
    tenants: deps.tenantBudgets,
    formatError: introspection ? formatError : formatErrorWithoutSuggestions,
  });
  const post = graphqlPostHandler({ apollo, path: '/graphql', context, log: deps.log, metrics, cors: corsMiddleware, maxBodyBytes, trusted, lane });
  const stream = live && streamHandler(live.transports, deps.log, metrics, corsMiddleware);
  const policy: OriginPolicy = { allowedHosts: deps.allowedHosts, corsOrigins: origins };
  const gate = new ShutdownGate();
  const handler = requestHandler(deps.log, policy, (req, res) => {
    if (!gate.admit(req, res)) return;
    if (stream?.(req, res)) return;
    if (!post(req, res)) app(req, res);
  });
  const upgrade = live && guardedUpgrade(policy, deps.log, live.transports.upgrade);
  return {
    app,
    handler,
    apollo,
    metrics,
    trusted,
    gate,
    upgrade: upgrade && ((req, socket, head) => void (gate.refuseUpgrade(socket) || upgrade(req, socket, head))),
    async closeSubscriptions() {
      await live?.transports.close();
      await live?.poller.close();
    },
  };
}

/** Apollo Server over the schema, with every plugin of the request path and the document limits. */
function apolloServer(deps: AppDeps, introspection: boolean, limits: ReturnType<typeof queryLimits>, trusted: TrustedDocuments | undefined) {
  return new ApolloServer<RequestContext>({
    schema: deps.schema,
    plugins: [
      subscriptionsElsewhere,
      costPlugin(deps.model),
      storageBusyPlugin,
      requestLogPlugin(deps.log, deps.model),
      demandPlugin(deps.model, deps.budget ?? DEFAULT_DEMAND_BUDGET, deps.requestAdmission, deps.tenantBudgets),
      ...(limits.plugins as Array<ApolloServerPlugin<RequestContext>>),
      httpCachePlugin(deps.model, { ...DEFAULT_HTTP_CACHE, ...deps.httpCache, authenticated: deps.authenticate !== undefined }),
      // Cache-Control is written by httpCachePlugin alone, from the schema.
      ApolloServerPluginCacheControl({ calculateHttpHeaders: false }),
      // The IDE is ours (ide.ts): Apollo's landing page loads its script from a CDN.
      ApolloServerPluginLandingPageDisabled(),
    ],
    formatError: introspection ? formatError : formatErrorWithoutSuggestions,
    validationRules: limits.validationRules,
    parseOptions: limits.parseOptions,
    introspection,
    includeStacktraceInErrorResponses: false,
    // The server stops itself (start-server.ts close): Apollo's own SIGTERM handler would stop Apollo first, and
    // every request still being served would be answered 500.
    stopOnTerminationSignals: false,
    // With a manifest, the only documents that reach Apollo are its own, parsed and validated at start-up.
    ...(trusted ? { documentStore: trusted.documentStore() } : {}),
  });
}

/**
 * `/health` (health.ts), `/livez` and `/readyz` (probes.ts) and `/metrics` (Prometheus, by default for this machine only) on `app`.
 * @returns the metrics, absent with metrics 'off'
 */
function mountOperations(app: express.Express, deps: AppDeps, subscriptions: (() => ChangePollerStats) | undefined): Metrics | undefined {
  mountHealth(app, deps);
  mountProbes(app, { store: deps.store, log: deps.log, catalogue: deps.catalogue });
  const metricsAccess = deps.metrics ?? 'loopback';
  const metrics =
    metricsAccess === 'off'
      ? undefined
      : new Metrics({
          ...{ queues: deps.queues, queueNames: deps.queueNames, worker: deps.worker, subscriptions, paths: deps.pathStates, backup: deps.backup },
          stores: [deps.store, ...(deps.queues ? [deps.queues] : [])],
        });
  if (metrics) {
    app.get('/metrics', async (req, res, next) => {
      // Not a secret, but not everyone's business either: by default, only a scraper on this machine.
      if (metricsAccess === 'loopback' && !isLoopback((req.socket.remoteAddress ?? '').replace(/^::ffff:/, ''))) return next();
      try {
        const { contentType, body } = await metrics.render();
        res.type(contentType).send(body);
      } catch (e) {
        deps.log.warn({ requestId: requestIdOf(req), err: e }, '/metrics: a metric could not be read');
        res.status(503).type('text/plain').send('metrics unavailable: see the server log\n');
      }
    });
  }
  return metrics;
}

/**
 * The whole application's listener: the host and origin guard first (request-origin.ts), then `serve`; a GraphQL
 * request in a span of its own when tracing is on (spans.ts).
 */
function requestHandler(log: Logger, policy: OriginPolicy, serve: RequestListener): RequestListener {
  const guarded = (req: IncomingMessage, res: ServerResponse) => {
    // A kubelet probes with the pod's IP address as its Host: the probes tell nothing a rebinding page could use.
    const refusal = !isProbe(req) && originRefusal(req, policy);
    if (refusal) return refuseOrigin(log, req, res, refusal);
    serve(req, res);
  };
  return (req, res) => {
    if (!tracingOn() || !req.url?.startsWith('/graphql')) return guarded(req, res);
    // One span per GraphQL request, the parent of its DataLoader batches and storage calls (spans.ts).
    const attributes = { 'http.request.method': req.method, 'url.path': '/graphql' };
    const span = startRequestSpan('graphql.request', req.headers, attributes, () => guarded(req, res));
    res.once('close', () => {
      span?.setAttribute('http.response.status_code', res.statusCode);
      span?.end();
    });
  };
}

/** A GET of /livez or /readyz without an Origin (no browser page sent it). */
function isProbe(req: IncomingMessage): boolean {
  return req.method === 'GET' && (req.url === '/livez' || req.url === '/readyz') && req.headers.origin === undefined;
}

/** A WebSocket upgrade listener behind the host and origin guard: a refused upgrade is answered and closed. */
function guardedUpgrade(policy: OriginPolicy, log: Logger, upgrade: (req: IncomingMessage, socket: Duplex, head: Buffer) => void) {
  return (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    const refusal = originRefusal(req, policy);
    if (!refusal) return upgrade(req, socket, head);
    log.info({ code: refusal.code, origin: req.headers.origin, host: req.headers.host }, `WebSocket refused: ${refusal.message}`);
    const body = JSON.stringify({ errors: [{ message: refusal.message, extensions: { code: refusal.code } }] });
    socket.end(
      `HTTP/1.1 ${refusal.status} ${refusal.status === 403 ? 'Forbidden' : 'Misdirected Request'}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  };
}

/**
 * The context of each GraphQL request, or its refusal at the door, before anything of the request runs: no valid
 * token (UNAUTHENTICATED, 401), over its caller's rate (RATE_LIMITED, 429), storage calls of other requests queued to
 * the limit (OVERLOADED, 503).
 */
function contextFunction(deps: AppDeps) {
  return async ({ req, res }: { req: IncomingMessage; res: ServerResponse }): Promise<RequestContext> => {
    try {
      // The peer's address: the server trusts no proxy header to name the caller.
      const address = `ip:${req.socket.remoteAddress ?? 'unknown'}`;
      let principal;
      try {
        principal = deps.authenticate && (await deps.authenticate(req.headers.authorization));
      } catch (e) {
        // A missing or refused token counts against its address: past the rate, 429 rather than 401 after 401.
        await deps.rateLimit?.(address);
        throw e;
      }
      await deps.rateLimit?.(principal ? `sub:${principal.subject}` : address);
      // A tenant whose budget of this second is spent is refused before its document is read (tenant-budgets.ts).
      if (principal?.tenant !== undefined) await deps.tenantBudgets?.refuseIfSpent(principal.tenant);
      if (deps.admission?.saturated()) {
        throw new GraphQLError('The server is overloaded; try again shortly.', {
          extensions: { code: ErrorCode.OVERLOADED, http: { status: 503, headers: new Map([['retry-after', '1']]) } },
        });
      }
      const context = createRequestContext(deps, requestIdOf(req), principal);
      recordContext(res, context);
      return context;
    } catch (e) {
      const code = (e as { extensions?: { code?: unknown }; code?: unknown }).extensions?.code ?? (e as { code?: unknown }).code;
      recordDoorRefusal(res, typeof code === 'string' ? code : 'INTERNAL_SERVER_ERROR');
      throw e;
    }
  };
}

/**
 * Every GraphQL answer says `no-store` unless Apollo's answer says otherwise (httpCachePlugin, for a GET query):
 * refusals at the door (401, 429, 413, a document not trusted) are never kept by a browser or a CDN either.
 */
function noStoreByDefault(_req: IncomingMessage, res: ServerResponse, next: () => void): void {
  res.setHeader('cache-control', 'no-store');
  next();
}

/**
 * Refuses a query string that names a parameter twice (`?query=a&query=b`): which one counts would differ between the
 * gate that reads the first (or the last) and the server that runs the other — a listed document let through in front
 * of one that is not. 400 BAD_REQUEST, nothing run.
 */
function singleParameters(req: IncomingMessage, res: ServerResponse, next: () => void): void {
  const at = req.url?.indexOf('?') ?? -1;
  if (at >= 0) {
    const seen = new Set<string>();
    for (const key of new URLSearchParams(req.url!.slice(at + 1)).keys()) {
      if (seen.has(key)) {
        sendHttpError(res, 400, 'BAD_REQUEST', `The query string names the parameter "${key}" more than once: send each parameter once.`, requestIdOf(req));
        return;
      }
      seen.add(key);
    }
  }
  next();
}

/** Answers a request refused by the host and origin guard (request-origin.ts), with its request id, and logs it. */
function refuseOrigin(log: Logger, req: IncomingMessage, res: ServerResponse, refusal: OriginRefusal): void {
  const requestId = assignRequestId(req, res);
  log.info({ requestId, code: refusal.code, origin: req.headers.origin, host: req.headers.host }, `request refused: ${refusal.message}`);
  res.setHeader('cache-control', 'no-store');
  sendHttpError(res, refusal.status, refusal.code, refusal.message, requestId);
}
