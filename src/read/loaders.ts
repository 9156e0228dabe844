/**
 * Per-request DataLoaders over the Table service (docs/architecture.md, "Reads"). One set per GraphQL request, never
 * shared between requests or users.
 *
 * - Point loader: de-duplicates keys, groups them by table and PartitionKey, sends point queries in parallel
 *   with bounded concurrency. Never an `or` filter: the guide ("Design for querying") warns that the service
 *   turns a filter of several RowKeys into a scan.
 * - Range loader: identical range queries in one request run once; every entity a range returns primes the
 *   point loader, so a later point query for it costs nothing.
 * - Every call goes through the server-wide admission (admission.ts), in the request's lane, and none is sent
 *   after the request's deadline.
 */
import { inSpan } from '../telemetry/spans';
import DataLoader from 'dataloader';
import { ErrorCode, TablegraphError } from '../errors';
import type { StorageAdmission } from './admission';
import type { TableStore } from '../storage/table-store';
import type { RangePosition, RangeQuery, StorageObserver, StoredEntity } from '../storage/storage-types';

/** A point query: one entity by table, PartitionKey and RowKey, with the properties to return. */
export interface PointKey {
  table: string;
  partitionKey: string;
  rowKey: string;
  /** $select; within one request all reads of one layout use the same list (see projection.ts). */
  select?: string[];
}

/**
 * A range query's result: entities in RowKey order (within each service page, where the service does not sort:
 * TableStore.queryRange), whether the range holds more after them, and where to resume after each.
 */
export interface RangeResult {
  entities: StoredEntity[];
  more: boolean;
  positions: RangePosition[];
}

/** The loaders of one request. */
export interface Loaders {
  point: DataLoader<PointKey, StoredEntity | null, string>;
  range: DataLoader<RangeQuery, RangeResult, string>;
}

export interface LoaderOptions {
  /** Storage calls in flight at once for this request (calls). */
  concurrency: number;
  /** Receives one record per storage call (the request's CostTracker). */
  observer?: StorageObserver;
  /** The server-wide admission every call of the request goes through, in the request's own lane. */
  admission?: { gate: StorageAdmission; lane: string };
  /** After this instant (ms since the epoch) no further call is sent: REQUEST_TIMEOUT. */
  deadline?: number;
}

const pointCacheKey = (k: PointKey) => `${k.table}\u0000${k.partitionKey}\u0000${k.rowKey}`;
const rangeCacheKey = (q: RangeQuery) =>
  JSON.stringify([
    q.table,
    q.partitionKey,
    q.rowKeyFrom ?? null,
    q.rowKeyFromExclusive ?? false,
    q.rowKeyAfter ?? null,
    q.after ?? null,
    q.rowKeyTo ?? null,
    q.rowKeyToInclusive ?? false,
    q.limit,
    q.select ?? null,
  ]);

/**
 * Creates the loaders of one request.
 * @throws (from load) the TablegraphError the store raised for that key (STORAGE_UNAVAILABLE, …); other keys of
 *   the same batch still resolve
 */
export function createLoaders(store: TableStore, options: LoaderOptions): Loaders {
  return new RequestLoaders(store, options);
}

/**
 * One request's loaders, each made on its first use: a request that reads nothing (`{ __typename }`) pays for no
 * limiter or loader, and for one object only (its methods are its class's, not closures made per request).
 */
class RequestLoaders implements Loaders {
  /** This request's calls in flight (calls), at most `options.concurrency`. */
  private active = 0;
  /** Calls waiting for one of this request's slots, oldest first: each is handed the slot of a call that ends. */
  private readonly waiting: Array<() => void> = [];
  private pointLoader?: DataLoader<PointKey, StoredEntity | null, string>;
  private rangeLoader?: DataLoader<RangeQuery, RangeResult, string>;
  private readonly callOptions: { observer?: StorageObserver };

  constructor(
    private readonly store: TableStore,
    private readonly options: LoaderOptions,
  ) {
    this.callOptions = { observer: options.observer };
  }

  get point(): DataLoader<PointKey, StoredEntity | null, string> {
    return (this.pointLoader ??= new DataLoader<PointKey, StoredEntity | null, string>(
      (keys) => inSpan('dataloader.point', { 'tablegraph.keys': keys.length }, () => this.pointBatch(keys)),
      { cacheKeyFn: pointCacheKey },
    ));
  }

  get range(): DataLoader<RangeQuery, RangeResult, string> {
    return (this.rangeLoader ??= new DataLoader<RangeQuery, RangeResult, string>(
      (queries) => inSpan('dataloader.range', { 'tablegraph.keys': queries.length }, () => this.rangeBatch(queries)),
      { cacheKeyFn: rangeCacheKey },
    ));
  }

  /**
   * A call of this request: within its own parallelism, through the server's admission, never after its deadline.
   * The slots are counted here, not by a limiter made per request: most requests make fewer calls than their
   * concurrency and never wait, and a call that ends hands its slot to the oldest waiting (admission.ts does the same
   * across requests).
   */
  private limit<T>(call: () => Promise<T>): Promise<T> {
    if (this.active < this.options.concurrency) {
      this.active++;
      return this.send(call);
    }
    return new Promise<void>((resolve) => this.waiting.push(resolve)).then(() => this.send(call));
  }

  /** Sends `call` in a slot this request holds, and passes the slot on once it ends. */
  private async send<T>(call: () => Promise<T>): Promise<T> {
    const { options } = this;
    try {
      if (options.deadline !== undefined && Date.now() >= options.deadline) {
        throw new TablegraphError(ErrorCode.REQUEST_TIMEOUT, 'The request used up its time; no further storage call was sent.', { reason: 'Deadline' });
      }
      return await (options.admission ? options.admission.gate.run(options.admission.lane, call) : call());
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.active--;
    }
  }

  private async pointBatch(keys: readonly PointKey[]): Promise<Array<StoredEntity | null | Error>> {
    // Grouping by table and partition keeps each partition's reads together in the queue.
    const order = keys.map((_, i) => i).sort((a, b) => pointCacheKey(keys[a]).localeCompare(pointCacheKey(keys[b])));
    const results: Array<StoredEntity | null | Error> = new Array(keys.length);
    await Promise.all(
      order.map((i) =>
        this.limit(async () => {
          const k = keys[i];
          try {
            results[i] = await this.store.getEntity(
              { table: k.table, partitionKey: k.partitionKey, rowKey: k.rowKey },
              { ...this.callOptions, select: k.select },
            );
          } catch (e) {
            results[i] = e as Error;
          }
        }),
      ),
    );
    return results;
  }

  private rangeBatch(queries: readonly RangeQuery[]): Promise<Array<RangeResult | Error>> {
    return Promise.all(
      queries.map((q) =>
        this.limit(async () => {
          try {
            const result = await this.store.queryRange(q, this.callOptions);
            for (const entity of result.entities) {
              this.point.prime({ table: q.table, partitionKey: entity.partitionKey, rowKey: entity.rowKey }, entity);
            }
            return result;
          } catch (e) {
            return e as Error;
          }
        }),
      ),
    );
  }
}
