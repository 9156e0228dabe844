/**
 * Copies (`@copy`, the guide's "Denormalization pattern") in a write's plan (write-plan.ts): the entity's own copies
 * set from the targets read, and the copies others hold of its fields brought up to date in its EGT where they share
 * its partition — the rest are the worker's (src/derived/copy-refresh.ts).
 */
import { typedValue } from '../model/entity-codec';
import { referenceAddress, referenceFields } from '../model/references';
import { ENTITY_TYPE_PROPERTY, type CopyModel, type Model, type WriteModel } from '../model/types';
import { addressKey } from '../storage/address-key';
import type { EntityAddress, StoredEntity, TransactionOperation } from '../storage/storage-types';
import type { ReadState, Values } from './plan-types';

/**
 * Sets the entity's copies (`@copy`) from the targets read, for the references the write sets (a create or replace
 * sets them all). A target that was not read (a reference with `checkOnWrite: false`) leaves its copies to the worker.
 * @returns whether the write sets a reference with copies (the worker checks them again after the commit)
 */
export function fillCopies(write: WriteModel, input: Values, values: Values | null, targets: ReadonlyMap<string, StoredEntity | null>): boolean {
  if (!values || write.entity.copies.size === 0) return false;
  let sets = false;
  for (const copy of write.entity.copies.values()) {
    const fields = referenceFields(copy.reference);
    if (write.action === 'UPDATE' && !fields.some((f) => input[f] !== undefined)) continue;
    sets = true;
    const address = referenceAddress(copy.reference, values);
    const target = address ? targets.get(addressKey(address)) : null;
    if (target === undefined) continue;
    // Through a unique index, what was read is the index entity: it holds the copied field only when the index
    // includes it; otherwise the copy is null until the worker reads the target.
    const index = copy.reference.index;
    const holds = !index || (index.projection.has(copy.targetField) && target?.properties[ENTITY_TYPE_PROPERTY] === index.entityType);
    values[copy.field] = holds ? (target?.properties[copy.targetField] ?? null) : null;
  }
  return sets;
}

/** Where a written entity's copies of one kind are listed in GroupState.copyHolders. */
export function copyListKey(address: EntityAddress, copy: CopyModel): string {
  return `${addressKey(address)}\u0000${copy.entity.name}.${copy.field}`;
}

/** The copies (`@copy`) of the entity's fields a write changes to a new, non-null value. */
export function changedCopies(model: Model, entity: WriteModel['entity'], previous: Values | null, values: Values | null): CopyModel[] {
  if (!previous || !values) return [];
  return (model.copiesOf.get(entity.name) ?? []).filter(
    (c) =>
      values[c.targetField] !== null &&
      values[c.targetField] !== undefined &&
      JSON.stringify(previous[c.targetField] ?? null, bigints) !== JSON.stringify(values[c.targetField], bigints),
  );
}

/**
 * The merges that bring copies held in the written entity's own partition up to date in its EGT (the guide's
 * "Denormalization pattern" kept by the writer). Copies elsewhere, too many, or becoming null (a merge cannot
 * remove a property) are the worker's.
 */
export function sameEgtCopies(
  model: Model,
  change: { entity: WriteModel['entity']; address: EntityAddress; previous: Values | null; values: Values | null },
  state: ReadState,
): TransactionOperation[] {
  const { entity, address, previous, values } = change;
  const ops: TransactionOperation[] = [];
  for (const copy of changedCopies(model, entity, previous, values)) {
    const holders = state.copyHolders?.get(copyListKey(address, copy));
    if (!holders) continue;
    const value = typedValue(copy.entity.fields.get(copy.field)!, values![copy.targetField]);
    for (const h of holders)
      ops.push({ kind: 'update', mode: 'merge', entity: { partitionKey: h.partitionKey, rowKey: h.rowKey, properties: { [copy.field]: value } } });
  }
  return ops;
}

/** Whether a write changes a field of the entity that other entities copy (`@copy`). */
export function copiedFieldsChanged(model: Model, entity: WriteModel['entity'], previous: Values | null, values: Values | null): boolean {
  const copies = model.copiesOf.get(entity.name) ?? [];
  if (copies.length === 0 || !previous) return false;
  if (!values) return true;
  return copies.some((c) => JSON.stringify(previous[c.targetField] ?? null, bigints) !== JSON.stringify(values[c.targetField] ?? null, bigints));
}

export const bigints = (_k: string, v: unknown) => (typeof v === 'bigint' ? v.toString() : v);
