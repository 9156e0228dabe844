/**
 * GraphQL over HTTP for the requests nearly every client sends — `POST /graphql` with a JSON body — served on
 * node:http straight into Apollo Server's `executeHTTPGraphQLRequest`, in front of the Express application.
 *
 * Why not Express for these: its router, body parser, response helpers and the Express integration cost about as
 * much CPU per request as Apollo's whole request pipeline (measured with `{ __typename }`: 0.62 ms per request
 * through Express against 0.33 ms here, client included), and a point query's own work is smaller than either.
 * Everything else — GET queries, the IDE, bodies in another media type, charset or content encoding, CORS
 * preflights, `/health`, `/metrics` — goes on to Express, which refuses or serves it as before.
 *
 * What a request meets here is what it met in Express: the request id (`x-request-id` in and out), the request
 * log line and metrics, CORS headers for the allowed origins, the body limit (413 PAYLOAD_TOO_LARGE) and JSON
 * parsing (400 BAD_REQUEST), then Apollo with the same context function.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { HeaderMap, type ApolloServer, type ContextFunction } from '@apollo/server';
import { parse as parseContentType } from 'content-type';
import getRawBody from 'raw-body';
import type { Logger } from '../log';
import type { RequestContext } from '../resolvers/context';
import { headerMemo } from './header-memo';
import { bodyErrorOf, sendHttpError } from './http-errors';
import type { Metrics } from './metrics';
import { assignRequestId, startRequestLine } from './request-log';
import type { GraphqlParams, TrustedDocuments } from './trusted-documents';
import type { LaneOutcome } from './query-lane';

/** A middleware that works on node:http objects (the `cors` package's does). */
type NodeMiddleware = (req: IncomingMessage, res: ServerResponse, next: (err?: unknown) => void) => void;

export interface GraphqlPostOptions {
  apollo: ApolloServer<RequestContext>;
  /** The path GraphQL is served at (exactly; `/graphql`). */
  path: string;
  /** Builds each request's context, or throws its refusal (a GraphQLError with a code and an HTTP status). */
  context: ContextFunction<[{ req: IncomingMessage; res: ServerResponse }], RequestContext>;
  log: Logger;
  metrics?: Metrics;
  /** Adds CORS headers for the allowed origins; absent when no origin is allowed. */
  cors?: NodeMiddleware;
  /** Largest body accepted (bytes). */
  maxBodyBytes: number;
  /** With a manifest: the only documents that run (trusted-documents.ts). */
  trusted?: TrustedDocuments;
  /** The query lane (query-lane.ts): what it serves never reaches Apollo. */
  lane?: (req: IncomingMessage, res: ServerResponse, params: GraphqlParams) => Promise<LaneOutcome>;
}

/**
 * Returns a handler that serves a request when it is a JSON `POST` to `options.path` and returns true, or leaves the
 * request untouched and returns false (the caller hands it to Express).
 */
export function graphqlPostHandler(options: GraphqlPostOptions): (req: IncomingMessage, res: ServerResponse) => boolean {
  return (req, res) => {
    if (req.method !== 'POST' || !isPath(req.url, options.path) || !isPlainJson(req)) return false;
    void serve(options, req, res).catch((err: unknown) => {
      options.log.error({ err }, 'unexpected error serving a GraphQL request');
      if (!res.headersSent) sendHttpError(res, 500, 'INTERNAL_SERVER_ERROR', 'Internal server error', String(res.getHeader('x-request-id') ?? ''));
      else res.destroy();
    });
    return true;
  };
}

async function serve(options: GraphqlPostOptions, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const requestId = assignRequestId(req, res);
  startRequestLine(options.log, options.metrics, req, res);
  // A POST's answer is never kept (http-cache.ts), refusals included.
  res.setHeader('cache-control', 'no-store');
  if (options.cors) {
    const failed = await new Promise<unknown>((resolve) => options.cors!(req, res, resolve));
    if (failed) throw failed;
  }
  let body: unknown;
  try {
    // Bytes, decoded here: raw-body's decoding (iconv-lite) cost more than the rest of reading a small body. A BOM is
    // dropped, as that decoding and Express's JSON parser drop it.
    const bytes = await getRawBody(req, { length: req.headers['content-length'], limit: options.maxBodyBytes });
    const text = bytes.toString('utf8').replace(/^\uFEFF/, '');
    // As Express's JSON parser (strict) reads a body: empty is `{}`, and only an object or an array is JSON here.
    body = text.length === 0 ? {} : JSON.parse(text);
    if (typeof body !== 'object' || body === null) throw new SyntaxError('not an object or an array');
  } catch (err) {
    const known = bodyErrorOf(err instanceof SyntaxError ? { status: 400 } : err);
    if (!known) throw err;
    options.log.info({ requestId, status: known.status, code: known.code, type: (err as { type?: string }).type }, `client error: ${known.message}`);
    sendHttpError(res, known.status, known.code, known.message, requestId);
    return;
  }
  if (options.trusted && !Array.isArray(body)) {
    // A batch goes on as it is: Apollo refuses it (batching is off), and nothing of it runs.
    const resolution = options.trusted.resolve(body as GraphqlParams);
    if (!resolution.ok) {
      options.log.info({ requestId, status: resolution.status, code: resolution.code }, `client error: ${resolution.message}`);
      sendHttpError(res, resolution.status, resolution.code, resolution.message, requestId);
      return;
    }
    body = resolution.params;
  }
  // A query of a prepared document runs in the lane; what it leaves (with the context it made, or its refusal), in Apollo.
  const lane = options.lane && !Array.isArray(body) ? await options.lane(req, res, body as GraphqlParams) : undefined;
  if (lane?.served) return;
  const headers = new HeaderMap();
  for (const [key, value] of Object.entries(req.headers)) {
    if (value !== undefined) headers.set(key, Array.isArray(value) ? value.join(', ') : value);
  }
  const query = req.url!.indexOf('?');
  const response = await options.apollo.executeHTTPGraphQLRequest({
    httpGraphQLRequest: { method: 'POST', headers, search: query < 0 ? '' : req.url!.slice(query), body },
    context: lane?.context ?? (() => options.context({ req, res })),
  });
  for (const [key, value] of response.headers) res.setHeader(key, value);
  res.statusCode = response.status ?? 200;
  if (response.body.kind === 'complete') {
    res.end(response.body.string);
    return;
  }
  for await (const chunk of response.body.asyncIterator) res.write(chunk);
  res.end();
}

function isPath(url: string | undefined, path: string): boolean {
  return url !== undefined && url.startsWith(path) && (url.length === path.length || url[path.length] === '?');
}

/** `application/json`, in UTF-8 (or no charset), not compressed: what the JSON parser here reads. */
function isPlainJson(req: IncomingMessage): boolean {
  const encoding = req.headers['content-encoding'];
  if (encoding !== undefined && encoding.toLowerCase() !== 'identity') return false;
  const type = req.headers['content-type'];
  if (type === undefined) return false;
  return plainJsonType(type);
}

/** Whether a `Content-Type` is JSON in UTF-8 (or no charset), parsed once per distinct header. */
const plainJsonType = headerMemo((type) => {
  try {
    const parsed = parseContentType(type);
    const charset = parsed.parameters.charset?.toLowerCase();
    return parsed.type === 'application/json' && (charset === undefined || charset === 'utf-8');
  } catch {
    return false;
  }
});
