/**
 * Resolves every field that reads storage to exactly one access path — a point query or a range query over one
 * partition — and rejects, with the type, field and SDL location, any field that could only be served by a scan
 * (the guide's "Design for querying": point queries first, then range queries; never a table scan).
 */
import { getNamedType, isListType, isNonNullType, isObjectType, type GraphQLSchema } from 'graphql';
import { readPoint, readRange, type PointDirective, type RangeDirective } from './directives';
import { boundTable, boundTemplate, derivedPrefix, type FieldContext } from './field-bindings';
import { leadingLiteral } from './layouts';
import type { SchemaProblems } from './schema-errors';
import { nodeIdField, nodeRootFields } from './node-interface';
import type { AccessPath, BoundTemplate, EntityModel, IndexModel, Layout, PointPath, RangePath } from '../model/types';
import { notAReference } from './reference-checks';
import { valueTypeNames } from './value-types';

/** Defaults for `@range` (entities per page). */
export interface PageDefaults {
  pageSize: number;
  maxPageSize: number;
}

/** The largest page the Table service returns in one response (entities). */
const SERVICE_PAGE_LIMIT = 1000;

/**
 * Finds the Relay connection types: `edges: [Edge]` whose edge has `node` and `cursor`, and `pageInfo`.
 * Returns connection name → node entity name, and the names of the edge types.
 */
export function findConnections(
  schema: GraphQLSchema,
  entities: Map<string, EntityModel>,
  problems: SchemaProblems,
): { connections: Map<string, string>; edges: Set<string> } {
  const connections = new Map<string, string>();
  const edges = new Set<string>();
  for (const type of Object.values(schema.getTypeMap())) {
    if (!isObjectType(type)) continue;
    const fields = type.getFields();
    if (!fields.edges || !fields.pageInfo) continue;
    const edgeType = getNamedType(fields.edges.type);
    const edgeFields = isObjectType(edgeType) ? edgeType.getFields() : undefined;
    if (!isObjectType(edgeType) || !edgeFields?.node || !edgeFields.cursor || !isListType(unwrapNonNull(fields.edges.type))) {
      problems.add(type.name, 'a connection needs `edges: [Edge!]!` whose edge type has `node` and `cursor`', type.astNode);
      continue;
    }
    const node = getNamedType(edgeFields.node.type);
    if (!entities.has(node.name)) {
      problems.add(type.name, `its nodes are ${node.name}, which has no @entity: a connection lists entities`, type.astNode);
      continue;
    }
    connections.set(type.name, node.name);
    edges.add(edgeType.name);
  }
  return { connections, edges };
}

function unwrapNonNull<T>(type: T): T {
  return (isNonNullType(type) ? type.ofType : type) as T;
}

/** The types the Mutation type's fields return: payloads, resolved from a write's result (see writes.ts). */
function payloadTypes(schema: GraphQLSchema): string[] {
  // What mutations and subscriptions return (payloads, changes): filled from the write or the change, not read.
  return [schema.getMutationType(), schema.getSubscriptionType()].flatMap((root) =>
    root ? Object.values(root.getFields()).map((f) => getNamedType(f.type).name) : [],
  );
}

/** What the access paths are compiled against: the schema's entities, its Relay connections and edges, page defaults. */
export interface PathInputs {
  /** Entity types by name. */
  entities: Map<string, EntityModel>;
  /** Connection type name → its node type's name. */
  connections: Map<string, string>;
  /** The names of the connections' edge types. */
  edges: Set<string>;
  defaults: PageDefaults;
  /** Put before every table name (test isolation). Default: ''. */
  tablePrefix?: string;
}

/** The root fields of a Federation 2 subgraph, added by `@apollo/subgraph`: their resolvers are federation-resolvers.ts's. */
const FEDERATION_ROOT_FIELDS = new Set(['_service', '_entities']);

/** Compiles the access path of every field in the schema; records a problem for each field that has none. */
export function buildAccessPaths(schema: GraphQLSchema, inputs: PathInputs, problems: SchemaProblems): Map<string, AccessPath> {
  const { entities, connections, edges, tablePrefix = '' } = inputs;
  const paths = new Map<string, AccessPath>();
  const joins: Array<{ path: RangePath; through: string; node: RangeDirective['node'] }> = [];
  const federated = schema.getType('_Service') !== undefined;
  const nodeFields = nodeRootFields(nodeIdField(schema));
  const skipped = new Set([
    schema.getMutationType()?.name,
    schema.getSubscriptionType()?.name,
    'PageInfo',
    ...connections.keys(),
    ...edges,
    // (An entity type a transaction returns is an entity still: its fields have paths.)
    ...payloadTypes(schema).filter((name) => !entities.has(name)),
    // A Federation 2 subgraph's own (@apollo/subgraph): `_service`'s type; `_entities` is served by federation.ts's keys.
    ...(federated ? ['_Service'] : []),
    // Kept inside the entities that hold them (value-types.ts): read with them.
    ...valueTypeNames(entities.values()),
  ]);
  for (const type of Object.values(schema.getTypeMap())) {
    if (!isObjectType(type) || type.name.startsWith('__') || skipped.has(type.name)) continue;
    const parentEntity = entities.get(type.name);
    const isRoot = type === schema.getQueryType();
    if (!parentEntity && !isRoot) {
      problems.add(
        type.name,
        'is neither an @entity, the Query type, a Relay connection, an edge nor a value object an entity holds: tablegraph cannot tell where its data lives',
        type.astNode,
      );
      continue;
    }
    for (const field of Object.values(type.getFields())) {
      if (isRoot && federated && FEDERATION_ROOT_FIELDS.has(field.name)) continue;
      if (isRoot && nodeFields.has(field.name)) continue; // served by each entity type's own keys (node-interface.ts)
      const ctx: FieldContext = { parent: type, field, coordinate: `${type.name}.${field.name}`, parentEntity, problems, tablePrefix };
      const point = readPoint(schema, field.astNode);
      const range = readRange(schema, field.astNode);
      if (point && range) {
        problems.add(ctx.coordinate, 'has both @point and @range: a field is served by one access path', field.astNode);
      } else if (point) {
        const path = compilePoint({ ...ctx, kind: 'point' }, point, entities);
        if (path) paths.set(ctx.coordinate, path);
      } else if (range) {
        const path = compileRange({ ...ctx, kind: 'range' }, range, inputs);
        if (path) paths.set(ctx.coordinate, path);
        if (path && range.through !== undefined) joins.push({ path, through: range.through, node: range.node });
      } else if ((isObjectType(getNamedType(field.type)) && !parentEntity?.fields.get(field.name)?.value) || isRoot) {
        problems.add(
          ctx.coordinate,
          `returns ${getNamedType(field.type).name} but has no @point or @range: it cannot be served by a point or range query, and tablegraph never scans`,
          field.astNode,
        );
      }
    }
  }
  // A join's reference may be compiled after the connection that goes through it: resolved once all are.
  for (const j of joins) {
    const join = resolveJoin(j.path, j.through, paths, entities);
    if (typeof join === 'string') {
      problems.add(j.path.coordinate, `through: "${j.through}": ${join}`, j.node);
      paths.delete(j.path.coordinate);
    } else {
      j.path.join = join;
    }
  }
  return paths;
}

/**
 * The join of a many-to-many connection: `through` names a reference of the join type (every key from the join
 * entity's own fields, addressing the node type or a unique index of it) to the connection's node type; when the
 * range reads the join type's index, the index entities hold those fields.
 * @returns the join, or why there is none
 */
function resolveJoin(path: RangePath, through: string, paths: Map<string, AccessPath>, entities: Map<string, EntityModel>): RangePath['join'] | string {
  const reference = paths.get(through);
  const [joinName, fieldName] = through.split('.');
  const join = entities.get(joinName)!; // compileRange checked it
  if (!reference || reference.kind !== 'point') return `${joinName} has no @point field "${fieldName}"`;
  if (reference.target !== path.target) return `${through} reaches ${reference.target.name}, but the connection's nodes are ${path.target.name}`;
  const why = notAReference(reference, joinName);
  if (why) return why;
  const bindings = [...reference.partitionKey.bindings.values(), ...reference.rowKey.bindings.values()];
  const missing = path.index ? bindings.filter((b) => !path.index!.projection.has(b.name)).map((b) => b.name) : [];
  if (missing.length) return `the index "${path.index!.name}" does not hold ${missing.join(', ')}: add ${missing.length > 1 ? 'them' : 'it'} to its include`;
  return { entity: join, reference, covered: new Map() }; // `covered` is filled once copies are known (build-copies.ts)
}

function compilePoint(ctx: FieldContext, d: PointDirective, entities: Map<string, EntityModel>): PointPath | undefined {
  const returned = unwrapNonNull(ctx.field.type);
  const target = entities.get(getNamedType(returned).name);
  if (!target || isListType(returned)) {
    ctx.problems.add(ctx.coordinate, '@point must return one @entity type (a list needs @range and a connection)', d.node);
    return undefined;
  }
  if (target.implementations && d.index !== undefined) {
    ctx.problems.add(ctx.coordinate, `${target.name} is an interface: it has no @index of its own (read it by its keys)`, d.node);
    return undefined;
  }
  const layout = layoutOf(ctx, target, d.index, d.node);
  if (!layout) return undefined;
  const table = boundTable(ctx, d.table, layout.layout, d.node);
  const partitionKey = boundTemplate(ctx, { source: d.partitionKey, layout: layout.layout.partitionKey, what: 'PartitionKey', mode: 'exact' }, d.node);
  const rowKey = boundTemplate(ctx, { source: d.rowKey, layout: layout.layout.rowKey, what: 'RowKey', mode: 'exact' }, d.node);
  if (!partitionKey || !rowKey || table === null) return undefined;
  return {
    kind: 'point',
    ...pathCommon(ctx, target, layout, table),
    partitionKey,
    rowKey,
    // A reference: every key from the entity's own fields, none from an argument.
    checkOnWrite:
      d.checkOnWrite &&
      !!ctx.parentEntity &&
      !target.implementations &&
      [...(table?.bindings.values() ?? []), ...partitionKey.bindings.values(), ...rowKey.bindings.values()].every((b) => b.source === 'parent'),
    ...(d.onDelete && { onDelete: d.onDelete }),
    node: d.node,
  };
}

/** What a point and a range path both say: the field, its target, the layout read through, its table. */
function pathCommon(
  ctx: FieldContext,
  target: EntityModel,
  layout: { layout: Layout; index?: IndexModel },
  table: BoundTemplate | undefined,
): Pick<PointPath, 'coordinate' | 'parentType' | 'fieldName' | 'target' | 'index' | 'table' | 'tableTemplate'> {
  return {
    coordinate: ctx.coordinate,
    parentType: ctx.parent.name,
    fieldName: ctx.field.name,
    target,
    index: layout.index,
    table: layout.layout.table,
    ...(table && { tableTemplate: table }),
  };
}

function compileRange(ctx: FieldContext, d: RangeDirective, inputs: PathInputs): RangePath | undefined {
  const targets = rangeTarget(ctx, d, inputs.entities, inputs.connections);
  const pages = targets && pageSizes(ctx, d, inputs.defaults);
  if (!targets || !pages) return undefined;
  const { target, keyed } = targets;
  const layout = layoutOf(ctx, keyed, d.index, d.node);
  if (!layout) return undefined;
  const table = boundTable(ctx, d.table, layout.layout, d.node);
  const partitionKey = boundTemplate(ctx, { source: d.partitionKey, layout: layout.layout.partitionKey, what: 'PartitionKey', mode: 'exact' }, d.node);
  if (!partitionKey || table === null) return undefined;
  const rows = rowKeyRange(ctx, d, layout);
  if (!rows) return undefined;
  return {
    kind: 'range' as const,
    ...pathCommon(ctx, target, layout, table),
    partitionKey,
    ...pages,
    node: d.node,
    ...rows,
  };
}

/**
 * The entity type a connection returns (`target`), and the type whose keys its range is over (`keyed`: the join
 * type of a many-to-many connection, otherwise the target). Undefined, with a problem, when there is none.
 */
function rangeTarget(
  ctx: FieldContext,
  d: RangeDirective,
  entities: Map<string, EntityModel>,
  connections: Map<string, string>,
): { target: EntityModel; keyed: EntityModel } | undefined {
  const connectionName = getNamedType(ctx.field.type).name;
  const nodeName = connections.get(connectionName);
  const target = nodeName ? entities.get(nodeName) : undefined;
  if (!target) {
    ctx.problems.add(ctx.coordinate, `@range must return a Relay connection of an @entity type, not ${connectionName}`, d.node);
    return undefined;
  }
  if (target.implementations && (d.index !== undefined || d.through !== undefined)) {
    ctx.problems.add(
      ctx.coordinate,
      `${target.name} is an interface: its connection ranges over its implementations' own entities, with no index or join`,
      d.node,
    );
    return undefined;
  }
  const siblings = [...entities.values()].find((i) => i.implementations && i.implementations.length > 1 && i.implementations.includes(target));
  if (siblings && d.index === undefined && d.through === undefined) {
    const others = siblings.implementations!.filter((e) => e !== target).map((e) => e.name);
    ctx.problems.add(
      ctx.coordinate,
      `${target.name} shares its keys with ${others.join(', ')} (interface ${siblings.name}): a range of ${target.name} alone would read theirs too; return ${siblings.name}Connection`,
      d.node,
    );
    return undefined;
  }
  // A many-to-many connection ranges over the join type's entities: its keys are the join type's.
  let keyed = target;
  if (d.through !== undefined) {
    const join = entities.get(d.through.split('.')[0]);
    if (!join || d.through.split('.').length !== 2) {
      ctx.problems.add(ctx.coordinate, `through: "${d.through}" must name a reference field of an @entity type, as "Type.field"`, d.node);
      return undefined;
    }
    keyed = join;
  }
  return { target, keyed };
}

/** The connection's arguments (`first`, `after`) and its page sizes (entities), checked. */
function pageSizes(ctx: FieldContext, d: RangeDirective, defaults: PageDefaults): { pageSize: number; maxPageSize: number } | undefined {
  const first = ctx.field.args.find((a) => a.name === 'first');
  const after = ctx.field.args.find((a) => a.name === 'after');
  if (!first || getNamedType(first.type).name !== 'Int' || !after || getNamedType(after.type).name !== 'String') {
    ctx.problems.add(ctx.coordinate, 'a connection field takes `first: Int` and `after: String`', ctx.field.astNode);
    return undefined;
  }
  const pageSize = d.pageSize ?? defaults.pageSize;
  const maxPageSize = d.maxPageSize ?? Math.max(defaults.maxPageSize, pageSize);
  if (!(pageSize >= 1 && pageSize <= maxPageSize && maxPageSize <= SERVICE_PAGE_LIMIT)) {
    ctx.problems.add(
      ctx.coordinate,
      `pageSize ${pageSize} and maxPageSize ${maxPageSize} must satisfy 1 <= pageSize <= maxPageSize <= ${SERVICE_PAGE_LIMIT}`,
      d.node,
    );
    return undefined;
  }
  return { pageSize, maxPageSize };
}

/** The RowKeys the range covers: bounds (`rowKeyFrom`/`rowKeyTo`) or a prefix, given or derived from the layout. */
function rowKeyRange(
  ctx: FieldContext,
  d: RangeDirective,
  layout: { layout: Layout; description: string },
): Pick<RangePath, 'rowKeyFrom' | 'rowKeyTo' | 'fromInclusive' | 'toInclusive' | 'rowKeyPrefix'> | undefined {
  const rowKeyTemplate = layout.layout.rowKey;
  if (d.rowKeyPrefix !== undefined && (d.rowKeyFrom !== undefined || d.rowKeyTo !== undefined)) {
    ctx.problems.add(ctx.coordinate, 'give either rowKeyPrefix or rowKeyFrom/rowKeyTo, not both', d.node);
    return undefined;
  }
  if (d.rowKeyFrom !== undefined || d.rowKeyTo !== undefined) {
    const literal = leadingLiteral(rowKeyTemplate);
    const bounds: Partial<Record<'rowKeyFrom' | 'rowKeyTo', BoundTemplate>> = {};
    for (const which of ['rowKeyFrom', 'rowKeyTo'] as const) {
      const source = d[which];
      if (source === undefined) continue;
      const bound = boundTemplate(ctx, { source, layout: undefined, what: which, mode: 'exact' }, d.node);
      if (!bound) return undefined;
      if (literal === '' || !source.startsWith(literal)) {
        ctx.problems.add(
          ctx.coordinate,
          `${which} "${source}" must start with "${literal}", the literal every RowKey of ${layout.description} starts with, so that the range holds no other type`,
          d.node,
        );
        return undefined;
      }
      bounds[which] = bound;
    }
    return { ...bounds, fromInclusive: d.fromInclusive, toInclusive: d.toInclusive };
  }
  const rowKeyPrefix =
    d.rowKeyPrefix !== undefined
      ? boundTemplate(ctx, { source: d.rowKeyPrefix, layout: rowKeyTemplate, what: 'RowKey', mode: 'prefix' }, d.node)
      : boundTemplate(ctx, { source: undefined, layout: derivedPrefix(ctx, rowKeyTemplate), what: 'RowKey', mode: 'prefix' }, d.node);
  if (!rowKeyPrefix) return undefined;
  const last = rowKeyPrefix.template.segments.at(-1);
  if (last?.kind === 'placeholder' && last.format.kind === 'string') {
    ctx.problems.add(
      ctx.coordinate,
      `RowKey prefix "${rowKeyPrefix.template.source}" ends in {${last.name}}: follow it with "_" so that "SMITH" does not also match "SMITHSON"`,
      d.node,
    );
    return undefined;
  }
  return { rowKeyPrefix };
}

function layoutOf(
  ctx: FieldContext,
  target: EntityModel,
  indexName: string | undefined,
  node: PointDirective['node'],
): { layout: Layout; index?: IndexModel; description: string } | undefined {
  if (indexName === undefined) return { layout: target.layout, description: target.name };
  const index = target.indexes.get(indexName);
  if (!index) {
    ctx.problems.add(ctx.coordinate, `${target.name} has no @index named "${indexName}"`, node);
    return undefined;
  }
  return { layout: index.layout, index, description: `${target.name}@index(${indexName})` };
}
