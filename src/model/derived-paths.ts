/**
 * The names of derived access paths (docs/schema-changes.md): what the catalogue records a state for, and what a
 * read checks before it reads through one (src/read/path-gate.ts).
 */
import type { IndexModel, SummaryModel } from './types';

/** The kinds of derived access path a deployment builds. */
export type PathKind = 'index' | 'summary' | 'copy' | 'changeLog';

/** A derived path's id, e.g. `index:Order.byCustomer`, `summary:Customer.orderCount`, `changeLog:Order`. */
export function pathId(kind: PathKind, type: string, name: string): string {
  return kind === 'changeLog' ? `${kind}:${type}` : `${kind}:${type}.${name}`;
}

/** The id of an index's path. */
export function indexPathId(index: IndexModel): string {
  return pathId('index', index.entity.name, index.name);
}

/** The id of a summary's path. */
export function summaryPathId(summary: SummaryModel): string {
  return pathId('summary', summary.holder.name, summary.field);
}
