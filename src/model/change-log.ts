/**
 * The change log that subscriptions read (src/server/subscriptions/): neither Azure Table storage nor the Cosmos DB
 * Table API has a change feed, so a write to an entity type that a subscription follows adds one change entity to
 * its own EGT, in the entity's partition — it exists exactly when the write committed ("Entity Group
 * Transactions"). Its RowKey is the guide's "Log tail pattern": `~change_` + inverted ticks of the write's time +
 * the write's id, so a range query from the prefix lists a partition's changes newest first, and one bounded by a
 * time lists the changes since then. `~` sorts after letters and digits: the change entities sit at the end of the
 * partition, apart from other types' ranges, and their EntityType (`~Change`) keeps them out of every read of
 * entities. Old change entities are deleted by the writers (change-log-trim.ts).
 *
 * Continuous backup (docs/backup.md) uses the same change entities: with capture on, every write of every entity
 * type adds one, holding the entity's image — its rows as stored after the write, `@encrypted` values sealed — which
 * the capture pass (src/backup/capture-pass.ts) copies into Blob storage and then deletes.
 */
import { gunzipSync, gzipSync } from 'node:zlib';
import { ErrorCode, TablegraphError } from '../errors';
import type { EntityAddress, EntityToWrite, StoredEntity, TransactionOperation } from '../storage/storage-types';
import { corrupt, decodeRow, encodeRow } from './row-text';
import { fromInvertedTicks, invertedTicks } from './key-template';
import { ENTITY_TYPE_PROPERTY } from './types';

/** The EntityType of every change entity. */
export const CHANGE_ENTITY_TYPE = '~Change';

/** The RowKey prefix of every change entity. */
export const CHANGE_ROW_KEY_PREFIX = '~change_';

/** What a write did to an entity. */
export type ChangeKind = 'CREATED' | 'UPDATED' | 'DELETED';

/** Properties of a change entity beside EntityType. */
export const CHANGE = {
  kind: 'Kind',
  of: 'Of',
  rowKey: 'OfRowKey',
  writeId: 'ChangeWriteId',
  relays: 'Relays',
  /** A move's create (src/worker/carry-out-move.ts): the entity's old address, `table`, `PartitionKey`, `RowKey`. */
  movedFromTable: 'MovedFromTable',
  movedFromPartitionKey: 'MovedFromPartitionKey',
  movedFromRowKey: 'MovedFromRowKey',
} as const;

/**
 * The EntityType of a fence (src/write/change-fence.ts): an entity at a change entity's RowKey, put there by the writer
 * when its EGT's answer was lost, so that the EGT can no longer be applied. Not a change: no reader delivers it.
 */
export const CHANGE_FENCE_ENTITY_TYPE = '~ChangeFence';

/**
 * The prefix of a deleted entity's values that `@auth` scope rules name, kept on its change entity (`Scope_owner`):
 * once the entity is gone, they decide who may learn of its delete.
 */
export const SCOPE_PROPERTY_PREFIX = 'Scope_';

/** One change as read back. */
export interface Change {
  /** The change entity's RowKey: unique, and orders changes (newest first). */
  changeKey: string;
  /** When the write's EGT was sent (ms since the epoch, the writer's clock). */
  at: number;
  /**
   * When the EGT was applied: the change entity's service Timestamp (StoredEntity.timestamp, text that sorts);
   * '' where the service gave none.
   */
  committed: string;
  kind: ChangeKind;
  /** The EntityType of the entity written. */
  of: string;
  /** The changed entity's address (its table and partition are the change's own). */
  address: EntityAddress;
  /** A delete's values of the fields `@auth` scope rules name (as text), kept on the change entity. */
  scope: Record<string, string>;
  /**
   * Set on a relay: the changeKey of the change it tells again, which committed later than readers look back
   * (src/write/change-fence.ts). Readers deliver the two once (changeIdentity).
   */
  relays?: string;
}

/** What makes two changes one for a subscriber: a relay and the change it relays are the same change. */
export function changeIdentity(c: Pick<Change, 'changeKey' | 'relays'>): string {
  return c.relays ?? c.changeKey;
}

let lastChangeTime = 0;

/**
 * The time of a change this process makes (ms since the epoch): the clock, but always after the last one, so that
 * two writes of one partition committed within a millisecond (a delete, then a create of the same key) are ordered
 * as they were made. Runs ahead of the clock only past 1,000 changes a second.
 */
export function nextChangeTime(): number {
  lastChangeTime = Math.max(Date.now(), lastChangeTime + 1);
  return lastChangeTime;
}

/** The RowKey of the change of write `writeId` made at `at` (ms since the epoch). */
export function changeRowKey(at: number, writeId: string): string {
  return `${CHANGE_ROW_KEY_PREFIX}${invertedTicks(new Date(at))}_${writeId}`;
}

/**
 * The RowKey below which (exclusive) lie the changes made at or after `since` (ms): a range query from
 * CHANGE_ROW_KEY_PREFIX to it lists them, newest first.
 */
export function changesSinceBound(since: number): string {
  // Changes at `since` itself have RowKeys that start with its inverted ticks: the bound is the next value.
  return `${CHANGE_ROW_KEY_PREFIX}${invertedTicks(new Date(since))}~`;
}

/** The first RowKey after every change entity (the exclusive end of a range over all of them). */
export const CHANGE_ROW_KEY_END = '~change`';

/** What a change entity records: the changed entity's type, the kind of change, its write, and its time (ms since 1970). */
export interface ChangeRecord {
  entityType: string;
  kind: ChangeKind;
  writeId: string;
  at: number;
  /**
   * A delete's values of the fields `@auth` scope rules name (none `@encrypted`: a change entity holds nothing
   * sealed), so that who may learn of the delete can be decided without the entity. Default: none.
   */
  scope?: Record<string, string>;
  /** The entity's rows as stored after the write (sealed), kept for backup; absent: none kept (capture off, a delete). */
  image?: EntityToWrite[];
  /** A move's create: the entity's old address (a restore settles the move by it: src/backup/restore-moves.ts). */
  movedFrom?: EntityAddress;
}

/** The prefix of a change entity's image properties: `Image0`, `Image1`, … (Edm.Binary, gzip of row lines). */
export const IMAGE_PROPERTY_PREFIX = 'Image';
/** Bytes of one image property (under the service's 64 KiB for an Edm.Binary property). */
const IMAGE_CHUNK_BYTES = 64_000;
/** Image properties one change entity holds at most (some 960 KB: with its other properties, under 1 MiB). */
const MAX_IMAGE_CHUNKS = 15;

/**
 * The properties holding an image: its rows as lines (row-text.ts), gzip-compressed, cut into Edm.Binary properties.
 * @throws TablegraphError LIMIT_EXCEEDED (reason ChangeImageTooLarge) when compressed it exceeds 15 × 64,000 bytes
 */
export function imageProperties(rows: readonly EntityToWrite[]): EntityToWrite['properties'] {
  const bytes = gzipSync(Buffer.from(rows.map((entity) => encodeRow({ table: '', entity })).join('\n'), 'utf8'));
  const chunks = Math.ceil(bytes.length / IMAGE_CHUNK_BYTES);
  if (chunks > MAX_IMAGE_CHUNKS) {
    throw new TablegraphError(
      ErrorCode.LIMIT_EXCEEDED,
      `The entity is too large for continuous backup to keep its image (${bytes.length} bytes compressed; at most ${MAX_IMAGE_CHUNKS * IMAGE_CHUNK_BYTES})`,
      { reason: 'ChangeImageTooLarge', bytes: bytes.length },
    );
  }
  const properties: EntityToWrite['properties'] = {};
  for (let i = 0; i < chunks; i++)
    properties[`${IMAGE_PROPERTY_PREFIX}${i}`] = { type: 'Binary', value: new Uint8Array(bytes.subarray(i * IMAGE_CHUNK_BYTES, (i + 1) * IMAGE_CHUNK_BYTES)) };
  return properties;
}

/**
 * The image a stored change entity holds (imageProperties), its rows in order; undefined when it holds none.
 * @throws TablegraphError DATA_INTEGRITY (reason BackupCorrupt) naming the change when its image cannot be read
 */
export function changeImage(e: StoredEntity): EntityToWrite[] | undefined {
  const chunks: Uint8Array[] = [];
  for (let i = 0; e.properties[`${IMAGE_PROPERTY_PREFIX}${i}`] instanceof Uint8Array; i++)
    chunks.push(e.properties[`${IMAGE_PROPERTY_PREFIX}${i}`] as Uint8Array);
  if (chunks.length === 0) return undefined;
  const where = `change ${e.partitionKey}/${e.rowKey}`;
  let text: string;
  try {
    text = gunzipSync(Buffer.concat(chunks)).toString('utf8');
  } catch {
    throw corrupt(where, 'its image is not gzip');
  }
  return text.split('\n').map((line) => decodeRow(line, where).entity);
}

/** The change entity a write to `address` adds to its EGT. */
export function changeEntity(address: EntityAddress, change: ChangeRecord): EntityToWrite {
  const { entityType, kind, writeId, at, scope = {}, image, movedFrom } = change;
  const scoped = Object.fromEntries(Object.entries(scope).map(([f, v]) => [`${SCOPE_PROPERTY_PREFIX}${f}`, { type: 'String' as const, value: v }]));
  return {
    partitionKey: address.partitionKey,
    rowKey: changeRowKey(at, writeId),
    properties: {
      [ENTITY_TYPE_PROPERTY]: { type: 'String', value: CHANGE_ENTITY_TYPE },
      [CHANGE.kind]: { type: 'String', value: kind },
      [CHANGE.of]: { type: 'String', value: entityType },
      [CHANGE.rowKey]: { type: 'String', value: address.rowKey },
      [CHANGE.writeId]: { type: 'String', value: writeId },
      ...scoped,
      ...(image && imageProperties(image)),
      ...(movedFrom && {
        [CHANGE.movedFromTable]: { type: 'String', value: movedFrom.table },
        [CHANGE.movedFromPartitionKey]: { type: 'String', value: movedFrom.partitionKey },
        [CHANGE.movedFromRowKey]: { type: 'String', value: movedFrom.rowKey },
      }),
    },
  };
}

/** A stored change entity as a Change; undefined for any other entity. */
export function readChange(table: string, e: StoredEntity): Change | undefined {
  if (e.properties[ENTITY_TYPE_PROPERTY] !== CHANGE_ENTITY_TYPE || !e.rowKey.startsWith(CHANGE_ROW_KEY_PREFIX)) return undefined;
  const kind = e.properties[CHANGE.kind];
  const of = e.properties[CHANGE.of];
  const rowKey = e.properties[CHANGE.rowKey];
  if ((kind !== 'CREATED' && kind !== 'UPDATED' && kind !== 'DELETED') || typeof of !== 'string' || typeof rowKey !== 'string') return undefined;
  const scope: Record<string, string> = {};
  for (const [k, v] of Object.entries(e.properties))
    if (k.startsWith(SCOPE_PROPERTY_PREFIX) && typeof v === 'string') scope[k.slice(SCOPE_PROPERTY_PREFIX.length)] = v;
  const relays = e.properties[CHANGE.relays];
  return {
    changeKey: e.rowKey,
    at: changeTime(e.rowKey),
    committed: e.timestamp ?? '',
    kind,
    of,
    address: { table, partitionKey: e.partitionKey, rowKey },
    scope,
    ...(typeof relays === 'string' && { relays }),
  };
}

/** The fence at a change entity's RowKey (change-fence.ts). */
export function fenceEntity(partitionKey: string, rowKey: string): EntityToWrite {
  return { partitionKey, rowKey, properties: { [ENTITY_TYPE_PROPERTY]: { type: 'String', value: CHANGE_FENCE_ENTITY_TYPE } } };
}

/**
 * A relay of a change entity as stored: the same change (kind, entity, write, `@auth` scope), at time `at` (ms since
 * 1970), naming the change it tells again.
 */
export function relayEntity(stored: StoredEntity, at: number): EntityToWrite {
  const properties: EntityToWrite['properties'] = {};
  for (const [name, value] of Object.entries(stored.properties)) if (typeof value === 'string') properties[name] = { type: 'String', value };
  properties[CHANGE.relays] = { type: 'String', value: stored.rowKey };
  return { partitionKey: stored.partitionKey, rowKey: changeRowKey(at, String(stored.properties[CHANGE.writeId])), properties };
}

/**
 * The order changes are told in: by `at`, then by RowKey (newer first in storage, so the greater RowKey first here).
 * @returns < 0 when `a` comes first
 */
export function changeOrder(a: Pick<Change, 'at' | 'changeKey'>, b: Pick<Change, 'at' | 'changeKey'>): number {
  return a.at - b.at || (a.changeKey < b.changeKey ? 1 : a.changeKey > b.changeKey ? -1 : 0);
}

/**
 * What one read of a partition's change log saw, told by commit time: its newest change's service Timestamp and
 * the changes committed at that very Timestamp. The writes of a partition are applied one after another, so a change
 * committed at or before `through` (and, at `through` itself, listed in `keys`) was there to be read; any other was
 * committed after the read.
 */
export interface ChangeSnapshot {
  /** The newest service Timestamp read (text that sorts; StoredEntity.timestamp). */
  through: string;
  /** The RowKeys of the changes read whose Timestamp is `through`. */
  keys: string[];
}

/**
 * The snapshot of a read that returned `changes`, never older than `before` (a later read of a window that slid past
 * the newest changes has seen at least as much). Undefined when neither says anything.
 */
export function snapshotOf(changes: readonly Change[], before?: ChangeSnapshot): ChangeSnapshot | undefined {
  let snapshot = before && { through: before.through, keys: [...before.keys] };
  for (const c of changes) {
    if (c.committed === '') continue;
    if (!snapshot || c.committed > snapshot.through) snapshot = { through: c.committed, keys: [c.changeKey] };
    else if (c.committed === snapshot.through && !snapshot.keys.includes(c.changeKey)) snapshot.keys.push(c.changeKey);
  }
  return snapshot;
}

/** Whether a read whose snapshot is `snapshot` saw `change` (it was committed by then). No snapshot: saw nothing. */
export function sawChange(snapshot: ChangeSnapshot | undefined, change: Pick<Change, 'committed' | 'changeKey'>): boolean {
  if (!snapshot || change.committed === '') return false;
  return change.committed < snapshot.through || (change.committed === snapshot.through && snapshot.keys.includes(change.changeKey));
}

/** Whether an entity to write is a change entity. */
export function isChangeEntity(e: EntityToWrite): boolean {
  return e.properties[ENTITY_TYPE_PROPERTY]?.value === CHANGE_ENTITY_TYPE;
}

/** The PartitionKey of the change entities an EGT holds; undefined when it holds none. */
export function changedPartition(operations: readonly TransactionOperation[]): string | undefined {
  const change = operations.find((op) => op.kind === 'create' && isChangeEntity(op.entity));
  return change && change.kind === 'create' ? change.entity.partitionKey : undefined;
}

/**
 * The EGT's operations with every change entity's RowKey made anew from the time now (nextChangeTime), keeping its
 * write id: called right before the EGT is sent, so that a change's time is never earlier than its EGT by more than
 * that call's own time (the storage timeout), however long the write waited for reads, its message and its
 * reservations. The change log's readers count on that bound (src/read/change-poller.ts). Every change of one EGT
 * gets the same time: a point-in-time restore (src/backup/) takes all of an EGT or none of it.
 */
export function stampChanges(operations: readonly TransactionOperation[]): TransactionOperation[] {
  let at: number | undefined;
  return operations.map((op) => {
    if (op.kind !== 'create' || !isChangeEntity(op.entity)) return op;
    const e = op.entity;
    const writeId = e.properties[CHANGE.writeId]?.value;
    at ??= nextChangeTime();
    return { ...op, entity: { ...e, rowKey: changeRowKey(at, String(writeId)) } };
  });
}

/** When the change with this RowKey was made (ms since the epoch). */
export function changeTime(changeKey: string): number {
  return fromInvertedTicks(changeKey.slice(CHANGE_ROW_KEY_PREFIX.length, CHANGE_ROW_KEY_PREFIX.length + 19)).getTime();
}
