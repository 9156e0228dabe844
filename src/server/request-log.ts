/**
 * Every request has an id: the client's `x-request-id` when it is a plain token (a proxy's, say), else a new UUID.
 * It is answered in the `x-request-id` header and in `extensions.requestId` of every error, and every log line of
 * the request carries it — so a client that quotes it lets an operator find what storage said, which the client
 * never sees (format-error.ts).
 *
 * Each GraphQL request ends with one log line (`msg: "request"`, info; warn for a 5xx): request id, operation name,
 * HTTP status, duration (ms), storage cost (round trips, entities read, storage ms) and the error codes — requests
 * refused at the door (no token, rate limit, overload, a body too large) included — and is counted in the metrics.
 * An Apollo plugin logs each error (a client's at info with its code; storage failures and the unexpected at warn or
 * error, with their details) and audits each mutation field: request id, subject (the token's), field, the keys it
 * names, and its outcome.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ApolloServerPlugin } from '@apollo/server';
import { unwrapResolverError } from '@apollo/server/errors';
import { getOperationAST, type GraphQLError } from 'graphql';
import type { Request, Response, NextFunction } from 'express';
import { ErrorCode, isTablegraphError } from '../errors';
import type { Logger } from '../log';
import type { Model } from '../model/types';
import type { RequestContext } from '../resolvers/context';
import type { Metrics } from './metrics';
import { codelessRefusal } from './format-error';

/** The header that carries a request's id, both ways. */
export const REQUEST_ID_HEADER = 'x-request-id';
const TOKEN = /^[A-Za-z0-9._:-]{1,100}$/;

/** What the request log keeps of each request until its line is written. */
interface RequestState {
  requestId?: string;
  /** The code of a refusal made before the request's context existed (token, rate, body). */
  doorCode?: string;
  context?: RequestContext;
}
/**
 * Where a request's or response's RequestState is kept: a property of its own, under a symbol nobody else knows —
 * not a WeakMap entry per request, which the garbage collector must trace as an ephemeron (a per-request cost).
 */
const STATE = Symbol('tablegraph.requestLog');
type WithState = { [STATE]?: RequestState };
function stateOf(key: IncomingMessage | ServerResponse): RequestState {
  return ((key as WithState)[STATE] ??= {});
}
function peekState(key: IncomingMessage | ServerResponse): RequestState | undefined {
  return (key as WithState)[STATE];
}

/** The id of the request (given by assignRequestId). */
export function requestIdOf(req: IncomingMessage): string {
  return peekState(req)?.requestId ?? randomUUID();
}

/** Gives the request its id (the client's `x-request-id` when it is a plain token) and answers it in the response header. */
export function assignRequestId(req: IncomingMessage, res: ServerResponse): string {
  const given = req.headers[REQUEST_ID_HEADER];
  const id = typeof given === 'string' && TOKEN.test(given) ? given : randomUUID();
  stateOf(req).requestId = id;
  res.setHeader(REQUEST_ID_HEADER, id);
  return id;
}

/** Express middleware: assignRequestId for every route. */
export function requestIdMiddleware(req: Request, res: Response, next: NextFunction): void {
  assignRequestId(req, res);
  next();
}

/** Records, for the request's log line, the code of a refusal made before its context existed (token, rate, body). */
export function recordDoorRefusal(res: ServerResponse, code: string): void {
  stateOf(res).doorCode = code;
}

/** Hands the request's context to its log line (app.ts, once the context exists). */
export function recordContext(res: ServerResponse, context: RequestContext): void {
  stateOf(res).context = context;
}

/**
 * Starts the request's log line: written once, when its response is sent (or the client went away), and the
 * request counted in `metrics`.
 */
export function startRequestLine(log: Logger, metrics: Metrics | undefined, req: IncomingMessage, res: ServerResponse): void {
  const start = performance.now();
  const finish = () => {
    const durationMs = Math.round((performance.now() - start) * 100) / 100;
    const { context, doorCode } = peekState(res) ?? {};
    const codes = context?.outcome.errorCodes ?? (doorCode ? [doorCode] : res.statusCode >= 400 ? [`HTTP_${res.statusCode}`] : []);
    const operationName = context?.outcome.operationName ?? null;
    const cost = context?.cost.snapshot();
    const line = {
      requestId: requestIdOf(req),
      operationName,
      status: res.writableFinished ? res.statusCode : 'client closed',
      durationMs,
      ...(cost && { cost: { roundTrips: cost.roundTrips, entitiesRead: cost.entitiesRead, storageMs: Math.round(cost.storageMs * 100) / 100 } }),
      errors: codes,
    };
    if (res.statusCode >= 500) log.warn(line, 'request');
    else log.info(line, 'request');
    metrics?.observe({ operation: operationName ?? 'anonymous', code: codes[0] ?? 'OK', durationMs, cost, tenant: context?.principal?.tenant });
  };
  // 'close' ends every response: once it is sent (after 'finish'), or when the client went away before.
  res.once('close', finish);
}

/** Express middleware for the GraphQL endpoint: startRequestLine. */
export function requestLineMiddleware(log: Logger, metrics?: Metrics) {
  return (req: Request, res: Response, next: NextFunction): void => {
    startRequestLine(log, metrics, req, res);
    next();
  };
}

/** Codes of failures that are not the client's doing (a tampered value included): logged at warn, with their details. */
const SERVER_SIDE = new Set<string>([
  ErrorCode.STORAGE_UNAVAILABLE,
  ErrorCode.STORAGE_BUSY,
  ErrorCode.STORAGE_BAD_REQUEST,
  ErrorCode.CONFIG_INVALID,
  ErrorCode.DATA_INTEGRITY,
]);

/**
 * Logs each error of a request: a client's at info with its code; storage failures and the unexpected at warn or
 * error, with their details (never shown to the client: format-error.ts).
 */
export function logRequestErrors(log: Logger, errors: readonly GraphQLError[], request: { requestId: string; operationName?: string | null }): void {
  for (const error of errors) {
    const original = unwrapResolverError(error);
    const where = { ...request, path: error.path };
    if (isTablegraphError(original)) {
      if (SERVER_SIDE.has(original.code) || typeof original.details.operation === 'string') {
        log.warn({ ...where, code: original.code, details: original.details, err: original.cause ?? original }, original.message);
      } else {
        log.info({ ...where, code: original.code }, `client error: ${original.message}`);
      }
    } else if (typeof error.extensions?.code === 'string' && error.extensions.code !== 'INTERNAL_SERVER_ERROR') {
      log.info({ ...where, code: error.extensions.code }, `client error: ${error.message}`);
    } else if (codelessRefusal(error)) {
      log.info({ ...where, code: codelessRefusal(error) }, `client error: ${error.message}`);
    } else {
      log.error({ ...where, err: original }, 'unexpected error');
    }
  }
}

/** The plugin: request ids in errors, error logs, the mutation audit. */
export function requestLogPlugin(log: Logger, model: Model): ApolloServerPlugin<RequestContext> {
  return {
    async requestDidStart() {
      return {
        async didEncounterErrors({ errors, contextValue, operationName }) {
          logRequestErrors(log, errors, { requestId: contextValue.requestId, operationName });
        },
        async executionDidStart({ operation }) {
          // A field hook makes Apollo call back for every field resolved: only mutations are audited.
          // No operation: the operation name given names none of the document's (execution reports it).
          if (operation?.operation !== 'mutation') return;
          return {
            willResolveField({ info, args, contextValue }) {
              if (info.parentType.name !== info.schema.getMutationType()?.name) return;
              const write = model.writes.get(`${info.parentType.name}.${info.fieldName}`);
              const input = (args as { input?: Record<string, unknown> }).input ?? {};
              const keys = Object.fromEntries((write?.entity.keyFields ?? []).map((k) => [k, input[k]]));
              // A move's destination: the new key values, as the move request takes them (write/move.ts).
              const to = write?.moveTo && Object.fromEntries([...write.moveTo].map(([toField, key]) => [key, input[toField] ?? input[key]]));
              return (error) => {
                const outcome = error
                  ? isTablegraphError(unwrapResolverError(error))
                    ? (unwrapResolverError(error) as { code: string }).code
                    : 'ERROR'
                  : 'OK';
                const subject = contextValue.principal?.subject ?? null;
                log.info(
                  { audit: true, requestId: contextValue.requestId, subject, field: info.fieldName, keys, ...(to && { to }), outcome },
                  `mutation ${info.fieldName}: ${outcome}`,
                );
              };
            },
          };
        },
        async willSendResponse({ response, contextValue, operationName, request, document }) {
          if (response.body.kind !== 'single') return;
          const errors = response.body.singleResult.errors;
          // A document that failed validation has no resolved operation: the one the client named, or the only one.
          // A name that names no operation of the document is not kept: any client could make up names at will.
          const named = operationName ?? (document && getOperationAST(document, request.operationName)?.name?.value);
          contextValue.outcome.operationName = named ?? undefined;
          contextValue.outcome.errorCodes = (errors ?? []).map((e) => String(e.extensions?.code ?? 'INTERNAL_SERVER_ERROR'));
          if (errors) {
            response.body.singleResult.errors = errors.map((e) => ({ ...e, extensions: { ...e.extensions, requestId: contextValue.requestId } }));
          }
        },
      };
    },
  };
}
