/**
 * Subscriptions in the HTTP application (app.ts): the change poller and both transports over the schema with its
 * `@subscribe` fields attached, the event streams' handler in front of Express, and the refusal of a subscription
 * sent to Apollo Server as a request.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ApolloServerPlugin } from '@apollo/server';
import type cors from 'cors';
import type express from 'express';
import { GraphQLError, type GraphQLSchema } from 'graphql';
import type { Logger } from '../../log';
import type { ContextDeps, RequestContext } from '../../resolvers/context';
import type { Authenticator } from '../auth';
import { DEFAULT_DEMAND_BUDGET, type DemandBudget } from '../demand-plugin';
import { formatError, formatErrorWithoutSuggestions } from '../format-error';
import { sendHttpError } from '../http-errors';
import type { Metrics } from '../metrics';
import type { queryLimits } from '../query-limits';
import type { RateLimit } from '../rate-limit';
import { assignRequestId, startRequestLine } from '../request-log';
import type { TrustedDocuments } from '../trusted-documents';
import { ChangePoller, DEFAULT_POLL_INTERVAL_MS } from '../../read/change-poller';
import { MAX_BUFFERED_EVENTS } from '../../read/event-queue';
import { attachSubscriptions } from '../../resolvers/subscription-resolvers';
import { DEFAULT_HEARTBEAT_MS, DEFAULT_SUBSCRIPTIONS_PER_CONNECTION, SSE_PATH, subscriptionTransports, type SubscriptionTransports } from './transports';

/** How subscriptions are served (Config.subscriptions, and the poll's overlap). */
export interface SubscriptionSettings {
  /** Time between two polls of a watched partition (ms). */
  pollMs: number;
  /** How far back each poll reads (ms): the longest after its change's time an acknowledged write's EGT may be applied, plus clock skew. */
  overlapMs: number;
  /** How long the change log keeps changes (ms). */
  retentionMs: number;
  /** Subscriptions this server serves at once, all connections together (subscriptions). */
  maxSubscriptions: number;
  /** Subscriptions one WebSocket holds at once (subscriptions). */
  perConnection: number;
  /** Subscriptions one token subject holds at once, all its connections and transports together (subscriptions). */
  perSubject: number;
  /** Time between two keep-alive signals on an idle connection (ms). */
  heartbeatMs: number;
  /** Events one subscriber may have waiting; past it, it is ended with OVERLOADED (events). */
  maxBuffered: number;
}

/** What the subscriptions need of the application's dependencies (app.ts AppDeps). */
export interface LiveSubscriptionDeps extends ContextDeps {
  schema: GraphQLSchema;
  log: Logger;
  authenticate?: Authenticator;
  rateLimit?: RateLimit;
  budget?: DemandBudget;
  maxBodyBytes?: number;
  subscriptions?: SubscriptionSettings;
  /** Whether the schema may be spelled out (default true); off: errors without "Did you mean …?". */
  introspection?: boolean;
}

/**
 * A subscription sent to Apollo (POST or GET /graphql) is refused with BAD_REQUEST (400), before it runs: they are
 * served over SSE at `/graphql/stream` and over a WebSocket at `/graphql`.
 */
export const subscriptionsElsewhere: ApolloServerPlugin<RequestContext> = {
  async requestDidStart() {
    return {
      async didResolveOperation({ operation }) {
        if (operation?.operation !== 'subscription') return;
        throw new GraphQLError(`Subscriptions are served over SSE at ${SSE_PATH} and over a WebSocket at /graphql (graphql-ws), not by a request.`, {
          extensions: { code: 'BAD_REQUEST', http: { status: 400 } },
        });
      },
    };
  },
};

/**
 * The change poller and both transports, over the schema with its `@subscribe` fields attached (it mutates
 * `deps.schema`).
 * @returns the poller (stats for /metrics, close) and the transports (SSE handler, WebSocket upgrade, close)
 */
export function liveSubscriptions(deps: LiveSubscriptionDeps, limits: ReturnType<typeof queryLimits>, trusted: TrustedDocuments | undefined) {
  const settings = deps.subscriptions ?? DEFAULT_SUBSCRIPTION_SETTINGS;
  const poller = new ChangePoller({ store: deps.store, intervalMs: settings.pollMs, overlapMs: settings.overlapMs, log: deps.log, admission: deps.admission });
  const budget = deps.budget ?? DEFAULT_DEMAND_BUDGET;
  attachSubscriptions(deps.schema, deps.model, { ...deps, poller, target: deps.store.target, ...settings, maxResumeReads: budget.maxStorageCalls });
  const transports = subscriptionTransports({
    schema: deps.schema,
    model: deps.model,
    validationRules: limits.validationRules,
    parseOptions: limits.parseOptions,
    budget,
    trusted,
    context: deps,
    log: deps.log,
    authenticate: deps.authenticate,
    rateLimit: deps.rateLimit,
    maxPerConnection: settings.perConnection,
    heartbeatMs: settings.heartbeatMs,
    maxPayloadBytes: deps.maxBodyBytes ?? 262_144,
    formatError: (deps.introspection ?? true) ? formatError : formatErrorWithoutSuggestions,
  });
  return { poller, transports };
}

/** Defaults of the subscription settings (Config.subscriptions's). */
const DEFAULT_SUBSCRIPTION_SETTINGS: SubscriptionSettings = {
  pollMs: DEFAULT_POLL_INTERVAL_MS,
  overlapMs: 21_500,
  retentionMs: 3_600_000,
  maxSubscriptions: 10_000,
  perConnection: DEFAULT_SUBSCRIPTIONS_PER_CONNECTION,
  perSubject: 100,
  heartbeatMs: DEFAULT_HEARTBEAT_MS,
  maxBuffered: MAX_BUFFERED_EVENTS,
};

/**
 * The event streams' handler (`/graphql/stream`): the request id and log line, CORS for the allowed origins (a
 * preflight answered there), then graphql-sse. Returns false for any other path.
 */
export function streamHandler(
  transports: SubscriptionTransports,
  log: Logger,
  metrics: Metrics | undefined,
  corsMiddleware: ReturnType<typeof cors> | undefined,
) {
  return (req: IncomingMessage, res: ServerResponse): boolean => {
    if (!req.url?.startsWith(SSE_PATH)) return false;
    assignRequestId(req, res);
    startRequestLine(log, metrics, req, res);
    res.setHeader('cache-control', 'no-store');
    if (!corsMiddleware) return transports.sse(req, res) || (notFound(req, res), true);
    corsMiddleware(req as express.Request, res as express.Response, () => {
      if (!transports.sse(req, res)) notFound(req, res);
    });
    return true;
  };
}

function notFound(req: IncomingMessage, res: ServerResponse): void {
  sendHttpError(
    res,
    404,
    'NOT_FOUND',
    `Nothing is served at ${req.method} ${req.url}: subscriptions are at ${SSE_PATH}.`,
    String(res.getHeader('x-request-id') ?? ''),
  );
}
