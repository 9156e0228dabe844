/**
 * Builds the entity and index layouts from `@entity` and `@index` and checks them: templates parse, their
 * placeholders are stored fields, index projections exist, and types sharing a table keep RowKeys apart
 * (the guide's "Heterogeneous entity types": a department and its employees in one partition).
 */
import { didYouMean } from 'graphql/jsutils/didYouMean';
import { suggestionList } from 'graphql/jsutils/suggestionList';
import { getNamedType, isListType, isNonNullType, isObjectType, type GraphQLField, type GraphQLObjectType, type GraphQLSchema, type ASTNode } from 'graphql';
import { checkTableName } from '../storage/limits';
import { isReservedName, RESERVED_NAME_PREFIX } from '../storage/reserved-names';
import type { KeyTemplate } from '../model/key-template';
import { parseTemplate } from './parse-template';
import { ETAG_FIELD } from '../model/write-inputs';
import { TENANT_FIELD, tenantField, withTenant } from '../model/tenancy';
import { readEncrypted, readEntity, readGlobal, readIndexes, readPoint, readRange, readSeries, type EntityDirective, type IndexDirective } from './directives';
import { edmTypeOf } from './edm-mapping';
import { hasSas } from './sas-fields';
import {
  BASED_ON_PROPERTY,
  ENTITY_TYPE_PROPERTY,
  MOVE_ID_PROPERTY,
  MOVED_IN_PROPERTY,
  RESERVED_UNTIL_PROPERTY,
  WRITE_ID_PROPERTY,
  type EntityModel,
  type IndexModel,
  type Layout,
  type StoredField,
} from '../model/types';
import type { SchemaProblems } from './schema-errors';
import { MAX_PARTS, MAX_USER_PROPERTIES, SYSTEM_PROPERTIES } from '../model/wide-entities';
import { readConstraint } from './read-constraint';
import { readBlob } from './blob-directives';
import { isTableTemplate, parseTableTemplate } from './period-tables';
import { splitProperties } from './wide-layouts';
import { nodeIdField } from './node-interface';
import { heldValueField, isValueObjectType } from './value-types';

/** Property names the Table service or tablegraph itself uses. */
const RESERVED_PROPERTIES = new Set([
  'PartitionKey',
  'RowKey',
  'Timestamp',
  'etag',
  ENTITY_TYPE_PROPERTY,
  WRITE_ID_PROPERTY,
  BASED_ON_PROPERTY,
  RESERVED_UNTIL_PROPERTY,
  MOVE_ID_PROPERTY,
  MOVED_IN_PROPERTY,
  TENANT_FIELD,
]);

function unwrap<T>(type: T): T {
  return (isNonNullType(type) ? type.ofType : type) as T;
}

/**
 * The type's fields stored as properties: not its access paths, its SAS URLs, its `etag`, nor `@nodeInterface`'s
 * global id (sealed from the keys each time: node-interface.ts).
 */
function storedFields(type: GraphQLObjectType, schema: GraphQLSchema, problems: SchemaProblems, tablePrefix: string): Map<string, StoredField> {
  const fields = new Map<string, StoredField>();
  for (const field of Object.values(type.getFields())) {
    const coordinate = `${type.name}.${field.name}`;
    if (readPoint(schema, field.astNode) || readRange(schema, field.astNode) || hasSas(field.astNode) || field.name === nodeIdField(schema)) continue;
    const named = getNamedType(field.type);
    if (isObjectType(named)) {
      // An @entity is a reference, checked by access-paths.ts (it needs @point); any other object type is a value object.
      if (!isValueObjectType(named)) continue;
      if (RESERVED_PROPERTIES.has(field.name)) problems.add(coordinate, `"${field.name}" is a reserved property name`, field.astNode);
      const held = RESERVED_PROPERTIES.has(field.name) ? undefined : heldValueField(schema, field, coordinate, problems);
      if (held) fields.set(field.name, held);
      continue;
    }
    if (field.name === ETAG_FIELD && named.name === 'String' && !isListType(unwrap(field.type))) continue;
    const edm = edmTypeOf(named);
    if (!edm) {
      problems.add(
        coordinate,
        `type ${named.name} cannot be stored as a property (use Int, Float, Decimal, String, ID, Boolean, Long, DateTime or an enum)`,
        field.astNode,
      );
      continue;
    }
    const shape = listShape(schema, field, named.name, coordinate, problems);
    if (!shape) continue;
    const { series, list } = shape;
    if (RESERVED_PROPERTIES.has(field.name)) {
      problems.add(coordinate, `"${field.name}" is a reserved property name`, field.astNode);
      continue;
    }
    if (field.args.length > 0) problems.add(coordinate, 'a stored field takes no arguments', field.astNode);
    const constraint = readConstraint(schema, field.astNode, named.name, coordinate, problems);
    const encrypted = readEncrypted(field.astNode);
    if (encrypted && (named.name !== 'String' || series || list)) {
      problems.add(coordinate, '@encrypted is for String fields: the text is sealed and stored as Edm.Binary', encrypted);
      continue;
    }
    const hasBlob = field.astNode?.directives?.some((d) => d.name.value === 'blob');
    if (hasBlob && list) problems.add(coordinate, '@blob holds one blob: not a list', field.astNode);
    const blob = hasBlob ? readBlob(schema, field, coordinate, tablePrefix, problems) : undefined;
    if (hasBlob && !blob) continue;
    if (blob && encrypted) {
      problems.add(coordinate, "@blob and @encrypted: the field holds a blob's name, and the blob is not sealed", encrypted);
      continue;
    }
    fields.set(field.name, {
      name: field.name,
      graphqlType: named.name,
      edm,
      nonNull: isNonNullType(field.type),
      ...(constraint && { constraint }),
      ...(series && { series }),
      ...(list && { list: true as const }),
      ...(encrypted && { encrypted: true as const }),
      ...(blob && { blob }),
    });
  }
  checkPropertyNames(type, fields, problems);
  return fields;
}

/**
 * Whether a field is one value, a `@series` (one property per element) or a list kept in one property; undefined,
 * with a problem added, when it is a list that cannot be stored so.
 */
function listShape(
  schema: GraphQLSchema,
  field: GraphQLField<unknown, unknown>,
  element: string,
  coordinate: string,
  problems: SchemaProblems,
): { series?: StoredField['series']; list?: true } | undefined {
  const inner = isNonNullType(field.type) ? field.type.ofType : field.type;
  const seriesDirective = readSeries(schema, field.astNode);
  if (!seriesDirective) {
    if (!isListType(inner)) return {};
    // A list of values kept in one property, as the JSON text of the list: its elements are never null.
    if (isNonNullType(inner.ofType) && !isListType(inner.ofType.ofType)) return { list: true };
    problems.add(coordinate, 'a list kept in one property holds non-null values, e.g. `tags: [String!]`', field.astNode);
    return undefined;
  }
  const series = seriesOf(field.name, seriesDirective.length);
  const elementsNonNull = isListType(inner) && isNonNullType(inner.ofType) && isNonNullType(field.type);
  if (!elementsNonNull || !SERIES_ELEMENTS.has(element)) {
    problems.add(
      coordinate,
      '@series is for a non-null list of non-null Int or Float elements, e.g. `hourly: [Int!]! @series(length: 24)`',
      seriesDirective.node,
    );
    return undefined;
  }
  if (!Number.isInteger(seriesDirective.length) || seriesDirective.length < 1 || seriesDirective.length > MAX_SERIES_LENGTH) {
    problems.add(
      coordinate,
      `@series(length: ${seriesDirective.length}): a series holds 1 to ${MAX_SERIES_LENGTH} elements (${MAX_PARTS} entities of ${MAX_USER_PROPERTIES - SYSTEM_PROPERTIES} properties, the guide's "Wide entities pattern")`,
      seriesDirective.node,
    );
    return undefined;
  }
  return { series };
}

/** Elements a `@series` may hold: numbers that add up as they are stored. */
const SERIES_ELEMENTS = new Set(['Int', 'Float']);
/** Elements of one `@series` at most: what a wide entity's parts hold. */
const MAX_SERIES_LENGTH = MAX_PARTS * (MAX_USER_PROPERTIES - SYSTEM_PROPERTIES);

/** The properties of a `@series` field: `hourly` of 24 → hourly00 … hourly23 (zero-padded, so they sort in order). */
function seriesOf(name: string, length: number): NonNullable<StoredField['series']> {
  const width = String(Math.max(length - 1, 0)).length;
  return { length, properties: Array.from({ length: Math.max(length, 0) }, (_, i) => `${name}${String(i).padStart(width, '0')}`) };
}

/** A series' properties may not take another field's name. */
function checkPropertyNames(type: GraphQLObjectType, fields: Map<string, StoredField>, problems: SchemaProblems): void {
  for (const field of fields.values()) {
    for (const property of field.series?.properties ?? []) {
      if (fields.has(property) || RESERVED_PROPERTIES.has(property)) {
        problems.add(
          `${type.name}.${field.name}`,
          `@series property "${property}" is also the name of ${fields.has(property) ? `the field ${type.name}.${property}` : 'a reserved property'}`,
          type.getFields()[field.name].astNode,
        );
      }
    }
  }
}

/** Where a template's problems are reported: its schema coordinate, its SDL node, and the list they go to. */
interface ProblemSite {
  coordinate: string;
  node: ASTNode | undefined;
  problems: SchemaProblems;
}

/**
 * Problems with a template's placeholders against the fields they must name. An index may name nullable fields:
 * it is then sparse (an entity without a value has no index entity), as a DynamoDB sparse index; and a list kept in
 * one property, keyed by each element (buildIndex checks the rest).
 */
function checkPlaceholders(t: KeyTemplate, what: string, fields: Map<string, StoredField>, site: ProblemSite, ofIndex = false): void {
  const { coordinate, node, problems } = site;
  const allowNullable = ofIndex;
  for (const seg of t.segments) {
    if (seg.kind !== 'placeholder') continue;
    const field = fields.get(seg.name);
    if (!field) {
      // graphql-js's own wording for a misspelled name: `Did you mean "id"?`
      const hint = didYouMean(suggestionList(seg.name, [...fields.keys()]).map((f) => `{${f}}`));
      problems.add(coordinate, `${what} template "${t.source}" names {${seg.name}}, which is not a stored field of the type.${hint}`, node);
    } else if (field.value) {
      problems.add(
        coordinate,
        `${what} template "${t.source}" names {${seg.name}}, a value object (${field.graphqlType}): a key part is one scalar value`,
        node,
      );
    } else if (field.series || (field.list && !ofIndex)) {
      problems.add(
        coordinate,
        field.series
          ? `${what} template "${t.source}" names {${seg.name}}, a @series: a list cannot be part of a key`
          : `${what} template "${t.source}" names {${seg.name}}, a list: a list cannot be part of an entity's key; an @index keyed by it keeps one index entity per element`,
        node,
      );
    } else if (field.encrypted) {
      problems.add(coordinate, `${what} template "${t.source}" names {${seg.name}}, which is @encrypted: keys are stored in the clear`, node);
    } else if (field.blob) {
      problems.add(coordinate, `${what} template "${t.source}" names {${seg.name}}, a @blob: its value is a new blob name at every write`, node);
    } else if (!field.nonNull && !allowNullable) {
      problems.add(coordinate, `${what} template "${t.source}" names {${seg.name}}, which is nullable: a key part must always have a value`, node);
    } else if ((seg.format.kind === 'padded' || seg.format.kind === 'descending') && !['Int', 'ID', 'Long'].includes(field.graphqlType)) {
      problems.add(
        coordinate,
        `${what} template "${t.source}" pads {${seg.name}}, a ${field.graphqlType}: padding needs an Int, Long or ID holding an integer`,
        node,
      );
    } else if (seg.format.kind === 'invertedTicks' && field.graphqlType !== 'DateTime') {
      problems.add(coordinate, `${what} template "${t.source}" inverts ticks of {${seg.name}}, which is not a DateTime`, node);
    } else if (seg.format.kind === 'date' && field.graphqlType !== 'DateTime') {
      problems.add(coordinate, `${what} template "${t.source}" writes {${seg.name}} as ${seg.format.pattern}, which needs a DateTime`, node);
    }
  }
}

/**
 * Reads every `@entity` type with its `@index`es into EntityModels.
 * @param tenancy whether the schema has `@tenancy`: every type not marked `@global` is then tenant-scoped
 */
export function buildEntities(schema: GraphQLSchema, problems: SchemaProblems, tablePrefix: string, tenancy = false): Map<string, EntityModel> {
  const entities = new Map<string, EntityModel>();
  for (const type of Object.values(schema.getTypeMap())) {
    if (!isObjectType(type) || type.name.startsWith('__')) continue;
    const directive = readEntity(schema, type.astNode);
    if (!directive) {
      if (readIndexes(schema, type.astNode).length > 0) problems.add(type.name, '@index needs @entity on the same type', type.astNode);
      continue;
    }
    const reading = { schema, problems, tablePrefix, tenantScoped: tenancy && !readGlobal(type.astNode) };
    const entity = buildEntity(reading, type, directive);
    if (!entity) continue;
    for (const d of readIndexes(schema, type.astNode)) {
      const index = buildIndex(reading, entity, directive, d);
      if (index) entity.indexes.set(d.name, index);
    }
    entities.set(type.name, entity);
  }
  checkSharedTables(entities, problems, (name) => {
    const type = schema.getType(name);
    return isObjectType(type) ? type.getInterfaces().map((i) => i.name) : [];
  });
  return entities;
}

/** What reading an `@entity` or `@index` needs: the schema, where problems go, and the table name prefix. */
interface LayoutReading {
  schema: GraphQLSchema;
  problems: SchemaProblems;
  tablePrefix: string;
  /** Whether the type is tenant-scoped (`@tenancy`, not `@global`): a hidden `_tenant` key field first in every PartitionKey. */
  tenantScoped: boolean;
}

/** One `@entity` type, without its indexes; undefined (with problems) when its keys cannot be read. */
function buildEntity(reading: LayoutReading, type: GraphQLObjectType, directive: EntityDirective): EntityModel | undefined {
  const { schema, problems, tablePrefix, tenantScoped } = reading;
  const fields = storedFields(type, schema, problems, tablePrefix);
  if (tenantScoped) fields.set(TENANT_FIELD, tenantField());
  const written = parseTemplate(directive.partitionKey, 'PartitionKey', type.name, directive.node, problems);
  const rk = parseTemplate(directive.rowKey, 'RowKey', type.name, directive.node, problems);
  if (!written || !rk) return undefined;
  const pk = tenantScoped ? withTenant(written) : written;
  const site: ProblemSite = { coordinate: type.name, node: directive.node, problems };
  checkPlaceholders(pk, 'PartitionKey', fields, site);
  checkPlaceholders(rk, 'RowKey', fields, site);
  const tableTemplate = isTableTemplate(directive.table) ? parseTableTemplate(tablePrefix + directive.table, type.name, directive.node, problems) : undefined;
  if (isTableTemplate(directive.table) && !tableTemplate) return undefined;
  if (tableTemplate) checkTableTemplate(tableTemplate, [...pk.fields, ...rk.fields], fields, site);
  const keyFields = [...new Set([...pk.fields, ...rk.fields])];
  // More properties than one entity holds: the guide's "Wide entities pattern" spreads them over several.
  const wide = splitProperties(fields, keyFields);
  if (typeof wide === 'string') problems.add(type.name, wide, type.astNode);
  const entity: EntityModel = {
    name: type.name,
    entityType: directive.typeName ?? type.name,
    layout: { table: tablePrefix + directive.table, partitionKey: pk, rowKey: rk, ...(tableTemplate && { tableTemplate }) },
    fields,
    keyFields,
    ...(typeof wide === 'object' && { wide }),
    indexes: new Map(),
    exposesEtag: Boolean(type.getFields()[ETAG_FIELD]) && !fields.has(ETAG_FIELD),
    summaryFields: new Set(),
    copies: new Map(),
    authFields: new Set(),
    ...(tenantScoped && { tenantScoped: true as const }),
    node: directive.node,
  };
  if (!tableTemplate) checkTable({ prefix: tablePrefix, written: directive.table }, type.name, directive.node, problems);
  else checkReserved(directive.table, type.name, directive.node, problems);
  return entity;
}

/** One `@index` of `entity`; undefined (with problems) when it cannot be one. */
function buildIndex(reading: LayoutReading, entity: EntityModel, directive: EntityDirective, d: IndexDirective): IndexModel | undefined {
  const { problems, tablePrefix } = reading;
  const { tableTemplate } = entity.layout;
  const pk = entity.layout.partitionKey;
  const { fields } = entity;
  const coordinate = `${entity.name}@index(${d.name})`;
  if (tableTemplate) {
    problems.add(
      coordinate,
      `${entity.name} has a table per period ("${directive.table}"): index entities would need one too, and would outlive a dropped table; read it by its keys`,
      d.node,
    );
    return undefined;
  }
  if (entity.indexes.has(d.name)) {
    problems.add(coordinate, 'an index of that name is already declared on the type', d.node);
    return undefined;
  }
  const written = d.partitionKey === undefined ? pk : parseTemplate(d.partitionKey, 'PartitionKey', coordinate, d.node, problems);
  const irk = parseTemplate(d.rowKey, 'RowKey', coordinate, d.node, problems);
  if (!written || !irk) return undefined;
  // A tenant's index entities stay in its key range, as its entities do.
  const ipk = reading.tenantScoped ? withTenant(written) : written;
  checkPlaceholders(ipk, 'PartitionKey', fields, { coordinate, node: d.node, problems }, true);
  checkPlaceholders(irk, 'RowKey', fields, { coordinate, node: d.node, problems }, true);
  for (const name of d.include) {
    if (!fields.has(name)) problems.add(coordinate, `include names "${name}", which is not a stored field of ${entity.name}`, d.node);
    else if (fields.get(name)!.series) problems.add(coordinate, `include names "${name}", a @series: its elements are properties of the entity only`, d.node);
    else if (fields.get(name)!.encrypted)
      problems.add(coordinate, `include names "${name}", which is @encrypted: it is sealed for its own entity only`, d.node);
  }
  const table = tablePrefix + (d.table ?? directive.table);
  checkTable({ prefix: tablePrefix, written: d.table ?? directive.table }, coordinate, d.node, problems);
  const index: IndexModel = {
    name: d.name,
    entity,
    layout: { table, partitionKey: ipk, rowKey: irk },
    scope: table === entity.layout.table && ipk.source === pk.source ? 'intraPartition' : 'interPartition',
    projection: new Set([...entity.keyFields, ...ipk.fields, ...irk.fields, ...d.include.filter((f) => fields.has(f))]),
    unique: d.unique,
    entityType: `${entity.entityType}.${d.name}`,
    node: d.node,
  };
  const element = listElement(index, d, problems);
  if (element === null) return undefined;
  if (element) index.element = element;
  if (index.unique && index.scope === 'intraPartition') {
    // Its index entities are upserted in the entity's own EGT, which would overwrite another entity's: unique
    // values are reserved only in an index of their own table or partition (src/write/reservations.ts).
    problems.add(
      coordinate,
      `@index(name: "${d.name}", unique: true) shares ${entity.name}'s table and PartitionKey, where uniqueness is not enforced: give it a table or a partitionKey of its own`,
      d.node,
    );
    return undefined;
  }
  return index;
}

/**
 * The list field an index is keyed by, one index entity per element: at most one (two would derive every pair), not
 * unique (each element would need a reservation of its own), and across partitions — the worker writes them, as many
 * as there are elements; in the entity's EGT they could outgrow its 100 operations.
 * @returns the field's name; undefined when no key field is a list; null after a problem
 */
function listElement(index: IndexModel, d: IndexDirective, problems: SchemaProblems): string | null | undefined {
  const keyFields = [...new Set([...index.layout.partitionKey.fields, ...index.layout.rowKey.fields])];
  const lists = keyFields.filter((f) => index.entity.fields.get(f)?.list);
  if (lists.length === 0) return undefined;
  const coordinate = `${index.entity.name}@index(${d.name})`;
  const named = lists.map((f) => `{${f}}`).join(' and ');
  if (lists.length > 1) problems.add(coordinate, `its keys name ${named}, two lists: an index is keyed by the elements of one list at most`, d.node);
  else if (index.unique) problems.add(coordinate, `its keys name ${named}, a list: a unique index holds one value per entity, not one per element`, d.node);
  else if (index.scope === 'intraPartition')
    problems.add(
      coordinate,
      `its keys name ${named}, a list, in ${index.entity.name}'s table and PartitionKey: one index entity per element is kept by the worker, outside the entity's EGT — give the index a table or a partitionKey of its own, e.g. partitionKey: "tag_{${lists[0]}}"`,
      d.node,
    );
  else return lists[0];
  return null;
}

/**
 * A table template's field must be a key field — a write's input and a point query's keys always carry it — and
 * non-null, since an entity without it would have no table.
 */
function checkTableTemplate(t: KeyTemplate, keyFields: string[], fields: Map<string, StoredField>, site: ProblemSite): void {
  const { coordinate, node, problems } = site;
  checkPlaceholders(t, 'Table', fields, site);
  for (const name of t.fields) {
    if (fields.has(name) && !keyFields.includes(name)) {
      problems.add(
        coordinate,
        `table template "${t.source}" names {${name}}, which is not in the PartitionKey or RowKey template: an entity's keys must tell its table`,
        node,
      );
    }
  }
}

/**
 * Azure table names: 3–63 alphanumeric characters, starting with a letter, the table prefix included; and none of
 * the project's own (reserved-names.ts).
 */
function checkTable(table: { prefix: string; written: string }, coordinate: string, node: ASTNode | undefined, problems: SchemaProblems): void {
  const name = table.prefix + table.written;
  try {
    checkTableName(name); // the storage's own rule, reported as a schema problem with its SDL location
  } catch {
    problems.add(coordinate, `"${name}" is not a valid table name (3-63 letters and digits, starting with a letter)`, node);
    return;
  }
  checkReserved(table.written, coordinate, node, problems);
}

/** Refuses a table name (or table template) the project keeps for its own tables: its catalogue's rows are not a schema's. */
function checkReserved(written: string, coordinate: string, node: ASTNode | undefined, problems: SchemaProblems): void {
  if (!isReservedName(written)) return;
  problems.add(
    coordinate,
    `table "${written}": names starting with "${RESERVED_NAME_PREFIX}" are tablegraph's own (its catalogue, among others); choose another name`,
    node,
  );
}

/** The literal text a RowKey template starts with ('' when it starts with a placeholder). */
export function leadingLiteral(t: KeyTemplate): string {
  const first = t.segments[0];
  return first && first.kind === 'literal' ? first.text : '';
}

/**
 * Layouts sharing a table must never produce the same RowKey: each needs a leading RowKey literal that is not
 * a prefix of another's, so that a RowKey prefix selects one type only. The exception is the guide's
 * "Inheritance relationships": entity types implementing one interface with the very same key templates are its
 * concrete types, one address holding one of them, told apart by EntityType (build-interfaces.ts).
 */
function checkSharedTables(entities: Map<string, EntityModel>, problems: SchemaProblems, interfacesOf: (type: string) => string[]): void {
  const byTable = new Map<string, Array<{ owner: string; layout: Layout; node?: ASTNode; interfaces: string[] }>>();
  for (const e of entities.values()) {
    const add = (owner: string, layout: Layout, node?: ASTNode, interfaces: string[] = []) => {
      const list = byTable.get(layout.table) ?? [];
      list.push({ owner, layout, node, interfaces });
      byTable.set(layout.table, list);
    };
    add(e.name, e.layout, e.node, interfacesOf(e.name));
    for (const i of e.indexes.values()) add(`${e.name}@index(${i.name})`, i.layout, i.node);
  }
  for (const [table, layouts] of byTable) {
    if (layouts.length < 2) continue;
    for (let a = 0; a < layouts.length; a++) {
      for (let b = a + 1; b < layouts.length; b++) {
        const [x, y] = [layouts[a], layouts[b]];
        const sameKeys = x.layout.partitionKey.source === y.layout.partitionKey.source && x.layout.rowKey.source === y.layout.rowKey.source;
        if (sameKeys && x.interfaces.some((i) => y.interfaces.includes(i))) continue;
        const la = leadingLiteral(layouts[a].layout.rowKey);
        const lb = leadingLiteral(layouts[b].layout.rowKey);
        if (la === '' || lb === '' || la.startsWith(lb) || lb.startsWith(la)) {
          problems.add(
            layouts[b].owner,
            `shares table ${table} with ${layouts[a].owner}, but their RowKey templates ("${layouts[a].layout.rowKey.source}", "${layouts[b].layout.rowKey.source}") can produce the same RowKey: start each with its own literal, e.g. "${layouts[b].owner.toLowerCase()}_"`,
            layouts[b].node,
          );
        }
      }
    }
  }
}
