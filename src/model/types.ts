/**
 * The model: what the compiler (src/model/compile.ts) makes of the schema's directives, and all that the read
 * and write paths consult. It holds no GraphQL execution state and no storage client.
 */
import type { ASTNode } from 'graphql';
import type { EdmType } from '../storage/types';
import type { KeyTemplate } from './key-template';

/** A scalar or enum field stored as one property of the same name. */
export interface StoredField {
  name: string;
  /** The GraphQL named type: Int, Float, String, ID, Boolean, Long, DateTime or an enum's name. */
  graphqlType: string;
  edm: EdmType;
  nonNull: boolean;
}

/** Where an entity, or an index entity, lives: one table, a PartitionKey and a RowKey template. */
export interface Layout {
  table: string;
  partitionKey: KeyTemplate;
  rowKey: KeyTemplate;
}

/** An object type declared with `@entity`. */
export interface EntityModel {
  /** The GraphQL type name, e.g. `Employee`. */
  name: string;
  /** The value of the `EntityType` property stored on each entity ("Heterogeneous entity types"). */
  entityType: string;
  layout: Layout;
  /** Fields stored as properties, by name. */
  fields: Map<string, StoredField>;
  /** Fields of the PartitionKey and RowKey templates: what identifies one entity. */
  keyFields: string[];
  indexes: Map<string, IndexModel>;
  /** The `@entity` directive, for error locations. */
  node?: ASTNode;
}

/** A secondary index of an entity, kept as index entities ("Index Entities Pattern"). */
export interface IndexModel {
  name: string;
  entity: EntityModel;
  layout: Layout;
  /**
   * intraPartition: same table and PartitionKey template as the entity, written in the entity's EGT
   * ("Intra-partition secondary index pattern"); interPartition: kept eventually
   * ("Inter-partition secondary index pattern").
   */
  scope: 'intraPartition' | 'interPartition';
  /** The fields copied onto each index entity: `include` plus the entity's key fields and the index's own. */
  projection: Set<string>;
  unique: boolean;
  /** The `EntityType` value stored on each index entity: `<entityType>.<index name>`. */
  entityType: string;
  /** The `@index` directive, for error locations. */
  node?: ASTNode;
}

/** Where a placeholder's value comes from when a field is resolved. */
export type Binding = { source: 'argument' | 'parent'; name: string };

/** A key template together with where each of its placeholders gets its value. */
export interface BoundTemplate {
  template: KeyTemplate;
  bindings: Map<string, Binding>;
}

interface AccessPathBase {
  /** `Type.field`, e.g. `Query.department`. */
  coordinate: string;
  parentType: string;
  fieldName: string;
  target: EntityModel;
  /** Set when the path reads index entities instead of the entity itself. */
  index?: IndexModel;
  table: string;
  partitionKey: BoundTemplate;
  /** The field's directive, for error locations. */
  node?: ASTNode;
}

/** A point query: both keys known ("Point Query" in the guide's "Design for querying"). */
export interface PointPath extends AccessPathBase {
  kind: 'point';
  rowKey: BoundTemplate;
}

/** A range query over one partition: a RowKey prefix or bounds ("Range Query"). */
export interface RangePath extends AccessPathBase {
  kind: 'range';
  /** Exact-prefix form: entities whose RowKey starts with the rendered prefix. */
  rowKeyPrefix?: BoundTemplate;
  /** Bounds form: RowKeys in [from, to). */
  rowKeyFrom?: BoundTemplate;
  rowKeyTo?: BoundTemplate;
  /** Default `first` (entities). */
  pageSize: number;
  /** Largest accepted `first` (entities). */
  maxPageSize: number;
}

export type AccessPath = PointPath | RangePath;

/** The compiled schema's storage design. */
export interface Model {
  entities: Map<string, EntityModel>;
  /** Every field that reads storage, by `Type.field`. */
  accessPaths: Map<string, AccessPath>;
  /** Connection types (name → node entity name), recognised by their Relay shape. */
  connections: Map<string, string>;
  /** Every table the design uses. */
  tables: string[];
}

/** Name of the property that tells the types in a shared partition apart. */
export const ENTITY_TYPE_PROPERTY = 'EntityType';
