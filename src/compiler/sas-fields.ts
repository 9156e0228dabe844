/**
 * Compiles `@sas` fields: String fields of an entity type that return a read-only shared access signature URL for
 * the entity's own partition (the guide's "Shared access signatures"; signed by src/storage/sas.ts).
 */
import { getDirectiveValues, getNamedType, isListType, isNonNullType, isObjectType, type GraphQLSchema } from 'graphql';
import type { SchemaProblems } from './schema-errors';
import type { EntityModel, SasField } from '../model/types';

const MIN_SECONDS = 60;
const MAX_SECONDS = 7 * 24 * 3600;

/** Whether a field definition carries `@sas` (such a field is not a stored property). */
export function hasSas(node: { directives?: readonly { name: { value: string } }[] } | undefined | null): boolean {
  return Boolean(node?.directives?.some((d) => d.name.value === 'sas'));
}

/** Every `@sas` field, by `Type.field`; problems for one on a non-entity type, not a String, or out of range. */
export function buildSasFields(schema: GraphQLSchema, entities: Map<string, EntityModel>, problems: SchemaProblems): Map<string, SasField> {
  const out = new Map<string, SasField>();
  const def = schema.getDirective('sas');
  if (!def) return out;
  for (const type of Object.values(schema.getTypeMap())) {
    if (!isObjectType(type) || type.name.startsWith('__')) continue;
    for (const field of Object.values(type.getFields())) {
      const d = field.astNode?.directives?.find((x) => x.name.value === 'sas');
      if (!d) continue;
      const coordinate = `${type.name}.${field.name}`;
      const entity = entities.get(type.name);
      const inner = isNonNullType(field.type) ? field.type.ofType : field.type;
      const { expiresInSeconds } = getDirectiveValues(def, { directives: [d] }) as { expiresInSeconds: number };
      if (!entity) problems.add(coordinate, "@sas goes on a field of an @entity type: it signs for that entity's partition", d);
      else if (isListType(inner) || getNamedType(field.type).name !== 'String' || field.args.length > 0)
        problems.add(coordinate, '@sas goes on a String field without arguments', d);
      else if (!(expiresInSeconds >= MIN_SECONDS && expiresInSeconds <= MAX_SECONDS))
        problems.add(coordinate, `@sas(expiresInSeconds: ${expiresInSeconds}): between ${MIN_SECONDS} and ${MAX_SECONDS}`, d);
      else out.set(coordinate, { entity, field: field.name, expiresInSeconds, node: d });
    }
  }
  return out;
}
