/**
 * Compiles the Mutation type's `@write` fields: which entity each writes, how (the guide's "Merge or replace"),
 * and which of its fields the input may set. Summary fields are never input: the write path keeps them.
 */
import {
  getNamedType,
  isInputObjectType,
  isListType,
  isNonNullType,
  isObjectType,
  type GraphQLField,
  type ASTNode,
  type GraphQLInputField,
  type GraphQLInputType,
  type GraphQLSchema,
} from 'graphql';
import { readTransaction, readWrite } from './directives';
import { TENANT_FIELD } from '../model/tenancy';
import { BLOB_INPUT, IF_MATCH_FIELD, moveField } from '../model/write-inputs';
import type { SchemaProblems } from './schema-errors';
import type { EntityModel, StoredField, WriteModel } from '../model/types';

/**
 * @returns the write models by `Mutation.field`, and the names of the payload types they return (object types
 *   that are neither entities nor connections, resolved from the write's result)
 */
export function buildWrites(
  schema: GraphQLSchema,
  entities: Map<string, EntityModel>,
  problems: SchemaProblems,
): { writes: Map<string, WriteModel>; payloads: Set<string> } {
  const writes = new Map<string, WriteModel>();
  const payloads = new Set<string>();
  const mutation = schema.getMutationType();
  if (!mutation) return { writes, payloads };
  for (const field of Object.values(mutation.getFields())) {
    const coordinate = `${mutation.name}.${field.name}`;
    const d = readWrite(schema, field.astNode);
    if (!d && readTransaction(schema, field.astNode)) continue; // a list of writes: transactions.ts
    if (!d) {
      problems.add(coordinate, 'has no @write: tablegraph does not know what it writes', field.astNode);
      continue;
    }
    const entity = entities.get(d.entity);
    if (!entity) {
      problems.add(coordinate, `@write(entity: "${d.entity}"): no @entity type of that name`, d.node);
      continue;
    }
    if (d.to !== undefined && d.action !== 'MOVE') problems.add(coordinate, '@write(to:) is for MOVE only', d.node);
    if (d.action === 'MOVE') {
      const moveTo = checkMoveInput(field, entity, coordinate, problems);
      const payload = checkPayload(field, entity, coordinate, problems);
      const target = d.to === undefined ? entity : checkMoveTarget(entity, { name: d.to, target: entities.get(d.to) }, { coordinate, node: d.node, problems });
      if (!moveTo || !payload || !target) continue;
      payloads.add(getNamedType(field.type).name);
      writes.set(coordinate, {
        coordinate,
        entity,
        action: 'MOVE',
        inputFields: new Set(entity.keyFields),
        inputType: getNamedType(field.args[0].type).name,
        ...payload,
        moveTo,
        ...(target !== entity && { moveTarget: target }),
      });
      continue;
    }
    const inputFields = checkInput(field, entity, d.action, coordinate, problems);
    const payload = checkPayload(field, entity, coordinate, problems);
    if (!inputFields || !payload) continue;
    payloads.add(getNamedType(field.type).name);
    writes.set(coordinate, { coordinate, entity, action: d.action, inputFields, inputType: getNamedType(field.args[0].type).name, ...payload });
  }
  return { writes, payloads };
}

/** A stored field's type as the schema writes it: `String`, `[String!]` for a list, and what a value object takes. */
function storedType(stored: StoredField): string {
  const named = stored.value ? `${stored.graphqlType} (given as an input object of the same fields, e.g. ${stored.graphqlType}Input)` : stored.graphqlType;
  return stored.list ? `[${named}!]` : named;
}

/**
 * Whether an input type takes the stored field's values: the same named type, a list exactly for a list field; for a
 * value object an input object of the same fields, each taking its field's values and non-null where it is.
 */
function takesValues(type: GraphQLInputType, stored: StoredField): boolean {
  if (isListType(isNonNullType(type) ? type.ofType : type) !== Boolean(stored.list)) return false;
  const named = getNamedType(type);
  if (!stored.value) return named.name === stored.graphqlType;
  if (!isInputObjectType(named)) return false;
  const given = named.getFields();
  if (Object.keys(given).length !== stored.value.fields.size) return false;
  return [...stored.value.fields.values()].every(
    (f) => given[f.name] && takesValues(given[f.name].type, f) && (!f.nonNull || isNonNullType(given[f.name].type)),
  );
}

/**
 * Why an input field of an INCREMENT, or one naming a `@series`, is wrong (undefined: it is right). An INCREMENT
 * input holds the key fields and, per series, `{ at: Int!, by: <element>! }`; other actions never set a series.
 */
function incrementProblem(f: GraphQLInputField, stored: StoredField | undefined, entity: EntityModel, action: WriteModel['action']): string | undefined {
  if (!stored) return `not a stored field of ${entity.name}`;
  if (!stored.series) return entity.keyFields.includes(f.name) ? undefined : 'an INCREMENT input holds the key fields and what to add to @series fields';
  if (action !== 'INCREMENT') return 'a @series is changed by INCREMENT only';
  const type = getNamedType(f.type);
  const shape = isInputObjectType(type) ? type.getFields() : undefined;
  const at = shape?.at?.type;
  const by = shape?.by?.type;
  const right =
    shape &&
    Object.keys(shape).length === 2 &&
    at &&
    by &&
    isNonNullType(at) &&
    getNamedType(at).name === 'Int' &&
    isNonNullType(by) &&
    getNamedType(by).name === stored.graphqlType;
  return right && !isNonNullType(f.type)
    ? undefined
    : `an increment of a @series of ${stored.graphqlType} is a nullable { at: Int!, by: ${stored.graphqlType}! } (${stored.graphqlType}SeriesIncrement)`;
}

function checkInput(
  field: GraphQLField<unknown, unknown>,
  entity: EntityModel,
  action: WriteModel['action'],
  coordinate: string,
  problems: SchemaProblems,
): Set<string> | undefined {
  const arg = field.args.length === 1 ? field.args[0] : undefined;
  const input = arg && isNonNullType(arg.type) ? arg.type.ofType : undefined;
  if (!arg || arg.name !== 'input' || !isInputObjectType(input)) {
    problems.add(coordinate, 'a @write field takes exactly one argument, `input: <InputObject>!`', field.astNode);
    return undefined;
  }
  const given = input.getFields();
  const names = new Set<string>();
  let ok = true;
  const fail = (message: string) => {
    problems.add(coordinate, message, field.astNode);
    ok = false;
  };
  for (const f of Object.values(given)) {
    if (f.name === IF_MATCH_FIELD) {
      if (action === 'CREATE' || action === 'INCREMENT' || getNamedType(f.type).name !== 'String' || isNonNullType(f.type)) {
        fail(`${input.name}.${IF_MATCH_FIELD}: a nullable String, on UPDATE, REPLACE and DELETE inputs only`);
      }
      continue;
    }
    if (f.name === TENANT_FIELD) {
      fail(TENANT_INPUT(input.name));
      continue;
    }
    const stored = entity.fields.get(f.name);
    if (stored?.series || action === 'INCREMENT') {
      const problem = incrementProblem(f, stored, entity, action);
      if (problem) fail(`${input.name}.${f.name}: ${problem}`);
      else names.add(f.name);
      continue;
    }
    if (stored?.blob) {
      if (getNamedType(f.type).name !== BLOB_INPUT || isNonNullType(f.type))
        fail(`${input.name}.${f.name} must be a nullable ${BLOB_INPUT}: ${entity.name}.${f.name} is a @blob`);
      else names.add(f.name);
    } else if (!stored) {
      fail(`${input.name}.${f.name} is not a stored field of ${entity.name}`);
    } else if (entity.summaryFields.has(f.name)) {
      fail(`${input.name}.${f.name} is a summary value: the write path keeps it, clients do not set it`);
    } else if (entity.copies.has(f.name)) {
      fail(`${input.name}.${f.name} is a copy (@copy): the write path keeps it, clients do not set it`);
    } else if (!takesValues(f.type, stored)) {
      fail(`${input.name}.${f.name} is a ${String(f.type)}, but ${entity.name}.${f.name} is a ${storedType(stored)}`);
    } else {
      names.add(f.name);
    }
  }
  for (const key of clientKeyFields(entity)) {
    if (!given[key] || !isNonNullType(given[key].type)) fail(`${input.name} needs the key field \`${key}\` as non-null`);
  }
  if (action === 'INCREMENT' && ![...entity.fields.values()].some((f) => f.series)) {
    fail(`INCREMENT adds to @series fields, and ${entity.name} has none`);
  }
  if (action === 'CREATE' || action === 'REPLACE') {
    for (const stored of entity.fields.values()) {
      if (stored.name === TENANT_FIELD) continue; // the token's, never the input's
      if (stored.nonNull && !stored.series && !entity.summaryFields.has(stored.name) && !(given[stored.name] && isNonNullType(given[stored.name].type))) {
        fail(`${input.name} needs \`${stored.name}\` as non-null: ${entity.name}.${stored.name} is non-null`);
      }
    }
  }
  if (action === 'DELETE') {
    for (const name of names) if (!entity.keyFields.includes(name)) fail(`${input.name}.${name}: a DELETE input holds key fields and ifMatch only`);
  }
  if (action === 'UPDATE') {
    for (const name of names) {
      if (!entity.keyFields.includes(name) && isNonNullType(given[name].type))
        fail(`${input.name}.${name} must be nullable: UPDATE changes only the fields given`);
    }
  }
  return ok ? names : undefined;
}

/**
 * The type a MOVE turns its entity into (`@write(to:)`, an archive): an @entity type keyed by key fields of the
 * moved type, each of whose stored fields the moved type has with the same type (non-null where the target's is).
 * @returns the target, or undefined (with problems)
 */
/** Why an input may not hold `_tenant`. */
const TENANT_INPUT = (input: string) => `${input}.${TENANT_FIELD}: the tenant comes from the caller's token, never from an input (@tenancy)`;

/** The key fields a mutation's input gives: all but the tenant, which comes from the token. */
function clientKeyFields(entity: EntityModel): string[] {
  return entity.keyFields.filter((k) => k !== TENANT_FIELD);
}

function checkMoveTarget(
  entity: EntityModel,
  to: { name: string; target: EntityModel | undefined },
  site: { coordinate: string; node: ASTNode; problems: SchemaProblems },
): EntityModel | undefined {
  const { name, target } = to;
  const { coordinate, node, problems } = site;
  if (!target) {
    problems.add(coordinate, `@write(to: "${name}"): no @entity type of that name`, node);
    return undefined;
  }
  if (Boolean(entity.tenantScoped) !== Boolean(target.tenantScoped)) {
    problems.add(
      coordinate,
      `@write(to: "${name}"): a move between a tenant-scoped and a @global type would take entities out of their tenant (@tenancy)`,
      node,
    );
    return undefined;
  }
  const wrong: string[] = [];
  for (const key of target.keyFields) if (!entity.keyFields.includes(key)) wrong.push(`its key field ${key} is not a key field of ${entity.name}`);
  for (const field of target.fields.values()) {
    if (target.summaryFields.has(field.name) || target.copies.has(field.name)) continue;
    const source = entity.fields.get(field.name);
    if (
      source &&
      (source.graphqlType !== field.graphqlType || Boolean(source.series) !== Boolean(field.series) || Boolean(source.list) !== Boolean(field.list))
    )
      wrong.push(`${field.name} is a ${field.graphqlType}, ${entity.name}.${field.name} a ${source.graphqlType}`);
    else if (source && Boolean(source.blob) !== Boolean(field.blob)) wrong.push(`${field.name} and ${entity.name}.${field.name} are not both @blob`);
    else if (field.nonNull && !field.series && !source?.nonNull)
      wrong.push(`${field.name} is non-null, and ${entity.name} has no non-null ${field.name} to fill it`);
  }
  if (wrong.length === 0) return target;
  problems.add(coordinate, `@write(to: "${name}"): ${target.name} cannot be made from a ${entity.name}: ${wrong.join('; ')}`, node);
  return undefined;
}

/**
 * A MOVE input: the key fields (non-null), `ifMatch`, and for each key field `to<Field>` (nullable, same type);
 * nothing else. A type that holds summaries cannot move: what it counts would stay behind.
 * @returns `to<Field>` → key field, or undefined (with problems)
 */
function checkMoveInput(
  field: GraphQLField<unknown, unknown>,
  entity: EntityModel,
  coordinate: string,
  problems: SchemaProblems,
): Map<string, string> | undefined {
  const arg = field.args.length === 1 ? field.args[0] : undefined;
  const input = arg && isNonNullType(arg.type) ? arg.type.ofType : undefined;
  if (!arg || arg.name !== 'input' || !isInputObjectType(input)) {
    problems.add(coordinate, 'a @write field takes exactly one argument, `input: <InputObject>!`', field.astNode);
    return undefined;
  }
  if (entity.summaryFields.size > 0) {
    problems.add(
      coordinate,
      `${entity.name} holds summaries (${[...entity.summaryFields].join(', ')}): moving it would leave what they count behind`,
      field.astNode,
    );
    return undefined;
  }
  const series = [...entity.fields.values()].filter((f) => f.series).map((f) => f.name);
  if (series.length > 0) {
    problems.add(coordinate, `${entity.name} holds a @series (${series.join(', ')}), which a move does not carry`, field.astNode);
    return undefined;
  }
  const given = input.getFields();
  // The tenant never moves: a move stays in the caller's tenant.
  const moveTo = new Map(clientKeyFields(entity).map((k) => [moveField(k), k]));
  let ok = true;
  for (const f of Object.values(given)) {
    if (f.name === TENANT_FIELD) {
      ok = fail(TENANT_INPUT(input.name));
      continue;
    }
    const key = entity.keyFields.includes(f.name) ? f.name : moveTo.get(f.name);
    const stored = key ? entity.fields.get(key) : undefined;
    if (f.name === IF_MATCH_FIELD) {
      if (getNamedType(f.type).name !== 'String' || isNonNullType(f.type)) ok = fail(`${input.name}.${IF_MATCH_FIELD}: a nullable String`);
    } else if (!stored) {
      ok = fail(`${input.name}.${f.name}: a MOVE input holds the key fields, ifMatch and ${[...moveTo.keys()].join(', ')}`);
    } else if (getNamedType(f.type).name !== stored.graphqlType || (key === f.name) !== isNonNullType(f.type)) {
      ok = fail(`${input.name}.${f.name} must be ${stored.graphqlType}${key === f.name ? '!' : ' (nullable: omitted, the key stays)'}`);
    }
  }
  for (const key of clientKeyFields(entity)) {
    if (!given[key]) ok = fail(`${input.name} needs the key field \`${key}\` as non-null`);
    if (!given[moveField(key)]) ok = fail(`${input.name} needs \`${moveField(key)}\`, the new value of ${key}`);
  }
  return ok ? moveTo : undefined;

  function fail(message: string): false {
    problems.add(coordinate, message, field.astNode);
    return false;
  }
}

/**
 * A payload type: one field of the entity type, and any number of nullable String fields marked
 * `@blobUpload(field:)` naming a `@blob` field of the entity (the upload URL of a write that gave it no bytes).
 * @returns the entity field's name and the upload fields, or undefined (with problems)
 */
function checkPayload(
  field: GraphQLField<unknown, unknown>,
  entity: EntityModel,
  coordinate: string,
  problems: SchemaProblems,
): { payloadField: string; uploadFields?: Map<string, string> } | undefined {
  const payload = getNamedType(field.type);
  const fields = isObjectType(payload) ? Object.values(payload.getFields()) : [];
  const uploads = new Map<string, string>();
  let ok = true;
  for (const f of fields) {
    const d = f.astNode?.directives?.find((x) => x.name.value === 'blobUpload');
    if (!d) continue;
    const arg = d.arguments?.find((a) => a.name.value === 'field')?.value;
    const name = arg?.kind === 'StringValue' ? arg.value : '';
    if (!entity.fields.get(name)?.blob) {
      problems.add(coordinate, `${payload.name}.${f.name}: @blobUpload(field: "${name}") must name a @blob field of ${entity.name}`, d);
      ok = false;
    } else if (isNonNullType(f.type) || getNamedType(f.type).name !== 'String') {
      problems.add(coordinate, `${payload.name}.${f.name}: a @blobUpload field is a nullable String (null when the write uploaded the bytes itself)`, d);
      ok = false;
    } else uploads.set(f.name, name);
  }
  const entityFields = fields.filter((f) => getNamedType(f.type).name === entity.name);
  if (!isObjectType(payload) || entityFields.length !== 1 || fields.length !== 1 + uploads.size) {
    problems.add(
      coordinate,
      `returns ${payload.name}, which must be an object type with exactly one field of type ${entity.name} (and @blobUpload fields)`,
      field.astNode,
    );
    return undefined;
  }
  return ok ? { payloadField: entityFields[0].name, ...(uploads.size > 0 && { uploadFields: uploads }) } : undefined;
}
