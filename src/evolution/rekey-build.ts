/**
 * Re-keying an entity type online (docs/schema-changes.md, "Re-keying a type"): its table, PartitionKey or RowKey
 * template changed, and every stored entity must move to the address the new templates give it. The guide's
 * "Eventually consistent transactions pattern" moves one entity by copy, then delete; a re-key moves them all, in
 * three steps, while the servers of the recorded (old) version serve the type from the old addresses and those of
 * the new version refuse it (src/evolution/path-states.ts):
 *
 * 1. **Copy** (`copyRekeyPage`), one page of the old table per build step, its continuation token the checkpoint:
 *    each entity of the type at its old address is written at its new one — the same values, WriteId and move marks —
 *    with an insert, so that nothing already there is overwritten: an entity there that is not a copy of the same one
 *    is a collision, reported with both keys (the build stops). Writes made meanwhile by the old servers are not
 *    followed: step 2 makes up for them.
 * 2. **Catch-up** (`catchUpRekey`), once no process of the old version is left (the build runner waits for their
 *    presence rows to go) and so no one writes the type: the old and the new addresses read whole and compared; each
 *    copy missing or different is written again, each copy whose source is gone deleted; the moves under way are
 *    recorded (the worker carries them out from the new address, src/worker/carry-out-move.ts).
 * 3. **Clean-up** (`cleanUpRekey`): the entities at the old addresses deleted, If-Match on the ETag read.
 *
 * Entities are told apart by where they are: one whose address is what the old templates render from its own values
 * is an old one, what the new templates render a copy (a type keeping its table can hold both, and one both render
 * the same is already where it belongs). A wide entity's parts (`_part<n>`) go with it.
 */
import { ErrorCode, isTablegraphError } from '../errors';
import { entityRows } from '../model/entity-rows';
import { valuesOf } from '../model/entity-codec';
import { parseKeyTemplate, renderKey } from '../model/key-template';
import { ENTITY_TYPE_PROPERTY, MOVE_ID_PROPERTY, MOVED_IN_PROPERTY, WRITE_ID_PROPERTY, type EntityModel, type Layout } from '../model/types';
import { addressKey } from '../storage/address-key';
import type { TableStore } from '../storage/table-store';
import type { EntityAddress, EntityToWrite, StorageObserver, StoredEntity, TransactionOperation } from '../storage/storage-types';
import { planEgtBatches } from '../write/egt-batches';
import { readPrimary } from '../write/index-settle';
import { submitSkippingChanged } from '../maintenance/index-rebuild';
import type { RecordedAddressing } from './layout-diff';
import pLimit from 'p-limit';

/** A `rekey:<Type>` row's definition: the type's addressing before and after. */
export interface RekeyDefinition {
  from: RecordedAddressing;
  to: RecordedAddressing;
}

/** A re-key at work: the type as the new schema stores it, and both layouts. */
export interface Rekey {
  entity: EntityModel;
  from: Layout;
  to: Layout;
}

/** The re-key of `entity` (the new schema's) from the addressing a `rekey:<Type>` row recorded. */
export function rekeyOf(entity: EntityModel, definition: RekeyDefinition): Rekey {
  const { from } = definition;
  return {
    entity,
    from: { table: from.table, partitionKey: parseKeyTemplate(from.partitionKey), rowKey: parseKeyTemplate(from.rowKey) },
    to: entity.layout,
  };
}

/** Two entities of the type the new templates put at one address (or one where an old entity is): never overwritten. */
export interface Collision {
  address: EntityAddress;
  entities: EntityAddress[];
}

/** An entity whose values cannot form its new keys (a key field with no value, a value a key cannot hold). */
export interface Underivable {
  entity: EntityAddress;
  message: string;
}

/**
 * Where a stored row of the type is: at its old address, at its new one, at both (the templates render the same), or
 * at neither; and which part of the entity it is ('' for the entity itself or its part 1, `_part<n>` for part n).
 */
type Placement = { old?: string; new?: string };

function partOf(layout: Layout, table: string, row: StoredEntity): string | undefined {
  try {
    if (layout.table !== table || renderKey(layout.partitionKey, row.properties) !== row.partitionKey) return undefined;
    const rowKey = renderKey(layout.rowKey, row.properties);
    if (!row.rowKey.startsWith(rowKey)) return undefined;
    const rest = row.rowKey.slice(rowKey.length);
    return rest === '' || /^_part\d+$/.test(rest) ? rest : undefined;
  } catch {
    return undefined; // values its keys cannot be rendered from: not at an address of that layout
  }
}

function placementOf(rekey: Rekey, table: string, row: StoredEntity): Placement {
  return { old: partOf(rekey.from, table, row), new: partOf(rekey.to, table, row) };
}

/** An old entity's part 1, to be copied: not already at its new address. */
const isOldEntity = (p: Placement) => p.old === '' && p.new === undefined;
/** An old entity's row (any part) to delete once copied. */
const isOldRow = (p: Placement) => p.old !== undefined && p.new === undefined;
/** A copy's part 1 (a row at its new address that is not also at its old one). */
const isCopy = (p: Placement) => p.new === '' && p.old === undefined;

/** The address the old templates give an entity (part 1's). */
function oldAddress(rekey: Rekey, stored: StoredEntity): EntityAddress {
  return {
    table: rekey.from.table,
    partitionKey: renderKey(rekey.from.partitionKey, stored.properties),
    rowKey: renderKey(rekey.from.rowKey, stored.properties),
  };
}

/** What makes two states of one entity the same to a re-key: its values, WriteId and move marks. */
function digest(entity: EntityModel, stored: StoredEntity): string {
  const p = stored.properties;
  const text = (v: unknown) => (v instanceof Date ? v.toISOString() : typeof v === 'bigint' ? `${v}n` : v);
  const values = Object.entries(valuesOf(entity, p)).map(([k, v]) => [k, Array.isArray(v) ? v.map(text) : text(v)]);
  return JSON.stringify([values, p[WRITE_ID_PROPERTY] ?? null, p[MOVE_ID_PROPERTY] ?? null, p[MOVED_IN_PROPERTY] ?? null]);
}

/** What one copy step did (counts in entities). */
export interface RekeyPageResult {
  /** Rows of the type the page read (entities; a wide entity's parts each count). */
  read: number;
  /** Entities copied (written at their new address). */
  written: number;
  /** Rows left: at their new address already, or parts (copied with their entity). */
  skipped: number;
  /** The next page's continuation token; absent after the last page. */
  next?: string;
  collisions: Collision[];
  underivable: Underivable[];
}

export interface RekeyStepOptions {
  store: TableStore;
  rekey: Rekey;
  /** Entities per page (at most 1000, the default). */
  pageSize?: number;
  /** EGTs in flight at once (transactions). Default 8. */
  concurrency?: number;
  observer?: StorageObserver;
}

/**
 * Step 1, one page (see the file comment): the page's old entities inserted at their new addresses, in EGTs per
 * partition; an insert refused because an entity is there is decided on after: a copy of the same entity (a step
 * redone after a kill) is replaced, anything else is a collision.
 * @param token where the page starts: a continuation token of the old table's scan; absent for the first page
 * @throws TablegraphError STORAGE_UNAVAILABLE, STORAGE_BUSY and others from the store: the page can be copied again
 */
export async function copyRekeyPage(opts: RekeyStepOptions, token: string | undefined): Promise<RekeyPageResult> {
  const { store, rekey, observer } = opts;
  const { entity } = rekey;
  const page = await store.scanPage(rekey.from.table, token, { entityType: entity.entityType, pageSize: opts.pageSize, observer });
  const result: RekeyPageResult = { read: page.entities.length, written: 0, skipped: 0, next: page.continuationToken, collisions: [], underivable: [] };
  const writes: Array<{ table: string; source: EntityAddress; rows: EntityToWrite[] }> = [];
  const targets = new Map<string, EntityAddress>();
  for (const row of page.entities) {
    const placement = placementOf(rekey, rekey.from.table, row);
    if (!isOldEntity(placement)) {
      result.skipped++;
      continue;
    }
    const at = { table: rekey.from.table, partitionKey: row.partitionKey, rowKey: row.rowKey };
    const source = entity.wide ? await readPrimary(store, entity, at, { observer }) : row;
    if (!source) continue; // deleted since the page was read
    try {
      const copy = entityRows(rekey.entity, source);
      const target = { table: copy.table, partitionKey: copy.rows[0].partitionKey, rowKey: copy.rows[0].rowKey };
      const earlier = targets.get(addressKey(target));
      if (earlier) {
        result.collisions.push({ address: target, entities: [earlier, at] });
        continue;
      }
      targets.set(addressKey(target), at);
      writes.push({ ...copy, source: at });
    } catch (e) {
      if (!isTablegraphError(e, ErrorCode.BAD_USER_INPUT)) throw e;
      result.underivable.push({ entity: at, message: e.message });
    }
  }
  if (writes.length > 0) await store.ensureTable(rekey.to.table);
  const limit = pLimit(opts.concurrency ?? 8);
  const batches = groupByPartition(writes);
  await Promise.all(batches.map((batch) => limit(() => insertCopies(opts, batch, result))));
  return result;
}

/** Copies grouped into EGTs: one partition each, at most 100 operations (a wide entity's parts stay together). */
function groupByPartition<T extends { table: string; rows: EntityToWrite[] }>(writes: T[]): T[][] {
  const groups = new Map<string, T[][]>();
  const out: T[][] = [];
  for (const w of writes) {
    const key = `${w.table}\u0000${w.rows[0].partitionKey}`;
    const list = groups.get(key) ?? [];
    groups.set(key, list);
    let last = list.at(-1);
    if (!last || last.reduce((n, x) => n + x.rows.length, 0) + w.rows.length > 100) {
      last = [];
      list.push(last);
      out.push(last);
    }
    last.push(w);
  }
  return out;
}

/**
 * Inserts one EGT of copies; a copy refused because its address is taken is read there: a copy of the same entity is
 * replaced (upsert), anything else is a collision; the others are sent again (an EGT applies all or nothing).
 */
async function insertCopies(
  opts: RekeyStepOptions,
  batch: Array<{ table: string; source: EntityAddress; rows: EntityToWrite[] }>,
  result: RekeyPageResult,
): Promise<void> {
  const { store, rekey, observer } = opts;
  let pending = batch.map((w) => ({ ...w, replace: false }));
  while (pending.length > 0) {
    const ops: TransactionOperation[] = pending.flatMap((w) =>
      w.rows.map((entity) => ({ kind: w.replace ? 'upsertReplace' : 'create', entity }) as TransactionOperation),
    );
    try {
      await store.submitTransaction(pending[0].table, ops, { observer });
      result.written += pending.length;
      return;
    } catch (e) {
      if (!isTablegraphError(e, ErrorCode.CONFLICT)) throw e;
      const failedOp = typeof e.details.operationIndex === 'number' ? e.details.operationIndex : 0;
      let at = 0;
      const failed = pending.find((w) => (at += w.rows.length) > failedOp) ?? pending[0];
      const target = { table: failed.table, partitionKey: failed.rows[0].partitionKey, rowKey: failed.rows[0].rowKey };
      const there = await readPrimary(store, rekey.entity, target, { observer });
      const sameSource =
        there &&
        isCopy(placementOf(rekey, target.table, { ...there, rowKey: target.rowKey })) &&
        addressKey(oldAddress(rekey, there)) === addressKey(failed.source);
      if (sameSource || !there) failed.replace = true;
      else {
        result.collisions.push({ address: target, entities: [failed.source, { table: target.table, partitionKey: there.partitionKey, rowKey: there.rowKey }] });
        pending = pending.filter((w) => w !== failed);
      }
    }
  }
}

/** What the catch-up did (counts in entities). */
export interface CatchUpResult {
  /** Rows read: the old addresses' and the new ones' (entities). */
  read: number;
  /** Copies written again (missing, or different from their source). */
  written: number;
  /** Copies deleted (their source is gone). */
  deleted: number;
  /** The old rows, to delete in the clean-up: each address and the ETag read. */
  oldRows: Array<EntityAddress & { etag: string }>;
  /** The moves under way: each move's id and its entity's new address. */
  moves: Record<string, EntityAddress>;
  collisions: Collision[];
  underivable: Underivable[];
}

/**
 * Step 2 (see the file comment): the old and the new addresses read whole, and every copy made equal to its source.
 * Runs while nothing writes the type. Holds each entity of the type in memory (its values, for the comparison).
 * @throws TablegraphError from the store: the catch-up can be run again from the start
 */
export async function catchUpRekey(opts: RekeyStepOptions): Promise<CatchUpResult> {
  const { store, rekey, observer } = opts;
  const { entity } = rekey;
  const result: CatchUpResult = { read: 0, written: 0, deleted: 0, oldRows: [], moves: {}, collisions: [], underivable: [] };
  const sources = new Map<string, { at: EntityAddress; stored: StoredEntity; copy: { table: string; rows: EntityToWrite[] } }>();
  const copies = new Map<string, { stored: StoredEntity; rows: Array<EntityAddress & { etag: string }> }>();
  /** Where an old entity is (part 1), so that a copy landing there is a collision. */
  const occupied = new Map<string, EntityAddress>();
  const tables = [...new Set([rekey.from.table, rekey.to.table])];
  for (const table of tables) {
    try {
      for await (const page of store.scan(table, { entityType: entity.entityType, observer })) {
        result.read += page.length;
        for (const row of page) {
          const placement = placementOf(rekey, table, row);
          const at = { table, partitionKey: row.partitionKey, rowKey: row.rowKey };
          if (placement.old === '') occupied.set(addressKey(at), at);
          if (isOldRow(placement)) result.oldRows.push({ ...at, etag: row.etag });
          if (isOldEntity(placement)) await noteSource(at, row);
          if (placement.new !== undefined && placement.old === undefined) await noteCopy(at, row, placement.new);
        }
      }
    } catch (e) {
      if (!(isTablegraphError(e, ErrorCode.NOT_FOUND) && e.details.reason === 'TableNotFound')) throw e;
    }
  }

  async function noteSource(at: EntityAddress, row: StoredEntity): Promise<void> {
    const stored = entity.wide ? await readPrimary(store, entity, at, { observer }) : row;
    if (!stored) return;
    try {
      const copy = entityRows(rekey.entity, stored);
      const target = { table: copy.table, partitionKey: copy.rows[0].partitionKey, rowKey: copy.rows[0].rowKey };
      const earlier = sources.get(addressKey(target));
      if (earlier) result.collisions.push({ address: target, entities: [earlier.at, at] });
      else sources.set(addressKey(target), { at, stored, copy });
      const moveId = stored.properties[MOVE_ID_PROPERTY];
      if (typeof moveId === 'string' && moveId !== '') result.moves[moveId] = target;
    } catch (e) {
      if (!isTablegraphError(e, ErrorCode.BAD_USER_INPUT)) throw e;
      result.underivable.push({ entity: at, message: e.message });
    }
  }

  /** A row of a copy (its part `part`): kept by the copy's address, to compare (part 1, merged) and to delete (every part). */
  async function noteCopy(at: EntityAddress, row: StoredEntity, part: string): Promise<void> {
    const base = { ...at, rowKey: row.rowKey.slice(0, row.rowKey.length - part.length) };
    const entry = copies.get(addressKey(base)) ?? { stored: row, rows: [] };
    entry.rows.push({ ...at, etag: row.etag });
    if (part === '') entry.stored = (entity.wide ? await readPrimary(store, entity, at, { observer }) : row) ?? row;
    copies.set(addressKey(base), entry);
  }

  for (const [key, source] of sources) {
    const other = occupied.get(key);
    if (other) result.collisions.push({ address: other, entities: [source.at, other] });
  }
  if (result.collisions.length > 0 || result.underivable.length > 0) return result;

  const writes: Array<{ table: string; rows: EntityToWrite[]; replace: true }> = [];
  for (const [key, source] of sources) {
    const copy = copies.get(key);
    if (copy && digest(entity, copy.stored) === digest(entity, source.stored)) continue;
    writes.push({ ...source.copy, replace: true });
  }
  const deletes = [...copies].filter(([key]) => !sources.has(key)).flatMap(([, c]) => c.rows);
  const limit = pLimit(opts.concurrency ?? 8);
  if (writes.length > 0) await store.ensureTable(rekey.to.table);
  await Promise.all(
    groupByPartition(writes).map((batch) =>
      limit(async () => {
        const ops = batch.flatMap((w) => w.rows.map((row) => ({ kind: 'upsertReplace', entity: row }) as TransactionOperation));
        await store.submitTransaction(batch[0].table, ops, { observer });
        result.written += batch.length;
      }),
    ),
  );
  result.deleted = await deleteRows(opts, deletes);
  return result;
}

/**
 * Step 3 (see the file comment): the old rows the catch-up read, deleted If-Match on the ETag it read, in EGTs per
 * partition. @returns rows deleted (entities)
 */
export async function cleanUpRekey(opts: RekeyStepOptions, oldRows: Array<EntityAddress & { etag: string }>): Promise<number> {
  return deleteRows(opts, oldRows);
}

/** Deletes rows If-Match on their ETags, in EGTs per partition; one changed or gone meanwhile is left. @returns rows deleted */
async function deleteRows(opts: RekeyStepOptions, rows: Array<EntityAddress & { etag: string }>): Promise<number> {
  const { store, observer } = opts;
  const limit = pLimit(opts.concurrency ?? 8);
  const batches = planEgtBatches(
    rows.map((r) => ({ table: r.table, entity: { partitionKey: r.partitionKey, rowKey: r.rowKey, properties: {} }, etag: r.etag })),
    store.target,
  );
  const etags = new Map(rows.map((r) => [addressKey(r), r.etag]));
  let deleted = 0;
  await Promise.all(
    batches.map((b) =>
      limit(async () => {
        const ops: TransactionOperation[] = b.writes.map((w) => ({
          kind: 'delete',
          partitionKey: w.entity.partitionKey,
          rowKey: w.entity.rowKey,
          ifMatch: etags.get(addressKey({ table: b.table, ...w.entity })),
        }));
        deleted += await submitSkippingChanged(store, b.table, ops, observer);
      }),
    ),
  );
  return deleted;
}

/** What a re-key will move, counted from what is stored (entities, rows, pages, EGTs). */
export interface RekeyCount {
  /** Entities at their old addresses (entities). */
  entities: number;
  /** Their rows, a wide entity's parts each counted (entities). */
  rows: number;
  /** Pages of the old table's scan (requests). */
  pages: number;
  /** EGTs the copy sends: its rows grouped by new partition, page by page, 100 at most each (requests). */
  copyEgts: number;
  /** EGTs the clean-up sends: the old rows grouped by old partition (requests). */
  deleteEgts: number;
}

/**
 * What a re-key will move, for a plan and for its build's total (a keys-only read of the old table, as the copy reads
 * it page by page); its calls told to `observer`.
 */
export async function countRekey(store: TableStore, rekey: Rekey, observer?: StorageObserver): Promise<RekeyCount> {
  const count: RekeyCount = { entities: 0, rows: 0, pages: 0, copyEgts: 0, deleteEgts: 0 };
  const keyFields = [...rekey.from.partitionKey.fields, ...rekey.from.rowKey.fields, ...rekey.to.partitionKey.fields, ...rekey.to.rowKey.fields];
  const select = [ENTITY_TYPE_PROPERTY, ...new Set(keyFields)];
  const oldPartitions = new Map<string, number>();
  try {
    for await (const page of store.scan(rekey.from.table, { entityType: rekey.entity.entityType, select, observer })) {
      count.pages++;
      const newPartitions = new Map<string, number>();
      for (const row of page) {
        const placement = placementOf(rekey, rekey.from.table, row);
        if (!isOldRow(placement)) continue;
        count.rows++;
        if (placement.old === '') count.entities++;
        const parts = rekey.entity.wide?.parts.length ?? 1;
        if (placement.old === '') {
          try {
            const key = `${rekey.to.table}\u0000${renderKey(rekey.to.partitionKey, row.properties)}`;
            newPartitions.set(key, (newPartitions.get(key) ?? 0) + parts);
          } catch {
            // counted as moved; the copy reports it
          }
        }
        oldPartitions.set(row.partitionKey, (oldPartitions.get(row.partitionKey) ?? 0) + 1);
      }
      for (const n of newPartitions.values()) count.copyEgts += Math.ceil(n / 100);
    }
  } catch (e) {
    if (!isTablegraphError(e, ErrorCode.NOT_FOUND)) throw e;
  }
  for (const n of oldPartitions.values()) count.deleteEgts += Math.ceil(n / 100);
  count.pages = Math.max(count.pages, 1);
  return count;
}
