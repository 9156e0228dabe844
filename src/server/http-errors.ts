/**
 * Errors that happen before GraphQL sees a request — a body that is not JSON (400), too large (413), in an encoding
 * the server does not read (415) — and routes that do not exist (404), answered as GraphQL-over-HTTP JSON with a
 * stable `extensions.code` and the request id, never Express's HTML page with a stack trace and paths. So are
 * requests node:http refuses itself before any handler runs (headers over its limit: 431).
 */
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { NextFunction, Request, Response } from 'express';
import type { Logger } from '../log';
import { recordDoorRefusal, requestIdOf } from './request-log';

/** Codes by HTTP status, for failures of the body parser. */
const CODES: Record<number, { code: string; message: string }> = {
  400: { code: 'BAD_REQUEST', message: 'The request body is not valid JSON.' },
  413: { code: 'PAYLOAD_TOO_LARGE', message: 'The request body is larger than the server accepts.' },
  415: { code: 'UNSUPPORTED_MEDIA_TYPE', message: 'The request body is in an encoding or charset the server does not read.' },
};

/** Answers a refusal as GraphQL-over-HTTP JSON (any node:http response, Express's included). */
export function sendHttpError(res: ServerResponse, status: number, code: string, message: string, requestId: string): void {
  recordDoorRefusal(res, code);
  res.statusCode = status;
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.end(JSON.stringify({ errors: [{ message, extensions: { code, requestId } }] }));
}

/** The code and message of a body that could not be read (the `status` of a raw-body or body-parser error). */
export function bodyErrorOf(err: unknown): { status: number; code: string; message: string } | undefined {
  const status = (err as { status?: unknown }).status;
  return typeof status === 'number' && CODES[status] ? { status, ...CODES[status] } : undefined;
}

/** Express error handler (the last middleware): body-parser failures and anything thrown before GraphQL. */
export function httpErrorHandler(log: Logger) {
  return (err: unknown, req: Request, res: Response, next: NextFunction): void => {
    if (res.headersSent) return next(err);
    const requestId = requestIdOf(req);
    const known = bodyErrorOf(err);
    if (known) {
      log.info({ requestId, status: known.status, code: known.code, type: (err as { type?: string }).type }, `client error: ${known.message}`);
      sendHttpError(res, known.status, known.code, known.message, requestId);
      return;
    }
    log.error({ requestId, err }, 'unexpected error before GraphQL');
    sendHttpError(res, 500, 'INTERNAL_SERVER_ERROR', 'Internal server error', requestId);
  };
}

/** Express handler for any route not served: 404 as JSON. */
export function notFoundHandler(req: Request, res: Response): void {
  sendHttpError(res, 404, 'NOT_FOUND', `Nothing is served at ${req.method} ${req.path}: the API is at /graphql.`, requestIdOf(req));
}

/** What node:http's own refusals answer, by the parser's error code; any other client error closes the connection. */
const PARSER_REFUSALS: Record<string, { status: number; reason: string; code: string; message: string }> = {
  HPE_HEADER_OVERFLOW: {
    status: 431,
    reason: 'Request Header Fields Too Large',
    code: 'HEADERS_TOO_LARGE',
    message: 'The request headers are larger than the server accepts (16 KiB in all): send a shorter token or fewer headers.',
  },
  ERR_HTTP_REQUEST_TIMEOUT: {
    status: 408,
    reason: 'Request Timeout',
    code: 'REQUEST_TIMEOUT',
    message: 'The request did not arrive whole in the time the server gives (TABLEGRAPH_BODY_TIMEOUT_MS): send it again.',
  },
};

/**
 * A node:http server's `clientError` listener: a request the HTTP parser refuses — headers over the limit — or that
 * did not arrive whole in time gets GraphQL-over-HTTP JSON with a code and a request id, where Node would answer a
 * bare status line; any other parse failure closes the connection as Node does.
 */
export function clientErrorHandler(log: Logger) {
  return (err: NodeJS.ErrnoException, socket: Duplex): void => {
    const refusal = err.code ? PARSER_REFUSALS[err.code] : undefined;
    // Nothing of the request's own answer may have gone out already (a request timed out mid-answer is cut): node:http
    // keeps the answer in progress on the socket as `_httpMessage`, and decides the same way for its own 408.
    const answering = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (!refusal || !socket.writable || answering?.headersSent) {
      socket.destroy();
      return;
    }
    const requestId = randomUUID();
    log.info({ requestId, status: refusal.status, code: refusal.code }, `client error: ${refusal.message}`);
    const body = JSON.stringify({ errors: [{ message: refusal.message, extensions: { code: refusal.code, requestId } }] });
    socket.end(
      `HTTP/1.1 ${refusal.status} ${refusal.reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `X-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
    );
  };
}
