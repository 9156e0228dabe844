/**
 * The names of derived access paths (docs/schema-changes.md): what the catalogue records a state for, and what a
 * read checks before it reads through one (src/read/path-gate.ts).
 */
import type { IndexModel, Model, SummaryModel } from './types';

/**
 * The kinds of derived access path a deployment builds; `rekey` is an entity type's own entities moved to the
 * addresses of a changed table, PartitionKey or RowKey template (src/evolution/rekey-build.ts).
 */
export type PathKind = 'index' | 'summary' | 'copy' | 'changeLog' | 'rekey';

/** A derived path's id, e.g. `index:Order.byCustomer`, `summary:Customer.orderCount`, `changeLog:Order`, `rekey:Order`. */
export function pathId(kind: PathKind, type: string, name: string): string {
  return kind === 'changeLog' || kind === 'rekey' ? `${kind}:${type}` : `${kind}:${type}.${name}`;
}

/** The id of the re-key of an entity type's own entities, e.g. `rekey:Order`. */
export function rekeyPathId(type: string): string {
  return pathId('rekey', type, type);
}

/** The id of an index's path. */
export function indexPathId(index: IndexModel): string {
  return pathId('index', index.entity.name, index.name);
}

/** The id of a summary's path. */
export function summaryPathId(summary: SummaryModel): string {
  return pathId('summary', summary.holder.name, summary.field);
}

/**
 * The entity types a derived path reads or writes: an index's type; a summary's holder and the type it sums; a copy's
 * holder and its target; a change log's or a re-key's type.
 * @param id a path id, e.g. `summary:Customer.orderCount`
 * @returns type names, the path's own type first
 */
export function pathTypes(model: Model, id: string): string[] {
  const kind = id.slice(0, id.indexOf(':'));
  const [type, name] = id.slice(id.indexOf(':') + 1).split('.');
  if (kind === 'summary') {
    const summary = model.summaries.get(`${type}.${name}`);
    return summary ? [type, summary.of.name] : [type];
  }
  if (kind === 'copy') {
    const copy = model.entities.get(type)?.copies.get(name);
    return copy ? [type, copy.reference.target.name] : [type];
  }
  return [type];
}
