/**
 * What one GraphQL request cost in storage: the numbers every response carries in `extensions.cost`, so that
 * tests, benchmarks and users see that the access paths hold (no scan, a bounded number of round trips).
 */
import type { StorageCallRecord, StorageObserver } from '../storage/storage-types';

/** The `extensions.cost` object. Counts are storage calls or entities; `storageMs` is wall time in ms. */
export interface StorageCost {
  /** Point queries sent (one entity each). */
  pointQueries: number;
  /** Range queries sent (one PartitionKey, a RowKey range); a query that followed continuation tokens counts once. */
  rangeQueries: number;
  /** Partition scans (PartitionKey plus a filter on other properties): always 0 on a request path. */
  partitionScans: number;
  /** Table scans: always 0 on a request path. */
  tableScans: number;
  /** Entity-group transactions and single-entity writes sent (the request's data, its indexes, summaries, messages). */
  writes: number;
  /**
   * Marks in continuous backup's capture journal written before an EGT with change entities: at most one per
   * partition written and 10-s bucket in a process, 0 when capture is off (docs/backup.md). Not in `writes`; in
   * `roundTrips` and the bill.
   */
  captureMarks: number;
  /** HTTP round trips to the Table service, continuation pages included. */
  roundTrips: number;
  /** Entities returned by all reads. */
  entitiesRead: number;
  /** Sequential steps of storage calls: a new wave starts when a call begins while none is in flight. */
  waves: number;
  /** Wall time in ms during which at least one storage call was in flight. */
  storageMs: number;
  /**
   * Billable transactions on Azure Table storage: every REST request to the service is one, an EGT included (one
   * request, however many entities) and each continuation page. Equal to `roundTrips`, named for the bill.
   */
  azureTransactions: number;
  /**
   * An estimate of the request units the same calls take on the Azure Cosmos DB Table API, for entities of at most
   * 1 KB: 1 RU per entity read (at least 1 per read round trip, a miss included), 5 RU per entity written. Larger
   * entities cost proportionally more. Measure with the service's own `x-ms-request-charge` before sizing.
   */
  cosmosRequestUnits: number;
}

/** Request units per entity read (≤ 1 KB) on the Cosmos DB Table API: the service's figure for a point read. */
export const RU_PER_ENTITY_READ = 1;
/** Request units per entity written (≤ 1 KB) on the Cosmos DB Table API: about five times a read. */
export const RU_PER_ENTITY_WRITTEN = 5;

/** A request-scoped StorageObserver that adds up StorageCost. */
export class CostTracker implements StorageObserver {
  private readonly cost: StorageCost = {
    pointQueries: 0,
    rangeQueries: 0,
    partitionScans: 0,
    tableScans: 0,
    writes: 0,
    captureMarks: 0,
    roundTrips: 0,
    entitiesRead: 0,
    waves: 0,
    storageMs: 0,
    azureTransactions: 0,
    cosmosRequestUnits: 0,
  };
  private inFlight = 0;
  private busySince = 0;

  onCallStart(): void {
    if (this.inFlight === 0) {
      this.cost.waves += 1;
      this.busySince = performance.now();
    }
    this.inFlight += 1;
  }

  onCall(record: StorageCallRecord): void {
    switch (record.kind) {
      case 'pointQuery':
        this.cost.pointQueries += 1;
        this.cost.entitiesRead += record.entities;
        break;
      case 'rangeQuery':
        this.cost.rangeQueries += 1;
        this.cost.entitiesRead += record.entities;
        break;
      case 'partitionScan':
        this.cost.partitionScans += 1;
        this.cost.entitiesRead += record.entities;
        break;
      case 'tableScan':
        this.cost.tableScans += 1;
        this.cost.entitiesRead += record.entities;
        break;
      default:
        if (record.captureMark) this.cost.captureMarks += 1;
        else this.cost.writes += 1;
    }
    this.cost.roundTrips += record.roundTrips;
    this.cost.azureTransactions += record.roundTrips;
    this.cost.cosmosRequestUnits +=
      record.kind === 'transaction' || record.kind === 'write'
        ? RU_PER_ENTITY_WRITTEN * record.entities
        : RU_PER_ENTITY_READ * Math.max(record.entities, record.roundTrips);
    if (this.inFlight > 0) {
      this.inFlight -= 1;
      if (this.inFlight === 0) this.cost.storageMs += performance.now() - this.busySince;
    }
  }

  /** A copy of the totals so far, `storageMs` rounded to 0.1 ms. */
  snapshot(): StorageCost {
    return { ...this.cost, storageMs: Math.round(this.cost.storageMs * 10) / 10 };
  }
}
