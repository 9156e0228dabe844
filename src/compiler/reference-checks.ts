/**
 * References as the compiler checks them: which `@point` fields `@copy`, `@range(through)` and `@summary(via)` can
 * follow, and which fields of the referring entity name the target. Following a reference at run time is
 * src/model/references.ts.
 */
import { type PointPath } from '../model/types';

/**
 * The fields of the referring entity that name the target, by the target's field each holds: the target's key
 * fields for a reference by keys, the fields its index is keyed by for one through an index (`customerId` for
 * `id`). Only placeholders that stand alone at the same position of both templates pair up.
 */
export function referenceKeyFields(path: PointPath): Map<string, string> {
  const layout = path.index?.layout ?? path.target.layout;
  const out = new Map<string, string>();
  for (const [bound, template] of [
    [path.partitionKey, layout.partitionKey],
    [path.rowKey, layout.rowKey],
  ] as const) {
    bound.template.segments.forEach((seg, i) => {
      const other = template.segments[i];
      const from = seg.kind === 'placeholder' ? bound.bindings.get(seg.name) : undefined;
      if (other?.kind === 'placeholder' && from?.source === 'parent') out.set(other.name, from.name);
    });
  }
  return out;
}

/**
 * Why a `@point` field of `holder` is not a reference that `@copy`, `@range(through)` and `@summary(via)` can
 * follow: one whose keys all come from the holder's own fields, addressing the target itself or a unique index of
 * it (a non-unique index entity would not name one target); undefined when it is one.
 */
export function notAReference(path: PointPath, holder: string): string | undefined {
  const bindings = [...(path.tableTemplate?.bindings.values() ?? []), ...path.partitionKey.bindings.values(), ...path.rowKey.bindings.values()];
  if (bindings.some((b) => b.source !== 'parent')) return `${path.coordinate} must be a reference: its keys from ${holder}'s own fields, none from an argument`;
  if (path.index && !path.index.unique)
    return `${path.coordinate} reads ${path.target.name}@index(${path.index.name}), which is not unique: a reference through an index needs unique: true, so that it names one ${path.target.name}`;
  return undefined;
}
