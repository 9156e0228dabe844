/**
 * Reads the storage directives (schema/directives.graphql) off the schema's AST nodes into plain objects.
 * Validation of what they say happens in layouts.ts and access-paths.ts.
 */
import { getDirectiveValues, type GraphQLSchema, type FieldDefinitionNode, type ObjectTypeDefinitionNode, type DirectiveNode } from 'graphql';

export interface EntityDirective {
  table: string;
  partitionKey: string;
  rowKey: string;
  typeName?: string;
  node: DirectiveNode;
}

export interface IndexDirective {
  name: string;
  table?: string;
  partitionKey?: string;
  rowKey: string;
  include: string[];
  unique: boolean;
  node: DirectiveNode;
}

export interface PointDirective {
  index?: string;
  table?: string;
  partitionKey?: string;
  rowKey?: string;
  checkOnWrite: boolean;
  onDelete?: 'RESTRICT' | 'CASCADE';
  node: DirectiveNode;
}

export interface RangeDirective {
  index?: string;
  table?: string;
  partitionKey?: string;
  rowKeyPrefix?: string;
  rowKeyFrom?: string;
  rowKeyTo?: string;
  fromInclusive: boolean;
  toInclusive: boolean;
  pageSize?: number;
  maxPageSize?: number;
  through?: string;
  node: DirectiveNode;
}

function directiveNodes(node: { directives?: readonly DirectiveNode[] } | undefined | null, name: string): DirectiveNode[] {
  return (node?.directives ?? []).filter((d) => d.name.value === name);
}

function values(schema: GraphQLSchema, name: string, directive: DirectiveNode): Record<string, unknown> {
  const def = schema.getDirective(name);
  if (!def) throw new Error(`directive @${name} is not declared (is schema/directives.graphql loaded?)`);
  // getDirectiveValues reads the first directive of that name on a node; pass a node holding just this one so
  // that repeatable directives (@index) are read one by one.
  return getDirectiveValues(def, { directives: [directive] }) ?? {};
}

/** The `@entity` directive of a type, if any. */
export function readEntity(schema: GraphQLSchema, node: ObjectTypeDefinitionNode | undefined | null): EntityDirective | undefined {
  const [d] = directiveNodes(node, 'entity');
  if (!d) return undefined;
  const v = values(schema, 'entity', d);
  return { table: v.table as string, partitionKey: v.partitionKey as string, rowKey: v.rowKey as string, typeName: v.typeName as string | undefined, node: d };
}

/** Every `@index` directive of a type, in SDL order. */
export function readIndexes(schema: GraphQLSchema, node: ObjectTypeDefinitionNode | undefined | null): IndexDirective[] {
  return directiveNodes(node, 'index').map((d) => {
    const v = values(schema, 'index', d);
    return {
      name: v.name as string,
      table: v.table as string | undefined,
      partitionKey: v.partitionKey as string | undefined,
      rowKey: v.rowKey as string,
      include: (v.include as string[] | undefined) ?? [],
      unique: (v.unique as boolean | undefined) ?? false,
      node: d,
    };
  });
}

/** The `@point` directive of a field, if any. */
export function readPoint(schema: GraphQLSchema, node: FieldDefinitionNode | undefined | null): PointDirective | undefined {
  const [d] = directiveNodes(node, 'point');
  if (!d) return undefined;
  const v = values(schema, 'point', d);
  return {
    index: v.index as string | undefined,
    table: v.table as string | undefined,
    partitionKey: v.partitionKey as string | undefined,
    rowKey: v.rowKey as string | undefined,
    checkOnWrite: (v.checkOnWrite as boolean | undefined) ?? true,
    onDelete: v.onDelete as 'RESTRICT' | 'CASCADE' | undefined,
    node: d,
  };
}

/** The `@range` directive of a field, if any. */
export function readRange(schema: GraphQLSchema, node: FieldDefinitionNode | undefined | null): RangeDirective | undefined {
  const [d] = directiveNodes(node, 'range');
  if (!d) return undefined;
  const v = values(schema, 'range', d);
  return {
    index: v.index as string | undefined,
    table: v.table as string | undefined,
    partitionKey: v.partitionKey as string | undefined,
    rowKeyPrefix: v.rowKeyPrefix as string | undefined,
    rowKeyFrom: v.rowKeyFrom as string | undefined,
    rowKeyTo: v.rowKeyTo as string | undefined,
    fromInclusive: (v.fromInclusive as boolean | undefined) ?? true,
    toInclusive: (v.toInclusive as boolean | undefined) ?? false,
    pageSize: v.pageSize as number | undefined,
    maxPageSize: v.maxPageSize as number | undefined,
    through: v.through as string | undefined,
    node: d,
  };
}

export interface SummaryDirective {
  of: string;
  via: string;
  count: boolean;
  sum: string[];
  node: DirectiveNode;
}

/** The `@summary` directive of a field, if any. */
export function readSummary(schema: GraphQLSchema, node: FieldDefinitionNode | undefined | null): SummaryDirective | undefined {
  const [d] = directiveNodes(node, 'summary');
  if (!d) return undefined;
  const v = values(schema, 'summary', d);
  return { of: v.of as string, via: v.via as string, count: (v.count as boolean | undefined) ?? false, sum: (v.sum as string[] | undefined) ?? [], node: d };
}

export interface WriteDirective {
  entity: string;
  action: 'CREATE' | 'UPDATE' | 'REPLACE' | 'DELETE' | 'MOVE' | 'INCREMENT';
  /** MOVE: the entity type the entity becomes (default: its own). */
  to?: string;
  node: DirectiveNode;
}

/** The `@write` directive of a field, if any. */
export function readWrite(schema: GraphQLSchema, node: FieldDefinitionNode | undefined | null): WriteDirective | undefined {
  const [d] = directiveNodes(node, 'write');
  if (!d) return undefined;
  const v = values(schema, 'write', d);
  return { entity: v.entity as string, action: v.action as WriteDirective['action'], ...(typeof v.to === 'string' && { to: v.to }), node: d };
}

/** The `@transaction` directive of a mutation field, if any: the most items its list of writes may hold. */
export function readTransaction(schema: GraphQLSchema, node: FieldDefinitionNode | undefined | null): { maxItems: number; node: DirectiveNode } | undefined {
  const [d] = directiveNodes(node, 'transaction');
  if (!d) return undefined;
  return { maxItems: values(schema, 'transaction', d).maxItems as number, node: d };
}

/** The `@series` directive of a field, if any: its length (elements). */
export function readSeries(schema: GraphQLSchema, node: FieldDefinitionNode | undefined | null): { length: number; node: DirectiveNode } | undefined {
  const [d] = directiveNodes(node, 'series');
  if (!d) return undefined;
  return { length: values(schema, 'series', d).length as number, node: d };
}

/** The `@encrypted` directive of a field, if any. */
export function readEncrypted(node: FieldDefinitionNode | undefined | null): DirectiveNode | undefined {
  return directiveNodes(node, 'encrypted')[0];
}

export interface CopyDirective {
  from: string;
  field: string;
  node: DirectiveNode;
}

/** The `@copy` directive of a field, if any. */
export function readCopy(schema: GraphQLSchema, node: FieldDefinitionNode | undefined | null): CopyDirective | undefined {
  const [d] = directiveNodes(node, 'copy');
  if (!d) return undefined;
  const v = values(schema, 'copy', d);
  return { from: v.from as string, field: v.field as string, node: d };
}

export interface TenancyDirective {
  claim: string;
  isolation: 'PARTITION_PREFIX' | 'TABLE' | 'ACCOUNT';
  node: DirectiveNode;
}

/** `@tenancy` on the schema (its definition or an `extend schema`), with every other one found after it. */
export function readTenancy(schema: GraphQLSchema): { first?: TenancyDirective; more: DirectiveNode[] } {
  const nodes = [schema.astNode, ...schema.extensionASTNodes].flatMap((n) => directiveNodes(n, 'tenancy'));
  const [d, ...more] = nodes;
  if (!d) return { more };
  const v = values(schema, 'tenancy', d);
  return { first: { claim: v.claim as string, isolation: (v.isolation as TenancyDirective['isolation'] | undefined) ?? 'PARTITION_PREFIX', node: d }, more };
}

/** The `@global` directive of a type, if any. */
export function readGlobal(node: ObjectTypeDefinitionNode | undefined | null): DirectiveNode | undefined {
  return directiveNodes(node, 'global')[0];
}
