/**
 * The stored layout of a compiled schema, as the catalogue records it (catalogue.ts): every entity type's table and
 * key templates and the stored fields its entities hold, and every derived access path — index entities, summary
 * values, copies, change logs — with what decides where its entities live. Two schemas with the same record store
 * the same data in the same places, whatever else (queries, descriptions, `@auth`) differs; the diff of two records
 * (layout-diff.ts) is what a deployment has to build, re-key or refuse.
 */
import { createHash } from 'node:crypto';
import { indexPathId, pathId, summaryPathId, type PathKind } from '../model/derived-paths';
import type { EntityModel, Model, StoredField } from '../model/types';

/** One stored field: its GraphQL type, its EDM type, whether it is non-null, and an enum's values. */
export interface RecordedField {
  type: string;
  edm: string;
  nonNull: boolean;
  /** A series field's element count. */
  series?: number;
  /** Set for a list kept in one property (`[String!]`): its JSON text. */
  list?: true;
  /** An enum field's values, sorted. */
  values?: string[];
  /** A value object's fields (kept in the JSON text of one property), by name. */
  fields?: Record<string, RecordedField>;
  /** A field a derived path writes — a summary's value, a copy — rather than a client. */
  derived?: 'summary' | 'copy';
}

/** Where an entity type lives and what its entities hold. */
export interface RecordedType {
  entityType: string;
  /** Table name, or a table template's source (a table per period). */
  table: string;
  partitionKey: string;
  rowKey: string;
  fields: Record<string, RecordedField>;
}

/** A derived access path: the entity type it derives from and what places its entities. */
export interface RecordedPath {
  kind: PathKind;
  /** The type whose entities derive it: an index's or copy's type, a summary's holder, a change log's type. */
  type: string;
  /** An index's or summary's or copy's name (`byLastName`, `headcount`); the type's name for a change log. */
  name: string;
  /** What decides its stored entities: a changed definition is a new path. */
  definition: Record<string, unknown>;
}

/** A schema's stored layout: types by name, derived paths by id (`index:Order.byCustomer`). */
export interface RecordedLayout {
  types: Record<string, RecordedType>;
  paths: Record<string, RecordedPath>;
}

/**
 * The layout `model` stores. Stored interfaces (inheritance) are recorded through their implementations, which
 * share the interface's table and keys.
 * @param enumValues an enum's values by enum name (from the GraphQL schema)
 */
export function recordLayout(model: Model, enumValues: (name: string) => string[] | undefined): RecordedLayout {
  const types: Record<string, RecordedType> = {};
  const paths: Record<string, RecordedPath> = {};
  for (const entity of model.entities.values()) {
    types[entity.name] = recordType(entity, enumValues);
    for (const index of entity.indexes.values()) {
      paths[indexPathId(index)] = {
        kind: 'index',
        type: entity.name,
        name: index.name,
        definition: {
          table: index.layout.table,
          partitionKey: index.layout.partitionKey.source,
          rowKey: index.layout.rowKey.source,
          scope: index.scope,
          unique: index.unique,
          projection: [...index.projection].sort(),
        },
      };
    }
    for (const copy of entity.copies.values()) {
      paths[pathId('copy', entity.name, copy.field)] = {
        kind: 'copy',
        type: entity.name,
        name: copy.field,
        definition: { reference: copy.reference.coordinate, target: copy.reference.target.name, targetField: copy.targetField },
      };
    }
    if (entity.changeLogged) paths[pathId('changeLog', entity.name, entity.name)] = { kind: 'changeLog', type: entity.name, name: entity.name, definition: {} };
  }
  for (const s of model.summaries.values()) {
    paths[summaryPathId(s)] = {
      kind: 'summary',
      type: s.holder.name,
      name: s.field,
      definition: { of: s.of.name, via: s.via.coordinate, count: s.count, terms: s.terms, scope: s.scope },
    };
  }
  return { types, paths };
}

function recordType(entity: EntityModel, enumValues: (name: string) => string[] | undefined): RecordedType {
  const fields: Record<string, RecordedField> = {};
  for (const f of entity.fields.values()) {
    fields[f.name] = {
      ...recordField(f, enumValues),
      ...(entity.summaryFields.has(f.name) && { derived: 'summary' as const }),
      ...(entity.copies.has(f.name) && { derived: 'copy' as const }),
    };
  }
  return {
    entityType: entity.entityType,
    table: entity.layout.table,
    partitionKey: entity.layout.partitionKey.source,
    rowKey: entity.layout.rowKey.source,
    fields,
  };
}

function recordField(f: StoredField, enumValues: (name: string) => string[] | undefined): RecordedField {
  const values = enumValues(f.graphqlType);
  return {
    type: f.graphqlType,
    edm: f.edm,
    nonNull: f.nonNull,
    ...(f.series && { series: f.series.length }),
    ...(f.list && { list: true as const }),
    ...(values && { values: [...values].sort() }),
    ...(f.value && { fields: Object.fromEntries([...f.value.fields.values()].map((v) => [v.name, recordField(v, enumValues)])) }),
  };
}

/** JSON with every object's keys sorted: the same layout always gives the same text. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}

/** The SHA-256 (hex) of a layout's canonical JSON: equal for two schemas that store the same data in the same places. */
export function layoutHash(layout: RecordedLayout): string {
  return createHash('sha256').update(canonicalJson(layout)).digest('hex');
}
