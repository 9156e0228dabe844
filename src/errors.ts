/**
 * The project's error type and its stable codes. Every layer throws `TablegraphError`; the server turns it
 * into a GraphQL error whose `extensions.code` is `code` (see src/server/format-error.ts). The storage layer
 * never throws a raw SDK error upwards: src/storage/storage-errors.ts maps them here, in one place.
 */

/** Stable `extensions.code` values. Clients may switch on them; never rename one. */
export const ErrorCode = {
  /** The request's arguments are malformed: a bad cursor, a key character, a `first` above the maximum. */
  BAD_USER_INPUT: 'BAD_USER_INPUT',
  /** The addressed entity or table does not exist (storage 404). */
  NOT_FOUND: 'NOT_FOUND',
  /** The entity already exists (storage 409) or its ETag no longer matches (storage 412). */
  CONFLICT: 'CONFLICT',
  /** An entity, a key or a transaction is over a size or count limit of the configured target (storage 413). */
  LIMIT_EXCEEDED: 'LIMIT_EXCEEDED',
  /** Storage refused the request as malformed (storage 400) after the project's own checks passed. */
  STORAGE_BAD_REQUEST: 'STORAGE_BAD_REQUEST',
  /** Storage did not answer, or answered 5xx after the SDK's retries. */
  STORAGE_UNAVAILABLE: 'STORAGE_UNAVAILABLE',
  /**
   * Storage throttled the request through all the SDK's retries — 503 ServerBusy, 429 (the Cosmos DB Table API's
   * request units), 500 OperationTimedOut — each retry waiting what the service asked: try again after
   * `retryAfterSeconds` (HTTP 503 with Retry-After). A write answered so was not stored.
   */
  STORAGE_BUSY: 'STORAGE_BUSY',
  /** The schema's directives do not describe a servable design; the server refuses to start. */
  SCHEMA_INVALID: 'SCHEMA_INVALID',
  /** Configuration (environment variables, connection string) is invalid. */
  CONFIG_INVALID: 'CONFIG_INVALID',
  /** The request has no valid token (HTTP 401), or a subscription outlived its token (reason TokenExpired). */
  UNAUTHENTICATED: 'UNAUTHENTICATED',
  /** The operation's worst case is over the demand budget, or a resume would read more than it (nothing was read). */
  QUERY_TOO_COSTLY: 'QUERY_TOO_COSTLY',
  /** The caller is authenticated but `@auth` does not let it read or write this (nothing was read or written). */
  FORBIDDEN: 'FORBIDDEN',
  /** The server has too many storage calls waiting (server-wide admission); try again shortly (HTTP 503). */
  OVERLOADED: 'OVERLOADED',
  /** The request used up its time (TABLEGRAPH_REQUEST_TIMEOUT_MS): no further storage call of it was sent. */
  REQUEST_TIMEOUT: 'REQUEST_TIMEOUT',
  /**
   * A stored value failed its integrity check (an `@encrypted` property changed or written around tablegraph, or
   * sealed with a key the server does not hold): it is refused, never shown as something else.
   */
  DATA_INTEGRITY: 'DATA_INTEGRITY',
  /**
   * The field reads through an access path that is still being built from the stored entities after a schema
   * change (an index, a summary, a copy), or whose build stopped on data it must not guess at (reason
   * `PathBuildFailed`): nothing was read. `extensions.progress` says how far the build is; try again later.
   */
  ACCESS_PATH_BUILDING: 'ACCESS_PATH_BUILDING',
} as const;

export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** An error with a stable code and optional machine-readable details (shown under `extensions`). */
export class TablegraphError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown>;

  constructor(code: ErrorCode, message: string, details: Record<string, unknown> = {}, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TablegraphError';
    this.code = code;
    this.details = details;
  }
}

/** True when `e` is a TablegraphError, optionally with the given code. */
export function isTablegraphError(e: unknown, code?: ErrorCode): e is TablegraphError {
  return e instanceof TablegraphError && (code === undefined || e.code === code);
}

/**
 * Whether `e` is storage failing for now — no answer, or throttling through every retry (STORAGE_UNAVAILABLE,
 * STORAGE_BUSY) — which a later attempt may get past: what a load, a worker or a maintenance command retries.
 */
export function isTransientStorageError(e: unknown): boolean {
  return isTablegraphError(e, ErrorCode.STORAGE_UNAVAILABLE) || isTablegraphError(e, ErrorCode.STORAGE_BUSY);
}
