/**
 * Demand control from the access paths: the worst case of an operation, computed before it runs, from the model,
 * the document and its variables. Every field that reads storage is one known point or range query, and every
 * list is a connection with a bounded `first`, so the worst case is exact arithmetic: each field's storage calls
 * and entities, multiplied by how many parents it can be resolved under (a connection's `first`, multiplied down
 * the tree). DataLoader batching may make the actual cost lower (one department read for a hundred employees),
 * never higher. Over a budget, the request is refused before its first storage call.
 *
 * Counted per field, times its multiplicity:
 * - a point query (`@point`): 1 storage call, 1 entity, 1 response node;
 * - a range query (`@range`, a Relay connection): 1 storage call and `first` + 1 entities; `first` nodes below;
 *   when read through an index whose projection lacks a selected field (or the ETag), 1 more point query per node;
 *   through join entities (`@range(through)`), 1 point query per node for the node itself, 2 when the join's
 *   reference goes through a unique index of the target (the index entity, then the target);
 * - a federation subgraph's `_entities`: each representation as the point query of its key (through a unique index,
 *   as an `@point(index:)` field is), its entity's selections below it;
 * - Relay's `node` and `nodes` (`@nodeInterface`): each id the point query of the costliest entity type, its selections
 *   below it;
 * - a `@transaction` field: per item its entity, summary holders and references read, a read back, its fan-out message
 *   and its unique values' reservations; then its EGT; its results' selections `maxItems` times;
 * - a mutation field: WRITE_CALLS storage calls (the entity, its holders, the reservation, the EGT, the message); a
 *   delete, besides, the range query of each `onDelete: RESTRICT` reference to its type.
 *
 * What execution leaves out is left out here too: a field, fragment or inline fragment that `@skip`/`@include` drops for
 * the request's variables costs nothing. Storage is counted as the DataLoaders read: sibling fields that name the same
 * field with the same arguments (aliases of one page, say) are read once per request — one storage count for them all,
 * their selections merged — while their response nodes count once per alias.
 */
import {
  getNamedType,
  isInputType,
  print,
  isObjectType,
  isInterfaceType,
  isUnionType,
  Kind,
  typeFromAST,
  valueFromAST,
  visit,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLField,
  type GraphQLObjectType,
  type GraphQLSchema,
  type GraphQLUnionType,
  type OperationDefinitionNode,
  type SelectionSetNode,
} from 'graphql';
import type { AccessPath, FederationKey, Model, RangePath, TransactionModel, WriteModel } from '../model/types';
import { representationKey } from '../model/federation-keys';
import { REFERRERS_LISTED } from '../model/references';
import { RU_PER_ENTITY_READ } from './cost';
import { isIncluded } from './selection';

/** The worst case of an operation: storage calls (calls), entities read (entities), response nodes (objects). */
export interface DemandEstimate {
  storageCalls: number;
  entitiesRead: number;
  nodes: number;
}

/**
 * What an operation's worst case costs at most in money, for `npm run explain -- --query`: Azure Table transactions
 * (one per storage call; a range query that follows continuation tokens adds one per page) and, for a query, request
 * units on the Cosmos DB Table API (1 RU per entity read of up to 1 KB, at least 1 per call: at most entities read
 * plus calls). A mutation's RU depend on the entities it writes, which the estimate does not count: left out.
 */
export function worstCaseMoney(
  estimate: DemandEstimate,
  kind: OperationDefinitionNode['operation'],
): { azureTransactions: number; cosmosRequestUnits?: number } {
  if (kind !== 'query') return { azureTransactions: estimate.storageCalls };
  return { azureTransactions: estimate.storageCalls, cosmosRequestUnits: RU_PER_ENTITY_READ * (estimate.entitiesRead + estimate.storageCalls) };
}

/** Storage calls one mutation field may make at most: entity and holder reads, the unique value's read, insert and
 *  confirmation, the fan-out message, the capture journal's mark (continuous backup) and the EGT. */
export const WRITE_CALLS = 8;

/**
 * Storage calls one mutation field may make at most: WRITE_CALLS, and for a delete, a range query per `onDelete:
 * RESTRICT` reference to its type (and, through an index, a point query per entity listed: REFERRERS_LISTED).
 */
function writeCalls(model: Model, write: WriteModel): number {
  if (write.action !== 'DELETE') return WRITE_CALLS;
  const restrict = (model.dependentsOf.get(write.entity.name) ?? []).filter((d) => d.onDelete === 'RESTRICT');
  return WRITE_CALLS + restrict.reduce((n, d) => n + 1 + (d.reverse.index ? REFERRERS_LISTED : 0), 0);
}

/**
 * Storage calls a `@transaction` field may make at most: per item its entity, each summary holder and each reference
 * it may read (transaction-runner.ts reads them in waves), a read back after a lost answer, its fan-out message when
 * the worker keeps something of its type, and per unique index the value's insert, confirmation and release
 * (transaction-reservations.ts); then the capture journal's mark (continuous backup) and the EGT.
 */
function transactionCalls(model: Model, tx: TransactionModel): number {
  let perItem = 0;
  for (const w of tx.items.values()) {
    const summaries = [...model.summaries.values()].filter((s) => s.of === w.entity);
    const indexes = [...w.entity.indexes.values()];
    const eventual =
      indexes.some((i) => i.scope === 'interPartition') ||
      summaries.some((s) => s.scope === 'eventual') ||
      model.copiesOf.has(w.entity.name) ||
      model.dependentsOf.has(w.entity.name);
    const unique = indexes.filter((i) => i.unique).length;
    perItem = Math.max(perItem, 2 + summaries.length + (model.references.get(w.entity.name)?.length ?? 0) + (eventual ? 1 : 0) + 3 * unique);
  }
  return tx.maxItems * perItem + 2;
}

/** Multiplicities beyond this are counted as this: the estimate only has to be over the budget, not exact. */
const CAP = 1e12;

/**
 * The variables an operation runs with: those sent, and each declared default for a variable not sent — as
 * execution will see them (graphql-js's coercion). An estimate that read only the variables sent would count a
 * `first: $n` whose `$n` defaults to 100 as the default page size.
 */
function withDefaults(schema: GraphQLSchema, operation: OperationDefinitionNode, variables: Record<string, unknown>): Record<string, unknown> {
  const effective = { ...variables };
  for (const def of operation.variableDefinitions ?? []) {
    const name = def.variable.name.value;
    if (effective[name] !== undefined || !def.defaultValue) continue;
    const type = typeFromAST(schema, def.type);
    if (type && isInputType(type)) effective[name] = valueFromAST(def.defaultValue, type);
  }
  return effective;
}

/**
 * @param variables the request's variables (coerced or raw: `first` is read as a number either way); a variable
 *   not sent counts with its declared default
 * @returns the worst case; a field that names no known type or field counts nothing (validation refuses it)
 */
export function estimateDemand(
  schema: GraphQLSchema,
  model: Model,
  operation: OperationDefinitionNode,
  fragments: Record<string, FragmentDefinitionNode>,
  variables: Record<string, unknown> = {},
): DemandEstimate {
  const root =
    operation.operation === 'mutation' ? schema.getMutationType() : operation.operation === 'query' ? schema.getQueryType() : schema.getSubscriptionType();
  const effective = withDefaults(schema, operation, variables);
  const storage = new DemandWalk(schema, model, fragments, effective, 'storage');
  const nodes = new DemandWalk(schema, model, fragments, effective, 'nodes');
  if (root) for (const walk of [storage, nodes]) walk.visit(root, operation.selectionSet, 1, new Set());
  return { storageCalls: storage.total.storageCalls, entitiesRead: storage.total.entitiesRead, nodes: nodes.total.nodes };
}

/**
 * The variables an operation's estimate depends on: those a connection's `first` takes (a federation subgraph's
 * `representations`, the `nodes` ids of `model`'s node interface), and those `@skip`/`@include` decide on, its
 * fragments' included — the key of a memoised estimate (prepared-documents.ts), which must tell an explicit null from
 * a variable not sent (that one takes its declared default).
 */
export function demandVariables(operation: OperationDefinitionNode, fragments: Record<string, FragmentDefinitionNode>, model?: Model): string[] {
  const names = new Set<string>();
  // `nodes(nodeIds:)` of Relay's node interface: as many point queries as ids.
  const lists = new Set(['first', 'representations', ...(model?.nodes ? [`${model.nodes.idField}s`] : [])]);
  const seen = new Set<string>();
  const walk = (node: OperationDefinitionNode | FragmentDefinitionNode) =>
    visit(node, {
      Argument(arg) {
        // A page's size, and a federation subgraph's `_entities` list: how many point queries it makes, of which types.
        if (lists.has(arg.name.value) && arg.value.kind === Kind.VARIABLE) names.add(arg.value.name.value);
      },
      Directive(d) {
        if (d.name.value !== 'skip' && d.name.value !== 'include') return;
        for (const arg of d.arguments ?? []) if (arg.value.kind === Kind.VARIABLE) names.add(arg.value.name.value);
      },
      FragmentSpread(spread) {
        const f = fragments[spread.name.value];
        if (f && !seen.has(f.name.value)) {
          seen.add(f.name.value);
          walk(f);
        }
      },
    });
  walk(operation);
  return [...names].sort();
}

/**
 * One walk of an operation's selections, adding up the worst case as it goes: of storage (calls and entities, sibling
 * fields of one name and arguments counted once) or of response nodes (every field as selected).
 */
class DemandWalk {
  readonly total: DemandEstimate = { storageCalls: 0, entitiesRead: 0, nodes: 0 };

  constructor(
    private readonly schema: GraphQLSchema,
    private readonly model: Model,
    private readonly fragments: Record<string, FragmentDefinitionNode>,
    /** The operation's variables, defaults included. */
    private readonly variables: Record<string, unknown>,
    /** What this walk counts. */
    private readonly counts: 'storage' | 'nodes',
  ) {}

  /** The fields of `set` on `type`, `times` over; `covered`: the fields an index entity's projection holds. */
  visit(type: GraphQLObjectType, set: SelectionSetNode | undefined, times: number, seen: Set<string>, covered?: Set<string>): void {
    const { model } = this;
    const fields = this.fieldsOf(type, set, seen);
    for (const { field, node, seen: inner } of this.counts === 'storage' ? this.merged(type, fields) : fields) {
      const named = getNamedType(field.type);
      const path = model.accessPaths.get(`${type.name}.${field.name}`);
      const write = model.writes.get(`${type.name}.${field.name}`);
      if (write) this.add('storageCalls', writeCalls(model, write) * times);
      const transaction = model.transactions.get(`${type.name}.${field.name}`);
      if (transaction) {
        this.visitTransaction(transaction, { field, node, seen: inner }, times);
        continue;
      }
      if (covered && !covered.has(field.name) && (model.entities.get(type.name)?.fields.has(field.name) || field.name === 'etag')) {
        // A field the index entity lacks: its entity is read, once per node (counted once per selection set).
        this.add('storageCalls', times);
        this.add('entitiesRead', times);
        covered = undefined;
      }
      if (model.federation && field.name === '_entities' && isUnionType(named)) this.visitEntities(named, { field, node, seen: inner }, times);
      if (model.nodes && isInterfaceType(named) && type === this.schema.getQueryType() && (field.name === 'node' || field.name === 'nodes')) {
        this.visitNodes({ field, node, seen: inner }, times);
        continue;
      }
      if (!isObjectType(named)) continue;
      this.add('nodes', times);
      if (path) this.visitPath(path, { field, node, named, seen: inner }, times);
      else this.visit(named, node.selectionSet, times, inner);
    }
  }

  /** A field served by an access path: its storage calls and entities, then its selections. */
  visitPath(
    path: AccessPath,
    at: { field: GraphQLField<unknown, unknown>; node: FieldNode; named: GraphQLObjectType; seen: Set<string> },
    times: number,
  ): void {
    const { field, node, named } = at;
    const first = this.firstOf(path, node, field);
    // A wide entity is one point query per entity it is stored as (the guide's "Wide entities pattern").
    const parts = path.kind === 'point' && !path.index ? (path.target.wide?.parts.length ?? 1) : 1;
    this.add('storageCalls', times * parts);
    this.add('entitiesRead', times * (path.kind === 'range' ? first + 1 : parts));
    if (path.kind === 'range' && path.join && !this.joinCovers(path, named, node.selectionSet, at.seen)) {
      // A many-to-many page: one point query per join entity, for its node, in one wave — two through a unique
      // index of the target (the index entity, then the target its keys give).
      const perNode = path.join.reference.index ? 2 : 1;
      this.add('storageCalls', times * first * perNode);
      this.add('entitiesRead', times * first * perNode);
    }
    // Through an eventually consistent index, `@auth` on entity fields is decided on the entity itself, read
    // at once (path-resolvers.ts): one more point query, and the node's fields come from it.
    const decidesOnEntity = path.kind === 'point' && path.index?.scope === 'interPartition' && path.target.authFields.size > 0;
    if (decidesOnEntity) {
      this.add('storageCalls', times);
      this.add('entitiesRead', times);
    }
    const projection = path.index && !(path.kind === 'range' && path.join) && !decidesOnEntity ? path.index.projection : undefined;
    if (path.kind === 'range') this.visitConnection(named, node.selectionSet, Math.min(CAP, times * first), at.seen, projection);
    else this.visit(named, node.selectionSet, times, at.seen, projection);
  }

  /**
   * A `@transaction` field: its reads and its EGT (transactionCalls), then each of its `maxItems` results' selections,
   * as the entity type (or each member of the union) written.
   */
  private visitTransaction(tx: TransactionModel, at: { field: GraphQLField<unknown, unknown>; node: FieldNode; seen: Set<string> }, times: number): void {
    this.add('storageCalls', transactionCalls(this.model, tx) * times);
    const named = getNamedType(at.field.type);
    const n = Math.min(CAP, times * tx.maxItems);
    this.add('nodes', n);
    for (const type of isUnionType(named) ? named.getTypes() : isObjectType(named) ? [named] : []) this.visit(type, at.node.selectionSet, n, at.seen);
  }

  /**
   * A Federation subgraph's `_entities(representations:)`: each representation is the point query of the key it carries
   * (src/model/federation-keys.ts), its entity's selections (the `... on Type` fragments) under it — as many times as
   * there are representations of that type and key. A representation the resolver refuses costs nothing.
   */
  private visitEntities(union: GraphQLUnionType, at: { field: GraphQLField<unknown, unknown>; node: FieldNode; seen: Set<string> }, times: number): void {
    const { field, node, seen } = at;
    const arg = node.arguments?.find((a) => a.name.value === 'representations');
    const def = field.args.find((a) => a.name === 'representations');
    const value: unknown = arg && def ? valueFromAST(arg.value, def.type, this.variables) : undefined;
    const groups = new Map<FederationKey, { type: GraphQLObjectType; count: number }>();
    for (const r of Array.isArray(value) ? (value as unknown[]) : []) {
      if (!r || typeof r !== 'object') continue;
      const values = r as Record<string, unknown>;
      const type = union.getTypes().find((t) => t.name === values.__typename);
      const key = type && representationKey(this.model.federation!.keys.get(type.name) ?? [], values);
      if (!type || !key) continue;
      const group = groups.get(key) ?? { type, count: 0 };
      group.count++;
      groups.set(key, group);
    }
    for (const [key, { type, count }] of groups) {
      const n = Math.min(CAP, times * count);
      this.add('nodes', n);
      this.visitPath(key.path!, { field, node, named: type, seen }, n);
    }
  }

  /**
   * Relay's `node(nodeId:)` and `nodes(nodeIds:)`: each id the point query of one entity type's own keys, which type
   * the sealed id does not tell before it runs — so each counts as the costliest type's, its selections (the
   * `... on Type` fragments) under it.
   */
  private visitNodes(at: { field: GraphQLField<unknown, unknown>; node: FieldNode; seen: Set<string> }, times: number): void {
    const { field, node, seen } = at;
    const nodes = this.model.nodes!;
    let count = 1;
    if (field.name === 'nodes') {
      const arg = node.arguments?.find((a) => a.name.value === `${nodes.idField}s`);
      const def = field.args.find((a) => a.name === `${nodes.idField}s`);
      const value: unknown = arg && def ? valueFromAST(arg.value, def.type, this.variables) : undefined;
      // (A single id where the list is expected is a list of one, as GraphQL coerces it.)
      count = Array.isArray(value) ? value.length : value === undefined || value === null ? 0 : 1;
    }
    const n = Math.min(CAP, times * count);
    if (n === 0) return;
    this.add('nodes', n);
    let worst: DemandEstimate | undefined;
    for (const [name, path] of nodes.paths) {
      const object = this.schema.getType(name);
      if (!isObjectType(object)) continue;
      const walk = new DemandWalk(this.schema, this.model, this.fragments, this.variables, this.counts);
      walk.visitPath(path, { field, node, named: object, seen }, n);
      const t = walk.total;
      if (!worst || t.storageCalls + t.entitiesRead + t.nodes > worst.storageCalls + worst.entitiesRead + worst.nodes) worst = t;
    }
    for (const k of ['storageCalls', 'entitiesRead', 'nodes'] as const) this.add(k, worst?.[k] ?? 0);
  }

  /**
   * Whether a many-to-many page is served from its join entities alone (path-resolvers.ts coveredEdges): every field
   * of the target its nodes select, and every one its `@auth` decides on, is one the join entities hold (keys, copies).
   */
  private joinCovers(path: RangePath, connection: GraphQLObjectType, set: SelectionSetNode | undefined, seen: Set<string>): boolean {
    const { covered } = path.join!;
    const target = path.target;
    // Any other field a node selects (a reference, a connection) may need fields the join does not hold: not covered.
    const needed = [...this.nodeFields(connection, set, seen)].filter((f) => f !== '__typename');
    return [...needed, ...target.authFields].every((f) => covered.has(f));
  }

  /** The names of the fields a connection's nodes select: under `edges { node }` and `nodes`. */
  private nodeFields(connection: GraphQLObjectType, set: SelectionSetNode | undefined, seen: Set<string>): Set<string> {
    const names = new Set<string>();
    for (const { field, node, seen: inner } of this.fieldsOf(connection, set, seen)) {
      const named = getNamedType(field.type);
      if (!isObjectType(named)) continue;
      if (field.name === 'edges') for (const f of this.nodeFields(named, node.selectionSet, inner)) names.add(f);
      else if (this.model.entities.has(named.name)) for (const f of this.fieldsOf(named, node.selectionSet, inner)) names.add(f.field.name);
    }
    return names;
  }

  /** A connection's selection: `edges { node }` (and `nodes`, if a schema has it) `first` times; pageInfo once. */
  private visitConnection(type: GraphQLObjectType, set: SelectionSetNode | undefined, first: number, seen: Set<string>, covered?: Set<string>): void {
    for (const { field, node, seen: inner } of this.fieldsOf(type, set, seen)) {
      const named = getNamedType(field.type);
      if (!isObjectType(named)) continue;
      if (this.model.entities.has(named.name)) {
        this.add('nodes', first);
        this.visit(named, node.selectionSet, first, inner, covered);
      } else if (field.name === 'edges') {
        this.add('nodes', first);
        this.visitConnection(named, node.selectionSet, first, inner, covered);
      } else {
        this.add('nodes', 1);
        this.visit(named, node.selectionSet, 1, inner);
      }
    }
  }

  /**
   * The fields a selection set selects on `type`, fragments inlined, each with the fragments spread on its way
   * (`seen`): a fragment is never expanded inside itself, so a cycle (which validation refuses anyway) ends.
   */
  private fieldsOf(
    type: GraphQLObjectType,
    set: SelectionSetNode | undefined,
    seen: Set<string>,
  ): Array<{ field: GraphQLField<unknown, unknown>; node: FieldNode; seen: Set<string> }> {
    const out: Array<{ field: GraphQLField<unknown, unknown>; node: FieldNode; seen: Set<string> }> = [];
    for (const s of set?.selections ?? []) {
      if (!isIncluded(s, this.variables)) continue; // what execution leaves out costs nothing
      if (s.kind === Kind.FIELD) {
        const field = type.getFields()[s.name.value];
        if (field) out.push({ field, node: s, seen });
      } else if (s.kind === Kind.INLINE_FRAGMENT) {
        if (!s.typeCondition || s.typeCondition.name.value === type.name) out.push(...this.fieldsOf(type, s.selectionSet, seen));
      } else if (!seen.has(s.name.value)) {
        const f = this.fragments[s.name.value];
        if (f && f.typeCondition.name.value === type.name) out.push(...this.fieldsOf(type, f.selectionSet, new Set([...seen, s.name.value])));
      }
    }
    return out;
  }

  /** A range's page size as the request asks it (entities), within the path's maximum; 1 for a point query. */
  private firstOf(path: AccessPath, node: FieldNode, field: GraphQLField<unknown, unknown>): number {
    if (path.kind !== 'range') return 1;
    const arg = node.arguments?.find((a) => a.name.value === 'first');
    const def = field.args.find((a) => a.name === 'first');
    const value = arg && def ? valueFromAST(arg.value, def.type, this.variables) : undefined;
    const first = typeof value === 'number' && Number.isFinite(value) ? value : path.pageSize;
    return Math.max(0, Math.min(first, path.maxPageSize)); // above the maximum the resolver refuses: nothing read
  }

  /**
   * Sibling object fields of one name and the same arguments (as written: the same literals or the same variables),
   * as one field whose selection is all of theirs: the DataLoaders read them once (one point or range query per
   * request, whatever the aliases). A mutation field is never merged: each alias is a write of its own.
   */
  private merged(type: GraphQLObjectType, fields: Array<{ field: GraphQLField<unknown, unknown>; node: FieldNode; seen: Set<string> }>) {
    const groups = new Map<string, { field: GraphQLField<unknown, unknown>; node: FieldNode; seen: Set<string> }>();
    const out: typeof fields = [];
    for (const f of fields) {
      if (!isObjectType(getNamedType(f.field.type)) || this.model.writes.has(`${type.name}.${f.field.name}`)) {
        out.push(f);
        continue;
      }
      const args = [...(f.node.arguments ?? [])].sort((a, b) => (a.name.value < b.name.value ? -1 : 1)).map((a) => `${a.name.value}:${print(a.value)}`);
      const key = `${f.field.name}(${args.join(',')})`;
      const group = groups.get(key);
      if (!group) {
        const selectionSet = f.node.selectionSet && { ...f.node.selectionSet, selections: [...f.node.selectionSet.selections] };
        const copy = { field: f.field, node: { ...f.node, selectionSet }, seen: new Set(f.seen) };
        groups.set(key, copy);
        out.push(copy);
      } else if (f.node.selectionSet) {
        // The alias's selection joins the first's; fragments it spread stay expandable under it.
        (group.node.selectionSet!.selections as unknown[]).push(...f.node.selectionSet.selections);
        for (const name of f.seen) group.seen.add(name);
      }
    }
    return out;
  }

  private add(k: keyof DemandEstimate, n: number): void {
    if ((k === 'nodes') !== (this.counts === 'nodes')) return;
    this.total[k] = Math.min(CAP, this.total[k] + n);
  }
}
