/**
 * Compiles the join entities of many-to-many connections (`@range(through: "Join.field")`, the guide's "Modelling
 * relationships": one join entity per pair). The rule every part keeps: a join entity whose target is deleted is
 * deleted by the worker (and the summaries counting it follow), one whose target is moved is re-pointed at the new
 * address (src/derived/join-upkeep.ts); a page never fails for a target that is gone; `verify` reports a join entity that
 * points at nothing. To find a target's join entities, the worker needs a range of the target's type over them,
 * keyed by its own fields — as a copy does (build-copies.ts).
 */
import { reverseRange } from './build-copies';
import { referenceKeyFields } from './reference-checks';
import type { SchemaProblems } from './schema-errors';
import type { AccessPath, JoinModel } from '../model/types';

/**
 * Every join type's reference used by a `through` connection, by the name of the type it reaches.
 * @param problems a `through` whose target type declares no range over its join entities is a problem there
 */
export function buildJoins(accessPaths: Map<string, AccessPath>, problems: SchemaProblems): Map<string, JoinModel[]> {
  const joinsOf = new Map<string, JoinModel[]>();
  for (const path of accessPaths.values()) {
    if (path.kind !== 'range' || !path.join) continue;
    const { entity, reference } = path.join;
    const target = reference.target;
    if ((joinsOf.get(target.name) ?? []).some((j) => j.reference === reference)) continue;
    const reverse = reverseRange(target, entity, accessPaths);
    if (!reverse) {
      problems.add(
        path.coordinate,
        `through: "${entity.name}.${reference.fieldName}": when a ${target.name} is deleted or moved, the worker deletes or re-points its ${entity.name} join entities, found through a @range of ${target.name} over ${entity.name} (or its index, or through it) keyed by ${target.name}'s own fields: declare one`,
        path.node,
      );
      continue;
    }
    const keyFields = referenceKeyFields(reference);
    joinsOf.set(target.name, [...(joinsOf.get(target.name) ?? []), { entity, reference, reverse, keyFields }]);
  }
  return joinsOf;
}
