/**
 * Reference checks on write. Table storage keeps no referential integrity ("Modelling relationships": the
 * application enforces it), so a write that points a reference — a `@point` field of an entity type whose keys
 * all come from the entity's own fields, e.g. `Order.customer` — at an address first reads that address, and
 * is refused with NOT_FOUND naming the field when nothing of the target type is stored there. The read is made
 * with the write's other reads (group-read.ts); the check is pure and runs while planning (write-plan.ts).
 *
 * What the check does not promise: the target may be deleted by another write after the check and before or after
 * the EGT commits (there is no transaction across partitions). Such a dangling reference reads as null where the
 * field is nullable, and NOT_FOUND where it is not.
 */
import { ErrorCode, TablegraphError } from '../errors';
import { referenceAddress, referenceFields } from '../model/references';
import { ENTITY_TYPE_PROPERTY, type Model, type PointPath, type WriteModel } from '../model/types';
import type { StoredEntity } from '../storage/storage-types';
import { addressKey } from '../storage/address-key';

type Values = Record<string, unknown>;

/**
 * The references a write must check: for a create or replace every reference, for an update those whose key
 * fields it gives; none for a delete (`values` null).
 * @param values the entity's values after the write
 */
export function referencesToCheck(model: Model, write: WriteModel, input: Values, values: Values | null): PointPath[] {
  if (!values) return [];
  const paths = model.references.get(write.entity.name) ?? [];
  return write.action === 'UPDATE' ? paths.filter((p) => referenceFields(p).some((f) => input[f] !== undefined)) : paths;
}

/**
 * Refuses a write whose references point at nothing.
 * @param stored what was read at each reference's address, by addressKey (null: nothing there)
 * @throws TablegraphError NOT_FOUND (reason ReferenceMissing, `field` the reference) when the target does not exist
 *   or is of another type; BAD_USER_INPUT when a value cannot form the target's key
 */
export function checkReferences(model: Model, write: WriteModel, input: Values, values: Values | null, stored: ReadonlyMap<string, StoredEntity | null>): void {
  for (const path of referencesToCheck(model, write, input, values)) {
    const address = referenceAddress(path, values!);
    if (!address) continue;
    const target = stored.get(addressKey(address));
    const expected = path.index ? path.index.entityType : path.target.entityType;
    if (target && target.properties[ENTITY_TYPE_PROPERTY] === expected) continue;
    const given = Object.fromEntries(referenceFields(path).map((f) => [f, values![f]]));
    throw new TablegraphError(
      ErrorCode.NOT_FOUND,
      `${path.coordinate}: no ${path.target.name} exists at ${JSON.stringify(given)}; create it first, or point ${path.fieldName} elsewhere`,
      {
        reason: 'ReferenceMissing',
        field: path.fieldName,
        partitionKey: address.partitionKey,
        rowKey: address.rowKey,
      },
    );
  }
}
