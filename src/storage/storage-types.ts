/**
 * Shapes that cross the storage boundary. Everything above src/storage speaks in these terms; nothing above
 * it sees an SDK type, an OData string or a RestError.
 */

import type { TokenCredential } from '@azure/core-auth';
import type { AccountUrls } from './account-urls';

/**
 * How a process reaches its storage account: a connection string (an account key, a SAS, or the embedded Azurite's
 * development account), or Microsoft Entra ID — the account's endpoints and a token credential, no key.
 */
export type StorageAccess = { kind: 'connection-string'; connectionString: string } | { kind: 'entra-id'; urls: AccountUrls; credential: TokenCredential };

/**
 * How a store reaches its service: a connection string (account key, SAS, or `UseDevelopmentStorage=true`), or the
 * service's endpoint and a Microsoft Entra ID credential (`DefaultAzureCredential`: a managed identity on Azure).
 */
export type ServiceAccess =
  { connectionString: string; url?: undefined; credential?: undefined } | { url: string; credential: TokenCredential; connectionString?: undefined };

/** Which service the connection string points at: limits differ (see src/storage/limits.ts). */
export type StorageTarget = 'azure' | 'azurite' | 'cosmos';

/** EDM property types the project writes explicitly (the Table service's data model). */
export type EdmType = 'String' | 'Int32' | 'Int64' | 'Double' | 'Boolean' | 'DateTime' | 'Guid' | 'Binary';

/** A property value with its EDM type: how the model annotates every non-string value on write. */
export interface TypedValue {
  type: EdmType;
  /** Int32/Double: number; Int64: bigint; DateTime: Date; Boolean: boolean; String/Guid: string; Binary: Uint8Array. */
  value: number | bigint | string | boolean | Date | Uint8Array;
}

/** Where one entity lives. Keys are already encoded (escaped, padded) by src/model/key-template.ts. */
export interface EntityAddress {
  table: string;
  partitionKey: string;
  rowKey: string;
}

/** An entity to write: its keys and its typed properties (`null` values are omitted, as the service does). */
export interface EntityToWrite {
  partitionKey: string;
  rowKey: string;
  properties: Record<string, TypedValue | null>;
}

/**
 * An entity as read. Properties are decoded to JS values: Int32/Double → number, Int64 → bigint,
 * DateTime → Date, Boolean → boolean, String/Guid → string, Binary → Uint8Array.
 */
export interface StoredEntity {
  partitionKey: string;
  rowKey: string;
  /** The entity's ETag (opaque string), for If-Match on a later write. */
  etag: string;
  /**
   * The service's `Timestamp`: when the entity was last written, by the service's clock, as ISO 8601 text with seven
   * fractional digits (`2026-11-25T13:35:56.7743258Z`), so that two compare as text; absent where the service gave
   * none. Writes of one partition are applied one after another, so their Timestamps order them.
   */
  timestamp?: string;
  properties: Record<string, unknown>;
  /**
   * A wide entity's physical entities (the guide's "Wide entities pattern", model/wide-entities.ts), in part order,
   * null where one is not stored; `etag` and `properties` are then theirs together.
   */
  parts?: ReadonlyArray<StoredEntity | null>;
}

/**
 * Where a range read stopped, to resume right after an entity. Where the service returns a range in RowKey order
 * (Azure Table storage, Azurite), the entity's RowKey. Where it need not (the Cosmos DB Table API: its results are
 * not sorted), the service page the entity lies in — that page's continuation token ('' for the range's first
 * page) and the page size it was read with, so the service gives the same page again — and how many of the page's
 * entities, in RowKey order, come before the resume point.
 */
export type RangePosition = { rowKey: string } | { token: string; pageSize: number; skip: number };

/**
 * A range query: one PartitionKey, RowKeys in [rowKeyFrom, rowKeyTo) — the guide's "range query".
 * `rowKeyAfter` (exclusive lower bound) takes precedence over `rowKeyFrom` when both are set: it is how a
 * cursor resumes.
 */
export interface RangeQuery {
  table: string;
  partitionKey: string;
  /** Inclusive lower RowKey bound; '' or absent = from the partition's first RowKey. */
  rowKeyFrom?: string;
  /** Exclusive lower RowKey bound (resume after this RowKey). */
  rowKeyAfter?: string;
  /** Resume where an earlier read of this same range stopped (a position it returned); overrides rowKeyAfter. */
  after?: RangePosition;
  /** Upper RowKey bound, exclusive unless `rowKeyToInclusive`; absent = to the partition's end. */
  rowKeyTo?: string;
  /** `rowKeyFrom` is exclusive (default: inclusive). */
  rowKeyFromExclusive?: boolean;
  /** `rowKeyTo` is inclusive (default: exclusive). */
  rowKeyToInclusive?: boolean;
  /** Property names to return ($select); absent = all. PartitionKey/RowKey are always returned. */
  select?: string[];
  /** Stop after this many entities (entities); continuation tokens are followed until it is reached. */
  limit: number;
}

/** What one storage call cost; reported to a request's observer (see src/read/cost.ts). */
export interface StorageCallRecord {
  kind: 'pointQuery' | 'rangeQuery' | 'partitionScan' | 'tableScan' | 'transaction' | 'write';
  table: string;
  /** Entities read (queries) or written (transactions, writes). */
  entities: number;
  /** Round trips to the service (a query that followed 2 continuation tokens made 3). */
  roundTrips: number;
  /** Wall time in ms, including SDK retries. */
  ms: number;
  /** True for a write of continuous backup's capture journal on a writer's behalf (src/write/journal-marks.ts). */
  captureMark?: boolean;
}

/**
 * The kinds of storage operation a store times (the labels of `tablegraph_storage_duration_seconds`): a point query,
 * a range query, a scan (partition or table: never on a request path), an EGT, a single-entity write, a queue call.
 */
export type TimedOperation = 'point' | 'range' | 'scan' | 'egt' | 'write' | 'queue';

/** Told the wall time of every storage call a store makes, SDK retries included (s), failed ones too. */
export type CallTimer = (operation: TimedOperation, seconds: number) => void;

/** Receives one record per storage call; request-scoped, passed in each call's options. */
export interface StorageObserver {
  onCallStart?(): void;
  onCall(record: StorageCallRecord): void;
}

/** One operation of an entity-group transaction (EGT). */
export type TransactionOperation =
  | { kind: 'create'; entity: EntityToWrite }
  | { kind: 'upsertReplace'; entity: EntityToWrite }
  | { kind: 'upsertMerge'; entity: EntityToWrite }
  | { kind: 'update'; entity: EntityToWrite; mode: 'merge' | 'replace'; ifMatch?: string }
  | { kind: 'delete'; partitionKey: string; rowKey: string; ifMatch?: string };

/** Per-call options every storage method takes. */
export interface CallOptions {
  observer?: StorageObserver;
  /** Abort the call (and its retries) after this many ms; default from the store's options. */
  timeoutMs?: number;
}
