/**
 * Compiles wide entities (the guide's "Wide entities pattern"): a type's properties spread over as many entities as
 * they need, and the uses such a type cannot have. Reading and writing the parts is src/model/wide-entities.ts.
 */
import type { ASTNode, GraphQLSchema } from 'graphql';
import { type EntityModel, type Model, type StoredField, type WideLayout } from '../model/types';
import type { SchemaProblems } from './schema-errors';
import { fieldNode, refuseUses } from './entity-uses';
import { MAX_USER_PROPERTIES, SYSTEM_PROPERTIES, MAX_PARTS } from '../model/wide-entities';

/**
 * The parts an entity type's properties need, or undefined when they fit in one entity.
 * @returns a layout of at most MAX_PARTS parts, or a string saying why the properties cannot be stored
 */
export function splitProperties(fields: ReadonlyMap<string, StoredField>, keyFields: readonly string[]): WideLayout | undefined | string {
  const others = [...fields.values()].filter((f) => !keyFields.includes(f.name)).flatMap((f) => f.series?.properties ?? [f.name]);
  const perPart = MAX_USER_PROPERTIES - SYSTEM_PROPERTIES - keyFields.length;
  if (others.length <= perPart) return undefined;
  if (perPart < 1) return `its ${keyFields.length} key fields leave no room in an entity for other properties`;
  const parts: Array<Set<string>> = [];
  for (let i = 0; i < others.length; i += perPart) parts.push(new Set(others.slice(i, i + perPart)));
  if (parts.length > MAX_PARTS) {
    return `its ${others.length} properties need ${parts.length} entities of ${perPart} (the guide's "Wide entities pattern"), but one EGT writes at most ${MAX_PARTS}`;
  }
  return { parts };
}

/**
 * What a wide entity cannot be part of, refused at start-up: every one of them reads or writes the entity as one
 * physical entity (a range query, an index entity, a summary holder's merge, a copy, a reference's check, a move,
 * a SAS for its partition, a table per period, an interface's shared layout).
 */
export function checkWideUses(schema: GraphQLSchema, model: Model, problems: SchemaProblems): void {
  const wide = (e: EntityModel | undefined) => e?.wide !== undefined;
  const refusal = (entity: EntityModel, what: string) =>
    `${entity.name} is a wide entity stored as ${entity.wide!.parts.length} entities (the guide's "Wide entities pattern"): it cannot ${what}; read it with a point query`;
  const refuse = (coordinate: string, entity: EntityModel, what: string, node?: ASTNode) =>
    problems.add(coordinate, refusal(entity, what), node ?? fieldNode(schema, coordinate));
  for (const e of model.entities.values()) {
    if (!wide(e)) continue;
    if (e.indexes.size > 0) refuse(`${e.name}@index(${[...e.indexes.keys()][0]})`, e, 'have index entities', [...e.indexes.values()][0].node);
    if (e.layout.tableTemplate) refuse(e.name, e, 'have a table per period', e.node);
  }
  for (const i of model.interfaces.values())
    for (const e of i.implementations ?? []) if (wide(e)) refuse(i.name, e, `implement the stored interface ${i.name}`, e.node);
  for (const path of model.accessPaths.values()) {
    if (path.kind === 'range' && (wide(path.target) || wide(path.join?.entity)))
      refuse(path.coordinate, wide(path.target) ? path.target : path.join!.entity, 'be read by a range query');
    else if (path.kind === 'point' && path.checkOnWrite && wide(path.target))
      refuse(path.coordinate, path.target, 'be the target of a reference checked on write (@point(checkOnWrite: false) reads it without the check)');
  }
  refuseUses(schema, model, problems, wide, refusal);
}
