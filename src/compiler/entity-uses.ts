/**
 * The uses of an entity type beyond its own reads and writes — a summary of it or held by it, a copy held by it or
 * taken from it, a move, a `@sas` field signing its partition — for the layouts that cannot take part in them (a
 * table per period, a wide entity) to refuse at start-up, each at its field's SDL location.
 */
import type { ASTNode, GraphQLSchema } from 'graphql';
import type { EntityModel, Model } from '../model/types';
import type { SchemaProblems } from './schema-errors';

/** The SDL node of field `Type.field`, for an error's location (undefined for another kind of coordinate). */
export function fieldNode(schema: GraphQLSchema, coordinate: string): ASTNode | undefined {
  const [type, field] = coordinate.split('.');
  const named = schema.getType(type);
  return named && 'getFields' in named ? ((named.getFields() as Record<string, { astNode?: ASTNode | null }>)[field]?.astNode ?? undefined) : undefined;
}

/**
 * Records a problem for each use of an entity type `applies` to, worded by `refusal` (given the type and what it
 * cannot do, e.g. "be summarised").
 */
export function refuseUses(
  schema: GraphQLSchema,
  model: Model,
  problems: SchemaProblems,
  applies: (e: EntityModel) => boolean,
  refusal: (e: EntityModel, what: string) => string,
): void {
  const refuse = (coordinate: string, entity: EntityModel, what: string) => problems.add(coordinate, refusal(entity, what), fieldNode(schema, coordinate));
  for (const [coordinate, s] of model.summaries) {
    if (applies(s.of)) refuse(coordinate, s.of, 'be summarised');
    else if (applies(s.holder)) refuse(coordinate, s.holder, 'hold a summary');
  }
  for (const copies of model.copiesOf.values()) {
    for (const c of copies) {
      const coordinate = `${c.entity.name}.${c.field}`;
      if (applies(c.entity)) refuse(coordinate, c.entity, 'hold a copy');
      else if (applies(c.reference.target)) refuse(coordinate, c.reference.target, 'be copied from');
    }
  }
  for (const w of model.writes.values()) if (w.action === 'MOVE' && applies(w.entity)) refuse(w.coordinate, w.entity, 'move');
  for (const [coordinate, sas] of model.sasFields) if (applies(sas.entity)) refuse(coordinate, sas.entity, 'sign a SAS for its partition');
}
