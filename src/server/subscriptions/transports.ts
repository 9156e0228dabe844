/**
 * Subscriptions over the two GraphQL transports a browser uses:
 * - GraphQL over Server-Sent Events (`graphql-sse`, distinct connections mode) at `/graphql/stream`: plain HTTP,
 *   through any proxy; the bearer token in the `Authorization` header, as for `POST /graphql`;
 * - GraphQL over WebSocket (`graphql-ws`) at `/graphql`: the token in the `connection_init` payload's
 *   `authorization` (a browser's WebSocket cannot send headers), or the upgrade request's header.
 *
 * Both take subscriptions only, checked as prepare.ts says, at most `maxPerConnection` at once on a WebSocket
 * (an SSE request is one subscription), and keep idle connections alive: an SSE comment line and a WebSocket ping
 * every `heartbeatMs`. A refusal has a stable `extensions.code`: UNAUTHENTICATED (SSE: 401; WebSocket: closed with
 * 4401), RATE_LIMITED (429, with `Retry-After`), PERSISTED_QUERY_NOT_ALLOWED, GRAPHQL_VALIDATION_FAILED,
 * QUERY_TOO_COSTLY, BAD_REQUEST (400), PAYLOAD_TOO_LARGE (413), OVERLOADED (TooManySubscriptions,
 * TooManyForSubject; TooManyOnConnection on a WebSocket). On a WebSocket, a refused subscription and an event's
 * field error are said on that subscription alone: the socket and its other subscriptions go on.
 *
 * Every error leaves through one formatter (format-error.ts: codes, no internals, and with introspection off no
 * "Did you mean …?"), the same as `POST /graphql`'s.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { randomUUID } from 'node:crypto';
import { GraphQLError, subscribe, type ExecutionArgs, type ExecutionResult, type GraphQLFormattedError } from 'graphql';
import { createHandler, type OperationArgs, type Response } from 'graphql-sse';
import { WebSocketServer } from 'ws';
import { isTablegraphError } from '../../errors';
import type { Logger } from '../../log';
import type { Principal } from '../../model/authorization';
import type { Authenticator } from '../auth';
import type { RateLimit } from '../rate-limit';
import { clientError } from '../format-error';
import { createRequestContext, type ContextDeps, type RequestContext } from '../../resolvers/context';
import { prepareSubscription, type PrepareOptions } from './prepare';
import { serveSse } from './sse-http';
import { serveGraphqlWs } from './websocket-server';

/** Default: subscriptions one WebSocket may hold at once. */
export const DEFAULT_SUBSCRIPTIONS_PER_CONNECTION = 20;
/** Default: time between two keep-alive signals on an idle connection (ms). */
export const DEFAULT_HEARTBEAT_MS = 15_000;

export interface TransportOptions extends PrepareOptions {
  context: ContextDeps;
  log: Logger;
  authenticate?: Authenticator;
  rateLimit?: RateLimit;
  /** Subscriptions one WebSocket may hold at once. */
  maxPerConnection: number;
  /** Time between two keep-alive signals (ms). */
  heartbeatMs: number;
  /** Largest message or request body accepted (bytes). */
  maxPayloadBytes: number;
  /** How every error is shown to clients (format-error.ts formatError, or formatErrorWithoutSuggestions). */
  formatError: (formatted: GraphQLFormattedError, error: unknown) => GraphQLFormattedError;
}

export interface SubscriptionTransports {
  /** Serves `/graphql/stream` (SSE); false when the request is not for it. */
  sse(req: IncomingMessage, res: ServerResponse): boolean;
  /** A node:http server's `upgrade` listener: WebSockets to `/graphql`; any other upgrade is refused. */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  /** Closes every WebSocket (1001, going away) and every event stream. */
  close(): Promise<void>;
}

/** The SSE path. */
export const SSE_PATH = '/graphql/stream';

/** A refusal as graphql-js errors with codes: a TablegraphError or a GraphQLError (401, 429) as it is. */
function asGraphQLErrors(e: unknown): GraphQLError[] {
  if (isTablegraphError(e)) {
    const { message, extensions } = clientError(e);
    return [new GraphQLError(message, { extensions })];
  }
  if (e instanceof GraphQLError) {
    const { http: _http, ...extensions } = e.extensions;
    return [new GraphQLError(e.message, { extensions })];
  }
  throw e;
}

function httpOf(e: unknown): { status?: number; headers?: Map<string, string> } | undefined {
  return e instanceof GraphQLError ? (e.extensions.http as { status?: number; headers?: Map<string, string> } | undefined) : undefined;
}

function statusOf(e: unknown): number {
  return httpOf(e)?.status ?? 400;
}

/** The caller of a request, counted against its rate, or the refusal (thrown: a GraphQLError with a status). */
async function callerOf(options: TransportOptions, authorization: string | undefined, address: string): Promise<Principal | undefined> {
  let principal: Principal | undefined;
  try {
    principal = options.authenticate && (await options.authenticate(authorization));
  } catch (e) {
    await options.rateLimit?.(`ip:${address}`);
    throw e;
  }
  await options.rateLimit?.(principal ? `sub:${principal.subject}` : `ip:${address}`);
  return principal;
}

/**
 * A GraphQLError that shows itself as formatted: both transports serialize an error with its `toJSON` (graphql-ws
 * calls it, graphql-sse's JSON.stringify does), so the client gets the formatter's output, while the transports go
 * on seeing a GraphQLError (graphql-ws tells a refusal from execution arguments by `instanceof GraphQLError`).
 */
class FormattedError extends GraphQLError {
  constructor(private readonly shown: GraphQLFormattedError) {
    super(shown.message, { extensions: shown.extensions });
  }

  override toJSON(): GraphQLFormattedError {
    return this.shown;
  }
}

/** Errors as clients get them over HTTP: each formatted, a code in each (format-error.ts). */
function formatErrors(options: TransportOptions, errors: readonly GraphQLError[]): GraphQLError[] {
  return errors.map((e) => (e instanceof FormattedError ? e : new FormattedError(options.formatError(e.toJSON(), e))));
}

function formatted(options: TransportOptions, result: ExecutionResult): ExecutionResult {
  return result.errors ? { ...result, errors: formatErrors(options, result.errors) } : result;
}

/**
 * graphql-js's `subscribe`, its first result and every event's with formatted errors. Not an async generator: one
 * waiting for its next event would hold a `return()` (the client gone) until that event came, and keep the
 * subscription — and its partition's polls — alive meanwhile.
 */
async function subscribeFormatted(options: TransportOptions, args: ExecutionArgs): Promise<AsyncIterableIterator<ExecutionResult> | ExecutionResult> {
  const result = await subscribe(args);
  if (!(Symbol.asyncIterator in result)) return formatted(options, result);
  const events: AsyncIterableIterator<ExecutionResult> = {
    async next() {
      const r = await result.next();
      return r.done ? r : { value: formatted(options, r.value), done: false };
    },
    async return() {
      await result.return?.();
      return { value: undefined, done: true };
    },
    async throw(error: unknown) {
      await result.return?.();
      throw error;
    },
    [Symbol.asyncIterator]() {
      return events;
    },
  };
  return events;
}

/** The execution arguments of a prepared subscription, with its request context. */
function executionArgs(
  options: TransportOptions,
  prepared: Extract<ReturnType<typeof prepareSubscription>, { ok: true }>,
  contextValue: RequestContext,
): ExecutionArgs {
  return { schema: options.schema, document: prepared.document, variableValues: prepared.variables, operationName: prepared.operationName, contextValue };
}

/** graphql-sse's handler (distinct connections): the caller and the document checked before the subscription runs. */
function sseTransport(options: TransportOptions) {
  return createHandler<IncomingMessage, { res: ServerResponse }>({
    schema: options.schema,
    subscribe: ((args: ExecutionArgs) => subscribeFormatted(options, args)) as never,
    // Distinct connections only: one request, one subscription, its token in its own headers.
    authenticate: () => null,
    async onSubscribe(req, params) {
      const raw = req.raw;
      let principal: Principal | undefined;
      try {
        principal = await callerOf(options, raw.headers.authorization, raw.socket.remoteAddress ?? 'unknown');
      } catch (e) {
        return refusalResponse(statusOf(e), formatErrors(options, asGraphQLErrors(e)), httpOf(e)?.headers) as Response;
      }
      const prepared = prepareSubscription(options, params as unknown as Record<string, unknown>);
      if (!prepared.ok) return refusalResponse(prepared.status, formatErrors(options, prepared.errors)) as Response;
      // graphql-sse types a context as a record; the resolvers' context is the RequestContext.
      return executionArgs(options, prepared, createRequestContext(options.context, randomUUID(), principal)) as unknown as OperationArgs;
    },
  });
}

/** graphql-ws on a `ws` server of its own (upgrades handed to it): the caller at `connection_init`, each subscription checked. */
function webSocketTransport(options: TransportOptions): WebSocketServer {
  const wss = new WebSocketServer({ noServer: true, maxPayload: options.maxPayloadBytes });
  // The caller of each WebSocket, decided at `connection_init`; its subscriptions, by id.
  const callers = new WeakMap<object, { principal?: Principal; ids: Set<string> }>();
  serveGraphqlWs<Record<string, unknown> | undefined>(
    {
      schema: options.schema,
      subscribe: ((args: ExecutionArgs) => subscribeFormatted(options, args)) as never,
      async onConnect(ctx) {
        const fromInit = ctx.connectionParams?.authorization;
        const authorization = typeof fromInit === 'string' ? fromInit : ctx.extra.request.headers.authorization;
        try {
          const principal = await callerOf(options, authorization, ctx.extra.request.socket.remoteAddress ?? 'unknown');
          callers.set(ctx.extra.socket, { principal, ids: new Set() });
          return true;
        } catch (e) {
          const [error] = asGraphQLErrors(e);
          options.log.info({ code: error.extensions.code }, `subscriptions: WebSocket refused: ${error.message}`);
          // graphql-ws closes with 4403 on false; a token problem is said with 4401 and the reason.
          ctx.extra.socket.close(statusOf(e) === 429 ? 4429 : 4401, String(error.extensions.code));
          return false;
        }
      },
      async onSubscribe(ctx, id, payload) {
        const caller = callers.get(ctx.extra.socket);
        if (!caller) return formatErrors(options, [new GraphQLError('Not connected.', { extensions: { code: 'UNAUTHENTICATED' } })]);
        if (caller.ids.size >= options.maxPerConnection) {
          return formatErrors(options, [
            new GraphQLError(`A connection holds ${options.maxPerConnection} subscriptions at most: complete one first, or open another connection.`, {
              extensions: { code: 'OVERLOADED', reason: 'TooManyOnConnection' },
            }),
          ]);
        }
        // Counted at once: the subscribe messages of one connection arrive together, and each awaits below.
        caller.ids.add(id);
        try {
          await options.rateLimit?.(caller.principal ? `sub:${caller.principal.subject}` : `ip:${ctx.extra.request.socket.remoteAddress ?? 'unknown'}`);
        } catch (e) {
          caller.ids.delete(id);
          return formatErrors(options, asGraphQLErrors(e));
        }
        const prepared = prepareSubscription(options, payload as unknown as Record<string, unknown>);
        if (!prepared.ok) {
          caller.ids.delete(id);
          return formatErrors(options, prepared.errors);
        }
        return executionArgs(options, prepared, createRequestContext(options.context, randomUUID(), caller.principal));
      },
      onComplete(ctx, id) {
        callers.get(ctx.extra.socket)?.ids.delete(id);
      },
      onError(ctx, id, _payload, errors) {
        callers.get(ctx.extra.socket)?.ids.delete(id);
        // A subscription that failed while it ran (graphql-ws wraps what its iterator threw): formatted too.
        return formatErrors(options, errors).map((e) => e.toJSON());
      },
    },
    wss,
    options.heartbeatMs,
    options.log,
  );

  return wss;
}

/** Both transports, over one schema with `@subscribe` fields attached (src/resolvers/subscription-resolvers.ts). */
export function subscriptionTransports(options: TransportOptions): SubscriptionTransports {
  const streams = new Set<ServerResponse>();
  const sseHandler = sseTransport(options);
  const wss = webSocketTransport(options);
  return {
    sse(req, res) {
      if (!req.url || !(req.url === SSE_PATH || req.url.startsWith(`${SSE_PATH}?`))) return false;
      streams.add(res);
      res.once('close', () => streams.delete(res));
      // An idle event stream gets a comment line now and then: proxies keep it open, the client sees it alive.
      const heartbeat = setInterval(() => {
        if (res.headersSent && res.getHeader('content-type')?.toString().startsWith('text/event-stream')) res.write(':\n\n');
      }, options.heartbeatMs);
      heartbeat.unref();
      res.once('close', () => clearInterval(heartbeat));
      serveSse(sseHandler, req, res, options.maxPayloadBytes).catch((err: unknown) => {
        options.log.error({ err }, 'subscriptions: unexpected error serving an event stream');
        if (!res.headersSent) {
          res.statusCode = 500;
          res.setHeader('content-type', 'application/json; charset=utf-8');
          res.end(JSON.stringify({ errors: [{ message: 'Internal server error', extensions: { code: 'INTERNAL_SERVER_ERROR' } }] }));
        } else res.destroy();
      });
      return true;
    },
    upgrade(req, socket, head) {
      const path = (req.url ?? '').split('?')[0];
      if (path !== '/graphql') {
        socket.destroy();
        return;
      }
      wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
    },
    async close() {
      for (const ws of wss.clients) ws.close(1001, 'Going away');
      for (const res of streams) res.end();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}

/**
 * An SSE request's refusal: JSON errors with codes and a status (graphql-sse's response tuple), with the refusal's
 * own headers (`Retry-After` of a 429, `WWW-Authenticate` of a 401).
 */
function refusalResponse(
  status: number,
  errors: GraphQLError[],
  headers: Map<string, string> = new Map(),
): [string, { status: number; statusText: string; headers: Record<string, string> }] {
  const body: { errors: GraphQLFormattedError[] } = { errors: errors.map((e) => e.toJSON()) };
  return [
    JSON.stringify(body),
    {
      status,
      statusText: status === 401 ? 'Unauthorized' : status === 429 ? 'Too Many Requests' : 'Bad Request',
      headers: { ...Object.fromEntries(headers), 'content-type': 'application/json; charset=utf-8' },
    },
  ];
}
