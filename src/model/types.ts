/**
 * The model: what the compiler (src/compiler/compile.ts) makes of the schema's directives, and all that the read
 * and write paths consult. It holds no GraphQL execution state and no storage client.
 */
import type { ASTNode } from 'graphql';
import type { EdmType } from '../storage/storage-types';
import type { KeyTemplate } from './key-template';

/** A scalar or enum field stored as one property of the same name. */
export interface StoredField {
  name: string;
  /** The GraphQL named type: Int, Float, Decimal, String, ID, Boolean, Long, DateTime or an enum's name. */
  graphqlType: string;
  edm: EdmType;
  nonNull: boolean;
  /** `@constraint`: what every write checks before anything is sent. */
  constraint?: FieldConstraint;
  /** `@auth` on the field: who may read it (beside the type's own rules). */
  auth?: AuthPolicy;
  /**
   * `@series`: a list of `graphqlType` numbers stored as one property per element, `properties[i]` holding element i
   * (the guide's "Data series pattern"); `edm` is the elements'.
   */
  series?: { length: number; properties: string[] };
  /**
   * A list of `graphqlType` values (`tags: [String!]`) kept in one property: the JSON text of the list, an Edm.String,
   * each element checked as a value of its type (`edm` is the elements': src/model/entity-codec.ts listValue).
   */
  list?: true;
  /**
   * A value object kept inside its holder: `graphqlType` names an object type without `@entity` (`dimensions:
   * Dimensions`), stored as the JSON text of its fields in one Edm.String property (the guide's "About the Azure Table
   * service": a complex type in one property, serialized). With `list`, a list of them. src/model/entity-codec.ts
   * jsonValue checks and writes it.
   */
  value?: ValueShape;
  /** `@encrypted`: sealed by the store before it is sent, opened when read (src/storage/property-cipher.ts). */
  encrypted?: true;
  /** `@blob`: the property holds a blob's name; the field reads as a SAS URL for it (src/model/blob-fields.ts). */
  blob?: BlobSpec;
}

/**
 * The fields of a value object type, by name: each one a value, a list of values, or a value object (nested), with
 * its nullability and `@constraint`; no directive that makes a property of its own (compiler/value-types.ts).
 */
export interface ValueShape {
  fields: ReadonlyMap<string, StoredField>;
}

/** Where an entity, or an index entity, lives: one table, a PartitionKey and a RowKey template. */
export interface Layout {
  /** The table's name; with `tableTemplate`, the template's source (not a name to send). */
  table: string;
  /**
   * A table per period (table-template.ts, the guide's "High volume delete pattern"): each entity's table is rendered
   * from its own key fields, e.g. `LoginAttempts{at:yyyyMMdd}`.
   */
  tableTemplate?: KeyTemplate;
  partitionKey: KeyTemplate;
  rowKey: KeyTemplate;
}

/** An object type declared with `@entity`. */
export interface EntityModel {
  /** The GraphQL type name, e.g. `Order`. */
  name: string;
  /** The value of the `EntityType` property stored on each entity ("Heterogeneous entity types"). */
  entityType: string;
  layout: Layout;
  /** Fields stored as properties, by name. */
  fields: Map<string, StoredField>;
  /** Fields of the PartitionKey and RowKey templates: what identifies one entity. */
  keyFields: string[];
  indexes: Map<string, IndexModel>;
  /**
   * Set when the entity's properties do not fit in one entity: how they are spread over its parts (wide-entities.ts,
   * the guide's "Wide entities pattern").
   */
  wide?: WideLayout;
  /** Whether the type has an `etag: String` field: the entity's ETag, for `ifMatch` on a later write. */
  exposesEtag: boolean;
  /** Stored fields that summaries maintain (`@summary`): written by the write path, never by a client. */
  summaryFields: Set<string>;
  /** Stored fields copied from a referenced entity (`@copy`, src/compiler/build-copies.ts), by field name: never written by a client. */
  copies: Map<string, CopyModel>;
  /** `@auth` on the type: who may read its entities, wherever a read reaches them. */
  auth?: AuthPolicy;
  /**
   * Set on a stored interface (src/compiler/build-interfaces.ts, the guide's "Inheritance relationships"): the entity types that
   * implement it, stored under this one layout and told apart by EntityType. Its `fields` are those they all have.
   */
  implementations?: EntityModel[];
  /** Whether a subscription follows this type: its writes add a change entity to their EGT (change-log.ts). */
  changeLogged?: boolean;
  /** Fields any `@auth` scope of a read of this type names: every read selects them, to decide on each entity. */
  authFields: Set<string>;
  /**
   * Under `@tenancy`, set on every type not marked `@global`: its entities belong to one tenant each. Its `fields` and
   * `keyFields` hold the hidden `_tenant` (src/model/tenancy.ts), its PartitionKey templates start with it.
   */
  tenantScoped?: true;
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
  /**
   * The list field (`tags: [String!]`) the index's key templates name, if any: one index entity per distinct element
   * (the guide's "Index Entities Pattern"), keyed by the element, each holding the whole list.
   */
  element?: string;
  /** The `EntityType` value stored on each index entity: `<entityType>.<index name>`. */
  entityType: string;
  /** The `@index` directive, for error locations. */
  node?: ASTNode;
}

/**
 * Where a placeholder's value comes from when a field is resolved: an argument, the parent entity's stored field, or
 * (`tenant`, the `{_tenant}` of a root field under `@tenancy`) the request's verified token. `optional`: the argument or stored field is
 * nullable (allowed only on a nullable `@point` field, an optional reference): when it is null the field is null,
 * and no storage call is made.
 */
export type Binding = { source: 'argument' | 'parent' | 'tenant'; name: string; optional?: boolean };

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
  /** The table's name; with `tableTemplate`, the target's template source. */
  table: string;
  /** A table per period: the table rendered from the field's arguments or parent (`@point(table:)`, `@range(table:)`). */
  tableTemplate?: BoundTemplate;
  partitionKey: BoundTemplate;
  /** The field's directive, for error locations. */
  node?: ASTNode;
  /** `@auth` on the field: who may read through it (beside the target type's own rules). */
  auth?: AuthPolicy;
}

/** A point query: both keys known ("Point Query" in the guide's "Design for querying"). */
export interface PointPath extends AccessPathBase {
  kind: 'point';
  rowKey: BoundTemplate;
  /**
   * A reference (a field of an entity type whose keys all come from the entity's own stored fields): whether a
   * write that sets those fields first checks that the entity they address exists (`@point(checkOnWrite)`,
   * default true). False for fields that are not references.
   */
  checkOnWrite: boolean;
  /** A reference's `@point(onDelete:)` as declared; absent: its default (build-dependents.ts). */
  onDelete?: OnDelete;
}

/** A range query over one partition: a RowKey prefix or bounds ("Range Query"). */
export interface RangePath extends AccessPathBase {
  kind: 'range';
  /** Exact-prefix form: entities whose RowKey starts with the rendered prefix. */
  rowKeyPrefix?: BoundTemplate;
  /** Bounds form: RowKeys from `rowKeyFrom` to `rowKeyTo`, each end inclusive or exclusive as declared. */
  rowKeyFrom?: BoundTemplate;
  rowKeyTo?: BoundTemplate;
  /** Whether `rowKeyFrom` itself is in the range (default true). */
  fromInclusive?: boolean;
  /** Whether `rowKeyTo` itself is in the range (default false). */
  toInclusive?: boolean;
  /**
   * A many-to-many connection (`@range(through)`): the range reads entities of `join.entity` (or its index
   * entities), and each node is the entity the join entity's reference `join.reference` points at — read in one
   * batched wave after the range. `target` is the node type.
   */
  join?: {
    entity: EntityModel;
    reference: PointPath;
    /**
     * The target's fields a join entity itself holds — its key fields (from the reference's keys) and its copies
     * (`@copy` through the reference) — by target field → join entity field. A page whose selection needs no other
     * field of the target is served from the join entities alone, without the second wave.
     */
    covered: Map<string, string>;
  };
  /** Default `first` (entities). */
  pageSize: number;
  /** Largest accepted `first` (entities). */
  maxPageSize: number;
}

export type AccessPath = PointPath | RangePath;

/** One term of a summed summary: a product of numeric fields and constants. */
export type SummaryFactor = { field: string } | { constant: number };

/**
 * A summary value (`@summary`) on a holder entity, kept by every write of an `of` entity — in the same EGT
 * ("Entity Group Transactions") or eventually (`scope`). Each `of` entity contributes 1 (count) or the sum of its
 * terms.
 */
export interface SummaryModel {
  holder: EntityModel;
  /** The holder's stored field that holds the value. */
  field: string;
  of: EntityModel;
  /** The `of` entity's reference to its holder. */
  via: PointPath;
  count: boolean;
  /** Terms added up when not a count; each term is a product of factors. */
  terms: SummaryFactor[][];
  /**
   * `egt`: the holder shares the `of` entity's partition, and every write changes it in its own EGT. `eventual`:
   * the holder is elsewhere (or `via` reaches it through a unique index); the message worker keeps it, exactly,
   * through one contribution entity per `of` entity in the holder's partition (src/model/contributions.ts), changed
   * in one EGT with the holder. A summary of a summary (its terms sum another summary of `of`) is always eventual.
   */
  scope: 'egt' | 'eventual';
  /**
   * The summaries that sum this one's value (`Customer.totalSpent` summing `Invoice.total`): after each change of
   * this value, the worker brings the holder's contributions to them up to date (src/derived/summary-chains.ts).
   */
  feeds: SummaryModel[];
}

/**
 * A copy of a referenced entity's field (`@copy`, the guide's "Denormalization pattern"): set by the writer from the
 * target when a write sets the reference, kept in step by the worker when the target changes.
 */
export interface CopyModel {
  /** The entity holding the copy. */
  entity: EntityModel;
  /** The copy's stored field on `entity`. */
  field: string;
  /** The reference whose target is copied from. */
  reference: PointPath;
  /** The target's field copied. */
  targetField: string;
  /** A range of the target type listing the entities (or their index entities) that hold copies of it. */
  reverse: RangePath;
}

export type WriteAction = 'CREATE' | 'UPDATE' | 'REPLACE' | 'DELETE' | 'MOVE' | 'INCREMENT';

/** A mutation field (`@write`): one write of one entity and what it fans out to. */
export interface WriteModel {
  coordinate: string;
  entity: EntityModel;
  action: WriteAction;
  /** Stored fields the input may set. */
  inputFields: Set<string>;
  /** The payload type's field that returns the written entity. */
  payloadField: string;
  /** Payload fields marked `@blobUpload`: the `@blob` field each returns an upload URL for, by payload field. */
  uploadFields?: Map<string, string>;
  /** MOVE: the input fields that give the new keys (`toCustomerId`), by the key field they replace. */
  moveTo?: Map<string, string>;
  /** MOVE with `to`: the entity type the entity becomes at its new address (an archive's). */
  moveTarget?: EntityModel;
  /** `@auth` on the mutation: who may run it, on which entities, giving which fields. */
  auth?: AuthPolicy;
  /** The name of the input object type its `input` argument takes (`CreateOrderInput`); absent on the worker's own writes. */
  inputType?: string;
}

/**
 * A mutation field with `@transaction` (src/compiler/transactions.ts): a list of writes, each one of the schema's
 * `@write` mutations, that land together in one EGT of one partition, or not at all.
 */
export interface TransactionModel {
  coordinate: string;
  /** The writes an item may be, by the item input's field name (the `@write` mutation's name). */
  items: Map<string, WriteModel>;
  /** The name of the list argument (`writes`). */
  listArgument: string;
  /**
   * The arguments that give the partition: the fields of one written type's PartitionKey template (the tenant's
   * aside), by name.
   */
  partitionArguments: string[];
  /**
   * Per item (by its field name), the entity's field each partition argument gives: its own PartitionKey's field in
   * the same place (an invoice's `id` for the argument `invoiceId` of its lines' `invoice_{invoiceId}`).
   */
  partitionFields: Map<string, Record<string, string>>;
  /** The most items one call may hold (items), proven to fit one EGT. */
  maxItems: number;
  /** The table every write goes to. */
  table: string;
  /** The first written type's PartitionKey template: every other's is the same key but for its fields' names. */
  partitionKey: KeyTemplate;
}

/** The compiled schema's storage design. */
/**
 * Where a tenant's entities are kept (docs/tenancy.md, "Tiers"): `PARTITION_PREFIX` in the deployment's shared tables,
 * `TABLE` in tables of its own (src/model/tenancy.ts tenantTable) of the deployment's account, `ACCOUNT` in tables of
 * the same names in a storage account of its own. The keys are the same on every tier.
 */
export type TenantIsolation = 'PARTITION_PREFIX' | 'TABLE' | 'ACCOUNT';

/** `extend schema @tenancy(…)`: the schema's entities are tenant-scoped (src/model/tenancy.ts). */
export interface TenancyModel {
  /** The verified token's claim that names the tenant. */
  claim: string;
  /** The tier of a tenant that has none of its own in the catalogue (src/model/tenancy.ts TenantIsolation). */
  isolation: TenantIsolation;
  /** The directive, for error locations. */
  node?: ASTNode;
}

export interface Model {
  /** Set under `extend schema @tenancy`: every entity type not marked `@global` is tenant-scoped. */
  tenancy?: TenancyModel;
  entities: Map<string, EntityModel>;
  /** Interfaces whose implementations share one layout (src/compiler/build-interfaces.ts), by name: what a field may return besides an entity type. */
  interfaces: Map<string, EntityModel>;
  /** Every summary value, by `Holder.field`. */
  summaries: Map<string, SummaryModel>;
  /** Every mutation field, by `Mutation.field`. */
  writes: Map<string, WriteModel>;
  /** Every `@transaction` mutation field, by `Mutation.field`. */
  transactions: Map<string, TransactionModel>;
  /** Subscription fields by `Subscription.field` (`@subscribe`). */
  subscriptions: Map<string, SubscriptionModel>;
  /** Every field that reads storage, by `Type.field`. */
  accessPaths: Map<string, AccessPath>;
  /** Connection types (name → node entity name), recognised by their Relay shape. */
  connections: Map<string, string>;
  /** Every table the design uses (not the tables of a table template: a write creates those, table-template.ts). */
  tables: string[];
  /** `@sas` fields (shared access signature URLs for an entity's partition), by `Type.field`. */
  sasFields: Map<string, SasField>;
  /**
   * References a write checks (point paths with `checkOnWrite`), by the name of the entity type that holds them:
   * a write setting a reference's key fields to an address where nothing exists is refused (NOT_FOUND).
   */
  references: Map<string, PointPath[]>;
  /** Every copy (`@copy`), by the name of the type copied from: what a write of that type must bring up to date. */
  copiesOf: Map<string, CopyModel[]>;
  /**
   * The entities whose references point at an entity of a type, by the name of the type they reach, where a delete of
   * that type must see to them (src/compiler/build-dependents.ts): the join entities of many-to-many connections
   * (`@range(through)`) and the references declared `onDelete: CASCADE`, which the worker deletes once their target is
   * deleted (and re-points once it is moved: src/derived/dependent-upkeep.ts); and the `onDelete: RESTRICT`
   * references found through a range, whose delete is refused while one points at it (src/write/group-read.ts).
   */
  dependentsOf: Map<string, DependentModel[]>;
  /** Set when the schema links Apollo Federation 2 (src/compiler/federation.ts): it is a subgraph. */
  federation?: FederationModel;
  /** Set under `extend schema @nodeInterface` (src/compiler/node-interface.ts): Relay's global ids. */
  nodes?: NodeModel;
}

/** Relay's Global Object Identification: every entity type implements `Node`, its id sealed from its type and keys. */
export interface NodeModel {
  /** The id field's name on every entity type (`nodeId` by default); the arguments are `node(<idField>:)`, `nodes(<idField>s:)`. */
  idField: string;
  /** Each entity type's point query by its own keys (its arguments the key fields, the tenant from the token), by type name. */
  paths: Map<string, PointPath>;
}

/**
 * A Federation 2 subgraph: the `@key`s `_entities` resolves, each one point query, and the SDL `_service` serves
 * (docs/federation.md).
 */
export interface FederationModel {
  /** The keys by entity type name, in declaration order: `_entities` answers a representation by its first key it carries. */
  keys: Map<string, FederationKey[]>;
  /** The SDL served as `_service { sdl }`: the schema without tablegraph's storage directives. */
  sdl: string;
}

/** One `@key` of an entity type and the point query that serves it. */
export interface FederationKey {
  /** The key's fields, as declared (`"sku package"` is `["sku", "package"]`). */
  fields: string[];
  /**
   * The point query a representation's values address: the entity's own keys, or a unique index's (the index entity,
   * then the entity). Its bindings are all `argument`s named after the key's fields (and the request's tenant).
   * Undefined for a key declared `resolvable: false`.
   */
  path?: PointPath;
}

/**
 * What a delete of `reference.target`'s type does to the entities of `entity` that point at one: `CASCADE`, they go
 * with it (the worker deletes them through the write path); `RESTRICT`, the delete is refused while one exists.
 * `reverse`, a range of the target type, lists them.
 */
export interface DependentModel {
  /** The referring type (a join type, or any type with a reference). */
  entity: EntityModel;
  /** Its reference to the target (`Type.field`). */
  reference: PointPath;
  onDelete: OnDelete;
  /**
   * A many-to-many connection's join reference (`@range(through)`) left at its default: its join entities are deleted
   * after the target, and a target created again at the same address meanwhile keeps them. A CASCADE declared with
   * `onDelete` instead leaves a tombstone at the target's address until they are deleted (no re-create before then).
   */
  join: boolean;
  /** A range of the target type over the referring entities (or their index entities) pointing at one target. */
  reverse: RangePath;
  /**
   * The referring fields that name the target, by the target field each holds: its key fields, or through a unique
   * index the fields the index is keyed by (src/compiler/reference-checks.ts referenceKeyFields).
   */
  keyFields: Map<string, string>;
}

/** What a delete does to the entities a reference of theirs points at it from (`@point(onDelete:)`). */
export type OnDelete = 'RESTRICT' | 'CASCADE';

/** Name of the property that tells the types in a shared partition apart. */
export const ENTITY_TYPE_PROPERTY = 'EntityType';

/**
 * Name of the String property that identifies the write which produced an entity's current state: a fresh UUID for
 * every write attempt, never reused — not after a delete, not after a failed attempt (docs/architecture.md, "Fan-out
 * and reconciliation"). A fan-out message names the write it announces and the state that write was based on, so the
 * worker can tell whether that write is still pending, committed, or superseded.
 */
export const WRITE_ID_PROPERTY = 'WriteId';

/**
 * Properties of a unique index entity while it is a reservation (docs/architecture.md, "Unique values"): `BasedOn`, the
 * state id the reserving write read (absent: a create, which needs no entity); `ReservedUntil`, the end of its lease,
 * after which the reserving write can no longer commit (it sends its EGT only well before). The reserving write's own
 * id is in WRITE_ID_PROPERTY. A reconciled index entity carries none of them.
 */
export const BASED_ON_PROPERTY = 'BasedOn';
export const RESERVED_UNTIL_PROPERTY = 'ReservedUntil';

/**
 * Name of the String property that marks an entity a move (`@write(action: MOVE)`) was requested for: the move's
 * id (its message's `writeId`). The request sets it, conditional on the ETag it read, right after it queued the
 * move; the worker moves only an entity that carries its own move's id, so a move is carried out once, and never
 * on an entity created later at the same address ("Eventually consistent transactions pattern"). Updates of the
 * entity keep it (they are carried along); a delete ends the move.
 */
export const MOVE_ID_PROPERTY = 'MoveId';

/**
 * Name of the String property that marks a move's copy at its new address while the entity is also still at its
 * old one: the move's id. Only that move's own writes may change such an entity (others get CONFLICT, reason
 * MovePending); the worker removes the mark once the old entity is deleted. It is how a redelivered move tells
 * its own copy from an entity someone else created at the new address.
 */
export const MOVED_IN_PROPERTY = 'MovedIn';

/**
 * A subscription field (`@subscribe`): it follows the writes to one partition of an entity type — or to one entity,
 * when its arguments give the RowKey's fields too — through the change log (change-log.ts).
 */
export interface SubscriptionModel {
  coordinate: string;
  entity: EntityModel;
  /** Whether the arguments name one entity (every RowKey field is one), not only its partition. */
  oneEntity: boolean;
  /** The argument a client resumes with (a change's cursor), if the field declares `after: String`. */
  after?: string;
  node?: ASTNode;
}

/** One rule: every condition holds. */
export interface AuthRule {
  /** Any of these roles; absent: any authenticated caller. */
  roles?: string[];
  /** Each entity field equals the claim's value. */
  scope: Array<{ field: string; claim: string }>;
  /** On a mutation: the only input fields (besides keys and ifMatch) the rule lets the caller give; absent: all. */
  fields?: string[];
}

/** Any of its rules (OR). */
export interface AuthPolicy {
  rules: AuthRule[];
  /** The directive, for error locations. */
  node?: ASTNode;
}

/** A field's compiled constraint. Bounds inclusive; lengths in characters (UTF-16 code units, as JS counts). */
export interface FieldConstraint {
  min?: number;
  max?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: RegExp;
}

/** What `@blob` says of a field. */
export interface BlobSpec {
  /** The container, table prefix included (lower-cased). */
  container: string;
  /** The largest upload through the server (bytes, decoded). */
  maxBytes: number;
  /** The Content-Types a write may give; empty: any. */
  contentTypes: string[];
  /** How long a read URL is valid (s). */
  expiresInSeconds: number;
}

/** A `@sas` field: the entity whose partition it signs for, and for how long (s). */
export interface SasField {
  entity: EntityModel;
  field: string;
  expiresInSeconds: number;
  node?: ASTNode;
}

/** How a wide entity's properties are spread over its parts. */
export interface WideLayout {
  /** Per part, in order: the properties it holds besides the key fields, EntityType and WriteId. */
  parts: Array<ReadonlySet<string>>;
}
