/**
 * Compiles `@copy` fields (the guide's "Denormalization pattern"): a field of an entity type that holds a copy of
 * a field of the entity one of its references points at. The writer fills it when a write sets the reference
 * (src/write/write-plan.ts); the message worker keeps it in step with the target (src/derived/copy-refresh.ts), finding
 * the copies through a range of the target type over the copying type — which the schema must declare, since a
 * request path never scans and neither does the worker.
 */
import { isObjectType, type GraphQLSchema } from 'graphql';
import { readCopy, type CopyDirective } from './directives';
import type { SchemaProblems } from './schema-errors';
import { referenceKeyFields, notAReference } from './reference-checks';
import type { AccessPath, CopyModel, EntityModel, RangePath, SummaryModel } from '../model/types';

/**
 * Reads every `@copy` field into its entity's `copies`.
 * @returns the copies by the name of the type copied from
 */
export function buildCopies(
  schema: GraphQLSchema,
  entities: Map<string, EntityModel>,
  accessPaths: Map<string, AccessPath>,
  summaries: Map<string, SummaryModel>,
  problems: SchemaProblems,
): Map<string, CopyModel[]> {
  const copiesOf = new Map<string, CopyModel[]>();
  for (const type of Object.values(schema.getTypeMap())) {
    if (!isObjectType(type) || type.name.startsWith('__')) continue;
    for (const f of Object.values(type.getFields())) {
      const d = readCopy(schema, f.astNode);
      if (!d) continue;
      const copy = buildCopy({ entities, accessPaths, summaries, problems }, { typeName: type.name, fieldName: f.name }, d);
      if (!copy) continue;
      copy.entity.copies.set(f.name, copy);
      const target = copy.reference.target;
      copiesOf.set(target.name, [...(copiesOf.get(target.name) ?? []), copy]);
    }
  }
  return copiesOf;
}

/** One `@copy` field, checked; undefined (with problems) when it cannot be one. */
function buildCopy(
  compiled: { entities: Map<string, EntityModel>; accessPaths: Map<string, AccessPath>; summaries: Map<string, SummaryModel>; problems: SchemaProblems },
  field: { typeName: string; fieldName: string },
  d: CopyDirective,
): CopyModel | undefined {
  const { entities, accessPaths, summaries, problems } = compiled;
  const { typeName, fieldName } = field;
  const coordinate = `${typeName}.${fieldName}`;
  const entity = entities.get(typeName);
  const stored = entity?.fields.get(fieldName);
  if (!entity || !stored) {
    problems.add(coordinate, '@copy goes on a stored field of an @entity type', d.node);
    return undefined;
  }
  const reference = accessPaths.get(`${typeName}.${d.from}`);
  const why =
    reference?.kind === 'point'
      ? notAReference(reference, typeName)
      : `${typeName}.${d.from} must be a reference: a @point field whose keys come from ${typeName}'s own fields`;
  if (!reference || reference.kind !== 'point' || why) {
    problems.add(coordinate, `@copy(from: "${d.from}"): ${why}`, d.node);
    return undefined;
  }
  const target = reference.target;
  const source = target.fields.get(d.field);
  if (!source) {
    problems.add(coordinate, `@copy(field: "${d.field}"): ${target.name} has no stored field "${d.field}"`, d.node);
    return undefined;
  }
  if ([source, stored].some((f) => f.series || f.list || f.value || f.encrypted || f.blob)) {
    problems.add(coordinate, 'a @series, a list, a value object, an @encrypted or a @blob field is neither copied nor a copy', d.node);
    return undefined;
  }
  if (source.graphqlType !== stored.graphqlType || stored.nonNull) {
    problems.add(coordinate, `a copy of ${target.name}.${d.field} is a nullable ${source.graphqlType} (its target may go)`, d.node);
    return undefined;
  }
  if (entity.keyFields.includes(fieldName)) {
    problems.add(coordinate, 'a copy cannot be part of a key: it changes when its target does', d.node);
    return undefined;
  }
  const indexed = [...entity.indexes.values()].find((i) => i.projection.has(fieldName));
  if (indexed) {
    problems.add(
      coordinate,
      `a copy cannot be in an index entity (@index "${indexed.name}" holds it): its copies there would not be kept; remove it from include`,
      d.node,
    );
    return undefined;
  }
  const summed = [...summaries.values()].find((s) => s.of === entity && s.terms.flat().some((x) => 'field' in x && x.field === fieldName));
  if (summed) {
    problems.add(
      coordinate,
      `a copy cannot be summed (${summed.holder.name}.${summed.field}): the summary would change without a write of ${entity.name}`,
      d.node,
    );
    return undefined;
  }
  const reverse = reverseRange(target, entity, accessPaths);
  if (!reverse) {
    problems.add(
      coordinate,
      `the worker finds the copies of ${target.name}.${d.field} through a @range of ${target.name} over ${entity.name} (or its index, or through it) keyed by ${target.name}'s own fields: declare one`,
      d.node,
    );
    return undefined;
  }
  return { entity, field: fieldName, reference, targetField: d.field, reverse };
}

/** A range field of `target` whose entities are `holder`'s (or its index entities, or its join entities), keyed by `target`'s fields. */
export function reverseRange(target: EntityModel, holder: EntityModel, accessPaths: Map<string, AccessPath>): RangePath | undefined {
  for (const path of accessPaths.values()) {
    if (path.kind !== 'range' || path.parentType !== target.name || !path.rowKeyPrefix) continue;
    const lists = path.join?.entity ?? path.index?.entity ?? path.target;
    if (lists !== holder) continue;
    const bindings = [...path.partitionKey.bindings.values(), ...path.rowKeyPrefix.bindings.values()];
    if (bindings.every((b) => b.source === 'parent')) return path;
  }
  return undefined;
}

/**
 * Fills each many-to-many path's `covered`: the target's fields that name it (its key fields, or through a unique
 * index the fields the index is keyed by), from the join entity's fields its reference binds them from, and the
 * target's fields the join entity copies through that reference — unless the range reads index entities, which
 * hold no copies.
 */
export function coverJoins(accessPaths: Map<string, AccessPath>): void {
  for (const path of accessPaths.values()) {
    if (path.kind !== 'range' || !path.join) continue;
    const { reference, entity, covered } = path.join;
    for (const [targetField, from] of referenceKeyFields(reference)) if (!path.index || path.index.projection.has(from)) covered.set(targetField, from);
    if (path.index) continue;
    for (const copy of entity.copies.values()) if (copy.reference === reference) covered.set(copy.targetField, copy.field);
  }
}
