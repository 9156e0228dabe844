/**
 * Value objects: an object type without `@entity` used as the type of an entity's stored field (`dimensions:
 * Dimensions`, `addresses: [Address!]`) is kept inside its holder, as the JSON text of its fields in one property (the
 * guide's "About the Azure Table service": "To store complex data types in a single property, you must use a
 * serialized format such as JSON"). It has no keys and no access path of its own: it is read with its holder. Its
 * fields are values (`@constraint` applies), lists of values, or value objects (nested); it never holds itself.
 */
import {
  getNamedType,
  isListType,
  isNonNullType,
  isObjectType,
  type GraphQLField,
  type GraphQLNamedType,
  type GraphQLObjectType,
  type GraphQLSchema,
} from 'graphql';
import type { EntityModel, StoredField, ValueShape } from '../model/types';
import { edmTypeOf } from './edm-mapping';
import { readConstraint } from './read-constraint';
import type { SchemaProblems } from './schema-errors';

/** Directives a value object's field may carry: none makes a property or a path of its own. */
const VALUE_FIELD_DIRECTIVES = new Set(['constraint', 'deprecated', 'shareable', 'inaccessible', 'tag']);

/** Whether `type` is an object type a field may hold as a value object: an object type that is no `@entity`. */
export function isValueObjectType(type: GraphQLNamedType): boolean {
  return isObjectType(type) && !type.astNode?.directives?.some((d) => d.name.value === 'entity');
}

/**
 * Per compilation (its problem list), each value object type's shape once (undefined: it has a problem, reported once
 * to that list).
 */
const shapes = new WeakMap<SchemaProblems, Map<string, ValueShape | undefined>>();

/**
 * The shape of a value object type, its problems added once (with the field's location) however many fields hold it.
 * @param holding the value object types this one is inside (a type found among them holds itself)
 * @returns undefined when the type cannot be kept as a value object
 */
export function valueShape(schema: GraphQLSchema, type: GraphQLObjectType, problems: SchemaProblems, holding: string[] = []): ValueShape | undefined {
  let known = shapes.get(problems);
  if (!known) shapes.set(problems, (known = new Map()));
  if (known.has(type.name)) return known.get(type.name);
  const fields = new Map<string, StoredField>();
  let ok = true;
  for (const field of Object.values(type.getFields())) {
    const place = { coordinate: `${type.name}.${field.name}`, problems, holding: [...holding, type.name] };
    const stored = valueField(schema, field, place, (d) => !VALUE_FIELD_DIRECTIVES.has(d));
    if (stored) fields.set(field.name, stored);
    else ok = false;
  }
  const shape = ok ? { fields } : undefined;
  // A type inside itself is reported where it holds itself, and not cached on the way: its outer call decides.
  if (holding.length === 0 || ok) known.set(type.name, shape);
  return shape;
}

/** Directives an entity's field holding a value object cannot carry: each is for one value of a scalar type. */
const REFUSED_ON_HOLDER = new Set(['constraint', 'encrypted', 'blob', 'series', 'summary', 'copy']);

/**
 * An entity's field holding a value object (or a list of them): one property, the JSON text of the value.
 * @returns undefined, with a problem added, when it cannot be kept so
 */
export function heldValueField(
  schema: GraphQLSchema,
  field: GraphQLField<unknown, unknown>,
  coordinate: string,
  problems: SchemaProblems,
): StoredField | undefined {
  const directive = field.astNode?.directives?.find((d) => REFUSED_ON_HOLDER.has(d.name.value));
  if (directive) {
    problems.add(
      coordinate,
      `@${directive.name.value} is for a field holding a scalar: ${getNamedType(field.type).name} is a value object (one JSON property)`,
      directive,
    );
    return undefined;
  }
  return valueField(schema, field, { coordinate, problems, holding: [] }, () => false);
}

interface FieldPlace {
  coordinate: string;
  problems: SchemaProblems;
  /** The value object types the field is inside, outermost first. */
  holding: string[];
}

/** One field of a value object type as it is kept in the JSON text, or undefined with a problem added. */
function valueField(
  schema: GraphQLSchema,
  field: GraphQLField<unknown, unknown>,
  place: FieldPlace,
  refused: (directive: string) => boolean,
): StoredField | undefined {
  const { coordinate, problems, holding } = place;
  const fail = (message: string) => {
    problems.add(coordinate, message, field.astNode);
    return undefined;
  };
  if (field.args.length > 0) return fail("a field kept in a value object takes no arguments: it is read from its holder's property");
  const directive = field.astNode?.directives?.find((d) => refused(d.name.value));
  if (directive) return fail(`@${directive.name.value} is for an @entity's own fields: a value object's fields are kept inside its holder's property`);
  const shape = listShapeOf(field);
  if (!shape) return fail('a list in a value object holds non-null elements, e.g. `lines: [String!]`');
  const named = getNamedType(field.type);
  const base = { name: field.name, graphqlType: named.name, nonNull: isNonNullType(field.type), ...(shape.list && { list: true as const }) };
  if (isObjectType(named)) {
    if (!isValueObjectType(named))
      return fail(`${named.name} is an @entity: a value object holds values; an entity is held by a field of an @entity type with @point`);
    if (holding.includes(named.name))
      return fail(
        `${named.name} would hold itself (${[...holding.slice(holding.indexOf(named.name)), named.name].join(' → ')}): its JSON text would never end`,
      );
    const value = valueShape(schema, named, problems, holding);
    return value && { ...base, edm: 'String', value };
  }
  const edm = edmTypeOf(named);
  if (!edm) return fail(`type ${named.name} cannot be kept in a value object (a scalar, an enum, a list of them or a value object)`);
  const constraint = readConstraint(schema, field.astNode, named.name, coordinate, problems);
  return { ...base, edm, ...(constraint && { constraint }) };
}

/** `{}` for one value, `{ list: true }` for a list of non-null elements; undefined for any other list. */
function listShapeOf(field: GraphQLField<unknown, unknown>): { list?: true } | undefined {
  const inner = isNonNullType(field.type) ? field.type.ofType : field.type;
  if (!isListType(inner)) return {};
  return isNonNullType(inner.ofType) && !isListType(inner.ofType.ofType) ? { list: true } : undefined;
}

/** The names of the value object types the entities hold, nested ones too. */
export function valueTypeNames(entities: Iterable<EntityModel>): Set<string> {
  const names = new Set<string>();
  const add = (fields: Iterable<StoredField>): void => {
    for (const f of fields) {
      if (!f.value || names.has(f.graphqlType)) continue;
      names.add(f.graphqlType);
      add(f.value.fields.values());
    }
  };
  for (const e of entities) add(e.fields.values());
  return names;
}
