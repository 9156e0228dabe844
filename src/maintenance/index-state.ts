/**
 * The derived state of indexes, read in full and compared with what the primary entities derive — the shared
 * core of `verify` and `rebuild-index` (docs/architecture.md, "Maintenance"; the guide's "Index Entities Pattern",
 * "Intra-partition secondary index pattern", "Inter-partition secondary index pattern").
 *
 * It reads whole tables on purpose: every index entity of the index (the index's table scanned, kept by the
 * index's EntityType, as a table may hold other types) and every primary entity of the type (its table scanned,
 * kept by the type's EntityType). Each table is scanned once however many indexes it serves. Index entities are
 * read first and held in memory, one map per index; each primary's expected index entity (`indexWrites` of its
 * values; none for a sparse index whose key field is null) is then compared as its page arrives.
 *
 * Index tables come first on purpose: an index entity the worker writes after the index scan is never seen, so
 * a rebuild cannot mistake it for an orphan of the older primary it read; one seen in the scan and rewritten
 * since has a new ETag, so the rebuild's If-Match leaves it alone. An intra-partition index shares its primaries'
 * table, read once: there a primary may be read before a write moves its index entity and the moved one read after,
 * so a rebuild reads an orphan's primary again before deleting it, and settles what it wrote for a primary changed
 * since (src/maintenance/index-rebuild.ts).
 */
import { ErrorCode, isTablegraphError, TablegraphError } from '../errors';
import { addressOfWrite, indexWrites, valuesOf, type TableWrite } from '../model/entity-codec';
import { ENTITY_TYPE_PROPERTY, type EntityModel, type IndexModel, type Model } from '../model/types';
import type { TableStore } from '../storage/table-store';
import type { EntityAddress, StorageObserver, StoredEntity, TypedValue } from '../storage/storage-types';
import { addressKey } from '../storage/address-key';
import { primaryOf } from '../write/index-settle';

/** How one index compares with what its primary entities derive. Addresses are index entity addresses. */
export interface IndexDiff {
  /** The entity type, e.g. `Order`. */
  type: string;
  /** The index name, e.g. `byLastName`. */
  index: string;
  scope: IndexModel['scope'];
  table: string;
  /** The EntityType value of the index's entities, e.g. `Order.byCustomer`. */
  entityType: string;
  /** Primary entities read (entities). */
  primaries: number;
  /** Index entities the primaries derive (entities; a sparse index derives fewer than `primaries`). */
  expected: number;
  /** Index entities of this index found in its table (entities). */
  found: number;
  /** Distinct addresses compared: expected ∪ found (entities). */
  checked: number;
  /**
   * Expected index entities that do not exist. An address held by an entity of another EntityType counts as
   * missing too (a table shared by types whose keys collide): rebuild-index then skips it (409), never overwrites.
   */
  missing: EntityAddress[];
  /** Index entities whose properties differ from the expected ones, with the differing property names. */
  different: Array<EntityAddress & { properties: string[] }>;
  /** Index entities of this index that no primary derives. */
  orphaned: EntityAddress[];
  /** Addresses that two or more primaries derive (a unique index violated): never repaired automatically. */
  duplicates: Array<EntityAddress & { primaries: EntityAddress[] }>;
  /** Primary entities whose index entity cannot be computed (a value that cannot be part of a key). */
  underivable: Array<{ primary: EntityAddress; message: string }>;
}

/** An IndexDiff plus what a rebuild needs to repair it. */
export interface IndexState {
  diff: IndexDiff;
  /**
   * Missing (no `etag`) and different (`etag` = the ETag read) index entities, as they should be, with the primary
   * that derives each and its ETag as read (a rebuild settles a primary written since: src/write/index-settle.ts).
   */
  repairs: Array<{ write: TableWrite; etag?: string; primary: EntityAddress; primaryEtag: string }>;
  /**
   * The orphaned index entities with the ETag read, for a conditional delete, and the primary each points at (its key
   * fields are projected onto it): a rebuild reads it again before the delete (see `derivesNow` in index-rebuild.ts).
   */
  orphans: Array<EntityAddress & { etag: string; primary?: EntityAddress }>;
}

/** Progress of the scans: the table being read and the entities read so far, all tables together. */
export interface ScanProgress {
  table: string;
  scanned: number;
}

export interface ReadIndexStateOptions {
  store: TableStore;
  /** The indexes to read (of one or several entity types, any scope). */
  indexes: IndexModel[];
  /** Called after each page of a scan (at most 1000 entities). */
  onProgress?(p: ScanProgress): void;
  observer?: StorageObserver;
}

/**
 * The entity type and index `model` names `type` and `index`.
 * @throws TablegraphError BAD_USER_INPUT for an unknown type or index, listing the known ones
 */
export function resolveIndex(model: Model, type: string, index: string): IndexModel {
  const entity = resolveEntity(model, type);
  const found = entity.indexes.get(index);
  if (!found) {
    const known = [...entity.indexes.keys()].join(', ') || '(none)';
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${type} has no index '${index}'. Its indexes: ${known}.`, { type, index });
  }
  return found;
}

/** @throws TablegraphError BAD_USER_INPUT for an unknown entity type, listing the known ones */
export function resolveEntity(model: Model, type: string): EntityModel {
  const entity = model.entities.get(type);
  if (!entity) {
    const known = [...model.entities.keys()].join(', ');
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `Unknown entity type '${type}'. Entity types: ${known}.`, { type });
  }
  return entity;
}

/** Problems in a diff (entities): missing + different + orphaned + duplicates + underivable. */
export function problemCount(d: IndexDiff): number {
  return d.missing.length + d.different.length + d.orphaned.length + d.duplicates.length + d.underivable.length;
}

/** One index: its entities as found (until a primary claims them), and the primaries that derived each address. */
class Tracker {
  /** Index entities found and not derived by any primary so far. */
  readonly unclaimed = new Map<string, StoredEntity>();
  /** Every address derived so far → the primaries deriving it (more than one: a duplicate). */
  readonly derivedBy = new Map<string, EntityAddress[]>();
  readonly state: IndexState;

  constructor(readonly index: IndexModel) {
    const { entity, layout, scope, entityType, name } = index;
    this.state = {
      diff: {
        type: entity.name,
        index: name,
        scope,
        table: layout.table,
        entityType,
        primaries: 0,
        expected: 0,
        found: 0,
        checked: 0,
        missing: [],
        different: [],
        orphaned: [],
        duplicates: [],
        underivable: [],
      },
      repairs: [],
      orphans: [],
    };
  }

  found(actual: StoredEntity): void {
    this.state.diff.found++;
    this.unclaimed.set(addressKey({ table: this.index.layout.table, ...keysOf(actual) }), actual);
  }

  derive(primary: StoredEntity, table: string): void {
    const diff = this.state.diff;
    const primaryAt = { table, ...keysOf(primary) };
    diff.primaries++;
    let writes: TableWrite[];
    try {
      writes = indexWrites(this.index, valuesOf(this.index.entity, primary.properties));
    } catch (e) {
      diff.underivable.push({ primary: primaryAt, message: e instanceof Error ? e.message : String(e) });
      return;
    }
    // None when sparse (a null key field, an empty list); one per element over a list.
    for (const write of writes) this.expect(write, primary, primaryAt);
  }

  /** One index entity `primary` derives: claimed, or missing, or different from the one found. */
  private expect(write: TableWrite, primary: StoredEntity, primaryAt: EntityAddress): void {
    const diff = this.state.diff;
    diff.expected++;
    const address = addressOfWrite(write);
    const key = addressKey(address);
    const earlier = this.derivedBy.get(key);
    if (earlier) {
      earlier.push(primaryAt); // a duplicate: reported as such in finish(), never repaired
      return;
    }
    this.derivedBy.set(key, [primaryAt]);
    const actual = this.unclaimed.get(key);
    this.unclaimed.delete(key);
    if (!actual) {
      diff.missing.push(address);
      this.state.repairs.push({ write, primary: primaryAt, primaryEtag: primary.etag });
      return;
    }
    const properties = differingProperties(write.entity.properties, actual.properties);
    if (properties.length === 0) return;
    diff.different.push({ ...address, properties });
    this.state.repairs.push({ write, etag: actual.etag, primary: primaryAt, primaryEtag: primary.etag });
  }

  finish(): IndexState {
    const { diff } = this.state;
    for (const actual of this.unclaimed.values()) {
      const address = { table: this.index.layout.table, ...keysOf(actual) };
      diff.orphaned.push(address);
      const primary = primaryOf(this.index.entity, actual);
      this.state.orphans.push({ ...address, etag: actual.etag, ...(primary.table !== '?' && { primary }) });
    }
    for (const [key, primaries] of this.derivedBy) {
      if (primaries.length < 2) continue;
      const [table, partitionKey, rowKey] = key.split('\u0000');
      diff.duplicates.push({ table, partitionKey, rowKey, primaries });
    }
    if (diff.duplicates.length > 0) {
      // Which primary should own a duplicated address is not for a rebuild to guess: report it only as such.
      const single = (a: EntityAddress) => this.derivedBy.get(addressKey(a))!.length < 2;
      diff.missing = diff.missing.filter(single);
      diff.different = diff.different.filter(single);
      this.state.repairs = this.state.repairs.filter((r) => single(addressOfWrite(r.write)));
    }
    diff.checked = this.derivedBy.size + diff.orphaned.length;
    this.unclaimed.clear();
    return this.state;
  }
}

function keysOf(e: StoredEntity): { partitionKey: string; rowKey: string } {
  return { partitionKey: e.partitionKey, rowKey: e.rowKey };
}

/** Whether a decoded stored value equals a typed expected value (DateTime by instant, Binary by bytes). */
function sameValue(expected: TypedValue, actual: unknown): boolean {
  const v = expected.value;
  switch (expected.type) {
    case 'DateTime':
      return actual instanceof Date && actual.getTime() === (v as Date).getTime();
    case 'Binary':
      return actual instanceof Uint8Array && Buffer.compare(Buffer.from(actual), Buffer.from(v as Uint8Array)) === 0;
    case 'Int32':
    case 'Double':
      return typeof actual === 'number' && (actual === v || (Number.isNaN(actual) && Number.isNaN(v as number)));
    default:
      return actual === v;
  }
}

/**
 * Names of the properties in which a stored entity differs from the expected one: values compared after
 * decoding; a property on one side only differs. Timestamp and ETag are not properties here (edm.ts drops them).
 */
export function differingProperties(expected: Record<string, TypedValue | null>, actual: Record<string, unknown>): string[] {
  const names = new Set([...Object.keys(expected), ...Object.keys(actual)]);
  const differing: string[] = [];
  for (const name of names) {
    const want = expected[name] ?? null;
    const got = actual[name] ?? null;
    if (want === null && got === null) continue;
    if (want === null || got === null || !sameValue(want, got)) differing.push(name);
  }
  return differing.sort();
}

/** Pages of a whole-table scan; a table that does not exist yet reads as empty (a new index's table). */
async function* scanTable(store: TableStore, table: string, observer?: StorageObserver): AsyncIterable<StoredEntity[]> {
  try {
    yield* store.scan(table, { observer });
  } catch (e) {
    if (!isTablegraphError(e, ErrorCode.NOT_FOUND)) throw e;
  }
}

/**
 * Reads the index entities and the primary entities of `indexes` and compares them (see the file comment).
 * Tables holding only index entities are scanned first; a primary is compared once its index's table has been
 * read in full (until then it waits in memory). Returns one IndexState per index, in the order given. The
 * result is a snapshot of the moment each table was read: writes made meanwhile may show up as differences.
 * @throws TablegraphError from the store (STORAGE_UNAVAILABLE, CONFIG_INVALID, …); a missing table reads as empty
 */
export async function readIndexState(opts: ReadIndexStateOptions): Promise<IndexState[]> {
  const { store, observer } = opts;
  const trackers = opts.indexes.map((i) => new Tracker(i));
  const primaryTables = new Set(trackers.map((t) => t.index.entity.layout.table));
  const indexTables = new Set(trackers.map((t) => t.index.layout.table).filter((t) => !primaryTables.has(t)));
  // `table \0 EntityType` → the trackers an entity of that type in that table matters to.
  const derivers = groupBy(trackers, (t) => `${t.index.entity.layout.table}\u0000${t.index.entity.entityType}`);
  const finders = groupBy(trackers, (t) => `${t.index.layout.table}\u0000${t.index.entityType}`);
  const scannedTables = new Set<string>();
  const waiting = new Map<Tracker, Array<{ entity: StoredEntity; table: string }>>();
  let scanned = 0;

  for (const table of [...indexTables, ...primaryTables]) {
    for await (const page of scanTable(store, table, observer)) {
      for (const entity of page) {
        const key = `${table}\u0000${String(entity.properties[ENTITY_TYPE_PROPERTY])}`;
        for (const t of finders.get(key) ?? []) t.found(entity);
        for (const t of derivers.get(key) ?? []) {
          if (scannedTables.has(t.index.layout.table)) t.derive(entity, table);
          else getOrAdd(waiting, t).push({ entity, table });
        }
      }
      scanned += page.length;
      opts.onProgress?.({ table, scanned });
    }
    scannedTables.add(table);
    for (const [t, primaries] of waiting) {
      if (!scannedTables.has(t.index.layout.table)) continue;
      for (const p of primaries) t.derive(p.entity, p.table);
      waiting.delete(t);
    }
  }
  return trackers.map((t) => t.finish());
}

function getOrAdd<K, V>(map: Map<K, V[]>, key: K): V[] {
  let list = map.get(key);
  if (!list) map.set(key, (list = []));
  return list;
}

function groupBy<T>(items: T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) getOrAdd(groups, key(item)).push(item);
  return groups;
}
