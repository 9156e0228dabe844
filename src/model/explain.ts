/**
 * The query plan of a schema, for people: for each field that reads storage, its access path (point or range
 * query, table, PartitionKey and RowKey templates and where their values come from, the index it reads) and the
 * waves of storage calls it costs ("Design for querying").
 */
import type { AccessPath, BoundTemplate } from './types';
import type { Model } from './types';

/** One field's plan. */
export interface FieldPlan {
  coordinate: string;
  kind: 'point query' | 'range query';
  table: string;
  partitionKey: string;
  rowKey: string;
  index?: { name: string; scope: string; projection: string[] };
  /** Waves of storage calls when the selection is covered by what the path reads (calls in sequence). */
  waves: number;
  /** Waves when the selection needs fields an index entity does not hold (the entity is read in one more wave). */
  maxWaves: number;
  /** Entities per page, for range queries: default and maximum `first`. */
  pageSize?: { default: number; max: number };
}

function describe(bound: BoundTemplate | undefined): string {
  if (!bound) return '';
  const from = [...bound.bindings].map(([placeholder, b]) => `${placeholder} ← ${b.source === 'argument' ? `$${b.name}` : `parent.${b.name}`}`);
  return from.length ? `"${bound.template.source}" (${from.join(', ')})` : `"${bound.template.source}"`;
}

function rowKeyOf(path: AccessPath): string {
  if (path.kind === 'point') return describe(path.rowKey);
  if (path.rowKeyPrefix) return `prefix ${describe(path.rowKeyPrefix)}`;
  return `from ${describe(path.rowKeyFrom) || 'the start'} to ${describe(path.rowKeyTo) || 'the end'}`;
}

/** The plan of every storage-reading field, root (Query) fields first, then by coordinate. */
export function explainModel(model: Model): FieldPlan[] {
  const plans = [...model.accessPaths.values()].map((path): FieldPlan => {
    const coveredOnly = path.index === undefined;
    return {
      coordinate: path.coordinate,
      kind: path.kind === 'point' ? 'point query' : 'range query',
      table: path.table,
      partitionKey: describe(path.partitionKey),
      rowKey: rowKeyOf(path),
      index: path.index && { name: path.index.name, scope: path.index.scope, projection: [...path.index.projection] },
      waves: 1,
      maxWaves: coveredOnly ? 1 : 2,
      pageSize: path.kind === 'range' ? { default: path.pageSize, max: path.maxPageSize } : undefined,
    };
  });
  const rank = (p: FieldPlan) => (p.coordinate.startsWith('Query.') ? 0 : 1);
  return plans.sort((a, b) => rank(a) - rank(b) || a.coordinate.localeCompare(b.coordinate));
}

/** The plan as text, one block per field. */
export function formatPlan(plans: FieldPlan[]): string {
  const lines: string[] = [];
  for (const p of plans) {
    lines.push(`${p.coordinate}`);
    lines.push(`  ${p.kind} on table ${p.table}`);
    lines.push(`    PartitionKey ${p.partitionKey}`);
    lines.push(`    RowKey       ${p.rowKey}`);
    if (p.index) lines.push(`    via ${p.index.scope} index "${p.index.name}" holding ${p.index.projection.join(', ')}`);
    if (p.pageSize) lines.push(`    page size    ${p.pageSize.default} entities by default, at most ${p.pageSize.max}`);
    lines.push(
      p.maxWaves > p.waves
        ? `  waves: ${p.waves}; ${p.maxWaves} when the selection needs a field the index does not hold`
        : `  waves: ${p.waves}`,
    );
  }
  return lines.join('\n');
}
