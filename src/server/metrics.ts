/**
 * Prometheus metrics at `GET /metrics` (prom-client, text exposition format), one registry per server:
 *
 * - `tablegraph_requests_total{operation,code}`: GraphQL requests by operation name and outcome (`OK`, or the first
 *   error's `extensions.code`, refusals at the door included). The name is that of the operation the document
 *   holds (`anonymous` without one, or when the request named no operation of its document); the first
 *   `maxOperationLabels` names have series of their own, later ones count as `other`;
 * - `tablegraph_request_duration_seconds{operation}`: their duration (s), from the first byte read to the last sent;
 * - `tablegraph_storage_calls_total{kind}`: storage calls made by requests, by kind (`pointQuery`, `rangeQuery`,
 *   `partitionScan`, `tableScan`, `write`), and `tablegraph_storage_round_trips_total`;
 * - `tablegraph_entities_read_total`: entities returned by requests' reads;
 * - `tablegraph_azure_transactions_total{operation}` and `tablegraph_cosmos_request_units_total{operation}`: what
 *   requests cost, by operation name (labelled as above: a trusted document's operation is named by its document),
 *   the sums of the `azureTransactions` and `cosmosRequestUnits` of their `extensions.cost` (src/read/cost.ts) —
 *   `topk(5, sum by (operation) (rate(tablegraph_azure_transactions_total[1h])))` finds the operations that cost most;
 * - under `@tenancy`, `tablegraph_tenant_azure_transactions{tenant}` and `tablegraph_tenant_cosmos_request_units{tenant}`:
 *   each tenant's cost since start, the costliest `maxTenantLabels` named, the rest as `other` (tenant-cost-metrics.ts);
 * - `tablegraph_storage_duration_seconds{operation}`: the time of every storage call this process makes (requests,
 *   workers, builds, backup), SDK retries included, by kind: `point`, `range`, `scan`, `egt`, `write`, `queue`;
 * - `tablegraph_fanout_queue_depth`, `tablegraph_fanout_poison_depth` (messages, approximate) and
 *   `tablegraph_fanout_oldest_message_age_seconds`, read from the queue service at each scrape;
 * - `tablegraph_worker_lag_seconds{quantile}` and `tablegraph_worker_messages_total{outcome}`: the in-process
 *   message worker's enqueue-to-reconcile lag over its recent window and its message counts;
 * - `tablegraph_subscriptions{of}` (subscribers, partitions watched), `tablegraph_subscription_calls_total{kind}`
 *   (change log polls, changed entities read, failed polls) and `tablegraph_subscription_events_total`;
 * - prom-client's default process metrics (`process_cpu_seconds_total`, `process_resident_memory_bytes`, event
 *   loop lag, …), prefixed `tablegraph_`.
 */
import client from 'prom-client';
import type { LatestPass } from '../backup/change-format';
import type { StorageCost } from '../read/cost';
import type { CallTimer } from '../storage/storage-types';
import type { QueueStore } from '../storage/queue-store';
import type { QueueWorker } from '../worker/queue-worker';
import type { ChangePollerStats } from '../read/change-poller';
import type { PathRecord } from '../evolution/catalogue-records';
import { TenantCostMetrics } from './tenant-cost-metrics';

const PATH_STATES = ['building', 'ready', 'failed', 'retired'] as const;

/** What the request log hands to the metrics for each finished request. */
export interface RequestOutcome {
  operation: string;
  /** `OK` or the first error's code. */
  code: string;
  durationMs: number;
  cost?: StorageCost;
  /** Under `@tenancy`: the tenant the request acted for. */
  tenant?: string;
}

export interface MetricsDeps {
  /** Tenants named in the per-tenant cost series (tenants; default DEFAULT_TENANT_LABELS): the rest are `other`. */
  maxTenantLabels?: number;
  /**
   * Distinct operation names labelled (names; default DEFAULT_MAX_OPERATION_LABELS): the first ones seen keep their
   * series, every later one counts as `other`, so no client can make the exposition grow without bound.
   */
  maxOperationLabels?: number;
  queues?: QueueStore;
  queueNames?: { queue: string; poison: string };
  worker?: () => QueueWorker | undefined;
  /** The subscriptions' change poller's counters (absent: the schema has no subscription). */
  subscriptions?: () => ChangePollerStats;
  /** The derived access paths' states as the server last read them (absent: no catalogue). */
  paths?: () => PathRecord[];
  /** Continuous backup's latest pass (absent: capture off). */
  backup?: () => Promise<LatestPass | undefined>;
  /** The stores whose every call `tablegraph_storage_duration_seconds` times (absent: none timed). */
  stores?: Array<{ timeCalls(timer: CallTimer): () => void }>;
}

/** Distinct operation names with series of their own, by default; later names count as `other`. */
export const DEFAULT_MAX_OPERATION_LABELS = 100;

export class Metrics {
  readonly registry = new client.Registry();
  private readonly requests: client.Counter<'operation' | 'code'>;
  private readonly duration: client.Histogram<'operation'>;
  private readonly storageCalls: client.Counter<'kind'>;
  private readonly roundTrips: client.Counter;
  private readonly entitiesRead: client.Counter;
  private readonly transactions: client.Counter<'operation'>;
  private readonly requestUnits: client.Counter<'operation'>;
  private readonly untime: Array<() => void> = [];
  private readonly operationLabels = new Set<string>();
  /** The series of each operation (and code) already counted: prom-client finds a series by its labels on every call. */
  private readonly requestSeries = new Map<string, ReturnType<client.Counter<'operation' | 'code'>['labels']>>();
  private readonly durationSeries = new Map<string, ReturnType<client.Histogram<'operation'>['labels']>>();
  private readonly maxOperationLabels: number;
  private readonly tenants: TenantCostMetrics;

  constructor(deps: MetricsDeps = {}) {
    this.maxOperationLabels = deps.maxOperationLabels ?? DEFAULT_MAX_OPERATION_LABELS;
    const registers = [this.registry];
    client.collectDefaultMetrics({ register: this.registry, prefix: 'tablegraph_' });
    this.requests = new client.Counter({
      name: 'tablegraph_requests_total',
      help: 'GraphQL requests by operation name and outcome code',
      labelNames: ['operation', 'code'],
      registers,
    });
    this.duration = new client.Histogram({
      name: 'tablegraph_request_duration_seconds',
      help: 'GraphQL request duration in seconds',
      labelNames: ['operation'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
    this.storageCalls = new client.Counter({
      name: 'tablegraph_storage_calls_total',
      help: 'Storage calls made by GraphQL requests, by kind',
      labelNames: ['kind'],
      registers,
    });
    this.roundTrips = new client.Counter({
      name: 'tablegraph_storage_round_trips_total',
      help: 'HTTP round trips to the Table service made by GraphQL requests',
      registers,
    });
    this.entitiesRead = new client.Counter({ name: 'tablegraph_entities_read_total', help: 'Entities returned by the reads of GraphQL requests', registers });
    this.transactions = new client.Counter({
      name: 'tablegraph_azure_transactions_total',
      help: 'Billable Azure Table storage transactions of GraphQL requests (their extensions.cost.azureTransactions), by operation',
      labelNames: ['operation'],
      registers,
    });
    this.requestUnits = new client.Counter({
      name: 'tablegraph_cosmos_request_units_total',
      help: 'Estimated Cosmos DB Table API request units of GraphQL requests (their extensions.cost.cosmosRequestUnits), by operation',
      labelNames: ['operation'],
      registers,
    });
    this.tenants = new TenantCostMetrics(this.registry, deps.maxTenantLabels);
    if (deps.stores) this.storageTimes(deps.stores);

    if (deps.queues && deps.queueNames) this.queueGauges(deps.queues, deps.queueNames);
    if (deps.paths) this.pathGauges(deps.paths);
    if (deps.subscriptions) this.subscriptionGauges(deps.subscriptions);
    if (deps.worker) this.workerGauges(deps.worker);
    if (deps.backup) this.backupGauges(deps.backup);
  }

  /** `tablegraph_storage_duration_seconds{operation}`: every call of the stores, by kind of operation. */
  private storageTimes(stores: NonNullable<MetricsDeps['stores']>): void {
    const histogram = new client.Histogram({
      name: 'tablegraph_storage_duration_seconds',
      help: 'Storage call duration in seconds (SDK retries included), by operation: point, range, scan, egt, write, queue',
      labelNames: ['operation'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [this.registry],
    });
    const series = new Map<string, client.Histogram.Internal<'operation'>>();
    const timer: CallTimer = (operation, seconds) => {
      let s = series.get(operation);
      if (!s) series.set(operation, (s = histogram.labels({ operation })));
      s.observe(seconds);
    };
    for (const store of new Set(stores)) this.untime.push(store.timeCalls(timer));
  }

  /** Stops timing the stores' calls (the server stops). */
  close(): void {
    for (const stop of this.untime.splice(0)) stop();
  }

  /**
   * Continuous backup: how far behind it is (now − the latest restorable time, s: what a loss now would lose at most),
   * and the latest pass's lag from a write's time to its durable segment (s; the 99th percentile and the greatest).
   */
  private backupGauges(backup: () => Promise<LatestPass | undefined>): void {
    const registers = [this.registry];
    new client.Gauge({
      name: 'tablegraph_backup_lag_seconds',
      help: 'Seconds since the latest restorable time (the start of the latest complete capture pass); absent before the first pass',
      registers,
      async collect() {
        const latest = await backup().catch(() => undefined);
        if (latest) this.set((Date.now() - Date.parse(latest.startedAt)) / 1000);
      },
    });
    new client.Gauge({
      name: 'tablegraph_backup_capture_lag_seconds',
      help: "The latest capture pass's lag from a write's time to its durable segment, in seconds",
      labelNames: ['quantile'],
      registers,
      async collect() {
        const latest = await backup().catch(() => undefined);
        if (!latest) return;
        this.set({ quantile: '0.99' }, latest.lagP99Ms / 1000);
        this.set({ quantile: '1' }, latest.lagMaxMs / 1000);
      },
    });
    new client.Gauge({
      name: 'tablegraph_backup_rpo_seconds',
      help: "The RPO the latest writes met (the last capture pass that counted any): from a write's commit to its restorable time, in seconds",
      labelNames: ['quantile'],
      registers,
      async collect() {
        const rpo = (await backup().catch(() => undefined))?.rpo;
        if (!rpo) return;
        this.set({ quantile: '0.99' }, rpo.p99Ms / 1000);
        this.set({ quantile: '1' }, rpo.maxMs / 1000);
      },
    });
  }

  /** The work queue's depth, its poison queue's, and the age of its oldest message, read from the queue service when scraped. */
  private queueGauges(queues: QueueStore, queueNames: { queue: string; poison: string }): void {
    const registers = [this.registry];
    new client.Gauge({
      name: 'tablegraph_fanout_queue_depth',
      help: 'Messages in the work queue (approximate, as the queue service reports it)',
      registers,
      async collect() {
        this.set(await queues.approximateDepth(queueNames.queue));
      },
    });
    new client.Gauge({
      name: 'tablegraph_fanout_poison_depth',
      help: "Messages in the work queue's poison queue (approximate)",
      registers,
      async collect() {
        this.set(await queues.approximateDepth(queueNames.poison));
      },
    });
    new client.Gauge({
      name: 'tablegraph_fanout_oldest_message_age_seconds',
      help: 'Age of the message at the front of the work queue in seconds (0 when empty)',
      registers,
      async collect() {
        this.set((await queues.oldestMessageAgeMs(queueNames.queue)) / 1000);
      },
    });
  }

  /** Subscriptions served, their storage calls and the events sent, from the change poller's counters. */
  private subscriptionGauges(subscriptions: () => ChangePollerStats): void {
    const registers = [this.registry];
    new client.Gauge({
      name: 'tablegraph_subscriptions',
      help: 'Subscriptions this server serves now, and the partitions they watch',
      labelNames: ['of'],
      registers,
      collect() {
        const s = subscriptions();
        this.set({ of: 'subscribers' }, s.listeners);
        this.set({ of: 'partitions' }, s.partitions);
      },
    });
    new client.Gauge({
      name: 'tablegraph_subscription_calls_total',
      help: 'Storage calls of subscriptions: change log range queries (poll), changed entities read (read), failed polls (failed)',
      labelNames: ['kind'],
      registers,
      collect() {
        const s = subscriptions();
        this.set({ kind: 'poll' }, s.polls);
        this.set({ kind: 'read' }, s.reads);
        this.set({ kind: 'failed' }, s.failures);
      },
    });
    new client.Gauge({
      name: 'tablegraph_subscription_events_total',
      help: 'Changes sent to subscribers, one per subscriber that got it',
      registers,
      collect() {
        this.set(subscriptions().delivered);
      },
    });
  }

  /** The in-process worker's lag (s) and its messages by outcome. */
  private workerGauges(worker: () => QueueWorker | undefined): void {
    const registers = [this.registry];
    new client.Gauge({
      name: 'tablegraph_worker_lag_seconds',
      help: "The in-process message worker's lag from enqueue to reconcile over its recent window, in seconds",
      labelNames: ['quantile'],
      registers,
      collect() {
        const lag = worker()?.stats().lag;
        if (!lag) return;
        this.set({ quantile: '0.5' }, lag.p50Ms / 1000);
        this.set({ quantile: '0.99' }, lag.p99Ms / 1000);
        this.set({ quantile: '1' }, lag.maxMs / 1000);
      },
    });
    new client.Gauge({
      name: 'tablegraph_worker_messages_total',
      help: 'Messages the in-process message worker handled, failed (to be retried), retried and sent to the poison queue',
      labelNames: ['outcome'],
      registers,
      collect() {
        const s = worker()?.stats();
        if (!s) return;
        for (const outcome of ['handled', 'failed', 'retried', 'poisoned'] as const) this.set({ outcome }, s[outcome]);
      },
    });
  }

  /**
   * The label of an operation name: the name itself while fewer than maxOperationLabels names have series (and it
   * is a GraphQL name of at most 64 characters), `invalid` for what is no such name, `other` past the bound.
   */
  private operationLabel(name: string): string {
    if (!/^[A-Za-z_][A-Za-z0-9_]{0,63}$/.test(name)) return 'invalid';
    if (this.operationLabels.has(name)) return name;
    if (this.operationLabels.size >= this.maxOperationLabels) return 'other';
    this.operationLabels.add(name);
    return name;
  }

  /** Counts one finished GraphQL request. */
  observe(o: RequestOutcome): void {
    const operation = this.operationLabel(o.operation);
    const key = `${operation}\u0000${o.code}`;
    let requests = this.requestSeries.get(key);
    if (!requests) this.requestSeries.set(key, (requests = this.requests.labels({ operation, code: o.code })));
    requests.inc();
    let duration = this.durationSeries.get(operation);
    if (!duration) this.durationSeries.set(operation, (duration = this.duration.labels({ operation })));
    duration.observe(o.durationMs / 1000);
    const c = o.cost;
    if (!c) return;
    const kinds: Array<[string, number]> = [
      ['pointQuery', c.pointQueries],
      ['rangeQuery', c.rangeQueries],
      ['partitionScan', c.partitionScans],
      ['tableScan', c.tableScans],
      ['write', c.writes],
    ];
    for (const [kind, n] of kinds) if (n > 0) this.storageCalls.inc({ kind }, n);
    if (c.roundTrips > 0) this.roundTrips.inc(c.roundTrips);
    if (c.entitiesRead > 0) this.entitiesRead.inc(c.entitiesRead);
    if (c.azureTransactions > 0) this.transactions.inc({ operation }, c.azureTransactions);
    if (c.cosmosRequestUnits > 0) this.requestUnits.inc({ operation }, c.cosmosRequestUnits);
    if (o.tenant !== undefined) this.tenants.add(o.tenant, c);
  }

  /**
   * `tablegraph_access_path_state{path,state}` (1 for the path's state, 0 for the others) and
   * `tablegraph_access_path_build_entities{path,kind}` (a build's entities read and written so far): every derived
   * access path after a schema change (docs/schema-changes.md).
   */
  private pathGauges(paths: () => PathRecord[]): void {
    const registers = [this.registry];
    new client.Gauge({
      name: 'tablegraph_access_path_state',
      help: 'Derived access paths by state (building, ready, failed, retired): 1 for the current state',
      labelNames: ['path', 'state'],
      registers,
      collect() {
        this.reset();
        for (const p of paths()) for (const state of PATH_STATES) this.set({ path: p.id, state }, p.state === state ? 1 : 0);
      },
    });
    new client.Gauge({
      name: 'tablegraph_access_path_build_entities',
      help: "A derived access path's build: entities read and written so far",
      labelNames: ['path', 'kind'],
      registers,
      collect() {
        this.reset();
        for (const p of paths()) {
          this.set({ path: p.id, kind: 'read' }, p.read);
          this.set({ path: p.id, kind: 'written' }, p.written);
        }
      },
    });
  }

  /** The exposition text and its content type. */
  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
