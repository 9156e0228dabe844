/**
 * The rows that store an entity as read: its values as its type's fields type them, its WriteId and its move marks,
 * at the address its templates render, split into parts for a wide entity (the guide's "Wide entities pattern").
 * What a copy of a stored entity writes — a re-key's copy (src/evolution/rekey-build.ts), a snapshot's rows
 * (src/backup/snapshot.ts) — so that the copy is the entity, not the properties a page happened to return.
 */
import type { EntityToWrite, StoredEntity } from '../storage/storage-types';
import { randomUUID } from 'node:crypto';
import { primaryWrite, valuesOf } from './entity-codec';
import { MOVE_ID_PROPERTY, MOVED_IN_PROPERTY, WRITE_ID_PROPERTY, type EntityModel } from './types';
import { partAddresses, partProperties } from './wide-entities';

/**
 * @param entity the type, whose layout gives the address
 * @param source the entity as read (a wide one's parts merged), its `@encrypted` properties opened
 * @returns its table and its rows (one, or a wide entity's parts in part order); no index entity
 * @throws TablegraphError BAD_USER_INPUT when its values cannot form its keys or miss a non-null field
 */
export function entityRows(entity: EntityModel, source: StoredEntity): { table: string; rows: EntityToWrite[] } {
  const writeId = source.properties[WRITE_ID_PROPERTY];
  const primary = primaryWrite(entity, valuesOf(entity, source.properties), typeof writeId === 'string' ? writeId : randomUUID());
  for (const mark of [MOVE_ID_PROPERTY, MOVED_IN_PROPERTY]) {
    const value = source.properties[mark];
    if (typeof value === 'string' && value !== '') primary.entity.properties[mark] = { type: 'String', value };
  }
  return { table: primary.table, rows: storedRows(entity, primary.entity, primary.table) };
}

/**
 * The rows an entity's primary write (entity-codec.ts primaryWrite) is stored as: itself, or a wide entity's parts
 * in part order (the guide's "Wide entities pattern").
 */
export function storedRows(entity: EntityModel, primary: EntityToWrite, table: string): EntityToWrite[] {
  if (!entity.wide) return [primary];
  return partAddresses(entity.wide, { table, partitionKey: primary.partitionKey, rowKey: primary.rowKey }).map((a, i) => ({
    partitionKey: a.partitionKey,
    rowKey: a.rowKey,
    properties: partProperties(entity, i, primary.properties),
  }));
}
