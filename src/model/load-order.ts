/**
 * What a load can write, and in what order: a type's rows need the targets of its non-optional references and the
 * holders of its summaries loaded first. Shared by the loader (src/load/load-entities.ts) and by what writes files
 * for it (src/maintenance/tenant-export.ts).
 */
import { ErrorCode, TablegraphError } from '../errors';
import type { Model } from './types';

/**
 * Refuses a type load cannot write: not an entity type, a table per period, a wide entity.
 * @throws TablegraphError BAD_USER_INPUT
 */
export function checkLoadable(model: Model, type: string): void {
  if (!model.entities.has(type)) {
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${type} is not an @entity type of the schema (its types: ${[...model.entities.keys()].join(', ')})`, {
      type,
    });
  }
  const { layout, wide } = model.entities.get(type)!;
  // Rows are loaded as one entity each, into one table: not yet a table per period or a wide entity's parts.
  if (layout.tableTemplate || wide) {
    throw new TablegraphError(
      ErrorCode.BAD_USER_INPUT,
      `${type} ${wide ? 'is a wide entity' : 'has a table per period'}: load does not write such types yet; use its mutations`,
      { type },
    );
  }
}

/**
 * The types a type's rows need loaded before them: the targets of its non-optional references and the holders of its
 * summaries. An optional reference may be null: it does not order the steps (a row that sets it to an entity loaded
 * later is refused alone, ReferenceMissing).
 */
export function typeNeeds(model: Model, type: string): string[] {
  return [
    ...(model.references.get(type) ?? [])
      .filter((p) => ![...p.partitionKey.bindings.values(), ...p.rowKey.bindings.values()].some((b) => b.optional))
      .map((p) => p.target.name),
    ...[...model.summaries.values()].filter((s) => s.of.name === type).map((s) => s.holder.name),
  ].filter((other) => other !== type);
}
