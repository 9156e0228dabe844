/**
 * Compiles what a delete does to the entities that point at the deleted one (the guide's "Modelling relationships":
 * Table storage keeps no referential integrity, the application does), so that no delete leaves a non-null reference
 * pointing at nothing:
 * - the join entities of many-to-many connections (`@range(through: "Join.field")`, one join entity per pair) are
 *   deleted by the worker after their target (and re-pointed when it moves: src/derived/dependent-upkeep.ts);
 * - a reference declared `@point(onDelete: CASCADE)`: its entities are deleted with the target — by the worker,
 *   through the write path, the target's address holding a tombstone until they are gone;
 * - any other non-null reference to a type that can be deleted is `RESTRICT`: the delete is refused while one points
 *   at it, found through a range or told by a count of them on the target.
 *
 * To find the entities pointing at a target, a delete (and the worker) needs a range of the target's type over them,
 * keyed by its own fields — as a copy does (build-copies.ts); RESTRICT may make do with a count summary instead. A
 * schema where a delete could leave a non-null reference dangling, or a cascade would stop at a RESTRICT, is refused
 * with the reference's location.
 */
import { isNonNullType, isObjectType, type GraphQLSchema } from 'graphql';
import { reverseRange } from './build-copies';
import { notAReference, referenceKeyFields } from './reference-checks';
import type { SchemaProblems } from './schema-errors';
import type { AccessPath, DependentModel, EntityModel, Model, OnDelete, PointPath, RangePath } from '../model/types';

/** What the pass reads of the model being built. */
type Built = Pick<Model, 'entities' | 'accessPaths' | 'references' | 'writes' | 'summaries'>;

/**
 * Every dependent, by the name of the type its reference reaches.
 * @param problems a `through` or CASCADE target type with no range over its dependents, a RESTRICT with neither a
 *   range nor a count, a cascade reaching a RESTRICT, a tombstone a wide type cannot hold
 */
export function buildDependents(schema: GraphQLSchema, built: Built, problems: SchemaProblems): Map<string, DependentModel[]> {
  const dependentsOf = new Map<string, DependentModel[]>();
  const add = (d: DependentModel) => dependentsOf.set(d.reference.target.name, [...(dependentsOf.get(d.reference.target.name) ?? []), d]);
  const joins = joinReferences(built.accessPaths, problems);
  for (const [reference, join] of joins) {
    // A join reference declared RESTRICT is one like any other (below).
    if (reference.onDelete !== 'RESTRICT') add({ ...join, reference, onDelete: 'CASCADE', join: true, keyFields: referenceKeyFields(reference) });
  }
  const deleted = deletedTypes(built, joins);
  for (const [type, references] of built.references) {
    for (const reference of references) {
      if (joins.has(reference) && reference.onDelete !== 'RESTRICT') continue;
      const onDelete = effectiveOnDelete(schema, reference);
      if (!onDelete || !deleted.has(reference.target.name)) continue;
      const dependent = dependentOf(built, { entity: built.entities.get(type)!, reference, onDelete }, problems);
      if (dependent) add(dependent);
    }
  }
  refuseStoppedCascades(dependentsOf, problems);
  return dependentsOf;
}

/**
 * Every join reference a `through` connection follows, with its join type and the range of its target over them.
 * @param problems a `through` whose target type declares no range over its join entities is a problem there
 */
function joinReferences(accessPaths: Map<string, AccessPath>, problems: SchemaProblems): Map<PointPath, { entity: EntityModel; reverse: RangePath }> {
  const joins = new Map<PointPath, { entity: EntityModel; reverse: RangePath }>();
  for (const path of accessPaths.values()) {
    if (path.kind !== 'range' || !path.join || joins.has(path.join.reference)) continue;
    const { entity, reference } = path.join;
    const target = reference.target;
    const reverse = reverseRange(target, entity, accessPaths);
    if (!reverse) {
      problems.add(
        path.coordinate,
        `through: "${entity.name}.${reference.fieldName}": when a ${target.name} is deleted or moved, the worker deletes or re-points its ${entity.name} join entities, found through a @range of ${target.name} over ${entity.name} (or its index, or through it) keyed by ${target.name}'s own fields: declare one`,
        path.node,
      );
      continue;
    }
    joins.set(reference, { entity, reverse });
  }
  return joins;
}

/** A reference's `onDelete`: as declared, else RESTRICT for a non-null one; undefined for a nullable one left alone. */
function effectiveOnDelete(schema: GraphQLSchema, reference: PointPath): OnDelete | undefined {
  if (reference.onDelete) return reference.onDelete;
  const parent = schema.getType(reference.parentType);
  const field = isObjectType(parent) ? parent.getFields()[reference.fieldName] : undefined;
  return field && isNonNullType(field.type) ? 'RESTRICT' : undefined;
}

/**
 * The types whose entities can be deleted: those with a DELETE mutation, then — until nothing is added — those a
 * cascade or a join's upkeep deletes with their target.
 */
function deletedTypes(built: Built, joins: Map<PointPath, unknown>): Set<string> {
  const deleted = new Set([...built.writes.values()].filter((w) => w.action === 'DELETE').map((w) => w.entity.name));
  const cascades = [...built.references.values()].flat().filter((r) => r.onDelete === 'CASCADE' || (joins.has(r) && r.onDelete !== 'RESTRICT'));
  for (let grew = true; grew;) {
    grew = false;
    for (const r of cascades) {
      if (deleted.has(r.target.name) && !deleted.has(r.parentType)) {
        deleted.add(r.parentType);
        grew = true;
      }
    }
  }
  return deleted;
}

/** The dependent a reference makes, or undefined (a problem when nothing could find its entities). */
function dependentOf(
  built: Built,
  rule: { entity: EntityModel; reference: PointPath; onDelete: OnDelete },
  problems: SchemaProblems,
): DependentModel | undefined {
  const { entity, reference, onDelete } = rule;
  const target = reference.target;
  const reverse = reverseRange(target, entity, built.accessPaths);
  const counted = [...built.summaries.values()].some((s) => s.holder === target && s.via === reference && s.count);
  if (!reverse) {
    if (onDelete === 'RESTRICT' && counted) return undefined; // the count on the target refuses the delete (write-plan.ts)
    // A count is offered only where it would compile: a suggestion the schema then refuses is no suggestion.
    const count = countRefusal(built, target, entity, reference)
      ? ''
      : `, or count them on ${target.name} (@summary(of: "${entity.name}", via: "${reference.fieldName}", count: true))`;
    const how =
      onDelete === 'CASCADE'
        ? `onDelete: CASCADE deletes the ${entity.name} entities pointing at a deleted ${target.name}, found through a @range of ${target.name} over ${entity.name} (or its index) keyed by ${target.name}'s own fields: declare one`
        : `a ${target.name} can be deleted while ${entity.name} entities point at it, and this reference is non-null: declare a @range of ${target.name} over ${entity.name} (or its index) keyed by ${target.name}'s own fields, so that the delete is refused while one does (or deletes them: onDelete: CASCADE)${count}; or make the reference nullable`;
    problems.add(reference.coordinate, how, reference.node);
    return undefined;
  }
  if (onDelete === 'CASCADE' && target.wide) {
    problems.add(
      reference.coordinate,
      `onDelete: CASCADE leaves a tombstone at a deleted ${target.name}'s address, which a wide entity's parts cannot hold: use RESTRICT`,
      reference.node,
    );
    return undefined;
  }
  return { entity, reference, onDelete, join: false, reverse, keyFields: referenceKeyFields(reference) };
}

/**
 * Why `target` could not hold a count of the `entity` entities `reference` points it at (the refusals a `@summary` of
 * it would meet: build-summaries.ts, writes.ts, wide-layouts.ts, period-tables.ts, tenant-isolation.ts); undefined
 * when it could.
 */
function countRefusal(built: Built, target: EntityModel, entity: EntityModel, reference: PointPath): string | undefined {
  if ([...built.writes.values()].some((w) => w.action === 'MOVE' && w.entity === target)) return `${target.name} has a MOVE`;
  if (target.wide || entity.wide) return 'a wide entity holds no summary and is not summarised';
  if (target.layout.tableTemplate || entity.layout.tableTemplate) return 'a table per period holds no summary and is not summarised';
  if (target.tenantScoped !== entity.tenantScoped) return 'the two differ in tenant scope';
  return notAReference(reference, entity.name);
}

/**
 * A cascade must reach the end: an entity deleted with its target (a CASCADE or a join) that a RESTRICT reference
 * points at would stop it half-way — its target gone, it left. Refused at the RESTRICT reference.
 */
function refuseStoppedCascades(dependentsOf: Map<string, DependentModel[]>, problems: SchemaProblems): void {
  const all = [...dependentsOf.values()].flat();
  const cascaded = new Set(all.filter((d) => d.onDelete === 'CASCADE').map((d) => d.entity.name));
  for (const d of all) {
    const target = d.reference.target.name;
    if (d.onDelete !== 'RESTRICT' || !cascaded.has(target)) continue;
    const by = all.find((c) => c.onDelete === 'CASCADE' && c.entity.name === target)!;
    problems.add(
      d.reference.coordinate,
      `${target} entities are deleted with their ${by.reference.target.name} (${by.reference.coordinate}${by.join ? ', a join' : ': onDelete: CASCADE'}), and this reference (RESTRICT) would stop that half-way: declare onDelete: CASCADE here, or RESTRICT on ${by.reference.coordinate}`,
      d.reference.node,
    );
  }
}
