/**
 * The process configuration, read once from the environment and validated with envalid. Everything else takes a
 * `Config` (or a part of it) as an argument and never reads `process.env` itself, so tests can pass their own.
 */
import path from 'node:path';
import { bool, cleanEnv, makeValidator, str, url, type CleanedEnv } from 'envalid';
import { ErrorCode, TablegraphError } from '../errors';
import { parseKeyRing, type CipherKey } from '../storage/property-cipher';
import type { StorageTarget } from '../storage/storage-types';
import { accountUrls, type AccountUrls } from '../storage/account-urls';
import type { TracingConfig } from '../telemetry/tracing';

/** The validated configuration (camelCase; paths absolute). */
export interface Config {
  /** HTTP port of the GraphQL server (PORT, default 4000). */
  port: number;
  /**
   * Interface the server binds to (HOST, default '127.0.0.1'). Loopback by default so a developer's machine does
   * not expose an unauthenticated IDE to its network; containers set HOST=0.0.0.0.
   */
  host: string;
  /**
   * AZURE_STORAGE_CONNECTION_STRING; undefined = Microsoft Entra ID when `accountUrls` is set, else start (or attach
   * to) the embedded Azurite under `dataDir`.
   */
  connectionString: string | undefined;
  /**
   * The storage account reached with Microsoft Entra ID (`DefaultAzureCredential`: a managed identity in Azure):
   * TABLEGRAPH_STORAGE_ACCOUNT_URL, or TABLEGRAPH_TABLE_URL / TABLEGRAPH_QUEUE_URL / TABLEGRAPH_BLOB_URL (all https).
   * Undefined when none is set. Never together with AZURE_STORAGE_CONNECTION_STRING.
   */
  accountUrls?: AccountUrls;
  /**
   * TABLEGRAPH_DATA_DIR resolved against the working directory: the embedded Azurite's files. Default
   * `.data/<name of the schema folder>` (`.data/hr` for the HR example): each schema's data apart, so that a schema
   * of one's own starts beside the example's instead of being refused over it.
   */
  dataDir: string;
  /** Whether `dataDir` is the default (TABLEGRAPH_DATA_DIR not set). */
  dataDirDefaulted: boolean;
  /** TABLEGRAPH_TARGET: forces the target whose limits apply; undefined = derived from the connection string. */
  target: StorageTarget | undefined;
  /** LOG_LEVEL: a pino level name (default 'info'). */
  logLevel: string;
  /** TABLEGRAPH_CURSOR_SECRET: HMAC key that makes cursors tamper-evident; undefined = a random per-process key. */
  cursorSecret: string | undefined;
  /**
   * TABLEGRAPH_ENCRYPTION_KEYS (`id:base64,…`, the first seals): the key ring of `@encrypted` fields; undefined = none
   * (src/runtime/encryption.ts decides what that means for the storage used).
   */
  encryptionKeys: CipherKey[] | undefined;
  /** TABLEGRAPH_SCHEMA_DIR resolved against the working directory (default `examples/hr`, the HR example): the SDL files. */
  schemaDir: string;
  /** TABLEGRAPH_MAX_PAGE_SIZE: the largest `first` a connection accepts, in entities (default 100). */
  maxPageSize: number;
  /** TABLEGRAPH_DEFAULT_PAGE_SIZE: `first` when a query omits it, in entities (default 20, at most maxPageSize). */
  defaultPageSize: number;
  /** TABLEGRAPH_STORAGE_TIMEOUT_MS: abort a storage call, SDK retries included, after this many ms (default 10000). */
  storageTimeoutMs: number;
  /** TABLEGRAPH_READ_CONCURRENCY: storage calls one request's loaders run at once (default 16). */
  readConcurrency: number;
  /** TABLEGRAPH_TABLE_PREFIX: put before every table name (letters and digits, default ''), so that several
   *  deployments or test runs share one storage account without sharing tables. */
  tablePrefix: string;
  /** TABLEGRAPH_WORKER: 'inline' (default) runs the message worker inside the server; 'off' leaves it to `npm run worker`. */
  worker: 'inline' | 'off';
  /** TABLEGRAPH_WORKER_CONCURRENCY: fan-out messages one worker handles at once (default 8). */
  workerConcurrency: number;
  /** TABLEGRAPH_MAX_DEQUEUE_COUNT: receives before a failing fan-out message goes to the poison queue (default 5). */
  maxDequeueCount: number;
  /** TABLEGRAPH_SETTLE_MS: how long a fan-out message waits for its write to become visible (ms, default 30000). */
  settleMs: number;
  /**
   * TABLEGRAPH_VISIBILITY_TIMEOUT_SECONDS: how long a received fan-out message stays hidden from other workers (s,
   * default 30; renewed while its handler runs): the time a killed worker's messages wait before another takes them.
   */
  visibilityTimeoutSeconds: number;
  /**
   * Builds of derived paths after a schema change (docs/schema-changes.md): TABLEGRAPH_BUILD_ENTITIES_PER_SECOND,
   * entities one worker's builds write per second at most (entities/s, default 500; 0: no limit);
   * TABLEGRAPH_BUILD_LEASE_MS, how long a build's lease lasts without a step (ms, default 30000: a killed worker's
   * build is taken over after it); TABLEGRAPH_BUILD_POLL_MS, how often a worker looks for builds (ms, default 5000);
   * TABLEGRAPH_BUILD_PAGE_SIZE, entities one step of an index build reads (entities, default and at most 1000);
   * TABLEGRAPH_TEST_BUILD_HOLD, a test hook (`<path id>@<steps>`: that build held after that many steps here;
   * `snapshot@<n>`, `restore@<n>`: those commands held after their n-th segment).
   */
  builds: { entitiesPerSecond: number; leaseMs: number; pollMs: number; pageSize: number; holdAfter?: { path: string; steps: number } };
  /** TABLEGRAPH_BLOB_CONNECTION_STRING: the account of `@blob` fields' blobs (default: the storage connection string). */
  blobConnectionString?: string;
  /**
   * Where backups go (docs/backup.md): TABLEGRAPH_BACKUP_CONTAINER, the container (default the table prefix in lower
   * case and `-backup`, or `tablegraph-backup`); TABLEGRAPH_BACKUP_CONNECTION_STRING, its account when not the
   * blobs' (another account, one with an immutability policy); TABLEGRAPH_BACKUP_RETENTION_DAYS, how long `npm run
   * backup -- expire` keeps a snapshot (days, default 7; the newest is always kept); TABLEGRAPH_BACKUP_CAPTURE,
   * continuous backup (default true: every write adds a change entity with its image, src/model/change-log.ts);
   * TABLEGRAPH_BACKUP_CAPTURE_SECONDS, how often a worker runs a capture pass (s, default 10);
   * TABLEGRAPH_BACKUP_SNAPSHOT_HOURS, time between the workers' scheduled snapshots (h, default 24; 0: none).
   */
  backup: { container: string; connectionString?: string; retentionDays: number; capture: boolean; captureIntervalMs: number; snapshotEveryMs: number };
  /**
   * TABLEGRAPH_BLOB_CLEANUP_DELAY_SECONDS: how long after a `@blob` write its cleanup runs (s, default 3600, at least
   * 6 × the storage timeout): an upload URL is valid a quarter of it, a write's EGT must be applied within a third
   * of it, and the cleanup deletes only blobs older than half of it.
   */
  blobCleanupDelaySeconds: number;
  /**
   * TABLEGRAPH_CORS_ORIGINS: the origins (`https://app.example.com`, comma-separated) a browser may call /graphql
   * from; empty (the default): none — a browser page of another origin cannot read the API's answers.
   */
  corsOrigins: string[];
  /**
   * TABLEGRAPH_ALLOWED_HOSTS: host names (comma-separated, no port) a request's `Host` may name beside the loopback
   * names a loopback-bound server answers for; on a server bound elsewhere, the only ones it answers for when set
   * (src/server/request-origin.ts). Default: none beside loopback's.
   */
  allowedHosts: string[];
  /**
   * TABLEGRAPH_TRUSTED_DOCUMENTS resolved against the working directory: a manifest of trusted documents (id →
   * document text, GraphQL Code Generator's `persisted-documents.json`, or Apollo's persisted query manifest); when
   * set, only the operations it lists run (src/server/trusted-documents.ts). Undefined (the default): any operation.
   */
  trustedDocuments?: string;
  /**
   * TABLEGRAPH_CACHE_MAX_AGE: max-age of a GET query's answer that reads entity types a write can change (s, default
   * 5; 0: no-store); TABLEGRAPH_CACHE_MAX_AGE_UNWRITTEN: of one that reads only types no mutation changes (s,
   * default 60). See src/server/http-cache.ts.
   */
  httpCache: { maxAgeSeconds: number; unwrittenMaxAgeSeconds: number };
  /**
   * Subscriptions (src/server/subscriptions/): TABLEGRAPH_SUBSCRIPTION_POLL_MS, time between two polls of a watched
   * partition's change log (ms, default 500); TABLEGRAPH_CHANGE_RETENTION_SECONDS, how long change entities are kept
   * and a client may resume (s, default 3600); TABLEGRAPH_MAX_SUBSCRIPTIONS, subscriptions one server serves (default
   * 10000); TABLEGRAPH_SUBSCRIPTIONS_PER_CONNECTION, on one WebSocket (default 20);
   * TABLEGRAPH_SUBSCRIPTION_HEARTBEAT_MS, keep-alive of idle connections (ms, default 15000);
   * TABLEGRAPH_SUBSCRIPTIONS_PER_SUBJECT, held at once by one token subject over all its connections (default 100);
   * TABLEGRAPH_SUBSCRIPTION_BUFFER, events one subscriber may have waiting before it is ended (events, default 1000).
   */
  subscriptions: {
    pollMs: number;
    retentionMs: number;
    maxSubscriptions: number;
    perConnection: number;
    perSubject: number;
    heartbeatMs: number;
    maxBuffered: number;
  };
  /**
   * TABLEGRAPH_INTROSPECTION: whether the schema can be introspected and the IDE page is served (default true, for
   * the quick start); false for a public deployment, which also blocks field suggestions in error messages.
   */
  introspection: boolean;
  /**
   * TABLEGRAPH_METRICS: who may read the Prometheus metrics at `/metrics` — `loopback` (the default: a scraper on
   * this machine, or a sidecar), `on` (anyone who reaches the port: put it behind your network's rules) or `off`.
   */
  metrics: 'loopback' | 'on' | 'off';
  /** TABLEGRAPH_MAX_BODY_BYTES: the largest request body accepted (bytes, default 262144); larger: 413. */
  maxBodyBytes: number;
  /** TABLEGRAPH_MAX_STORAGE_CALLS: the worst-case storage calls an operation may have (calls, default 1000). */
  maxStorageCalls: number;
  /** TABLEGRAPH_MAX_NODES: the worst-case response nodes an operation may have (objects, default 10000). */
  maxNodes: number;
  /**
   * Authentication (src/server/auth.ts): TABLEGRAPH_JWKS_URL with TABLEGRAPH_JWT_ISSUER and TABLEGRAPH_JWT_AUDIENCE
   * (production), or TABLEGRAPH_JWT_SECRET (HS256, at least 32 characters: development and tests);
   * TABLEGRAPH_JWT_ROLES_CLAIM (default `roles`); TABLEGRAPH_JWT_REQUIRE_EXP (default true: a token without `exp`
   * is refused). `off` (TABLEGRAPH_AUTH=off) says on purpose that there is none.
   */
  auth: { off: boolean; jwksUrl?: string; issuer?: string; audience?: string; secret?: string; rolesClaim: string; requireExp: boolean };
  /** TABLEGRAPH_REQUEST_TIMEOUT_MS: a request's time; after it no further storage read of it is sent (ms, default 30000). */
  requestTimeoutMs: number;
  /**
   * TABLEGRAPH_BODY_TIMEOUT_MS: the time a client has to send a whole request, headers and body (ms, default 30000);
   * a request still arriving after it is answered 408 and its connection closed (a body dripped a byte at a time
   * holds nothing longer).
   */
  bodyTimeoutMs: number;
  /**
   * TABLEGRAPH_ADMIN_ROLE: with authentication on, the role whose tokens see `/health`'s details — the work queue and
   * every derived path's state (default `admin`); other callers are told its status alone.
   */
  adminRole: string;
  /**
   * TABLEGRAPH_MAX_STORAGE_INFLIGHT: storage reads in flight at once, all requests together (calls, default 8:
   * what single-threaded Azurite serves without a queue of its own; raise it for Azure Table storage).
   */
  maxStorageInFlight: number;
  /** TABLEGRAPH_MAX_STORAGE_QUEUE: storage reads waiting, all requests together, before OVERLOADED (calls, default 2000). */
  maxStorageQueue: number;
  /**
   * TABLEGRAPH_MAX_HEAVY_REQUESTS: heavy queries running at once; the others wait their turn, or are refused at once
   * with OVERLOADED when they could not finish before their deadline (requests, default 4;
   * src/read/request-admission.ts).
   */
  maxHeavyRequests: number;
  /** TABLEGRAPH_HEAVY_REQUEST_CALLS: a query whose demand estimate exceeds this is heavy (storage calls, default 16). */
  heavyRequestCalls: number;
  /** TABLEGRAPH_RATE_LIMIT: requests a caller (subject, or IP address) may make per minute (requests, default 1200). */
  rateLimit: number;
  /**
   * Under `@tenancy`, each tenant's budget a second, from its operations' demand estimates
   * (src/server/tenant-budgets.ts): TABLEGRAPH_TENANT_TRANSACTIONS_PER_SECOND (storage calls/s, default 1000) and
   * TABLEGRAPH_TENANT_ENTITIES_PER_SECOND (entities read/s, default 10000).
   */
  tenantBudget: { transactionsPerSecond: number; entitiesPerSecond: number };
  /**
   * OpenTelemetry traces (src/telemetry/tracing.ts), from the standard variables: on when OTEL_TRACES_EXPORTER is
   * `otlp` or `console`, or an OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
   * off (undefined) otherwise, with OTEL_TRACES_EXPORTER=none, or OTEL_SDK_DISABLED=true. OTEL_SERVICE_NAME names
   * the service. The exporter reads its other OTEL_EXPORTER_OTLP_* variables (headers, protocol) itself.
   */
  tracing?: TracingConfig;
}

const positiveInt = makeValidator<number>((input: string) => {
  const n = Number(input);
  if (!/^\s*\d+\s*$/.test(input) || !Number.isSafeInteger(n) || n < 1) {
    throw new Error(`expected a positive integer, got "${input}"`);
  }
  return n;
});

/** A Blob container's name: 3-63 lower-case letters, digits and single hyphens, a letter or digit at each end. */
const containerName = makeValidator<string>((input: string) => {
  if (!/^[a-z0-9](?:[a-z0-9]|-(?!-)){1,61}[a-z0-9]$/.test(input))
    throw new Error(`expected a container name (3-63 of a-z, 0-9 and single hyphens), got "${input}"`);
  return input;
});

/** A whole number of at least 0 (0 turns something off). */
const nonNegativeInt = makeValidator<number>((input: string) => {
  const n = Number(input);
  if (!/^\s*\d+\s*$/.test(input) || !Number.isSafeInteger(n)) throw new Error(`expected a whole number (0 or more), got "${input}"`);
  return n;
});

/** A TCP port; 0 asks the system for a free one (tests, several servers on one machine). */
const portOrZero = makeValidator<number>((input: string) => {
  const n = Number(input);
  if (!/^\s*\d+\s*$/.test(input) || n > 65535) throw new Error(`expected a port number 0-65535, got "${input}"`);
  return n;
});

/** Comma-separated origins, each `scheme://host[:port]` with no path. */
const originList = makeValidator<string[]>((input: string) => {
  const origins = input
    .split(',')
    .map((o) => o.trim())
    .filter(Boolean);
  for (const o of origins) {
    let url: URL;
    try {
      url = new URL(o);
    } catch {
      throw new Error(`"${o}" is not an origin (scheme://host[:port])`);
    }
    if (url.origin !== o) throw new Error(`"${o}" is not an origin: write it as ${url.origin}`);
  }
  return origins;
});

const hostList = makeValidator<string[]>((input: string) => {
  const hosts = input
    .split(',')
    .map((h) => h.trim().toLowerCase())
    .filter(Boolean);
  for (const h of hosts) if (!/^[a-z0-9.-]+$|^[0-9a-f:]+$/.test(h)) throw new Error(`"${h}" is not a host name (no scheme, no port)`);
  return hosts;
});

/** The pino level names LOG_LEVEL may take. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
const TARGETS = ['azure', 'azurite', 'cosmos'] as const;

const specs = {
  PORT: portOrZero({ default: 4000, desc: 'HTTP port of the GraphQL server (0: a free port)' }),
  HOST: str({ default: '127.0.0.1', desc: 'interface to bind; 0.0.0.0 in containers' }),
  AZURE_STORAGE_CONNECTION_STRING: str({ default: undefined, desc: 'Azure Storage connection string' }),
  TABLEGRAPH_STORAGE_ACCOUNT_URL: str({ default: undefined, desc: 'storage account reached with Entra ID, e.g. https://contoso.table.core.windows.net' }),
  TABLEGRAPH_TABLE_URL: str({ default: undefined, desc: 'Table endpoint reached with Entra ID (Cosmos DB Table API, Azurite)' }),
  TABLEGRAPH_QUEUE_URL: str({ default: undefined, desc: 'Queue endpoint reached with Entra ID' }),
  TABLEGRAPH_BLOB_URL: str({ default: undefined, desc: 'Blob endpoint reached with Entra ID' }),
  TABLEGRAPH_DATA_DIR: str({ default: undefined, desc: "folder of the embedded Azurite (default .data/<schema folder's name>)" }),
  TABLEGRAPH_TARGET: str<(typeof TARGETS)[number]>({ choices: TARGETS, default: undefined }),
  LOG_LEVEL: str<(typeof LOG_LEVELS)[number]>({ choices: LOG_LEVELS, default: 'info' }),
  TABLEGRAPH_CURSOR_SECRET: str({ default: undefined, desc: 'HMAC key for cursors' }),
  TABLEGRAPH_ENCRYPTION_KEYS: str({ default: undefined, desc: 'keys of @encrypted fields: id:base64 of 32 bytes, comma-separated, the first seals' }),
  TABLEGRAPH_SCHEMA_DIR: str({ default: 'examples/hr', desc: 'folder of the SDL files' }),
  TABLEGRAPH_MAX_PAGE_SIZE: positiveInt({ default: 100 }),
  TABLEGRAPH_DEFAULT_PAGE_SIZE: positiveInt({ default: 20 }),
  TABLEGRAPH_STORAGE_TIMEOUT_MS: positiveInt({ default: 10000 }),
  TABLEGRAPH_READ_CONCURRENCY: positiveInt({ default: 16 }),
  TABLEGRAPH_TABLE_PREFIX: str({ default: '', desc: 'prefix of every table name (letters and digits)' }),
  TABLEGRAPH_WORKER: str<'inline' | 'off'>({ choices: ['inline', 'off'], default: 'inline' }),
  TABLEGRAPH_WORKER_CONCURRENCY: positiveInt({ default: 8 }),
  TABLEGRAPH_MAX_DEQUEUE_COUNT: positiveInt({ default: 5 }),
  TABLEGRAPH_SETTLE_MS: positiveInt({ default: 30000 }),
  TABLEGRAPH_VISIBILITY_TIMEOUT_SECONDS: positiveInt({ default: 30 }),
  TABLEGRAPH_BUILD_ENTITIES_PER_SECOND: nonNegativeInt({ default: 500, desc: 'entities a worker builds per second (0: no limit)' }),
  TABLEGRAPH_BUILD_LEASE_MS: positiveInt({ default: 30000 }),
  TABLEGRAPH_BUILD_POLL_MS: positiveInt({ default: 5000 }),
  TABLEGRAPH_BUILD_PAGE_SIZE: positiveInt({ default: 1000 }),
  TABLEGRAPH_TEST_BUILD_HOLD: str({ default: undefined, desc: 'a test hook: <path id>@<steps>, a build held after that many steps' }),
  TABLEGRAPH_BLOB_CONNECTION_STRING: str({ default: undefined, desc: 'account of @blob fields (default: AZURE_STORAGE_CONNECTION_STRING)' }),
  TABLEGRAPH_BLOB_CLEANUP_DELAY_SECONDS: positiveInt({ default: 3600 }),
  TABLEGRAPH_BACKUP_CONTAINER: containerName({ default: undefined, desc: 'the backup container (default: <table prefix>-backup)' }),
  TABLEGRAPH_BACKUP_RETENTION_DAYS: positiveInt({ default: 7 }),
  TABLEGRAPH_BACKUP_CONNECTION_STRING: str({ default: undefined, desc: 'the backup account (default: the blobs’)' }),
  TABLEGRAPH_BACKUP_CAPTURE: bool({ default: true, desc: 'continuous backup: every write keeps a change entity that workers copy to Blob storage' }),
  TABLEGRAPH_BACKUP_CAPTURE_SECONDS: positiveInt({ default: 10, desc: 'how often a worker copies captured changes to Blob storage (s)' }),
  TABLEGRAPH_BACKUP_SNAPSHOT_HOURS: nonNegativeInt({ default: 24, desc: 'time between scheduled snapshots (h; 0: none scheduled)' }),
  TABLEGRAPH_INTROSPECTION: bool({ default: true, desc: 'schema introspection and the IDE page' }),
  TABLEGRAPH_METRICS: str<'loopback' | 'on' | 'off'>({ choices: ['loopback', 'on', 'off'], default: 'loopback', desc: 'who may read /metrics' }),
  TABLEGRAPH_MAX_BODY_BYTES: positiveInt({ default: 262144 }),
  TABLEGRAPH_MAX_STORAGE_CALLS: positiveInt({ default: 1000 }),
  TABLEGRAPH_REQUEST_TIMEOUT_MS: positiveInt({ default: 30000 }),
  TABLEGRAPH_BODY_TIMEOUT_MS: positiveInt({ default: 30000, desc: 'time to send a whole request, headers and body (ms)' }),
  TABLEGRAPH_ADMIN_ROLE: str({ default: 'admin', desc: "the role whose tokens see /health's details" }),
  TABLEGRAPH_MAX_STORAGE_INFLIGHT: positiveInt({ default: 8 }),
  TABLEGRAPH_MAX_STORAGE_QUEUE: positiveInt({ default: 2000 }),
  TABLEGRAPH_MAX_HEAVY_REQUESTS: positiveInt({ default: 4 }),
  TABLEGRAPH_HEAVY_REQUEST_CALLS: positiveInt({ default: 16 }),
  TABLEGRAPH_RATE_LIMIT: positiveInt({ default: 1200 }),
  TABLEGRAPH_TENANT_TRANSACTIONS_PER_SECOND: positiveInt({ default: 1000, desc: "under @tenancy: a tenant's storage calls a second" }),
  TABLEGRAPH_TENANT_ENTITIES_PER_SECOND: positiveInt({ default: 10000, desc: "under @tenancy: a tenant's entities read a second" }),
  TABLEGRAPH_AUTH: str<'off'>({ choices: ['off'], default: undefined, desc: 'off: serve without authentication, on purpose' }),
  TABLEGRAPH_JWKS_URL: url({ default: undefined, desc: "the OpenID provider's JWKS" }),
  TABLEGRAPH_JWT_ISSUER: str({ default: undefined }),
  TABLEGRAPH_JWT_AUDIENCE: str({ default: undefined }),
  TABLEGRAPH_JWT_SECRET: str({ default: undefined, desc: 'HS256 key, development and tests' }),
  TABLEGRAPH_JWT_ROLES_CLAIM: str({ default: 'roles' }),
  TABLEGRAPH_JWT_REQUIRE_EXP: bool({ default: true, desc: 'refuse tokens without an exp claim' }),
  TABLEGRAPH_MAX_NODES: positiveInt({ default: 10000 }),
  OTEL_TRACES_EXPORTER: str<'otlp' | 'console' | 'none'>({ choices: ['otlp', 'console', 'none'], default: undefined }),
  OTEL_EXPORTER_OTLP_ENDPOINT: url({ default: undefined, desc: 'OTLP/HTTP endpoint of traces (and other signals)' }),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: url({ default: undefined, desc: 'OTLP/HTTP endpoint of traces' }),
  OTEL_SERVICE_NAME: str({ default: undefined }),
  OTEL_SDK_DISABLED: bool({ default: false }),
  TABLEGRAPH_TRUSTED_DOCUMENTS: str({ default: undefined, desc: 'manifest of the only operations that run (JSON: id → document)' }),
  TABLEGRAPH_CACHE_MAX_AGE: nonNegativeInt({ default: 5, desc: 'max-age of GET answers that writes can change (s)' }),
  TABLEGRAPH_CACHE_MAX_AGE_UNWRITTEN: nonNegativeInt({ default: 60, desc: 'max-age of GET answers no mutation can change (s)' }),
  TABLEGRAPH_SUBSCRIPTION_POLL_MS: positiveInt({ default: 500 }),
  TABLEGRAPH_CHANGE_RETENTION_SECONDS: positiveInt({ default: 3600 }),
  TABLEGRAPH_MAX_SUBSCRIPTIONS: positiveInt({ default: 10000 }),
  TABLEGRAPH_SUBSCRIPTIONS_PER_CONNECTION: positiveInt({ default: 20 }),
  TABLEGRAPH_SUBSCRIPTION_HEARTBEAT_MS: positiveInt({ default: 15000 }),
  TABLEGRAPH_SUBSCRIPTIONS_PER_SUBJECT: positiveInt({ default: 100 }),
  TABLEGRAPH_SUBSCRIPTION_BUFFER: positiveInt({ default: 1000 }),
  TABLEGRAPH_ALLOWED_HOSTS: hostList({ default: [], desc: 'host names a request may name beside loopback, comma-separated' }),
  TABLEGRAPH_CORS_ORIGINS: originList({ default: [], desc: 'origins allowed to call /graphql from a browser, comma-separated' }),
};

/**
 * The test hook TABLEGRAPH_TEST_BUILD_HOLD, `<path id>@<steps>` (`index:Member.byEmail@2`, or `snapshot@2`, `restore@2`).
 * @throws TablegraphError CONFIG_INVALID for another shape
 */
function buildHold(value: string): { path: string; steps: number } {
  const at = value.lastIndexOf('@');
  const steps = Number(value.slice(at + 1));
  if (at <= 0 || !Number.isInteger(steps) || steps < 1) {
    throw new TablegraphError(ErrorCode.CONFIG_INVALID, `Invalid configuration: TABLEGRAPH_TEST_BUILD_HOLD is <path id>@<steps>, not "${value}".`, {
      errors: { TABLEGRAPH_TEST_BUILD_HOLD: 'not <path id>@<steps>' },
    });
  }
  return { path: value.slice(0, at), steps };
}

/** Tracing as the OTEL_* variables ask for it (Config.tracing). */
function tracingOf(e: {
  OTEL_TRACES_EXPORTER?: 'otlp' | 'console' | 'none';
  OTEL_EXPORTER_OTLP_ENDPOINT?: string;
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?: string;
  OTEL_SERVICE_NAME?: string;
  OTEL_SDK_DISABLED: boolean;
}): TracingConfig | undefined {
  if (e.OTEL_SDK_DISABLED || e.OTEL_TRACES_EXPORTER === 'none') return undefined;
  const exporter = e.OTEL_TRACES_EXPORTER ?? (e.OTEL_EXPORTER_OTLP_ENDPOINT || e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ? 'otlp' : undefined);
  return exporter && { exporter, serviceName: e.OTEL_SERVICE_NAME };
}

/**
 * Validates `env` and returns the configuration. Empty values count as unset (compose files often write `X=`).
 * Throws TablegraphError(CONFIG_INVALID) naming every invalid variable and why (details.errors: name → message);
 * it never exits the process, unlike envalid's default reporter.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, cwd: string = process.cwd()): Config {
  const e = readEnv(env);
  checkCombinations(e);
  const urls = accountUrls({
    account: e.TABLEGRAPH_STORAGE_ACCOUNT_URL,
    table: e.TABLEGRAPH_TABLE_URL,
    queue: e.TABLEGRAPH_QUEUE_URL,
    blob: e.TABLEGRAPH_BLOB_URL,
  });
  if (urls && e.AZURE_STORAGE_CONNECTION_STRING) {
    const why = 'is set together with an account URL (Microsoft Entra ID): choose one way to reach storage';
    throw new TablegraphError(ErrorCode.CONFIG_INVALID, `Invalid configuration: AZURE_STORAGE_CONNECTION_STRING ${why}.`, {
      errors: { AZURE_STORAGE_CONNECTION_STRING: why },
    });
  }
  return configOf(e, urls, cwd);
}

/** The environment's variables after envalid: each of `specs` typed, defaulted and checked on its own. */
type Env = CleanedEnv<typeof specs>;

/** Each variable checked on its own (envalid), empty ones counting as unset. @throws TablegraphError CONFIG_INVALID */
function readEnv(env: NodeJS.ProcessEnv): Env {
  const raw: Record<string, string> = {};
  for (const key of Object.keys(specs)) {
    const v = env[key];
    if (v !== undefined && v.trim() !== '') raw[key] = v;
  }
  return cleanEnv(raw, specs, {
    reporter: ({ errors }) => {
      const entries = Object.entries(errors).filter(([, err]) => err !== undefined) as [string, Error][];
      if (entries.length === 0) return;
      const lines = entries.map(([name, err]) => `${name}: ${err.message || 'missing'}`);
      throw new TablegraphError(ErrorCode.CONFIG_INVALID, `Invalid configuration: ${lines.join('; ')}`, {
        errors: Object.fromEntries(entries.map(([name, err]) => [name, err.message])),
      });
    },
  });
}

/** The default backup container for a table prefix (a valid container name: lower case, 3-63 characters). */
function defaultBackupContainer(tablePrefix: string): string {
  return tablePrefix === '' ? 'tablegraph-backup' : `${tablePrefix.toLowerCase().slice(0, 56)}-backup`;
}

/** What no variable's own check sees: values that must agree with others. @throws TablegraphError CONFIG_INVALID */
function checkCombinations(e: Env): void {
  if (!/^[A-Za-z0-9]*$/.test(e.TABLEGRAPH_TABLE_PREFIX)) {
    throw new TablegraphError(ErrorCode.CONFIG_INVALID, 'Invalid configuration: TABLEGRAPH_TABLE_PREFIX may hold letters and digits only.', {
      errors: { TABLEGRAPH_TABLE_PREFIX: 'letters and digits only' },
    });
  }
  if (e.TABLEGRAPH_DEFAULT_PAGE_SIZE > e.TABLEGRAPH_MAX_PAGE_SIZE) {
    throw new TablegraphError(
      ErrorCode.CONFIG_INVALID,
      `Invalid configuration: TABLEGRAPH_DEFAULT_PAGE_SIZE (${e.TABLEGRAPH_DEFAULT_PAGE_SIZE}) is above ` +
        `TABLEGRAPH_MAX_PAGE_SIZE (${e.TABLEGRAPH_MAX_PAGE_SIZE}).`,
      { errors: { TABLEGRAPH_DEFAULT_PAGE_SIZE: 'above TABLEGRAPH_MAX_PAGE_SIZE' } },
    );
  }
  const minDelay = Math.ceil((6 * e.TABLEGRAPH_STORAGE_TIMEOUT_MS) / 1000);
  if (e.TABLEGRAPH_BLOB_CLEANUP_DELAY_SECONDS < minDelay || e.TABLEGRAPH_BLOB_CLEANUP_DELAY_SECONDS > 7 * 24 * 3600) {
    const why = `between 6 × TABLEGRAPH_STORAGE_TIMEOUT_MS (${minDelay} s) and 7 days (604800 s)`;
    throw new TablegraphError(ErrorCode.CONFIG_INVALID, `Invalid configuration: TABLEGRAPH_BLOB_CLEANUP_DELAY_SECONDS must be ${why}.`, {
      errors: { TABLEGRAPH_BLOB_CLEANUP_DELAY_SECONDS: why },
    });
  }
  const authProblem =
    (e.TABLEGRAPH_JWKS_URL &&
      (!e.TABLEGRAPH_JWT_ISSUER || !e.TABLEGRAPH_JWT_AUDIENCE) && ['TABLEGRAPH_JWKS_URL', 'needs TABLEGRAPH_JWT_ISSUER and TABLEGRAPH_JWT_AUDIENCE']) ||
    (e.TABLEGRAPH_JWT_SECRET !== undefined &&
      e.TABLEGRAPH_JWT_SECRET.length < 32 && ['TABLEGRAPH_JWT_SECRET', 'must be at least 32 characters (an HS256 key)']) ||
    (e.TABLEGRAPH_AUTH === 'off' &&
      (e.TABLEGRAPH_JWKS_URL || e.TABLEGRAPH_JWT_SECRET) && ['TABLEGRAPH_AUTH', 'is off, but TABLEGRAPH_JWKS_URL or TABLEGRAPH_JWT_SECRET is set']);
  if (authProblem) {
    throw new TablegraphError(ErrorCode.CONFIG_INVALID, `Invalid configuration: ${authProblem[0]} ${authProblem[1]}.`, {
      errors: { [authProblem[0]]: authProblem[1] },
    });
  }
}

/**
 * `.data/<name>` under `cwd`: the schema folder's name with anything but letters, digits, `.`, `_` and `-` made `_`
 * (`schema` for a folder without one, the file system's root).
 */
export function defaultDataDir(cwd: string, schemaDir: string): string {
  const name =
    path
      .basename(schemaDir)
      .replace(/[^A-Za-z0-9._-]/g, '_')
      .replace(/^\.+/, '_') || 'schema';
  return path.resolve(cwd, '.data', name);
}

/** The configuration the variables say, paths resolved against `cwd`. */
function configOf(e: Env, urls: AccountUrls | undefined, cwd: string): Config {
  return {
    port: e.PORT,
    host: e.HOST,
    connectionString: e.AZURE_STORAGE_CONNECTION_STRING,
    accountUrls: urls,
    dataDir: e.TABLEGRAPH_DATA_DIR === undefined ? defaultDataDir(cwd, path.resolve(cwd, e.TABLEGRAPH_SCHEMA_DIR)) : path.resolve(cwd, e.TABLEGRAPH_DATA_DIR),
    dataDirDefaulted: e.TABLEGRAPH_DATA_DIR === undefined,
    target: e.TABLEGRAPH_TARGET,
    logLevel: e.LOG_LEVEL,
    cursorSecret: e.TABLEGRAPH_CURSOR_SECRET,
    encryptionKeys: e.TABLEGRAPH_ENCRYPTION_KEYS === undefined ? undefined : parseKeyRing(e.TABLEGRAPH_ENCRYPTION_KEYS, 'TABLEGRAPH_ENCRYPTION_KEYS'),
    schemaDir: path.resolve(cwd, e.TABLEGRAPH_SCHEMA_DIR),
    maxPageSize: e.TABLEGRAPH_MAX_PAGE_SIZE,
    defaultPageSize: e.TABLEGRAPH_DEFAULT_PAGE_SIZE,
    storageTimeoutMs: e.TABLEGRAPH_STORAGE_TIMEOUT_MS,
    readConcurrency: e.TABLEGRAPH_READ_CONCURRENCY,
    tablePrefix: e.TABLEGRAPH_TABLE_PREFIX,
    worker: e.TABLEGRAPH_WORKER,
    workerConcurrency: e.TABLEGRAPH_WORKER_CONCURRENCY,
    maxDequeueCount: e.TABLEGRAPH_MAX_DEQUEUE_COUNT,
    settleMs: e.TABLEGRAPH_SETTLE_MS,
    visibilityTimeoutSeconds: e.TABLEGRAPH_VISIBILITY_TIMEOUT_SECONDS,
    builds: {
      entitiesPerSecond: e.TABLEGRAPH_BUILD_ENTITIES_PER_SECOND,
      leaseMs: e.TABLEGRAPH_BUILD_LEASE_MS,
      pollMs: e.TABLEGRAPH_BUILD_POLL_MS,
      pageSize: Math.min(e.TABLEGRAPH_BUILD_PAGE_SIZE, 1000),
      ...(e.TABLEGRAPH_TEST_BUILD_HOLD !== undefined && { holdAfter: buildHold(e.TABLEGRAPH_TEST_BUILD_HOLD) }),
    },
    blobConnectionString: e.TABLEGRAPH_BLOB_CONNECTION_STRING,
    blobCleanupDelaySeconds: e.TABLEGRAPH_BLOB_CLEANUP_DELAY_SECONDS,
    backup: {
      container: e.TABLEGRAPH_BACKUP_CONTAINER ?? defaultBackupContainer(e.TABLEGRAPH_TABLE_PREFIX),
      retentionDays: e.TABLEGRAPH_BACKUP_RETENTION_DAYS,
      capture: e.TABLEGRAPH_BACKUP_CAPTURE,
      captureIntervalMs: e.TABLEGRAPH_BACKUP_CAPTURE_SECONDS * 1000,
      snapshotEveryMs: e.TABLEGRAPH_BACKUP_SNAPSHOT_HOURS * 3_600_000,
      ...(e.TABLEGRAPH_BACKUP_CONNECTION_STRING !== undefined && { connectionString: e.TABLEGRAPH_BACKUP_CONNECTION_STRING }),
    },
    corsOrigins: e.TABLEGRAPH_CORS_ORIGINS,
    allowedHosts: e.TABLEGRAPH_ALLOWED_HOSTS,
    subscriptions: {
      pollMs: e.TABLEGRAPH_SUBSCRIPTION_POLL_MS,
      retentionMs: e.TABLEGRAPH_CHANGE_RETENTION_SECONDS * 1000,
      maxSubscriptions: e.TABLEGRAPH_MAX_SUBSCRIPTIONS,
      perConnection: e.TABLEGRAPH_SUBSCRIPTIONS_PER_CONNECTION,
      perSubject: e.TABLEGRAPH_SUBSCRIPTIONS_PER_SUBJECT,
      heartbeatMs: e.TABLEGRAPH_SUBSCRIPTION_HEARTBEAT_MS,
      maxBuffered: e.TABLEGRAPH_SUBSCRIPTION_BUFFER,
    },
    httpCache: { maxAgeSeconds: e.TABLEGRAPH_CACHE_MAX_AGE, unwrittenMaxAgeSeconds: e.TABLEGRAPH_CACHE_MAX_AGE_UNWRITTEN },
    trustedDocuments: e.TABLEGRAPH_TRUSTED_DOCUMENTS === undefined ? undefined : path.resolve(cwd, e.TABLEGRAPH_TRUSTED_DOCUMENTS),
    introspection: e.TABLEGRAPH_INTROSPECTION,
    metrics: e.TABLEGRAPH_METRICS,
    maxBodyBytes: e.TABLEGRAPH_MAX_BODY_BYTES,
    maxStorageCalls: e.TABLEGRAPH_MAX_STORAGE_CALLS,
    maxNodes: e.TABLEGRAPH_MAX_NODES,
    auth: {
      off: e.TABLEGRAPH_AUTH === 'off',
      jwksUrl: e.TABLEGRAPH_JWKS_URL,
      issuer: e.TABLEGRAPH_JWT_ISSUER,
      audience: e.TABLEGRAPH_JWT_AUDIENCE,
      secret: e.TABLEGRAPH_JWT_SECRET,
      rolesClaim: e.TABLEGRAPH_JWT_ROLES_CLAIM,
      requireExp: e.TABLEGRAPH_JWT_REQUIRE_EXP,
    },
    requestTimeoutMs: e.TABLEGRAPH_REQUEST_TIMEOUT_MS,
    bodyTimeoutMs: e.TABLEGRAPH_BODY_TIMEOUT_MS,
    adminRole: e.TABLEGRAPH_ADMIN_ROLE,
    maxStorageInFlight: e.TABLEGRAPH_MAX_STORAGE_INFLIGHT,
    maxStorageQueue: e.TABLEGRAPH_MAX_STORAGE_QUEUE,
    maxHeavyRequests: e.TABLEGRAPH_MAX_HEAVY_REQUESTS,
    heavyRequestCalls: e.TABLEGRAPH_HEAVY_REQUEST_CALLS,
    rateLimit: e.TABLEGRAPH_RATE_LIMIT,
    tenantBudget: { transactionsPerSecond: e.TABLEGRAPH_TENANT_TRANSACTIONS_PER_SECOND, entitiesPerSecond: e.TABLEGRAPH_TENANT_ENTITIES_PER_SECOND },
    tracing: tracingOf(e),
  };
}
