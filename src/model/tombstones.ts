/**
 * A tombstone: what a delete leaves at an entity's address while the entities pointing at it with `@point(onDelete:
 * CASCADE)` are being deleted (src/derived/dependent-upkeep.ts). It is no entity of any type (its EntityType is none a
 * schema can name: `~` is no GraphQL name character), so every read passes it by as it passes another type's entity
 * (the entity reads as deleted at once); but it holds the address — a create there is refused (CONFLICT, reason
 * `DeletePending`) until the worker has deleted the dependents, and then the tombstone — so a target created again
 * can never take over the dependents of the one deleted. It carries the delete's write id, which tells the delete's
 * own read-back and its fan-out message that it committed.
 */
import { ENTITY_TYPE_PROPERTY, WRITE_ID_PROPERTY, type EntityModel } from './types';
import type { EntityAddress, EntityToWrite, StoredEntity } from '../storage/storage-types';

/** The EntityType of every tombstone. */
export const TOMBSTONE_ENTITY_TYPE = '~deleted';
/** The property naming the EntityType of the entity a tombstone stands for. */
export const TOMBSTONE_OF_PROPERTY = 'TombstoneOf';

/** The tombstone a delete (write `writeId`) of an entity of `entity` at `address` leaves. */
export function tombstone(entity: EntityModel, address: EntityAddress, writeId: string): EntityToWrite {
  return {
    partitionKey: address.partitionKey,
    rowKey: address.rowKey,
    properties: {
      [ENTITY_TYPE_PROPERTY]: { type: 'String', value: TOMBSTONE_ENTITY_TYPE },
      [TOMBSTONE_OF_PROPERTY]: { type: 'String', value: entity.entityType },
      [WRITE_ID_PROPERTY]: { type: 'String', value: writeId },
    },
  };
}

/** Whether a stored entity is a tombstone. */
export function isTombstone(stored: StoredEntity | null | undefined): boolean {
  return stored?.properties[ENTITY_TYPE_PROPERTY] === TOMBSTONE_ENTITY_TYPE;
}
