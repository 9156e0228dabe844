/**
 * What one GraphQL request cost in storage: the numbers every response carries in `extensions.cost`, so that
 * tests, benchmarks and users see that the access paths hold (no scan, a bounded number of round trips).
 */
import type { StorageCallRecord, StorageObserver } from '../storage/types';

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
  /** Entity-group transactions and single-entity writes sent. */
  writes: number;
  /** HTTP round trips to the Table service, continuation pages included. */
  roundTrips: number;
  /** Entities returned by all reads. */
  entitiesRead: number;
  /** Sequential steps of storage calls: a new wave starts when a call begins while none is in flight. */
  waves: number;
  /** Wall time in ms during which at least one storage call was in flight. */
  storageMs: number;
}

/** A request-scoped StorageObserver that adds up StorageCost. */
export class CostTracker implements StorageObserver {
  private readonly cost: StorageCost = {
    pointQueries: 0,
    rangeQueries: 0,
    partitionScans: 0,
    tableScans: 0,
    writes: 0,
    roundTrips: 0,
    entitiesRead: 0,
    waves: 0,
    storageMs: 0,
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
        this.cost.writes += 1;
    }
    this.cost.roundTrips += record.roundTrips;
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
