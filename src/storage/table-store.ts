/**
 * The thin adapter over `@azure/data-tables`: point queries, range queries, EGTs and single-entity writes in the
 * project's terms (storage-types.ts). Writes are checked against the target's limits before they leave the process
 * (limits.ts), values are typed explicitly (edm.ts), errors mapped in one place (storage-errors.ts), and every
 * call reports its cost to the caller's observer.
 */
import { odata, TableClient, TableEntity, TableServiceClient } from '@azure/data-tables';
import { ErrorCode, isTablegraphError, TablegraphError } from '../errors';
import { createDefaultHttpClient, createHttpHeaders, createPipelineRequest } from '@azure/core-rest-pipeline';
import { fromSdkEntity, fromWireEntity, selectWithKeys as withKeys, toSdkEntity } from './edm';
import { egtEtags, egtRequest, type EgtDialect } from './egt-request';
import { PointReader } from './point-reader';
import { RangeReader } from './range-reader';
import { SharedKeyRest } from './shared-key-rest';
import { LeanWriter, type LeanOutcome } from './lean-writes';
import { AbortLatch } from './abort-latch';
import type { PropertyCipher } from './property-cipher';
import { placeToken, readPlaceToken, type TablePlace, type TablePlacement } from './table-placement';
import { MAX_PAGE_SIZE, pagedRange, sortedRange, type CallCost, type RangePage } from './range-pages';

import { checkEntity, checkKey, checkTableName, checkTransaction } from './limits';
import { isEntityNotFound, StorageErrorContext, toTablegraphError } from './storage-errors';
import { CallTimers } from './call-timers';
import { inSpan, tracingOn } from '../telemetry/spans';
import type {
  CallOptions,
  EntityAddress,
  EntityToWrite,
  RangeQuery,
  StorageCallRecord,
  ServiceAccess,
  StorageTarget,
  StoredEntity,
  TransactionOperation,
  CallTimer,
  TimedOperation,
} from './storage-types';

/**
 * A standard Azure Storage connection string (Azure, Azurite or Cosmos DB Table API), or the Table endpoint and a
 * token credential; then the options.
 */
export type TableStoreOptions = ServiceAccess & {
  target: StorageTarget;
  /** Per-call timeout in ms, SDK retries included (default 10000). */
  timeoutMs?: number;
  /** Whether range results come back in RowKey order (default: not on the `cosmos` target). */
  sortedRanges?: boolean;
  /** The SDK's exponential retry policy (408, 5xx; never other 4xx). Defaults: 3 retries, 500 ms, max 4000 ms. */
  retry?: { maxRetries?: number; retryDelayInMs?: number; maxRetryDelayInMs?: number };
  /**
   * Whether point and range queries go without the SDK's pipeline where an account key allows it (point-reader.ts,
   * range-reader.ts). Default: true.
   */
  leanReads?: boolean;
};

/** Options of a conditional single-entity write: `ifMatch` is the ETag the caller read. */
export type ConditionalOptions = CallOptions & { ifMatch?: string };

type RawEntity = Record<string, unknown>;
type WriteMode = 'merge' | 'replace';
type Etag = string | undefined;
/**
 * A scan's filters (the service applies them): one partition or a range of them, a RowKey range within, one EntityType or several,
 * and the entities whose service Timestamp is at or after `since` (`committedSince`) or before `before`
 * (`committedBefore`). With `partitionKey` and `rowKeyRange` it is a range query of one partition (its RowKeys bound
 * what the service reads), answered page by page.
 */
type ScanOptions = CallOptions & {
  partitionKey?: string;
  /** PartitionKeys from `from` (inclusive) to `to` (exclusive): one tenant's key range, say (src/model/tenancy.ts). */
  partitionKeyRange?: { from: string; to: string };
  /** RowKeys from `from` (inclusive) to `to` (exclusive): a partition's change entities, say (src/model/change-log.ts). */
  rowKeyRange?: { from: string; to: string };
  entityType?: string;
  /** Any of these EntityTypes (one read of a table for all the types stored in it); with `entityType`, both apply. */
  entityTypes?: string[];
  committedSince?: Date;
  committedBefore?: Date;
  select?: string[];
  pageSize?: number;
};
type Send = (client: TableClient, sdk: TableEntity<RawEntity>, signal: AbortSignal) => Promise<{ etag?: string }>;

/** How a single-entity write is sent: through the SDK, and, where it has one, first without it (lean-writes.ts). */
interface WriteSends {
  sdk: Send;
  /** Its table (the place's, for a placed table) and its entity as sent (checked and sealed). */
  lean?: (writer: LeanWriter, to: { table: string; entity: EntityToWrite }, latch: AbortLatch) => Promise<LeanOutcome<string | undefined>>;
}

/**
 * One store per process and connection: caches one TableClient per table and which tables exist. Methods
 * throw TablegraphError only (mapping in storage-errors.ts): NOT_FOUND, CONFLICT, LIMIT_EXCEEDED,
 * BAD_USER_INPUT, STORAGE_BAD_REQUEST, CONFIG_INVALID, STORAGE_UNAVAILABLE (timeout, network, 5xx after retries).
 */
/** The timed operation of each kind of call. */
const TIMED: Record<StorageCallRecord['kind'], TimedOperation> = {
  pointQuery: 'point',
  rangeQuery: 'range',
  partitionScan: 'scan',
  tableScan: 'scan',
  transaction: 'egt',
  write: 'write',
};

export class TableStore {
  readonly target: StorageTarget;
  /** A call's timeout, SDK retries included (ms). */
  readonly timeoutMs: number;
  /**
   * Whether the service returns a range query's entities in RowKey order: Azure Table storage and Azurite do; the
   * Cosmos DB Table API does not (its FAQ), so range positions there name service pages (queryRange).
   */
  readonly sortedRanges: boolean;
  private readonly access: ServiceAccess;
  private readonly clientOptions: { allowInsecureConnection: boolean; retryOptions: TableStoreOptions['retry'] };
  private readonly service: TableServiceClient;
  private readonly clients = new Map<string, TableClient>();
  private readonly tables = new Map<string, Promise<void>>();
  /** Sends EGTs (their `$batch` requests) through the table clients' pipelines: kept-alive connections. */
  private readonly httpClient = createDefaultHttpClient();
  /** Whose EGT text the store writes (egt-request.ts): the Cosmos DB Table API's differs. */
  private readonly egtDialect: EgtDialect;
  /** HTTP attempts each call made (its first and the SDK's retries), by the call's own AbortSignal. */
  private readonly attempts = new WeakMap<object, number>();
  private readonly attemptsPolicy: Parameters<TableClient['pipeline']['addPolicy']>[0] = {
    name: 'tablegraphAttempts',
    sendRequest: (request, next) => {
      if (request.abortSignal) this.attempts.set(request.abortSignal, (this.attempts.get(request.abortSignal) ?? 0) + 1);
      return next(request);
    },
  };
  /** Sends inserts and EGTs without the SDK's pipeline (lean-writes.ts); absent: through the SDK alone. */
  private lean?: LeanWriter;
  /** Seals `@encrypted` properties on the way out and opens them on the way in (property-cipher.ts); absent: none. */
  private cipher?: PropertyCipher;
  private timers = new CallTimers();
  /** Where a placed table's entities live (table-placement.ts); absent: every table is here. */
  private placement?: TablePlacement<TableStore>;
  private readonly options: TableStoreOptions;
  /** Point queries without the SDK's pipeline (point-reader.ts), for a connection string with an account key. */
  private readonly points?: PointReader;
  /** Range queries without the SDK's pipeline (range-reader.ts), for a connection string with an account key. */
  private readonly ranges?: RangeReader;

  /**
   * From now on, every entity written has the encrypted properties of its type sealed (before the size checks: a
   * sealed value is larger), and every entity read has them opened — or refused with DATA_INTEGRITY.
   */
  useCipher(cipher: PropertyCipher): void {
    this.cipher = cipher;
  }

  /**
   * From now on, calls on a table the placement places go where it says, by their PartitionKey, and a scan of the whole
   * table reads each of its places in turn (table-placement.ts).
   */
  usePlacement(placement: TablePlacement<TableStore>): void {
    this.placement = placement;
  }

  /** The connection string this store reaches its account with; undefined under Microsoft Entra ID. */
  get connectionString(): string | undefined {
    return this.access.connectionString;
  }

  /** Where a call on `partitionKey` of `table` goes: its placement's answer, or this store and `table`. */
  placeOf(table: string, partitionKey: string): TablePlace<TableStore> {
    return this.placement?.placeOf(table, partitionKey) ?? { store: this, table };
  }

  /** Whether calls may go elsewhere than the table named (usePlacement was called). */
  get placed(): boolean {
    return this.placement !== undefined;
  }

  /**
   * A store of another account (`access`), or of the same one (none given), with this one's options, cipher and call
   * timers, and no placement: where a placement sends a tenant's calls.
   */
  sibling(access?: ServiceAccess & { target?: StorageTarget }): TableStore {
    const base = { ...this.options, connectionString: undefined, url: undefined, credential: undefined };
    const reach = access ?? this.access;
    const options = reach.url === undefined ? { ...base, connectionString: reach.connectionString } : { ...base, url: reach.url, credential: reach.credential };
    const store = new TableStore({ ...options, target: access?.target ?? this.target } as TableStoreOptions);
    store.cipher = this.cipher;
    store.timers = this.timers;
    return store;
  }

  /** Where a call on `partitionKey` of `table` goes instead, its table made once there; undefined: here. */
  private async elsewhere(table: string, partitionKey: string, forWrite = false): Promise<TablePlace<TableStore> | undefined> {
    const place = this.placement?.placeOf(table, partitionKey, forWrite);
    if (place) await place.store.ensureTable(place.table);
    return place;
  }

  /** Whether a cipher seals and opens encrypted properties (useCipher was called). */
  get sealsProperties(): boolean {
    return this.cipher !== undefined;
  }

  /**
   * The entity as this store would write it: its `@encrypted` properties sealed when a cipher is in use (a copy of
   * it kept elsewhere — a backup segment — holds them sealed, as the table does).
   */
  sealed(entity: EntityToWrite): EntityToWrite {
    return this.cipher ? this.cipher.seal(entity) : entity;
  }

  /** An entity as the SDK returns it → StoredEntity, its encrypted properties opened. */
  private decode(raw: Record<string, unknown>): StoredEntity {
    return this.opened(fromSdkEntity(raw));
  }

  /** The entity with its encrypted properties opened (property-cipher.ts), when a cipher is in use. */
  private opened(entity: StoredEntity): StoredEntity {
    return this.cipher ? this.cipher.open(entity) : entity;
  }

  /** Sends nothing. @throws CONFIG_INVALID for a malformed connection string (a wrong key fails later, 403). */
  constructor(opts: TableStoreOptions) {
    this.target = opts.target;
    this.options = opts;
    this.egtDialect = opts.target === 'cosmos' ? 'cosmos' : 'azure';
    this.sortedRanges = opts.sortedRanges ?? opts.target !== 'cosmos';
    this.access = opts.url === undefined ? { connectionString: opts.connectionString } : { url: opts.url, credential: opts.credential };
    this.timeoutMs = opts.timeoutMs ?? 10_000;
    const retryOptions = { maxRetries: 3, retryDelayInMs: 500, maxRetryDelayInMs: 4000, ...opts.retry };
    try {
      if (opts.url !== undefined) {
        // A token goes over https only (account-urls.ts checked the scheme); the SDK picks the Cosmos DB scope itself.
        this.clientOptions = { allowInsecureConnection: false, retryOptions };
        this.service = new TableServiceClient(opts.url, opts.credential, this.clientOptions);
      } else {
        // Azurite speaks http; the SDK refuses to send credentials over http unless told.
        const url = TableServiceClient.fromConnectionString(opts.connectionString).url;
        this.clientOptions = { allowInsecureConnection: url.startsWith('http:'), retryOptions };
        this.service = TableServiceClient.fromConnectionString(opts.connectionString, this.clientOptions);
        const rest = opts.leanReads === false ? undefined : SharedKeyRest.fromConnectionString(opts.connectionString);
        this.points = rest && new PointReader(rest);
        // Inserts and EGTs without the SDK's pipeline; its retries follow a lean attempt, so not where they are off.
        if (retryOptions.maxRetries !== 0) this.lean = rest && new LeanWriter(rest, retryOptions.retryDelayInMs ?? 500);
        this.ranges = rest && new RangeReader(rest);
      }
    } catch (cause) {
      throw new TablegraphError(ErrorCode.CONFIG_INVALID, 'The storage connection string is invalid.', {}, { cause });
    }
  }

  /**
   * Creates `table` if missing (an existing one is fine) and remembers it, so later calls cost nothing.
   * @throws BAD_USER_INPUT for an invalid name; CONFLICT (TableBeingDeleted) right after deleteTable on Azure.
   */
  ensureTable(table: string): Promise<void> {
    checkTableName(table);
    let created = this.tables.get(table);
    if (!created) {
      const request = this.service.createTable(table, { abortSignal: this.signal() });
      created = this.mapped(request, { operation: 'ensureTable', table });
      created.catch(() => this.tables.delete(table)); // a failure is not remembered
      this.tables.set(table, created);
    }
    return created;
  }

  /** Forgets that `table` exists (another process may have dropped it): the next ensureTable asks the service. */
  forgetTable(table: string): void {
    this.tables.delete(table);
  }

  /**
   * The names of the tables that start with `prefix`, in name order: a listing of the account's tables, for
   * maintenance commands (`expire`, a tenant's delete). `''` (no table prefix, the default) lists every table. One call
   * per page of names.
   */
  async listTables(prefix: string, opts?: CallOptions): Promise<string[]> {
    const names: string[] = [];
    checkTableName(`${prefix}xxx`); // letters and digits: the next name after all of the prefix's ends its last one
    // `TableName lt` the prefix with its last character one higher; no filter at all for no prefix (there is no last
    // character: a bound made of none would list nothing).
    const upper = prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1);
    const queryOptions = prefix === '' ? {} : { filter: odata`TableName ge ${prefix} and TableName lt ${upper}` };
    try {
      for await (const page of this.service.listTables({ queryOptions, abortSignal: this.signal(opts) }).byPage()) {
        for (const t of page) if (t.name?.startsWith(prefix)) names.push(t.name);
      }
    } catch (e) {
      throw toTablegraphError(e, { operation: 'listTables', table: `${prefix}*` });
    }
    return names.sort();
  }

  /** Drops `table` and all its entities (the guide's "High volume delete pattern"); a missing table is fine. */
  async deleteTable(table: string): Promise<void> {
    checkTableName(table);
    this.tables.delete(table);
    this.clients.delete(table);
    const request = this.service.deleteTable(table, { abortSignal: this.signal() });
    await this.mapped(request, { operation: 'deleteTable', table });
  }

  /** For /health: lists one table to prove the service answers; returns the latency in ms. Not observed. */
  async ping(opts?: CallOptions): Promise<number> {
    const started = performance.now();
    const tables = this.service.listTables({ abortSignal: this.signal(opts) }).byPage({ maxPageSize: 1 });
    await this.mapped(tables.next(), { operation: 'ping', table: '' });
    return performance.now() - started;
  }

  /**
   * Point query, the cheapest read; `select` is a projection. Null when the entity does not exist. Reports
   * 'pointQuery'. @throws BAD_USER_INPUT/LIMIT_EXCEEDED for a bad key, NOT_FOUND for a missing table.
   */
  async getEntity(addr: EntityAddress, opts?: CallOptions & { select?: string[] }): Promise<StoredEntity | null> {
    const place = this.placement && (await this.elsewhere(addr.table, addr.partitionKey));
    if (place) return place.store.getEntity({ ...addr, table: place.table }, opts);
    const client = this.checkedClient(addr);
    return this.call('pointQuery', opts, { operation: 'getEntity', ...addr }, async (latch, cost) => {
      // The lean point query first (point-reader.ts); what it cannot tell for sure goes through the SDK. With tracing
      // on, the SDK's own spans (and the trace context it sends) are wanted: the SDK alone.
      if (this.points && !tracingOn()) {
        const answer = await this.points.get(addr.table, addr.partitionKey, addr.rowKey, opts?.select && withKeys(opts.select), latch);
        if (answer !== undefined) {
          cost.entities = answer ? 1 : 0;
          return answer && this.opened(fromWireEntity(answer.json, answer.etag));
        }
      }
      const queryOptions = { select: withKeys(opts?.select) };
      const options = { disableTypeConversion: true, queryOptions, abortSignal: latch.signal };
      const request = client.getEntity<RawEntity>(addr.partitionKey, addr.rowKey, options);
      const raw = await request.catch((e: unknown) => (isEntityNotFound(e) ? null : Promise.reject(e)));
      cost.entities = raw ? 1 : 0;
      return raw && this.decode(raw);
    });
  }

  /**
   * Range query within one partition (the guide's "Design for querying"): `PartitionKey eq` and RowKey bounds
   * only, following continuation tokens until `q.limit` entities or the range's end. Each entity comes with the
   * position to resume right after it (RangePosition); `more` says whether the range holds more after them.
   *
   * Where the service returns ranges in RowKey order, so are the entities, a position is a RowKey, and the query
   * asks for one entity more than `limit`, so `more` is exact. Where it need not (`sortedRanges` false: the Cosmos
   * DB Table API), each service page is put in RowKey order and a position names the page by its continuation
   * token: every entity of the range comes exactly once, in RowKey order within a service page and in the
   * service's order across pages; `more` is the presence of a continuation token (the service may give one that
   * leads to an empty page). Reports 'rangeQuery', roundTrips = pages fetched.
   * @throws BAD_USER_INPUT for a bad PartitionKey, limit or position, NOT_FOUND for a missing table.
   */
  async queryRange(q: RangeQuery, opts?: CallOptions): Promise<RangePage> {
    const place = this.placement && (await this.elsewhere(q.table, q.partitionKey));
    if (place) return place.store.queryRange({ ...q, table: place.table }, opts);
    checkKey('PartitionKey', q.partitionKey, this.target);
    if (!Number.isSafeInteger(q.limit) || q.limit < 0) {
      throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `A range limit must be an integer ≥ 0, not ${q.limit}.`);
    }
    const after = q.after && 'rowKey' in q.after ? q.after.rowKey : q.rowKeyAfter;
    const resume = q.after && 'token' in q.after ? q.after : undefined;
    if (
      resume &&
      (this.sortedRanges ||
        !Number.isSafeInteger(resume.pageSize) ||
        resume.pageSize < 1 ||
        resume.pageSize > MAX_PAGE_SIZE ||
        !Number.isSafeInteger(resume.skip) ||
        resume.skip < 0)
    ) {
      throw new TablegraphError(ErrorCode.BAD_USER_INPUT, 'The range position is not one this store gave.');
    }
    // Conditions are and-ed, never or-ed: the guide warns that `or` turns a range query into a partition scan.
    const conditions = [odata`PartitionKey eq ${q.partitionKey}`];
    if (after !== undefined && this.sortedRanges) conditions.push(odata`RowKey gt ${after}`);
    else if (q.rowKeyFrom) conditions.push(q.rowKeyFromExclusive ? odata`RowKey gt ${q.rowKeyFrom}` : odata`RowKey ge ${q.rowKeyFrom}`);
    if (q.rowKeyTo !== undefined) conditions.push(q.rowKeyToInclusive ? odata`RowKey le ${q.rowKeyTo}` : odata`RowKey lt ${q.rowKeyTo}`);
    const client = this.client(q.table);
    const queryOptions = { filter: conditions.join(' and '), select: withKeys(q.select) };
    const ctx = { operation: 'queryRange', table: q.table, partitionKey: q.partitionKey };
    // The lean range query first (range-reader.ts); a page it cannot read goes through the SDK. With tracing on, the
    // SDK's own spans are wanted: the SDK alone.
    const lean = tracingOn() ? undefined : this.ranges;
    return this.call('rangeQuery', opts, ctx, async (latch, cost) => {
      const page = async (top: number, continuationToken?: string) => {
        const wire = await lean?.page({ table: q.table, filter: queryOptions.filter, select: queryOptions.select, top, continuationToken }, latch);
        if (wire)
          return {
            entities: wire.entities.map((e) => this.opened(fromWireEntity(e, String(e['odata.etag'] ?? '')))),
            continuationToken: wire.continuationToken,
          };
        const list = client.listEntities<RawEntity>({ queryOptions, disableTypeConversion: true, abortSignal: latch.signal });
        const next = await list.byPage({ maxPageSize: top, continuationToken }).next();
        return next.done ? { entities: [] } : { entities: next.value.map((raw) => this.decode(raw)), continuationToken: next.value.continuationToken };
      };
      const read = this.sortedRanges ? sortedRange(q.limit, page, cost) : pagedRange(q.limit, resume, page, cost);
      const result = await read;
      cost.entities = result.entities.length;
      return result;
    });
  }

  /**
   * A whole-table read (whole-partition with `partitionKey`; only one EntityType's entities with `entityType`, a
   * filter the service applies), page by page, for maintenance commands only — never on a request path. Each page
   * is one call with its own timeout, reported as 'tableScan' or 'partitionScan'. `pageSize`: entities per page, at
   * most and by default 1000.
   */
  async *scan(table: string, opts: ScanOptions = {}): AsyncIterable<StoredEntity[]> {
    let continuationToken: string | undefined;
    do {
      const page = await this.scanPage(table, continuationToken, opts);
      continuationToken = page.continuationToken;
      if (page.entities.length > 0) yield page.entities;
    } while (continuationToken);
  }

  /**
   * One page of a scan (see `scan`), from `continuationToken` on (absent: the first page): its entities, and the
   * token of the next page (absent after the last). A build keeps the token as its checkpoint and resumes there.
   * A page may hold no entities and still have a next one (the service's time limit).
   */
  async scanPage(
    table: string,
    continuationToken: string | undefined,
    opts: ScanOptions = {},
  ): Promise<{ entities: StoredEntity[]; continuationToken?: string }> {
    const placement = this.placement;
    const one = opts.partitionKey ?? opts.partitionKeyRange?.from;
    if (placement && one !== undefined) {
      const place = await this.elsewhere(table, one);
      if (place) return place.store.scanPage(place.table, continuationToken, opts);
    }
    const places = placement && one === undefined ? placement.scanPlaces(table) : undefined;
    if (places) return this.scanPlaces(table, places, continuationToken, opts);
    return this.scanHere(table, continuationToken, opts);
  }

  /** One page of a scan of `table` in this store, wherever a placement would send it. */
  private async scanHere(
    table: string,
    continuationToken: string | undefined,
    opts: ScanOptions,
  ): Promise<{ entities: StoredEntity[]; continuationToken?: string }> {
    const client = this.client(table);
    const filters = [
      ...(opts.partitionKey === undefined ? [] : [odata`PartitionKey eq ${opts.partitionKey}`]),
      ...(opts.partitionKeyRange === undefined
        ? []
        : [odata`PartitionKey ge ${opts.partitionKeyRange.from}`, odata`PartitionKey lt ${opts.partitionKeyRange.to}`]),
      ...(opts.rowKeyRange === undefined ? [] : [odata`RowKey ge ${opts.rowKeyRange.from}`, odata`RowKey lt ${opts.rowKeyRange.to}`]),
      ...(opts.entityType === undefined ? [] : [odata`EntityType eq ${opts.entityType}`]),
      ...(opts.entityTypes === undefined ? [] : [`(${opts.entityTypes.map((t) => odata`EntityType eq ${t}`).join(' or ')})`]),
      ...(opts.committedSince === undefined ? [] : [odata`Timestamp ge ${opts.committedSince}`]),
      ...(opts.committedBefore === undefined ? [] : [odata`Timestamp lt ${opts.committedBefore}`]),
    ];
    const queryOptions = { filter: filters.length > 0 ? filters.join(' and ') : undefined, select: withKeys(opts.select) };
    const maxPageSize = Math.min(opts.pageSize ?? MAX_PAGE_SIZE, MAX_PAGE_SIZE);
    const kind = opts.partitionKey === undefined ? 'tableScan' : opts.rowKeyRange === undefined ? 'partitionScan' : 'rangeQuery';
    const page = await this.call(kind, opts, { operation: 'scan', table }, async (latch, cost) => {
      const list = client.listEntities<RawEntity>({ queryOptions, disableTypeConversion: true, abortSignal: latch.signal });
      const next = await list.byPage({ maxPageSize, continuationToken }).next();
      const raw = next.done ? [] : next.value;
      cost.entities = raw.length;
      return { entities: raw.map((r) => this.decode(r)), token: next.done ? undefined : next.value.continuationToken };
    });
    return { entities: page.entities, ...(page.token && { continuationToken: page.token }) };
  }

  /**
   * One page of a whole-table scan of a placed table: the page of the place the token is in (the first place's first
   * page for none), only the entities that place holds, and a token that goes on in that place or at the next one.
   */
  private async scanPlaces(
    table: string,
    places: ReturnType<TablePlacement<TableStore>['scanPlaces']> & object,
    token: string | undefined,
    opts: ScanOptions,
  ): Promise<{ entities: StoredEntity[]; continuationToken?: string }> {
    const { key, inner } = readPlaceToken(token);
    const at = key === undefined ? 0 : places.findIndex((p) => p.key === key);
    const here = places[at];
    if (!here) {
      // The place went away between pages (a tenant deleted or moved back): go on at the one after it.
      const after = places.find((p) => p.key > key!);
      return { entities: [], ...(after && { continuationToken: placeToken(after.key, undefined) }) };
    }
    // A place's table is read, never made: one not there holds nothing (a tenant's own tables, dropped by its delete,
    // must not be made again by a scan of a process that has not yet read that the tenant is gone).
    const page: { entities: StoredEntity[]; continuationToken?: string } = here.place
      ? await here.place.store
          .scanPage(here.place.table, inner, opts)
          .catch((e: unknown) => (isTablegraphError(e, ErrorCode.NOT_FOUND) ? { entities: [] } : Promise.reject(e)))
      : await this.scanHere(table, inner, opts);
    const entities = page.entities.filter((e) => here.keep(e.partitionKey));
    const next = page.continuationToken ? placeToken(here.key, page.continuationToken) : places[at + 1] && placeToken(places[at + 1].key, undefined);
    return { entities, ...(next && { continuationToken: next }) };
  }

  /**
   * An EGT (the guide's "Entity Group Transactions"): all operations apply or none does. checkTransaction
   * runs first, so an invalid batch sends nothing. Returns each operation's new ETag (undefined for deletes).
   * Reports 'transaction'. @throws CONFLICT (reason EntityAlreadyExists, ETagMismatch, …) or NOT_FOUND with
   * details.operationIndex naming the failing operation — and details.attempts (> 1) when the SDK's retry met it,
   * which may then be the first attempt's own doing, applied with its answer lost; BAD_USER_INPUT/LIMIT_EXCEEDED
   * from checkTransaction.
   */
  async submitTransaction(table: string, given: TransactionOperation[], opts?: CallOptions): Promise<Etag[]> {
    const place =
      this.placement && given.length > 0 && (await this.elsewhere(table, 'entity' in given[0] ? given[0].entity.partitionKey : given[0].partitionKey, true));
    if (place) return place.store.submitTransaction(place.table, given, opts);
    const cipher = this.cipher;
    const ops = cipher ? given.map((op) => ('entity' in op ? { ...op, entity: cipher.seal(op.entity) } : op)) : given;
    checkTransaction(ops, this.target);
    const client = this.client(table);
    const { tableUrl, batchUrl } = this.egtUrls(client, table);
    const { body, contentType } = egtRequest(tableUrl, ops, this.egtDialect);
    const ctx = { operation: 'submitTransaction', table, batch: ops };
    return this.call('transaction', opts, ctx, async (latch, cost) => {
      const lean = await this.leanFirst(cost, latch, (writer) => writer.batch(body, contentType, ops.length, latch));
      const etags = lean
        ? lean.done
        : egtEtags(
            await client.pipeline.sendRequest(
              this.httpClient,
              createPipelineRequest({
                url: batchUrl,
                method: 'POST',
                body,
                headers: createHttpHeaders({ ...EGT_HEADERS, 'Content-Type': contentType }),
                abortSignal: latch.signal,
                allowInsecureConnection: this.clientOptions.allowInsecureConnection,
              }),
            ),
            ops.length,
          );
      cost.entities = ops.length;
      return ops.map((op, i) => (op.kind === 'delete' ? undefined : etags[i]));
    });
  }

  /**
   * A write sent without the SDK's pipeline first (lean-writes.ts), when this store may: its result (`done`), or
   * undefined when the SDK is to send it (again) — after the wait the answer asked for, the lean attempt counted
   * (`cost.leanAttempts`). With tracing on, the SDK's own spans (and the trace context it sends) are wanted: the SDK
   * alone, as for reads.
   * @throws the service's refusal (RestError), as the SDK would
   */
  private async leanFirst<T>(cost: CallCost, latch: AbortLatch, send: (writer: LeanWriter) => Promise<LeanOutcome<T>>): Promise<{ done: T } | undefined> {
    if (!this.lean || tracingOn()) return undefined;
    const outcome = await send(this.lean);
    if ('done' in outcome) return outcome;
    cost.leanAttempts = 1;
    cost.roundTrips += 1;
    if (outcome.again > 0 && !latch.aborted) {
      await new Promise<void>((resolve) => {
        const stop = latch.onAbort(() => (clearTimeout(timer), resolve()));
        const timer = setTimeout(() => (stop(), resolve()), outcome.again);
      });
    }
    return undefined;
  }

  /**
   * The URLs of an EGT: `table`'s URL, which its parts name (the client's account URL without its query, then the
   * table's name), and the `$batch` URL it is sent to (the same account URL, then `$batch`, its query — a SAS — kept).
   */
  private egtUrls(client: TableClient, table: string): { tableUrl: string; batchUrl: string } {
    const [account, query] = client.url.split('?');
    const base = account.endsWith('/') ? account : `${account}/`;
    return { tableUrl: `${base}${table}`, batchUrl: `${base}$batch${query === undefined ? '' : `?${query}`}` };
  }

  /** Inserts a new entity; returns its ETag. Reports 'write'. @throws CONFLICT (EntityAlreadyExists). */
  async createEntity(table: string, entity: EntityToWrite, opts?: CallOptions): Promise<string> {
    return this.write('createEntity', table, entity, opts, {
      sdk: (client, sdk, abortSignal) => client.createEntity(sdk, { abortSignal }),
      lean: (writer, to, latch) => writer.insert(to.table, to.entity, latch),
    });
  }

  /** Insert-or-merge / insert-or-replace, unconditional; returns the new ETag. Reports 'write'. */
  async upsertEntity(table: string, entity: EntityToWrite, mode: WriteMode, opts?: CallOptions): Promise<string> {
    return this.write('upsertEntity', table, entity, opts, {
      sdk: (client, sdk, abortSignal) => client.upsertEntity(sdk, mode === 'merge' ? 'Merge' : 'Replace', { abortSignal }),
    });
  }

  /**
   * Merges into / replaces an existing entity if its ETag still equals `ifMatch` (any ETag when absent);
   * returns the new ETag (Promise<string>). Reports 'write'. @throws NOT_FOUND when missing, CONFLICT
   * (ETagMismatch) when stale.
   */
  async updateEntity(table: string, entity: EntityToWrite, mode: WriteMode, opts?: ConditionalOptions) {
    return this.write('updateEntity', table, entity, opts, {
      sdk: (client, sdk, abortSignal) => client.updateEntity(sdk, mode === 'merge' ? 'Merge' : 'Replace', { etag: opts?.ifMatch ?? '*', abortSignal }),
    });
  }

  /**
   * Deletes an entity if its ETag equals `ifMatch` (any ETag when absent). Returns false when it did not
   * exist. Reports 'write'. @throws CONFLICT (ETagMismatch) when stale.
   */
  async deleteEntity(addr: EntityAddress, opts?: ConditionalOptions): Promise<boolean> {
    const place = this.placement && (await this.elsewhere(addr.table, addr.partitionKey, true));
    if (place) return place.store.deleteEntity({ ...addr, table: place.table }, opts);
    const client = this.checkedClient(addr);
    return this.call('write', opts, { operation: 'deleteEntity', ...addr }, async (latch, cost) => {
      const request = client.deleteEntity(addr.partitionKey, addr.rowKey, { etag: opts?.ifMatch ?? '*', abortSignal: latch.signal });
      const deleted = await request.then(
        () => true,
        (e: unknown) => (isEntityNotFound(e) ? false : Promise.reject(e)),
      );
      cost.entities = deleted ? 1 : 0;
      return deleted;
    });
  }

  /**
   * checkEntity, then one observed single-entity write that must return an ETag: `send.lean` first when there is one
   * (leanFirst), else or then `send.sdk`.
   */
  private async write(operation: string, table: string, given: EntityToWrite, opts: CallOptions | undefined, send: WriteSends): Promise<string> {
    const place = this.placement && (await this.elsewhere(table, given.partitionKey, true));
    if (place) return place.store.write(operation, place.table, given, opts, send);
    const entity = this.cipher ? this.cipher.seal(given) : given;
    checkEntity(entity, this.target);
    const client = this.client(table);
    const ctx = { operation, table, partitionKey: entity.partitionKey, rowKey: entity.rowKey };
    return this.call('write', opts, ctx, async (latch, cost) => {
      const lean = send.lean && (await this.leanFirst(cost, latch, (writer) => send.lean!(writer, { table, entity }, latch)));
      const etag = lean ? lean.done : (await send.sdk(client, toSdkEntity(entity), latch.signal)).etag;
      if (etag === undefined) throw new TablegraphError(ErrorCode.STORAGE_BAD_REQUEST, 'No ETag in the answer.', ctx);
      cost.entities = 1;
      return etag;
    });
  }

  /**
   * Tells `timer` the time of every later call of this store, whoever makes it (requests, workers, builds, backup).
   * @returns a function that stops it
   */
  timeCalls(timer: CallTimer): () => void {
    return this.timers.add(timer);
  }

  /** One observed storage call: onCallStart, the call under a timeout, onCall (also on failure, 0 entities). */
  private async call<T>(
    kind: StorageCallRecord['kind'],
    opts: CallOptions | undefined,
    ctx: StorageErrorContext,
    run: (latch: AbortLatch, cost: CallCost) => Promise<T>,
  ): Promise<T> {
    const cost: CallCost = { entities: 0, roundTrips: 1 };
    opts?.observer?.onCallStart?.();
    const started = performance.now();
    // The span's attributes are made only when tracing is on: this runs on every storage call.
    const attributes = tracingOn() ? { 'db.collection.name': ctx.table, 'tablegraph.kind': kind, 'tablegraph.partition_key': ctx.partitionKey } : {};
    return inSpan(`table.${ctx.operation}`, attributes, async (span) => {
      // A timer cleared when the call ends, not AbortSignal.timeout: on every storage call, that one's timer fires
      // after the call anyway, and makes its DOMException then. The latch makes an AbortSignal only for the SDK's
      // calls (abort-latch.ts): the lean point and range queries go without one.
      const latch = new AbortLatch(timeoutReason);
      const timer = setTimeout(() => latch.abort(), opts?.timeoutMs ?? this.timeoutMs);
      try {
        return await run(latch, cost);
      } catch (e) {
        cost.entities = 0;
        const mapped = toTablegraphError(e, ctx);
        // A refusal met by the SDK's retry may be the first attempt's own doing, applied with its answer lost.
        // A lean attempt before the SDK's (leanFirst) is one of them.
        const signal = latch.madeSignal;
        const attempts = (signal ? (this.attempts.get(signal) ?? 0) : 0) + (cost.leanAttempts ?? 0);
        if (attempts > 1) mapped.details.attempts = attempts;
        throw mapped;
      } finally {
        clearTimeout(timer);
        const { entities, roundTrips } = cost;
        span?.setAttributes({ 'tablegraph.round_trips': roundTrips, 'tablegraph.entities': entities });
        const ms = performance.now() - started;
        opts?.observer?.onCall({ kind, table: ctx.table, entities, roundTrips, ms });
        this.timers.time(TIMED[kind], ms / 1000);
      }
    });
  }

  /** `request`, its rejection mapped by toTablegraphError. */
  private mapped<T>(request: Promise<T>, ctx: StorageErrorContext): Promise<T> {
    return request.catch((e: unknown) => Promise.reject(toTablegraphError(e, ctx)));
  }

  /** The table's client, after checking the address's keys (BAD_USER_INPUT, LIMIT_EXCEEDED). */
  private checkedClient(addr: EntityAddress): TableClient {
    checkKey('PartitionKey', addr.partitionKey, this.target, { ...addr });
    checkKey('RowKey', addr.rowKey, this.target, { ...addr });
    return this.client(addr.table);
  }

  private signal(opts?: CallOptions): AbortSignal {
    return AbortSignal.timeout(opts?.timeoutMs ?? this.timeoutMs);
  }

  private client(table: string): TableClient {
    let client = this.clients.get(table);
    if (!client) {
      checkTableName(table);
      client =
        this.access.url === undefined
          ? TableClient.fromConnectionString(this.access.connectionString, table, this.clientOptions)
          : new TableClient(this.access.url, table, this.access.credential, this.clientOptions);
      // After the retry policy: it sees each attempt, so that a refusal met by a retry can be told (details.attempts).
      client.pipeline.addPolicy(this.attemptsPolicy, { afterPhase: 'Retry' });
      // Per-call CPU this project does not use: @azure/logger (its own code logs storage calls), @azure/core-tracing
      // unless tracing is on, redirects and forms (the Table service has none). Measured by test/bench/point-bench.ts.
      for (const name of UNUSED_SDK_POLICIES) if (name !== 'tracingPolicy' || !tracingOn()) client.pipeline.removePolicy({ name });
      this.clients.set(table, client);
    }
    return client;
  }
}

/** The headers of an EGT's `$batch` request besides its Content-Type: the SDK's (13.x), the pipeline adds the rest. */
const EGT_HEADERS = {
  accept: 'application/json',
  'x-ms-version': '2019-02-02',
  DataServiceVersion: '3.0;',
  MaxDataServiceVersion: '3.0;NetFx',
  'Accept-Charset': 'UTF-8',
};

/** The Azure SDK pipeline policies every TableClient of the store goes without. */
const UNUSED_SDK_POLICIES = ['tracingPolicy', 'logPolicy', 'redirectPolicy', 'formDataPolicy', 'multipartPolicy'];

/** Why a call's signal aborts when its time is up: what AbortSignal.timeout gives. */
function timeoutReason(): DOMException {
  return new DOMException('The operation was aborted due to timeout', 'TimeoutError');
}
