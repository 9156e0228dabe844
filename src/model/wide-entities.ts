/**
 * The guide's "Wide entities pattern": a logical entity with more properties than one entity may hold (252 besides
 * PartitionKey, RowKey and Timestamp — the guide's "Capacity considerations", the same on Azure, Azurite and the
 * Cosmos DB Table API) is stored as several physical entities, its parts, in one partition. Part 1 has the
 * entity's own RowKey; part n (n ≥ 2) the same RowKey followed by `_part<n>`, which no entity of the type can have
 * as its own RowKey (a key value is escaped to hold no bare `_`, key-escape.ts). Every part holds the key fields,
 * `EntityType` and `WriteId`; the other properties — fields and `@series` elements, in declaration order — fill the
 * parts in turn.
 *
 * Reading the entity is one point query per part, all in one wave ("Wide entities pattern": "two efficient
 * requests"). Writing it is one EGT ("Entity Group Transactions"): a create, replace or delete writes every part,
 * each under its own ETag; an INCREMENT merges only the parts holding the elements it changes ("Merge or replace"),
 * so writers of elements in different parts never conflict. The entity's ETag, as clients see it, is its parts'
 * ETags joined by a space, in part order; a part not stored shows as `-`.
 */
import { WRITE_ID_PROPERTY, type EntityModel, type WideLayout } from './types';
import type { EntityAddress, EntityToWrite, StoredEntity, TransactionOperation } from '../storage/storage-types';

/** Properties an entity may hold besides PartitionKey, RowKey and Timestamp (the guide's "Capacity considerations"). */
export const MAX_USER_PROPERTIES = 252;
/** Properties the write path adds to every entity (and every part): EntityType, WriteId and, during a move, MoveId or MovedIn. */
export const SYSTEM_PROPERTIES = 3;
/** Parts of one wide entity at most: all of them are written in one EGT, which holds 100 operations. */
export const MAX_PARTS = 100;
/** What part n's RowKey adds to the entity's: `_part<n>`. */
const PART_SUFFIX = '_part';
/** How a part not stored shows in the entity's ETag. */
const ABSENT_PART = '-';

/** The addresses of a wide entity's parts, part 1 (the entity's own address) first. */
export function partAddresses(wide: WideLayout, address: EntityAddress): EntityAddress[] {
  return wide.parts.map((_, i) => (i === 0 ? address : { ...address, rowKey: `${address.rowKey}${PART_SUFFIX}${i + 1}` }));
}

/** Property names to $select from part `i`: those of `select` the part holds (keys and EntityType are in each). */
export function partSelect(entity: EntityModel, i: number, select: readonly string[] | undefined): string[] | undefined {
  return select?.filter((p) => entity.wide!.parts[i].has(p) || !isPartProperty(entity, p));
}

/** The properties of `properties` that part `i` holds: its own, and those every part holds (keys, EntityType, WriteId). */
export function partProperties<T>(entity: EntityModel, i: number, properties: Record<string, T>): Record<string, T> {
  return Object.fromEntries(Object.entries(properties).filter(([p]) => entity.wide!.parts[i].has(p) || !isPartProperty(entity, p)));
}

/** Whether `property` lives in one part only (every other property — keys, EntityType, WriteId — is in each). */
function isPartProperty(entity: EntityModel, property: string): boolean {
  return entity.wide!.parts.some((p) => p.has(property));
}

/**
 * The logical entity from its parts as read (null where a part is not stored): every part's properties together,
 * the ETag of each part joined, and the parts themselves for the next write's If-Match. Null when no part is stored;
 * a part missing beside stored ones (a type that grew a part since it was written) reads as its properties absent.
 */
export function mergeParts(parts: ReadonlyArray<StoredEntity | null>): StoredEntity | null {
  const first = parts.find((p): p is StoredEntity => p !== null);
  if (!first) return null;
  const properties: Record<string, unknown> = {};
  for (const p of [...parts].reverse()) if (p) Object.assign(properties, p.properties); // part 1's system properties win
  return {
    partitionKey: first.partitionKey,
    rowKey: parts[0]?.rowKey ?? first.rowKey.slice(0, first.rowKey.lastIndexOf(PART_SUFFIX)),
    etag: parts.map((p) => p?.etag ?? ABSENT_PART).join(' '),
    properties,
    parts,
  };
}

/** Whether any part of `stored` (a wide entity as mergeParts gives it, or a plain entity) was written by `writeId`. */
export function writtenBy(stored: StoredEntity, writeId: string): boolean {
  return (stored.parts ?? [stored]).some((p) => p?.properties[WRITE_ID_PROPERTY] === writeId);
}

/**
 * The EGT operations that write a wide entity, from the one operation planned for the logical entity, with the
 * part each writes. A create writes every part; a replace every part under its ETag (creating a part not stored);
 * a merge (an INCREMENT) only the parts holding a property it names, each under its ETag (a part not stored is
 * created whole from `whole`); a delete every stored part under its ETag.
 * @param whole the logical entity as it is after the write (for a create, replace or merge)
 * @param current the logical entity as read (mergeParts), for a replace, merge or delete
 */
export function partOperations(
  entity: EntityModel,
  op: TransactionOperation,
  whole: EntityToWrite | undefined,
  current: StoredEntity | null,
): { operations: TransactionOperation[]; parts: number[] } {
  const wide = entity.wide!;
  const address = {
    table: entity.layout.table,
    partitionKey: op.kind === 'delete' ? op.partitionKey : op.entity.partitionKey,
    rowKey: op.kind === 'delete' ? op.rowKey : op.entity.rowKey,
  };
  const addresses = partAddresses(wide, address);
  const stored = (i: number) => current?.parts?.[i] ?? null;
  const operations: TransactionOperation[] = [];
  const parts: number[] = [];
  const add = (i: number, o: TransactionOperation) => {
    operations.push(o);
    parts.push(i);
  };
  const partOf = (i: number, of: EntityToWrite): EntityToWrite => ({
    partitionKey: addresses[i].partitionKey,
    rowKey: addresses[i].rowKey,
    properties: partProperties(entity, i, of.properties),
  });
  const merged = op.kind === 'update' && op.mode === 'merge' ? wide.parts.map((part) => Object.keys(op.entity.properties).some((p) => part.has(p))) : [];
  // A merge that changes nothing (an INCREMENT adding to no element) still writes its WriteId, to part 1.
  if (merged.length > 0 && !merged.includes(true)) merged[0] = true;
  wide.parts.forEach((_, i) => {
    const before = stored(i);
    if (op.kind === 'delete') {
      if (before) add(i, { kind: 'delete', partitionKey: addresses[i].partitionKey, rowKey: addresses[i].rowKey, ifMatch: before.etag });
    } else if (op.kind === 'update' && op.mode === 'merge') {
      if (!merged[i]) return;
      if (before) add(i, { kind: 'update', mode: 'merge', entity: partOf(i, op.entity), ifMatch: before.etag });
      else add(i, { kind: 'create', entity: partOf(i, whole!) });
    } else if (op.kind === 'update' && before) {
      add(i, { kind: 'update', mode: 'replace', entity: partOf(i, op.entity), ifMatch: before.etag });
    } else {
      add(i, { kind: 'create', entity: partOf(i, op.kind === 'update' ? op.entity : (whole ?? op.entity)) });
    }
  });
  return { operations, parts };
}

/**
 * The entity's ETag after a committed write: the new ETag of each part it wrote, the one read of each it did not.
 * @param etags the ETags the EGT returned for the write's operations, in order (partOperations' `parts`)
 */
export function etagAfter(current: StoredEntity | null, parts: readonly number[], etags: ReadonlyArray<string | undefined>, count: number): string {
  const each = Array.from({ length: count }, (_, i) => current?.parts?.[i]?.etag ?? ABSENT_PART);
  parts.forEach((part, j) => (each[part] = etags[j] ?? ABSENT_PART));
  return each.join(' ');
}
