/**
 * What one load step knows of the store (load-plan.ts): each partition it writes to, read whole once before it
 * writes there, and single entities it looks up (references, summary holders), each read once — so that the plan
 * can skip what is stored already, find what a rewritten entity derived before, and refuse a reference to nothing
 * without a read per row. Reads whole partitions, and past a few partitions of a table the whole table, on
 * purpose: the loader is a bulk tool, never a request path.
 */
import { ENTITY_TYPE_PROPERTY } from '../model/types';
import type { EntityAddress, StoredEntity, TypedValue } from '../storage/storage-types';
import { addressKey } from '../storage/address-key';

/** What the loader reads from storage. */
export interface LoadReads {
  /** Every entity of a partition (a range query over the whole partition, all pages). */
  partition(table: string, partitionKey: string): Promise<StoredEntity[]>;
  /** Every entity of a table (a scan, all pages). */
  table(table: string): Promise<StoredEntity[]>;
  /** One entity, or null (a point query). */
  entity(address: EntityAddress): Promise<StoredEntity | null>;
}

/**
 * Whether stored properties are exactly `properties` (typed as written; null ones absent), no more, no fewer.
 * Int32 and Double are both numbers when read: a stored Int32 5 equals a Double 5 here.
 */
export function storedAs(properties: Record<string, TypedValue | null>, stored: Record<string, unknown>): boolean {
  const given = Object.entries(properties).filter(([, v]) => v !== null) as Array<[string, TypedValue]>;
  if (given.length !== Object.keys(stored).filter((k) => stored[k] !== undefined && stored[k] !== null).length) return false;
  return given.every(([k, v]) => {
    const s = stored[k];
    if (v.type === 'DateTime') return s instanceof Date && s.getTime() === (v.value as Date).getTime();
    if (v.type === 'Binary') return false;
    return s === v.value;
  });
}

/**
 * Partitions of one table a step reads one by one before it reads the rest of the table in one scan (partitions).
 * A range query costs about as much as a scan page on a small table (Azurite filters the whole table for either),
 * so a load that touches thousands of small partitions — index and contribution entities — reads each table once
 * instead of once per partition.
 */
export const PARTITIONS_BEFORE_SCAN = 16;

/** One step's cached view of the store. */
export class StepStore {
  private readonly partitions = new Map<string, Promise<Map<string, StoredEntity>>>();
  /** Partitions read one by one, per table; then the table's scan, by PartitionKey. */
  private readonly perTable = new Map<string, number>();
  private readonly scans = new Map<string, Promise<Map<string, Map<string, StoredEntity>>>>();
  private readonly ofType = new Map<string, Promise<Map<string, StoredEntity>>>();
  private readonly entities = new Map<string, Promise<StoredEntity | null>>();

  /** @param written addressKeys of the entities this load wrote (earlier steps and this one): known to exist */
  constructor(
    private readonly reads: LoadReads,
    private readonly written: ReadonlySet<string>,
  ) {}

  /**
   * What a partition held before this step wrote to it, by RowKey: its own range query for the first
   * PARTITIONS_BEFORE_SCAN partitions of a table, then one scan of the table for every further one. The scan is
   * read before the step writes to any partition it answers for (the step reads a partition before writing there);
   * a partition read on its own keeps that read.
   */
  partition(table: string, partitionKey: string): Promise<Map<string, StoredEntity>> {
    const key = `${table}\u0000${partitionKey}`;
    let state = this.partitions.get(key);
    if (!state) {
      const alone = this.perTable.get(table) ?? 0;
      if (alone < PARTITIONS_BEFORE_SCAN) {
        this.perTable.set(table, alone + 1);
        state = this.reads.partition(table, partitionKey).then((all) => new Map(all.map((e) => [e.rowKey, e])));
      } else {
        state = this.scan(table).then((byPartition) => byPartition.get(partitionKey) ?? new Map());
      }
      this.partitions.set(key, state);
    }
    return state;
  }

  /** The table as one scan found it, by PartitionKey and RowKey (scanned once per step). */
  private scan(table: string): Promise<Map<string, Map<string, StoredEntity>>> {
    let scanned = this.scans.get(table);
    if (!scanned) {
      scanned = this.reads.table(table).then((all) => {
        const byPartition = new Map<string, Map<string, StoredEntity>>();
        for (const e of all) {
          let rows = byPartition.get(e.partitionKey);
          if (!rows) byPartition.set(e.partitionKey, (rows = new Map()));
          rows.set(e.rowKey, e);
        }
        return byPartition;
      });
      this.scans.set(table, scanned);
    }
    return scanned;
  }

  /** The entities of one `EntityType` in a partition, by RowKey. */
  ofEntityType(table: string, partitionKey: string, entityType: string): Promise<Map<string, StoredEntity>> {
    const key = `${table}\u0000${partitionKey}\u0000${entityType}`;
    let mine = this.ofType.get(key);
    if (!mine) {
      mine = this.partition(table, partitionKey).then((all) => new Map([...all].filter(([, e]) => e.properties[ENTITY_TYPE_PROPERTY] === entityType)));
      this.ofType.set(key, mine);
    }
    return mine;
  }

  /** Whether what was stored at the address before this step is exactly `properties`. */
  async storedAs(table: string, entity: { partitionKey: string; rowKey: string; properties: Record<string, TypedValue | null> }): Promise<boolean> {
    const stored = (await this.partition(table, entity.partitionKey)).get(entity.rowKey);
    return stored !== undefined && storedAs(entity.properties, stored.properties);
  }

  /** What is stored at an address (one point query, once per step). */
  read(address: EntityAddress): Promise<StoredEntity | null> {
    const key = addressKey(address);
    let read = this.entities.get(key);
    if (!read) this.entities.set(key, (read = this.reads.entity(address)));
    return read;
  }

  /** Whether an entity of `entityType` is at the address: written by this load, or stored. */
  async exists(address: EntityAddress, entityType: string): Promise<boolean> {
    if (this.written.has(addressKey(address))) return true;
    const found = await this.read(address);
    return found !== null && found.properties[ENTITY_TYPE_PROPERTY] === entityType;
  }
}
