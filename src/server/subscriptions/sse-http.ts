/**
 * graphql-sse's protocol handler on node:http, with the body read under the server's limit. graphql-sse's own
 * node:http adapter reads a whole body into one string before any check: a body of a few hundred MB stops the
 * process (`RangeError: Invalid string length`), with no token needed. Here a body is read with `raw-body` and
 * refused past `maxBodyBytes` (413 PAYLOAD_TOO_LARGE, as `POST /graphql` answers), and every refusal — graphql-sse's
 * own (a body that is not JSON, no `query`, variables that are not an object: 400; 405, 406, 415) as much as the
 * server's — is GraphQL-over-HTTP JSON with an `extensions.code` in each error and the request id.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { GraphQLFormattedError } from 'graphql';
import type { Handler } from 'graphql-sse';
import getRawBody from 'raw-body';
import { bodyErrorOf, sendHttpError } from '../http-errors';
import { recordDoorRefusal } from '../request-log';

/** Codes of graphql-sse's refusals, which carry none, by HTTP status. */
const REFUSAL_CODES: Record<number, string> = {
  400: 'BAD_REQUEST',
  404: 'NOT_FOUND',
  405: 'METHOD_NOT_ALLOWED',
  406: 'NOT_ACCEPTABLE',
  409: 'CONFLICT',
  413: 'PAYLOAD_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
};

/** graphql-sse's refusals without a text of their own, by HTTP status. */
const REFUSAL_MESSAGES: Record<number, string> = {
  405: 'Subscriptions are sent with GET or POST.',
  406: 'An event stream is asked for with "Accept: text/event-stream".',
  415: 'A subscription is sent as JSON ("Content-Type: application/json") or in the URL of a GET.',
};

/**
 * Serves one request to `/graphql/stream` with graphql-sse's handler.
 * @param maxBodyBytes the largest body read (bytes); a larger one is refused with 413 before it is read whole
 * @returns once the answer ended (an event stream: once it closed)
 * @throws what graphql-sse's handler or its hooks throw (an internal error; the caller answers 500)
 */
export async function serveSse(handler: Handler<IncomingMessage, { res: ServerResponse }>, req: IncomingMessage, res: ServerResponse, maxBodyBytes: number) {
  const requestId = String(res.getHeader('x-request-id') ?? '');
  let body: string | null = null;
  if (req.method === 'POST') {
    try {
      body = await getRawBody(req, { limit: maxBodyBytes, length: req.headers['content-length'], encoding: 'utf8' });
    } catch (e) {
      const known = bodyErrorOf(e) ?? { status: 400, code: 'BAD_REQUEST', message: 'The request body could not be read.' };
      // The rest of a refused body is not read: the connection closes after the answer.
      res.setHeader('connection', 'close');
      sendHttpError(res, known.status, known.code, known.message, requestId);
      req.resume();
      return;
    }
  }
  const [answer, init] = await handler({
    method: req.method ?? 'GET',
    url: req.url ?? '/',
    headers: {
      get(key) {
        const header = req.headers[key];
        return Array.isArray(header) ? header.join('\n') : header;
      },
    },
    body,
    raw: req,
    context: { res },
  });
  if (init.status >= 400) {
    const errors = refusalErrors(typeof answer === 'string' ? answer : null, init.status, requestId);
    recordDoorRefusal(res, String(errors[0]?.extensions?.code ?? REFUSAL_CODES[init.status] ?? 'BAD_REQUEST'));
    res.writeHead(init.status, init.statusText, { ...init.headers, 'content-type': 'application/json; charset=utf-8' });
    res.end(JSON.stringify({ errors }));
    return;
  }
  res.writeHead(init.status, init.statusText, init.headers);
  if (!answer || typeof answer === 'string') {
    await new Promise<void>((resolve) => res.end(answer ?? undefined, () => resolve()));
    return;
  }
  res.once('close', () => void answer.return(undefined));
  for await (const chunk of answer) {
    if (!res.writable) break;
    await new Promise<void>((resolve, reject) => res.write(chunk, (err) => (err ? reject(err) : resolve())));
  }
  res.end();
}

/** A refusal's errors, each with a code (its own, or the status's) and the request id. */
function refusalErrors(text: string | null, status: number, requestId: string): GraphQLFormattedError[] {
  let errors: GraphQLFormattedError[] | undefined;
  try {
    const parsed = text ? (JSON.parse(text) as { errors?: unknown }) : undefined;
    if (Array.isArray(parsed?.errors)) errors = parsed.errors as GraphQLFormattedError[];
  } catch {
    // graphql-sse answers some refusals with plain text: its message is kept below
  }
  errors ??= [{ message: text || REFUSAL_MESSAGES[status] || `Refused (HTTP ${status}).` }];
  return errors.map((e) => ({ ...e, extensions: { code: REFUSAL_CODES[status] ?? 'BAD_REQUEST', ...e.extensions, requestId } }));
}
