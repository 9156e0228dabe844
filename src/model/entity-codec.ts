/**
 * Turns a GraphQL-shaped object (field name → value) into the entities that store it: the entity itself and
 * one index entity per `@index` ("Index Entities Pattern"), every property typed with its EDM type, every key
 * rendered from its template. The write paths (import, seeding, later mutations) all go through here.
 */
import { randomUUID } from 'node:crypto';
import { ErrorCode, TablegraphError } from '../errors';
import type { EntityAddress, EntityToWrite, TypedValue } from '../storage/storage-types';
import { checkConstraint } from './constraints';
import { decimalText, toDecimal } from './decimal';
import { isWellFormedText, renderKey } from './key-template';
import { tableOf } from './table-template';
import { ENTITY_TYPE_PROPERTY, WRITE_ID_PROPERTY, type EntityModel, type IndexModel, type Layout, type StoredField } from './types';

/** An entity to write, and the table it goes to. */
export interface TableWrite {
  table: string;
  entity: EntityToWrite;
}

/** The address a table write goes to: its table, PartitionKey and RowKey. */
export function addressOfWrite(w: TableWrite): EntityAddress {
  return { table: w.table, partitionKey: w.entity.partitionKey, rowKey: w.entity.rowKey };
}

/** The entity's own write plus one write per index. */
export interface EntityWrites {
  primary: TableWrite;
  indexes: Array<TableWrite & { index: IndexModel }>;
}

const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;

/**
 * The typed property for one field value; null/undefined → null (the property is omitted). A Decimal is stored
 * as its canonical text (src/model/decimal.ts).
 * @throws TablegraphError BAD_USER_INPUT when the value does not fit the field's EDM type (an Int outside 32
 *   bits, a non-finite Float, a Long that is not an integer, an invalid date, a malformed Decimal) or breaks
 *   its `@constraint`, with details { field }
 */
export function typedValue(field: StoredField, value: unknown): TypedValue | null {
  if (value === null || value === undefined) return null;
  if (field.list || field.value) return jsonProperty(field, value);
  checkConstraint(field, value);
  if (field.graphqlType === 'Decimal') return { type: 'String', value: decimalText(toDecimal(value, field.name)) };
  const bad = (why: string) =>
    new TablegraphError(ErrorCode.BAD_USER_INPUT, `${field.name}: ${why} (got ${JSON.stringify(String(value))})`, { field: field.name });
  switch (field.edm) {
    case 'Int32': {
      const n = typeof value === 'string' ? Number(value) : value;
      if (typeof n !== 'number' || !Number.isInteger(n) || n < INT32_MIN || n > INT32_MAX) throw bad('expected a 32-bit integer');
      return { type: 'Int32', value: n };
    }
    case 'Double': {
      const n = typeof value === 'string' ? Number(value) : value;
      if (typeof n !== 'number' || !Number.isFinite(n)) throw bad('expected a finite number');
      return { type: 'Double', value: n };
    }
    case 'Int64': {
      try {
        if (typeof value === 'number' && !Number.isSafeInteger(value)) throw new Error();
        const n = BigInt(value as string | number | bigint);
        if (n < -(2n ** 63n) || n >= 2n ** 63n) throw new Error();
        return { type: 'Int64', value: n };
      } catch {
        throw bad('expected a 64-bit integer');
      }
    }
    case 'DateTime': {
      const d = value instanceof Date ? value : new Date(value as string);
      if (Number.isNaN(d.getTime())) throw bad('expected an ISO 8601 date-time');
      return { type: 'DateTime', value: d };
    }
    case 'Boolean':
      if (typeof value !== 'boolean') throw bad('expected a boolean');
      return { type: 'Boolean', value };
    default:
      if (typeof value !== 'string' && typeof value !== 'number') throw bad('expected a string');
      if (typeof value === 'string' && !isWellFormedText(value)) throw bad('expected well-formed Unicode text (no lone surrogate)');
      return { type: 'String', value: String(value) };
  }
}

/**
 * The one property of a list field (`tags: [String!]`) or a value object (`dimensions: Dimensions`, nested ones and
 * lists of them too): its JSON text, each value typed and checked as a value of its type (a `@constraint` applies to
 * each) and written as JSON gives it back — a number as a number, a Long, a Decimal and a DateTime as text; a value
 * object's null fields left out. The property's size is checked with the entity's (64 KiB a value,
 * src/storage/limits.ts: LIMIT_EXCEEDED naming the field).
 * @param value a list or an object, or the JSON text of one (a CSV cell)
 * @throws TablegraphError BAD_USER_INPUT, with details { field } naming the path (`dimensions.width`,
 *   `addresses[1].city`), when the value is not a list or an object, an element is null, a non-null field of a value
 *   object is missing, it holds a field its type does not have, or a value is not of its type
 */
function jsonProperty(field: StoredField, value: unknown): TypedValue {
  let parsed = value;
  if (typeof value === 'string') {
    try {
      parsed = JSON.parse(value);
    } catch {
      parsed = undefined;
    }
  }
  return { type: 'String', value: JSON.stringify(jsonValue(field, parsed, field.name)) };
}

/** A list's or a value object's value as its JSON text holds it (`path`: where it is, for errors). */
function jsonValue(field: StoredField, value: unknown, path: string): unknown {
  const bad = (why: string) => new TablegraphError(ErrorCode.BAD_USER_INPUT, `${path}: ${why}`, { field: path });
  if (field.list) {
    if (!Array.isArray(value)) throw bad('expected a list');
    const element: StoredField = { ...field, list: undefined };
    return value.map((v, i) => {
      if (v === null || v === undefined)
        throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${path}[${i}] is null: the list's elements are not`, { field: path });
      return jsonValue(element, v, `${path}[${i}]`);
    });
  }
  if (field.value) {
    if (typeof value !== 'object' || value === null || Array.isArray(value) || value instanceof Date) throw bad(`expected an object (${field.graphqlType})`);
    const given = value as Record<string, unknown>;
    const extra = Object.keys(given).find((k) => !field.value!.fields.has(k));
    if (extra !== undefined) throw bad(`${field.graphqlType} has no field ${JSON.stringify(extra)}`);
    const out: Record<string, unknown> = {};
    for (const [name, f] of field.value.fields) {
      const v = given[name];
      if (v === null || v === undefined) {
        if (f.nonNull) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${path}.${name} is required`, { field: `${path}.${name}` });
        continue;
      }
      out[name] = jsonValue(f, v, `${path}.${name}`);
    }
    return out;
  }
  const typed = typedValue({ ...field, name: path }, value)!;
  return typed.type === 'Int64' ? String(typed.value) : typed.type === 'DateTime' ? (typed.value as Date).toISOString() : typed.value;
}

/** A list field's value from its stored property (its JSON text), or as a write's result holds it (the list). */
export function listOf(properties: Record<string, unknown>, name: string): unknown[] | null {
  return jsonOf(properties, name) as unknown[] | null;
}

/**
 * A list's or a value object's value from its stored property (its JSON text), or as a write's result holds it (the
 * list or the object itself).
 */
export function jsonOf(properties: Record<string, unknown>, name: string): unknown {
  const stored = properties[name];
  if (stored === null || stored === undefined) return null;
  return typeof stored === 'string' ? (JSON.parse(stored) as unknown) : stored;
}

/**
 * The properties of a `@series` field's value (the guide's "Data series pattern"): element i in
 * `field.series.properties[i]`, each typed and checked (`@constraint` applies to each element); a 0 is not stored
 * (it reads as 0). null or undefined: no property.
 * @throws TablegraphError BAD_USER_INPUT when the value is not a list of `length` numbers of the element type
 */
export function seriesProperties(field: StoredField, value: unknown): EntityToWrite['properties'] {
  const series = field.series!;
  if (value === null || value === undefined) return {};
  if (!Array.isArray(value) || value.length !== series.length) {
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${field.name}: expected a list of ${series.length} numbers`, { field: field.name });
  }
  const properties: EntityToWrite['properties'] = {};
  value.forEach((element, i) => {
    const typed = typedValue({ ...field, series: undefined }, element);
    if (typed === null) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${field.name}[${i}] is required`, { field: field.name });
    if (typed.value !== 0) properties[series.properties[i]] = typed;
  });
  return properties;
}

/** A `@series` field's value from stored properties: one number per element, 0 where no property is stored. */
export function seriesValue(field: StoredField, properties: Record<string, unknown>): number[] {
  const whole = properties[field.name]; // values already assembled (a write's result)
  if (Array.isArray(whole)) return whole as number[];
  return field.series!.properties.map((p) => Number(properties[p] ?? 0));
}

function write(layout: Layout, entityType: string, fields: Iterable<StoredField>, values: Record<string, unknown>): TableWrite {
  return {
    table: tableOf(layout, values),
    entity: {
      partitionKey: renderKey(layout.partitionKey, values),
      rowKey: renderKey(layout.rowKey, values),
      properties: propertiesOf(entityType, fields, values),
    },
  };
}

/** The properties an entity (or index entity) of `entityType` holding `fields` has for `values`. */
function propertiesOf(entityType: string, fields: Iterable<StoredField>, values: Record<string, unknown>): EntityToWrite['properties'] {
  const properties: EntityToWrite['properties'] = { [ENTITY_TYPE_PROPERTY]: { type: 'String', value: entityType } };
  for (const field of fields) {
    if (field.series) {
      Object.assign(properties, seriesProperties(field, values[field.name]));
      continue;
    }
    const v = typedValue(field, values[field.name]);
    if (v === null && field.nonNull) {
      throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${field.name} is required`, { field: field.name });
    }
    properties[field.name] = v;
  }
  return properties;
}

/** An index entity to write, with the index it belongs to. */
export type IndexWrite = TableWrite & { index: IndexModel };

/**
 * The index entities of `index` for an entity with `values`: one, or none when a key field of the index is null
 * (the index is sparse: such an entity has no index entity, "Index Entities Pattern"); over a list field
 * (`IndexModel.element`), one per distinct element, keyed by it and holding the whole list — none for an empty or
 * null list.
 * @throws TablegraphError BAD_USER_INPUT when a value cannot be part of a key
 */
export function indexWrites(index: IndexModel, values: Record<string, unknown>): IndexWrite[] {
  const keys = indexKeys(index, values);
  if (keys.length === 0) return [];
  const projected = [...index.projection].map((name) => index.entity.fields.get(name)).filter((f): f is StoredField => f !== undefined);
  // Every element's index entity holds the same properties: the whole list among them.
  const properties = propertiesOf(index.entityType, projected, values);
  const table = tableOf(index.layout, values);
  return keys.map((k) => ({ index, table, entity: { ...k, properties: { ...properties } } }));
}

/**
 * The keys of the index entities of `index` an entity with `values` derives, as indexWrites has them (none when
 * sparse, one per distinct element over a list), without building their properties.
 * @throws TablegraphError BAD_USER_INPUT when a value cannot be part of a key, or a list's element is not of its type
 */
export function indexKeys(index: IndexModel, values: Record<string, unknown>): Array<{ partitionKey: string; rowKey: string }> {
  const { partitionKey, rowKey } = index.layout;
  if ([...partitionKey.fields, ...rowKey.fields].some((f) => values[f] === null || values[f] === undefined)) return [];
  const keys = new Map<string, { partitionKey: string; rowKey: string }>();
  for (const element of index.element ? indexedElements(index, values) : [undefined]) {
    const keyed = index.element ? { ...values, [index.element]: element } : values;
    const k = { partitionKey: renderKey(partitionKey, keyed), rowKey: renderKey(rowKey, keyed) };
    keys.set(`${k.partitionKey}\u0000${k.rowKey}`, k);
  }
  return [...keys.values()];
}

/**
 * The elements of the list an index is keyed by, each checked and written as the list's property holds it; the list
 * given as a list or as its JSON text (a CSV cell).
 * @throws TablegraphError BAD_USER_INPUT when it is no list or an element is not of the list's type
 */
function indexedElements(index: IndexModel, values: Record<string, unknown>): unknown[] {
  const typed = typedValue(index.entity.fields.get(index.element!)!, values[index.element!]);
  return typed === null ? [] : (JSON.parse(String(typed.value)) as unknown[]);
}

/**
 * Whether an entity with `values` (null: none) derives the index entity of `index` at `address`.
 * @returns false, too, when its values cannot form the index's keys (it derives nothing)
 */
export function derivesIndexEntity(index: IndexModel, values: Record<string, unknown> | null, address: EntityAddress): boolean {
  if (!values || address.table !== index.layout.table) return false;
  try {
    return indexKeys(index, values).some((k) => k.partitionKey === address.partitionKey && k.rowKey === address.rowKey);
  } catch {
    return false;
  }
}

/**
 * The entity's own write for `values` (no index entity), its `WriteId` `writeId`: what a copy of a stored entity
 * writes (src/model/entity-rows.ts).
 * @throws TablegraphError BAD_USER_INPUT when a value is missing, mistyped, or cannot be part of a key
 */
export function primaryWrite(entity: EntityModel, values: Record<string, unknown>, writeId: string): TableWrite {
  const primary = write(entity.layout, entity.entityType, entity.fields.values(), values);
  primary.entity.properties[WRITE_ID_PROPERTY] = { type: 'String', value: writeId };
  return primary;
}

/**
 * The entity and all its index entities for `values` (field name → value, as GraphQL would give them): the
 * intra-partition ones, then what `derive` gives. Bulk writers (import, seed) write them all directly.
 * @param writeId stored as the entity's `WriteId` (types.ts: the id of the write that produced this state);
 *   default a fresh UUID — a bulk write (import, seed) is a write too
 * @throws TablegraphError BAD_USER_INPUT when a value is missing, mistyped, or cannot be part of a key
 */
export function entityWrites(entity: EntityModel, values: Record<string, unknown>, writeId: string = randomUUID()): EntityWrites {
  const primary = primaryWrite(entity, values, writeId);
  const intraPartition = [...entity.indexes.values()].flatMap((index) => (index.scope === 'intraPartition' ? indexWrites(index, values) : []));
  return { primary, indexes: [...intraPartition, ...derive(entity, values)] };
}

/**
 * What an entity derives across partitions: its inter-partition index entities (docs/architecture.md, "Fan-out and
 * reconciliation", "Inter-partition secondary index pattern"). A pure function of the entity's values; null (no entity)
 * derives nothing. The worker, the import and the maintenance commands all derive through here.
 */
export function derive(entity: EntityModel, values: Record<string, unknown> | null): IndexWrite[] {
  if (!values) return [];
  return [...entity.indexes.values()].flatMap((index) => (index.scope === 'interPartition' ? indexWrites(index, values) : []));
}

/** The field values a stored entity holds (its stored fields only; missing properties are null). */
export function valuesOf(entity: EntityModel, properties: Record<string, unknown>): Record<string, unknown> {
  const values: Record<string, unknown> = {};
  for (const [name, field] of entity.fields)
    values[name] = field.series ? seriesValue(field, properties) : field.list || field.value ? jsonOf(properties, name) : (properties[name] ?? null);
  return values;
}

/** The field values of `stored` when it is an entity of `entity`'s type; null when absent or of a sibling type. */
export function valuesIfOf(entity: EntityModel, stored: { properties: Record<string, unknown> } | null): Record<string, unknown> | null {
  return stored && stored.properties[ENTITY_TYPE_PROPERTY] === entity.entityType ? valuesOf(entity, stored.properties) : null;
}

/** The address of the entity an entity or index entity's properties describe (its key fields are projected). */
export function primaryAddress(entity: EntityModel, properties: Record<string, unknown>): { table: string; partitionKey: string; rowKey: string } {
  return {
    table: tableOf(entity.layout, properties),
    partitionKey: renderKey(entity.layout.partitionKey, properties),
    rowKey: renderKey(entity.layout.rowKey, properties),
  };
}
