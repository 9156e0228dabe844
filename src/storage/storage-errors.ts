/**
 * The one place where `@azure/data-tables` errors (RestError, AbortError, network errors) become
 * TablegraphErrors. Nothing above src/storage sees an SDK error.
 *
 * Measured on Azurite 3.37 and the SDK: a single operation's service code is in `details.errorCode` and its
 * message is the raw `{"odata.error":…}` body; an EGT's code is in `code` and its message starts with the
 * failing operation's index (`2:The specified entity already exists.`).
 */
import { ErrorCode, TablegraphError } from '../errors';
import { TransactionOperation } from './storage-types';

/** What the failing call was doing; copied into the error's details. */
export interface StorageErrorContext {
  /** The TableStore method, e.g. 'getEntity', 'submitTransaction'. */
  operation: string;
  table: string;
  partitionKey?: string;
  rowKey?: string;
  /** The EGT's operations, so the failing one can be named. */
  batch?: TransactionOperation[];
}

/** Service codes that mean "over a size or count limit" even when they come with a 400. */
const LIMIT_CODES = new Set(['EntityTooLarge', 'PropertyValueTooLarge', 'RequestBodyTooLarge', 'TooManyProperties', 'KeyValueTooLarge']);

/** Error codes of requests that never got an answer (Node's socket errors and core-rest-pipeline's own). */
const NO_ANSWER_CODES = new Set(['REQUEST_SEND_ERROR', 'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE', 'ESOCKETTIMEDOUT']);

interface ErrorLike {
  name?: unknown;
  message?: unknown;
  code?: unknown;
  statusCode?: unknown;
  details?: { errorCode?: unknown; odataError?: { message?: { value?: unknown } } };
}

/** The service's own message, first line only (the rest is RequestId and Time). */
function serviceMessage(err: ErrorLike): string {
  let text = typeof err.details?.odataError?.message?.value === 'string' ? err.details.odataError.message.value : '';
  if (!text && typeof err.message === 'string') {
    text = err.message;
    if (text.startsWith('{')) {
      try {
        const body = JSON.parse(text) as { 'odata.error'?: { message?: { value?: string } } };
        text = body['odata.error']?.message?.value ?? text;
      } catch {
        // not JSON: keep the message as it is
      }
    } else if (text.startsWith('<?xml')) {
      // An XML error body (an authentication failure is answered in XML even by the Table service): its <Message>.
      const detail = /<AuthenticationErrorDetail>([\s\S]*?)<\/AuthenticationErrorDetail>/.exec(text)?.[1];
      text = `${/<Message>([\s\S]*?)<\/Message>/.exec(text)?.[1]?.split('\n')[0] ?? text}${detail ? ` (${detail.trim()})` : ''}`;
    }
  }
  return text.split('\n')[0].trim();
}

function describe(ctx: StorageErrorContext, partitionKey?: string, rowKey?: string): string {
  const entity =
    partitionKey !== undefined && rowKey !== undefined
      ? `entity (PartitionKey '${partitionKey}', RowKey '${rowKey}') in table '${ctx.table}'`
      : `table '${ctx.table}'`;
  return `${ctx.operation} on ${entity}`;
}

/** The wait a throttled answer asks for (ms): `x-ms-retry-after-ms`, `retry-after-ms` or `Retry-After` (s); 1 s when none. */
function retryAfterMs(err: { response?: { headers?: { get?(name: string): string | undefined } } }): number {
  const get = (name: string) => err.response?.headers?.get?.(name);
  const ms = Number(get('x-ms-retry-after-ms') ?? get('retry-after-ms'));
  if (Number.isFinite(ms) && ms > 0) return ms;
  const s = Number(get('retry-after'));
  return Number.isFinite(s) && s > 0 ? s * 1000 : 1000;
}

/** STORAGE_BUSY, with the wait the service asked for (details.retryAfterMs, ms). */
function busy(
  make: (code: ErrorCode, text: string, reason?: string) => TablegraphError,
  details: Record<string, unknown>,
  err: unknown,
  text: string,
  reason: string,
): TablegraphError {
  details.retryAfterMs = retryAfterMs(err as Parameters<typeof retryAfterMs>[0]);
  return make(ErrorCode.STORAGE_BUSY, text, reason);
}

/**
 * Maps any error thrown by a storage call to a TablegraphError; a TablegraphError passes through unchanged.
 * 404 → NOT_FOUND (reason TableNotFound / ResourceNotFound); 409 → CONFLICT (reason EntityAlreadyExists, …);
 * 412 → CONFLICT (reason 'ETagMismatch'); 413 and 400s with a size code (EntityTooLarge, …) → LIMIT_EXCEEDED;
 * other 400s and 4xx → STORAGE_BAD_REQUEST; 401/403 → CONFIG_INVALID (credentials refused); 429, 503 and 500
 * OperationTimedOut (throttling, after the SDK's retries) → STORAGE_BUSY (details.retryAfterMs); aborts (the per-call
 * timeout), network errors, 408 and other 5xx → STORAGE_UNAVAILABLE.
 * details: { operation, table, partitionKey?, rowKey?, storageCode?, status?, storageMessage?, reason? } and,
 * for an EGT (ctx.batch), operationIndex plus that operation's keys, parsed from the `N:` message prefix.
 * The original error is kept as `cause`.
 */
export function toTablegraphError(e: unknown, ctx: StorageErrorContext): TablegraphError {
  if (e instanceof TablegraphError) return e;
  const err: ErrorLike = typeof e === 'object' && e !== null ? (e as ErrorLike) : { message: String(e) };
  const status = typeof err.statusCode === 'number' ? err.statusCode : undefined;
  const detailCode = err.details?.errorCode;
  const storageCode = typeof detailCode === 'string' ? detailCode : typeof err.code === 'string' ? err.code : undefined;
  let message = serviceMessage(err);

  let partitionKey = ctx.partitionKey;
  let rowKey = ctx.rowKey;
  let operationIndex: number | undefined;
  const prefix = /^(\d+):/.exec(message);
  if (ctx.batch && prefix) {
    operationIndex = Number(prefix[1]);
    message = message.slice(prefix[0].length);
    const op = ctx.batch[operationIndex];
    if (op) {
      partitionKey = op.kind === 'delete' ? op.partitionKey : op.entity.partitionKey;
      rowKey = op.kind === 'delete' ? op.rowKey : op.entity.rowKey;
    }
  }

  const details: Record<string, unknown> = { operation: ctx.operation, table: ctx.table };
  if (partitionKey !== undefined) details.partitionKey = partitionKey;
  if (rowKey !== undefined) details.rowKey = rowKey;
  if (operationIndex !== undefined) details.operationIndex = operationIndex;
  if (storageCode !== undefined) details.storageCode = storageCode;
  if (status !== undefined) details.status = status;
  if (message) details.storageMessage = message;
  const what = describe(ctx, partitionKey, rowKey);
  const inOp = operationIndex !== undefined ? ` (EGT operation ${operationIndex}; nothing was written)` : '';
  const make = (code: ErrorCode, text: string, reason?: string): TablegraphError => {
    if (reason !== undefined) details.reason = reason;
    return new TablegraphError(code, text, details, { cause: e });
  };

  if (err.name === 'AbortError') {
    return make(ErrorCode.STORAGE_UNAVAILABLE, `${what} timed out or was aborted.`, 'aborted');
  }
  if (status === undefined) {
    const reason = typeof err.code === 'string' && NO_ANSWER_CODES.has(err.code) ? 'network' : 'noResponse';
    return make(ErrorCode.STORAGE_UNAVAILABLE, `${what} got no answer from the Table service: ${message}`, reason);
  }
  switch (status) {
    case 404:
      return storageCode === 'TableNotFound'
        ? make(ErrorCode.NOT_FOUND, `Table '${ctx.table}' does not exist${inOp}.`, storageCode)
        : make(ErrorCode.NOT_FOUND, `${what}: not found${inOp}.`, storageCode ?? 'ResourceNotFound');
    case 409:
      return make(ErrorCode.CONFLICT, `${what}: ${message || 'conflict'}${inOp}`, storageCode ?? 'Conflict');
    case 412:
      return make(ErrorCode.CONFLICT, `${what}: the entity changed since it was read (ETag mismatch)${inOp}. Read it again and retry.`, 'ETagMismatch');
    case 413:
      return make(ErrorCode.LIMIT_EXCEEDED, `${what}: the request is too large${inOp}.`, storageCode);
    case 401:
    case 403:
      return make(ErrorCode.CONFIG_INVALID, `${what}: the service refused the credentials: ${message}`, storageCode);
    case 408:
      return make(ErrorCode.STORAGE_UNAVAILABLE, `${what}: the Table service is busy (${status}).`, storageCode);
    case 429:
      return busy(make, details, err, `${what}: the Table service throttled the request (429).`, storageCode ?? 'TooManyRequests');
  }
  if (status === 503 || (status === 500 && storageCode === 'OperationTimedOut')) {
    return busy(make, details, err, `${what}: the Table service is busy (${status} ${storageCode ?? ''}).`, storageCode ?? 'ServerBusy');
  }
  if (status >= 500) {
    return make(ErrorCode.STORAGE_UNAVAILABLE, `${what}: the Table service failed (${status}).`, storageCode);
  }
  if (storageCode !== undefined && LIMIT_CODES.has(storageCode)) {
    return make(ErrorCode.LIMIT_EXCEEDED, `${what}: ${message || storageCode}${inOp}`, storageCode);
  }
  return make(ErrorCode.STORAGE_BAD_REQUEST, `${what} was refused (${status}): ${message}${inOp}`, storageCode);
}

/** True for a 404 about the entity (ResourceNotFound), false for a missing table or any other error. */
export function isEntityNotFound(e: unknown): boolean {
  const err = typeof e === 'object' && e !== null ? (e as ErrorLike) : {};
  return err.statusCode === 404 && err.details?.errorCode !== 'TableNotFound' && err.code !== 'TableNotFound';
}
