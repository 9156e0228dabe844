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
  /** Over the caller's rate, or (reason TenantBudget) its tenant's budget a second: try again after `Retry-After` (HTTP 429). */
  RATE_LIMITED: 'RATE_LIMITED',
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
  /**
   * The server is stopping (a rolling update, a scale-in): it finishes every request it took and refuses the ones that
   * arrive after with HTTP 503, `Retry-After` and `Connection: close`; nothing of such a request ran. Send it again.
   */
  SHUTTING_DOWN: 'SHUTTING_DOWN',
} as const;

export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/**
 * Every `extensions.reason` (`details.reason`) tablegraph gives, with the code it comes with and what it means: the
 * one list of them. docs/errors.md lists each (test/unit/docs-match.test.ts checks it), and a TablegraphError's
 * `details.reason` can only be one of these names. Besides these, a storage error may carry the storage service's
 * own error code as its reason (`details.storageCode`, e.g. `EntityTooLarge`, `InvalidInput`).
 */
export const Reason = {
  // Writes
  EntityAlreadyExists: { code: 'CONFLICT', meaning: 'an entity with these keys exists (a create, or a move to a taken address)' },
  ETagMismatch: { code: 'CONFLICT', meaning: 'the entity changed since it was read: its ETag no longer matches `ifMatch` (a concurrent delete included)' },
  UniqueKeyTaken: {
    code: 'CONFLICT',
    meaning:
      'a unique value the write sets belongs to another entity, or is held by a write of another entity not yet settled: free again at `extensions.heldUntil` unless that write is stored',
  },
  ReservationBusy: {
    code: 'CONFLICT',
    meaning:
      'another write of the same entity, not yet settled (its answer lost, say), holds the unique value: try again after `extensions.heldUntil`, when its lease ends at the latest',
  },
  HasDependents: { code: 'CONFLICT', meaning: 'the delete of a summary holder whose counts are not 0' },
  HasReferrers: {
    code: 'CONFLICT',
    meaning: 'the delete of an entity that a reference declared (or left at) `onDelete: RESTRICT` points at: `extensions.reference` names it',
  },
  DeletePending: {
    code: 'CONFLICT',
    meaning: 'a create at the address of an entity deleted a moment ago, whose `onDelete: CASCADE` dependents the worker is still deleting: try again',
  },
  MovePending: { code: 'CONFLICT', meaning: 'a move of the entity, or into its new address, is under way' },
  PopReceiptMismatch: { code: 'CONFLICT', meaning: 'a queue message was received again by another consumer since (the worker leaves it to that one)' },
  SummaryHolderMissing: { code: 'NOT_FOUND', meaning: 'the summary holder the write counts towards (e.g. its department) does not exist' },
  ReferenceMissing: { code: 'NOT_FOUND', meaning: 'a reference the write sets points at nothing' },
  NotBase64: { code: 'BAD_USER_INPUT', meaning: "a `@blob` field's `base64` is not base64 text" },
  Empty: { code: 'BAD_USER_INPUT', meaning: "a `@blob` field's `base64` holds no bytes (give null to clear the field)" },
  ContentTypeInvalid: { code: 'BAD_USER_INPUT', meaning: "a `@blob` field's content type is not a media type" },
  ContentTypeNotAllowed: { code: 'BAD_USER_INPUT', meaning: "a `@blob` field's content type is not one of its `contentTypes`" },
  OutcomeUnknown: {
    code: 'STORAGE_UNAVAILABLE',
    meaning: "the write's answer was lost and reading back cannot tell whether it was stored: read before writing again",
  },
  Contention: {
    code: 'STORAGE_UNAVAILABLE',
    meaning: 'writers kept changing what a write or the worker read, through all its attempts (the worker then handles its message again later)',
  },
  BlobCommitWindowPassed: { code: 'STORAGE_UNAVAILABLE', meaning: "the write took longer than its blobs' commit window: nothing was written" },
  TooManyItems: { code: 'LIMIT_EXCEEDED', meaning: 'a `@transaction` mutation was given more writes than its `maxItems`: nothing was written' },
  // Reads, subscriptions and the server's limits
  BadRepresentation: {
    code: 'BAD_USER_INPUT',
    meaning:
      "a Federation `_entities` representation is not an object, names a type this subgraph has no resolvable `@key` for, or carries none of its keys' fields: `extensions.index` names it",
  },
  Deadline: { code: 'REQUEST_TIMEOUT', meaning: 'the request used up its time (`TABLEGRAPH_REQUEST_TIMEOUT_MS`): no further storage call was sent' },
  StorageQueueFull: { code: 'OVERLOADED', meaning: "the server's queue of storage calls is full: try again after `Retry-After`" },
  HeavyRequestsQueued: { code: 'OVERLOADED', meaning: 'a heavy query could not finish in time behind the heavy ones running' },
  TenantClosed: { code: 'FORBIDDEN', meaning: "under `@tenancy`, the caller's tenant is closed: being deleted, or deleted (`npm run tenant -- delete`)" },
  TenantNotCreated: {
    code: 'FORBIDDEN',
    meaning: "under `@tenancy(isolation: ACCOUNT)`, the caller's tenant has no account yet (`npm run tenant -- create <id> --isolation ACCOUNT`)",
  },
  TenantMoving: {
    code: 'STORAGE_BUSY',
    meaning:
      "under `@tenancy`, the caller's tenant is between tiers (`npm run tenant -- move`) for a few seconds: its writes wait; try again after `Retry-After`",
  },
  TenantBudget: {
    code: 'RATE_LIMITED',
    meaning:
      "under `@tenancy`, the caller's tenant spent its budget of this second (`budget`: storage calls and entities a second): try again after `Retry-After`",
  },
  TooManySubscriptions: { code: 'OVERLOADED', meaning: 'the server serves `TABLEGRAPH_MAX_SUBSCRIPTIONS` subscriptions already' },
  TooManyForSubject: { code: 'OVERLOADED', meaning: 'the caller holds `TABLEGRAPH_SUBSCRIPTIONS_PER_SUBJECT` subscriptions already' },
  TooManyOnConnection: { code: 'OVERLOADED', meaning: 'the connection holds `TABLEGRAPH_SUBSCRIPTIONS_PER_CONNECTION` subscriptions already' },
  TokenExpired: { code: 'UNAUTHENTICATED', meaning: 'a subscription outlived its token: its last event; subscribe again with a new token and the last cursor' },
  ResumeTooLarge: { code: 'QUERY_TOO_COSTLY', meaning: "a subscription's resume would read more changed entities than the budget's storage calls" },
  ChangesExpired: { code: 'BAD_USER_INPUT', meaning: "a subscription's cursor is older than the change log keeps: read the data again" },
  PathBuilding: { code: 'ACCESS_PATH_BUILDING', meaning: 'the access path a schema change added is still being built (`extensions.progress`)' },
  PathBuildFailed: { code: 'ACCESS_PATH_BUILDING', meaning: "the access path's build stopped on data it must not guess at (see `npm run migrate -- status`)" },
  PathRetired: { code: 'ACCESS_PATH_BUILDING', meaning: 'a newer deployed schema removed the access path, or no longer serves the type here' },
  PathChanged: { code: 'ACCESS_PATH_BUILDING', meaning: "a newer deployed schema changed the access path: this server's schema is older" },
  TypeRekeying: { code: 'ACCESS_PATH_BUILDING', meaning: "the type's entities are being moved to changed table or key templates" },
  TagMismatch: { code: 'DATA_INTEGRITY', meaning: 'an `@encrypted` value was changed, or copied from another entity or property' },
  NotSealed: { code: 'DATA_INTEGRITY', meaning: 'an `@encrypted` property holds a value written around tablegraph' },
  UnknownKey: { code: 'DATA_INTEGRITY', meaning: 'an `@encrypted` value was sealed with a key `TABLEGRAPH_ENCRYPTION_KEYS` does not hold' },
  // Storage answers, mapped in src/storage/storage-errors.ts
  TableNotFound: { code: 'NOT_FOUND', meaning: 'the table does not exist' },
  ResourceNotFound: { code: 'NOT_FOUND', meaning: 'the entity does not exist' },
  Conflict: { code: 'CONFLICT', meaning: 'the storage service refused the write as a conflict (409) without a code of its own' },
  ServerBusy: { code: 'STORAGE_BUSY', meaning: 'the storage service throttled the request (503) through every retry' },
  TooManyRequests: {
    code: 'STORAGE_BUSY',
    meaning: 'the storage service throttled the request (429: the Cosmos DB Table API’s request units) through every retry',
  },
  OperationTimedOut: { code: 'STORAGE_BUSY', meaning: 'the storage service timed the operation out (500) through every retry' },
  aborted: { code: 'STORAGE_UNAVAILABLE', meaning: 'a storage call timed out (`TABLEGRAPH_STORAGE_TIMEOUT_MS`) or was aborted' },
  network: { code: 'STORAGE_UNAVAILABLE', meaning: 'a storage call got no answer: the connection failed' },
  noResponse: { code: 'STORAGE_UNAVAILABLE', meaning: 'a storage call got no answer' },
  // Start-up, schema changes and commands
  ChangeRefused: { code: 'SCHEMA_INVALID', meaning: 'a schema change the stored data cannot take (each with its location and what makes it possible)' },
  SchemaOlder: {
    code: 'SCHEMA_INVALID',
    meaning: 'a command that writes entities (`npm run load`, `npm run import`) runs an older schema than the one deployed: run it with the deployed one',
  },
  CatalogueContended: { code: 'STORAGE_UNAVAILABLE', meaning: 'the catalogue of access paths kept changing while the schema was deployed' },
  CatalogueRowInvalid: {
    code: 'DATA_INTEGRITY',
    meaning: "a row of the catalogue does not decode (written around tablegraph, or damaged): its table and keys are named; a path's row is read as failed",
  },
  BackupCorrupt: {
    code: 'DATA_INTEGRITY',
    meaning: 'a backup segment or manifest differs from what was written (checksum, rows, shape): nothing is restored from it',
  },
  CaptureBehind: {
    code: 'STORAGE_UNAVAILABLE',
    meaning:
      "`npm run tenant -- delete`: no capture pass ran after the tenant's entities were deleted, so its backup could not be purged yet: run the delete again once a worker with capture on runs",
  },
  SnapshotNotFound: { code: 'NOT_FOUND', meaning: '`npm run restore`: no complete snapshot has that id (`npm run backup -- list` lists them)' },
  SnapshotOfOtherSchema: {
    code: 'SCHEMA_INVALID',
    meaning: '`npm run restore`: the snapshot was taken with another schema than the configured one (its SDL is in the manifest)',
  },
  RestoreTargetInUse: { code: 'CONFLICT', meaning: '`npm run restore`: the target table prefix holds a deployment, or is the one the snapshot was taken from' },
  ChangeImageTooLarge: {
    code: 'LIMIT_EXCEEDED',
    meaning: 'continuous backup: the entity written is too large, compressed, for its change entity to keep its image (about 960 KB)',
  },
  NotRestorable: {
    code: 'BAD_USER_INPUT',
    meaning: '`npm run restore -- --at`: the time is outside the restorable window (`npm run backup -- status` prints it)',
  },
  SchemaChangedInWindow: {
    code: 'SCHEMA_INVALID',
    meaning: '`npm run restore -- --at`: the schema changed between the snapshot and the time; restore to a time with a snapshot of its schema',
  },
  TooManyMoves: { code: 'LIMIT_EXCEEDED', meaning: 'more moves were under way at a re-key than the catalogue records at once' },
  PortInUse: { code: 'CONFIG_INVALID', meaning: "the server's port is in use" },
  PortForbidden: { code: 'CONFIG_INVALID', meaning: "the server's port needs privileges the process does not have" },
  HostNotAvailable: { code: 'CONFIG_INVALID', meaning: '`HOST` is not an address of this machine' },
  NothingDeployed: { code: 'BAD_USER_INPUT', meaning: '`npm run migrate -- drop`: no deployment is recorded' },
  UnknownCoordinate: { code: 'BAD_USER_INPUT', meaning: '`npm run migrate`: a coordinate the schema does not have' },
  UnknownPath: { code: 'BAD_USER_INPUT', meaning: '`npm run migrate`: an access path the catalogue does not have' },
  stopped: { code: 'STORAGE_UNAVAILABLE', meaning: 'a worker was stopped before its queue was drained' },
  drainTimeout: { code: 'STORAGE_UNAVAILABLE', meaning: "a worker's queue was not drained in the time given" },
  // Why a build stopped (`npm run migrate -- status`; reads get PathBuildFailed)
  PathUnknown: { code: 'ACCESS_PATH_BUILDING', meaning: 'the build names an access path or type this schema does not have' },
  TablePerPeriod: { code: 'ACCESS_PATH_BUILDING', meaning: 'an index of a type with a table per period: build it with `npm run rebuild-index`' },
  UniqueValueHeldTwice: { code: 'ACCESS_PATH_BUILDING', meaning: 'two entities hold a value of a unique index being built' },
  UnderivableEntities: { code: 'ACCESS_PATH_BUILDING', meaning: 'stored entities cannot form the new keys (a field the template needs is missing)' },
  RekeyCollision: { code: 'ACCESS_PATH_BUILDING', meaning: "two entities would have the same address under the re-keyed type's templates" },
} as const satisfies Record<string, { code: ErrorCode; meaning: string }>;

/** A name of the Reason catalogue. */
export type ReasonName = keyof typeof Reason;

/** A TablegraphError's details: any fields, its `reason` one of the catalogue's. */
export interface ErrorDetails {
  reason?: ReasonName;
  [key: string]: unknown;
}

/** An error with a stable code and optional machine-readable details (shown under `extensions`). */
export class TablegraphError extends Error {
  readonly code: ErrorCode;
  readonly details: ErrorDetails;

  constructor(code: ErrorCode, message: string, details: ErrorDetails = {}, options?: { cause?: unknown }) {
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
