/**
 * Building an index online from the stored entities, one page of the entity type's table at a time (the guide's
 * "Index Entities Pattern", "Intra-partition secondary index pattern", "Inter-partition secondary index pattern";
 * docs/schema-changes.md). While it runs, the servers of the new schema keep the index for every write they make;
 * the build must never undo one of those writes:
 *
 * 1. A page of primaries is read (one call, up to 1000 entities of the type: a filter on EntityType the service
 *    applies, so entities of other types sharing the table, index entities included, are not read; only what the
 *    index entity is made of, $select), and each one's index entity derived. The next page's read starts then, so
 *    that it runs while this page is written.
 * 2. Each is *inserted*, in EGTs per partition: an index entity that exists already was written by a write made
 *    since the read (it is newer), and is left alone (`skipped`). For a unique index, one that points at another
 *    entity is a value held twice: reported with both entities' keys, never overwritten.
 * 3. The page is read again (the same filtered call from the same continuation token, its ETags only) — left to the
 *    caller (`settle`), who runs it beside the next page's inserts: a primary
 *    written between the two reads may have had its old index entity removed by its writer before step 2 inserted
 *    it again. Each such primary is settled on its own — its current
 *    state read, the build's own insert deleted (If-Match on the ETag the insert returned) when that state no longer
 *    derives it, the current index entity inserted — until its state stays the same over one pass.
 *
 * A page redone after a kill inserts nothing twice (inserts of existing entities are skipped); what a killed step
 * may leave (an insert of a state changed meanwhile, not settled) is for the repair pass the runner then ends with.
 */
import pLimit from 'p-limit';
import { ErrorCode, isTablegraphError } from '../errors';
import { indexWrites, valuesOf, type TableWrite } from '../model/entity-codec';
import { ENTITY_TYPE_PROPERTY, type EntityModel, type IndexModel } from '../model/types';
import { addressKey } from '../storage/address-key';
import type { TableStore } from '../storage/table-store';
import type { EntityAddress, StorageObserver, StoredEntity } from '../storage/storage-types';
import { planEgtBatches } from '../write/egt-batches';
import { pointsAt } from '../write/reservations';
import { primaryOf, readPrimary, settlePrimary, type HeldTwice } from '../write/index-settle';
import { addressOfWrite } from '../model/entity-codec';

/** What one page of a build did (counts in entities). */
export interface IndexPageResult {
  /** Primaries the page read (entities of the type; a wide entity's parts each count). */
  read: number;
  /** Index entities inserted. */
  written: number;
  /** Index entities left as a newer write made them. */
  skipped: number;
  /** The next page's continuation token; absent after the last page. */
  next?: string;
  /** The next page's first read, started as soon as this page's was done: hand it to the next step. */
  prefetch?: Promise<ScannedPage>;
  /** Unique values held by two entities (unique indexes only): the build must stop. */
  heldTwice: HeldTwice[];
  /** Primaries whose index entity cannot be computed (a value that cannot be part of a key). */
  underivable: Array<{ primary: EntityAddress; message: string }>;
  /**
   * Whether an insert was refused on the SDK's retry of its EGT, whose first attempt may have applied it with its
   * answer lost: the build cannot tell its own inserts there, and must end with a repair pass.
   */
  uncertain: boolean;
  /**
   * Step 3 of the page (see the file comment), left to the caller, who may run it beside the next page's inserts: the
   * page read again, and each primary written between its two reads settled.
   */
  settle(): Promise<SettleResult>;
}

/** What a page's settling found (counts in entities). */
export interface SettleResult {
  /** Primaries written between the page's two reads, settled one by one. */
  settled: number;
  /** Unique values held by two entities, found while settling: the build must stop. */
  heldTwice: HeldTwice[];
}

export interface IndexPageOptions {
  store: TableStore;
  index: IndexModel;
  /** The table being read (the type's table). */
  table: string;
  /** Where the page starts: a continuation token; absent for the first page. */
  token?: string;
  /** The page's first read, already under way (`IndexPageResult.prefetch` of the page before). */
  page?: Promise<ScannedPage>;
  /** EGTs in flight at once (transactions). Default 8. */
  concurrency?: number;
  /** Entities per page (at most 1000, the default). */
  pageSize?: number;
  observer?: StorageObserver;
}

/**
 * Builds the index entities of one page of primaries (see the file comment).
 * @throws TablegraphError STORAGE_UNAVAILABLE, STORAGE_BUSY and others from the store: nothing is lost, and the
 *   page can be built again from the same token
 */
export async function buildIndexPage(opts: IndexPageOptions): Promise<IndexPageResult> {
  const { store, index, table, observer } = opts;
  const page = await (opts.page ?? readIndexPage(store, index, table, opts.token, opts));
  // The next page is read while this one is written: a step costs its writes' time, not its reads' too.
  const prefetch = page.continuationToken ? readIndexPage(store, index, table, page.continuationToken, opts) : undefined;
  prefetch?.catch(() => undefined); // its failure is met, and thrown, by the step that uses it
  const result: Omit<IndexPageResult, 'settle'> = {
    read: page.entities.length,
    written: 0,
    skipped: 0,
    heldTwice: [],
    underivable: [],
    uncertain: false,
    next: page.continuationToken,
    prefetch,
  };
  const primaries = await primariesOf(store, index.entity, table, page.entities, { observer });
  const wanted = deriveAll(index, table, primaries, result);
  const inserted = await insertAll(opts, wanted, result);
  return { ...result, settle: () => settlePage(opts, primaries, { wanted, inserted }) };
}

/**
 * The page again (its ETags are all this read needs): primaries written between its two reads are settled one by one.
 * @throws TablegraphError from the store: the page's build is then redone, or ends with a repair pass
 */
async function settlePage(
  opts: IndexPageOptions,
  primaries: StoredEntity[],
  mine: { wanted: { byPrimary: Map<string, Wanted[]> }; inserted: Map<string, string> },
): Promise<SettleResult> {
  const { store, index, table, observer } = opts;
  const result: SettleResult = { settled: 0, heldTwice: [] };
  const again = await store.scanPage(table, opts.token, {
    pageSize: opts.pageSize,
    entityType: index.entity.entityType,
    select: [ENTITY_TYPE_PROPERTY],
    observer,
  });
  const etags = new Map(again.entities.map((e) => [`${e.partitionKey}\u0000${e.rowKey}`, e.etag]));
  for (const primary of primaries) {
    // Every write of a wide entity rewrites its first part: that part's ETag tells for the whole entity.
    if (etags.get(`${primary.partitionKey}\u0000${primary.rowKey}`) === primary.etag.split(' ')[0]) continue;
    const at = { table, partitionKey: primary.partitionKey, rowKey: primary.rowKey };
    const own = (mine.wanted.byPrimary.get(addressKey(at)) ?? []).flatMap((w) => {
      const etag = mine.inserted.get(addressKey(addressOfWrite(w.write)));
      return etag ? [{ address: addressOfWrite(w.write), etag }] : [];
    });
    result.settled++;
    const held = await settlePrimary(store, index, at, own, { observer });
    if (held) result.heldTwice.push(held);
  }
  return result;
}

interface Wanted {
  write: TableWrite;
  address: EntityAddress;
}

/**
 * What each primary derives, by index entity address and by primary (one index entity, or one per element of a list);
 * for a unique index, two primaries of the page deriving one address hold a value twice (in `result`), and so does a
 * primary whose values cannot form a key.
 */
function deriveAll(
  index: IndexModel,
  table: string,
  primaries: StoredEntity[],
  result: Pick<IndexPageResult, 'heldTwice' | 'underivable'>,
): { byAddress: Map<string, Wanted>; byPrimary: Map<string, Wanted[]> } {
  const byAddress = new Map<string, Wanted>();
  const byPrimary = new Map<string, Wanted[]>();
  for (const primary of primaries) {
    const at = { table, partitionKey: primary.partitionKey, rowKey: primary.rowKey };
    let writes: TableWrite[];
    try {
      writes = indexWrites(index, valuesOf(index.entity, primary.properties));
    } catch (e) {
      result.underivable.push({ primary: at, message: e instanceof Error ? e.message : String(e) });
      continue;
    }
    // None: sparse, a null key field (or an empty list) derives nothing.
    for (const write of writes) {
      const key = addressKey(addressOfWrite(write));
      const earlier = byAddress.get(key);
      if (earlier && index.unique) {
        result.heldTwice.push({ index: addressOfWrite(write), primaries: [earlier.address, at] });
        continue;
      }
      const wanted = { write, address: at };
      byAddress.set(key, wanted);
      byPrimary.set(addressKey(at), [...(byPrimary.get(addressKey(at)) ?? []), wanted]);
    }
  }
  return { byAddress, byPrimary };
}

/**
 * Inserts what the page derives, in EGTs per partition; each refused one (it exists) decided on after: left as a
 * newer write made it, or — a unique value another entity holds — reported held twice.
 * @returns the ETag of each index entity inserted, by address key
 */
async function insertAll(
  opts: IndexPageOptions,
  wanted: { byAddress: Map<string, Wanted> },
  result: Pick<IndexPageResult, 'written' | 'skipped' | 'heldTwice' | 'uncertain'>,
): Promise<Map<string, string>> {
  const { store, index, observer } = opts;
  const inserted = new Map<string, string>();
  const refused: string[] = [];
  if (wanted.byAddress.size > 0) await store.ensureTable(index.layout.table);
  const limit = pLimit(opts.concurrency ?? 8);
  const batches = planEgtBatches(
    [...wanted.byAddress.values()].map((w) => w.write),
    store.target,
  );
  await Promise.all(batches.map((b) => limit(() => insertSkippingExisting(store, b.table, b.writes, { inserted, refused, result }, observer))));
  result.written = inserted.size;
  for (const key of refused) {
    const { write, address } = wanted.byAddress.get(key)!;
    if (!index.unique) {
      result.skipped++;
      continue;
    }
    const holder = await store.getEntity(addressOfWrite(write), { observer });
    if (!holder || pointsAt(index.entity, holder, address)) result.skipped++;
    else result.heldTwice.push({ index: addressOfWrite(write), primaries: [primaryOf(index.entity, holder), address] });
  }
  return inserted;
}

/** One page of a type's table as an index build reads it. */
export type ScannedPage = { entities: StoredEntity[]; continuationToken?: string };

/**
 * One page of `index`'s type (a scan filtered by its EntityType), only what the index entity is made of ($select):
 * the keys, the index's key fields and its projection (a wide entity's parts whole, to be merged).
 */
export function readIndexPage(
  store: TableStore,
  index: IndexModel,
  table: string,
  token: string | undefined,
  opts: { pageSize?: number; observer?: StorageObserver },
): Promise<ScannedPage> {
  const entity = index.entity;
  const fields = [...entity.keyFields, ...index.layout.partitionKey.fields, ...index.layout.rowKey.fields, ...index.projection];
  const select = entity.wide ? undefined : [...new Set([ENTITY_TYPE_PROPERTY, ...fields.flatMap((f) => entity.fields.get(f)?.series?.properties ?? [f])])];
  return store.scanPage(table, token, { pageSize: opts.pageSize, entityType: entity.entityType, select, observer: opts.observer });
}

/** The primaries among a page's entities (their EntityType), a wide entity's parts read and merged. */
async function primariesOf(
  store: TableStore,
  entity: EntityModel,
  table: string,
  entities: StoredEntity[],
  call: { observer?: StorageObserver },
): Promise<StoredEntity[]> {
  const own = entities.filter((e) => e.properties[ENTITY_TYPE_PROPERTY] === entity.entityType);
  if (!entity.wide) return own;
  const firsts = own.filter((e) => !/_part\d+$/.test(e.rowKey));
  const merged = await Promise.all(firsts.map((e) => readPrimary(store, entity, { table, partitionKey: e.partitionKey, rowKey: e.rowKey }, call)));
  return merged.filter((e): e is StoredEntity => e !== null);
}

/**
 * Inserts `writes` as one EGT; when the service refuses one because its entity exists, sends the others again
 * without it (an EGT applies all or nothing). Fills `into.inserted` (address key → ETag) and `into.refused`
 * (address keys); a refusal met on the SDK's retry marks the page `uncertain`.
 */
async function insertSkippingExisting(
  store: TableStore,
  table: string,
  writes: TableWrite[],
  into: { inserted: Map<string, string>; refused: string[]; result: Pick<IndexPageResult, 'uncertain'> },
  observer?: StorageObserver,
): Promise<void> {
  let pending = writes;
  while (pending.length > 0) {
    try {
      const etags = await store.submitTransaction(
        table,
        pending.map((w) => ({ kind: 'create', entity: w.entity })),
        { observer },
      );
      pending.forEach((w, i) => into.inserted.set(addressKey({ table, ...w.entity }), etags[i] ?? ''));
      return;
    } catch (e) {
      if (!isTablegraphError(e, ErrorCode.CONFLICT)) throw e;
      if (typeof e.details.attempts === 'number' && e.details.attempts > 1) into.result.uncertain = true;
      const failed = e.details.operationIndex;
      if (pending.length === 1) {
        into.refused.push(addressKey({ table, ...pending[0].entity }));
        return;
      }
      if (typeof failed !== 'number') {
        // The refusal named no operation: each on its own.
        for (const w of pending) await insertSkippingExisting(store, table, [w], into, observer);
        return;
      }
      into.refused.push(addressKey({ table, ...pending[failed].entity }));
      pending = pending.filter((_, i) => i !== failed);
    }
  }
}
