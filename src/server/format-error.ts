/**
 * Turns any error a resolver threw into the GraphQL error the client sees: a stable code in `extensions.code`, a
 * message a person can act on, and only the details meant for clients (the field, the rule, the reason). What
 * storage said — table names, keys, the SDK's text, hosts and ports — never leaves the server: errors from storage
 * get a plain message, and the whole error is logged with the request id the response carries (request-log.ts).
 * Anything unexpected is shown as INTERNAL_SERVER_ERROR without internals.
 */
import { GraphQLError, type GraphQLFormattedError } from 'graphql';
import { unwrapResolverError } from '@apollo/server/errors';
import { ErrorCode, TablegraphError } from '../errors';

/**
 * Details a client may see in `extensions` (everything else stays in the server's log). The docs' every
 * `extensions.<name>` of an error is one of these (test/unit/docs-match.test.ts).
 */
export const CLIENT_DETAILS: ReadonlySet<string> = new Set([
  'reason',
  // A RESTRICT reference that refused a delete (HasReferrers): `Type.field`, the schema's own coordinate.
  'reference',
  // The storage service's own error code (EntityTooLarge, …): a code, never its message, table or keys.
  'storageCode',
  // Until when a unique value is held by a write not yet settled (UniqueKeyTaken, ReservationBusy): ISO 8601.
  'heldUntil',
  'field',
  'constraint',
  'argument',
  'max',
  'limit',
  'index',
  'itemIndex',
  'maxItems',
  'fields',
  'currentEtag',
  'operationIndex',
  'property',
  'bytes',
  'operations',
  'entityType',
  'accessPath',
  'state',
  'progress',
]);

/** Plain messages for errors whose own message names storage internals. */
const STORAGE_MESSAGES: Partial<Record<ErrorCode, string>> = {
  [ErrorCode.STORAGE_UNAVAILABLE]: 'The storage service did not answer in time. Try again; if it persists, tell the operator the request id.',
  [ErrorCode.STORAGE_BUSY]: 'The storage service is busy: try again after retryAfterSeconds.',
  [ErrorCode.STORAGE_BAD_REQUEST]: 'The storage service refused the request. Tell the operator the request id.',
  [ErrorCode.CONFIG_INVALID]: 'The server is misconfigured. Tell the operator the request id.',
  [ErrorCode.NOT_FOUND]: 'An entity the request needs does not exist.',
  [ErrorCode.CONFLICT]: 'The entity changed since it was read, or already exists. Read it again and retry.',
  [ErrorCode.LIMIT_EXCEEDED]: 'The request is over a size limit of the storage service.',
};

/** Whether the error was mapped from what storage answered (its message then names tables and keys). */
function fromStorage(e: TablegraphError): boolean {
  return (
    typeof e.details.operation === 'string' ||
    e.code === ErrorCode.STORAGE_UNAVAILABLE ||
    e.code === ErrorCode.STORAGE_BUSY ||
    e.code === ErrorCode.STORAGE_BAD_REQUEST ||
    e.code === ErrorCode.CONFIG_INVALID
  );
}

/** The client's view of a TablegraphError: its code, a message, and the details meant for clients. */
export function clientError(e: TablegraphError): { message: string; extensions: Record<string, unknown> } {
  const extensions: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(e.details)) if (CLIENT_DETAILS.has(k)) extensions[k] = v;
  const message = fromStorage(e) ? (STORAGE_MESSAGES[e.code] ?? 'The storage service refused the request.') : e.message;
  if (e.code === ErrorCode.STORAGE_BUSY) extensions.retryAfterSeconds = retryAfterSeconds(e);
  return { message, extensions: { ...extensions, code: e.code } };
}

/** The whole seconds a STORAGE_BUSY asks to wait (at least 1): its `Retry-After`. */
export function retryAfterSeconds(e: TablegraphError): number {
  const ms = typeof e.details.retryAfterMs === 'number' ? e.details.retryAfterMs : 1000;
  return Math.max(1, Math.ceil(ms / 1000));
}

/** Codes of Apollo's own refusals that come without one (answered HTTP 400), by their message. */
const APOLLO_REFUSALS: Record<string, string> = {
  'provided sha does not match query': 'PERSISTED_QUERY_HASH_MISMATCH',
  'Unsupported persisted query version': 'PERSISTED_QUERY_VERSION_UNSUPPORTED',
};

/**
 * The code of a refusal Apollo made without one, before execution, with an HTTP 4xx status (a persisted query's
 * hash that does not match its query, say): the client's mistake, never INTERNAL_SERVER_ERROR. Undefined otherwise.
 */
export function codelessRefusal(error: unknown): string | undefined {
  if (!(error instanceof GraphQLError) || typeof error.extensions?.code === 'string') return undefined;
  const status = (error.extensions?.http as { status?: unknown } | undefined)?.status;
  if (typeof status !== 'number' || status < 400 || status >= 500) return undefined;
  return APOLLO_REFUSALS[error.message] ?? 'BAD_REQUEST';
}

/** An Apollo `formatError` hook. */
export function formatError(formatted: GraphQLFormattedError, error: unknown): GraphQLFormattedError {
  const original = unwrapResolverError(error);
  if (original instanceof TablegraphError) {
    const { message, extensions } = clientError(original);
    return { ...formatted, message, extensions };
  }
  const refusal = codelessRefusal(error);
  if (refusal) return { message: (error as GraphQLError).message, extensions: { code: refusal } };
  if (formatted.extensions?.code && formatted.extensions.code !== 'INTERNAL_SERVER_ERROR') {
    // GraphQL's and the server's own refusals (parse, validation, limits, demand): their figures are for clients.
    const { stacktrace: _s, http: _h, ...extensions } = formatted.extensions;
    return { ...formatted, extensions };
  }
  return { message: 'Internal server error', locations: formatted.locations, path: formatted.path, extensions: { code: 'INTERNAL_SERVER_ERROR' } };
}

/** graphql-js's suggestions: ` Did you mean "x"?`, ` Did you mean the enum value "X"?`, ` Did you mean "a" or "b"?`. */
const SUGGESTION = /\s*Did you mean [^?]*\?/g;

/**
 * `formatError` for a schema that is not to be spelled out (introspection off): as formatError, and without
 * graphql-js's "Did you mean …?" suggestions — of fields, arguments, input fields, types and enum values — which
 * would name the schema's members one typo at a time.
 */
export function formatErrorWithoutSuggestions(formatted: GraphQLFormattedError, error: unknown): GraphQLFormattedError {
  const out = formatError(formatted, error);
  const message = out.message.replace(SUGGESTION, '');
  return message === out.message ? out : { ...out, message };
}
