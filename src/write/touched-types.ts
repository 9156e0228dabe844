/**
 * The entity types a write reads or writes besides its own entity — what a process must serve for the write to be
 * made (src/read/path-gate.ts `assertServed`): while one of them is being re-keyed, the write is refused before
 * anything is read or sent.
 */
import type { EntityModel, Model, WriteModel } from '../model/types';

const cache = new WeakMap<WriteModel, string[]>();

/**
 * The types a write of `write` touches, its own first: a move's target type; the targets of its references (read to
 * check them and to fill copies); the holders of summaries of it kept in its EGT; the types holding copies of it in
 * its partition (rewritten in its EGT). Computed once per write model.
 * @returns entity type names, each once
 */
export function typesTouchedBy(model: Model, write: WriteModel): string[] {
  let types = cache.get(write);
  if (!types) {
    types = [...typesOf(model, write.entity, write.moveTarget)];
    cache.set(write, types);
  }
  return types;
}

/** The same, for a write of `entity` made by the worker (a copy refreshed, a summary's contribution): see above. */
export function typesTouchedByEntity(model: Model, entity: EntityModel): string[] {
  return [...typesOf(model, entity)];
}

function typesOf(model: Model, entity: EntityModel, moveTarget?: EntityModel): Set<string> {
  const types = new Set<string>([entity.name]);
  if (moveTarget) types.add(moveTarget.name);
  for (const path of model.references.get(entity.name) ?? []) types.add(path.target.name);
  for (const s of model.summaries.values()) if (s.of === entity) types.add(s.holder.name);
  for (const other of model.entities.values()) {
    for (const copy of other.copies.values()) if (copy.reference.target === entity) types.add(other.name);
  }
  return types;
}
