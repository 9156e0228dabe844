/**
 * The two generic resolvers every storage-reading field gets: one point query, or one range query returned as a
 * Relay connection. Neither knows which schema it serves; the model's AccessPath says everything.
 */
import { isNonNullType, type GraphQLFieldResolver, type GraphQLResolveInfo } from 'graphql';
import { ErrorCode, isTablegraphError, TablegraphError } from '../errors';
import { prefixUpperBound, renderKey } from '../model/key-template';
import { concreteType } from '../model/inheritance';
import { ENTITY_TYPE_PROPERTY, type EntityModel, type PointPath, type RangePath } from '../model/types';
import { entitySelect, indexSelect, selectedNodeFields, type Projection } from '../read/projection';
import { readReferenced, referenceFields } from '../model/references';
import type { EntityAddress, StoredEntity } from '../storage/storage-types';
import { mergeParts, partAddresses, partSelect } from '../model/wide-entities';
import { forbidden } from '../model/authorization';
import { allowsEntity, authorizeBefore, authorizeTypeBefore, keyValues } from './authorize';
import { derivesIndexEntity, primaryAddress, valuesIfOf } from '../model/entity-codec';
import { indexPathId } from '../model/derived-paths';
import { bindingValues } from './bindings';
import type { RequestContext } from './context';
import type { EntityNode } from './entity-node';

type Resolver = GraphQLFieldResolver<EntityNode | undefined, RequestContext, Record<string, unknown>>;

/**
 * Refuses a read through an index still being built after a schema change — the path's own, or a many-to-many
 * page's unique index of its targets — and a read of entity types this process does not serve while they are
 * re-keyed: the type read, and a many-to-many page's targets (src/read/path-gate.ts).
 * @throws TablegraphError ACCESS_PATH_BUILDING
 */
function assertBuilt(path: PointPath | RangePath, ctx: RequestContext): void {
  if (!ctx.paths) return;
  if (path.index) ctx.paths.assertReadable(indexPathId(path.index), path.coordinate);
  const through = path.kind === 'range' ? path.join?.reference.index : undefined;
  if (through) ctx.paths.assertReadable(indexPathId(through), path.coordinate);
  for (const type of new Set([readType(path), path.target])) {
    for (const concrete of type.implementations ?? [type]) ctx.paths.assertServed(concrete.name, path.coordinate);
  }
}

/**
 * Whether a stored entity of a range read is a re-key's copy at another layout's address (src/read/path-gate.ts
 * `meetsCopies`): the entity's own keys, rendered by its type's layout here, do not give where it was read.
 */
function copyElsewhere(path: RangePath, stored: StoredEntity, type: EntityModel, ctx: RequestContext): boolean {
  if (path.index || path.join || !ctx.paths?.meetsCopies(type.name)) return false;
  let own: EntityAddress;
  try {
    own = primaryAddress(type, stored.properties);
  } catch {
    return false; // keys its values cannot form: not a copy this process could tell, shown as read
  }
  return own.partitionKey !== stored.partitionKey || !(stored.rowKey === own.rowKey || stored.rowKey.startsWith(`${own.rowKey}_part`));
}

/** The entity type whose entities (or index entities) a path reads: a many-to-many range reads its join type. */
function readType(path: PointPath | RangePath) {
  return (path.kind === 'range' && path.join?.entity) || path.target;
}

/**
 * The entity type of a stored entity (or index entity) the path reads, as it is to be shown: the path's target, or
 * for an interface the implementation whose EntityType it carries (the guide's "Inheritance relationships");
 * undefined for an entity the path does not read (another type sharing the partition).
 */
function nodeType(path: PointPath | RangePath, stored: StoredEntity): EntityModel | undefined {
  const type = stored.properties[ENTITY_TYPE_PROPERTY];
  if (path.index) return type === path.index.entityType ? path.target : undefined;
  return concreteType(readType(path), type);
}

/** Notes, for the response's extensions, that the request read an eventually consistent index. */
function noteConsistency(path: PointPath | RangePath, ctx: RequestContext): void {
  if (path.index?.scope === 'interPartition') ctx.eventuallyConsistent.add(`${path.target.name}.${path.index.name}`);
}

function toNode(path: PointPath | RangePath, stored: StoredEntity, entity: EntityModel): EntityNode {
  return { entity, stored, fromIndex: path.index };
}

/** The table a path reads: its one table, or its table per period rendered (table-template.ts). */
function tableName(path: PointPath | RangePath, values: Record<string, unknown>): string {
  return path.tableTemplate ? renderKey(path.tableTemplate.template, values) : path.table;
}

/**
 * A period's table that does not exist — no write ever needed it, or it was expired — holds nothing: `empty`. Any
 * other table is created at start-up, so its absence stays an error.
 */
function absentTable<T>(path: PointPath | RangePath, empty: T): (e: unknown) => T {
  return (e) => {
    if (path.tableTemplate && isTablegraphError(e, ErrorCode.NOT_FOUND) && e.details.reason === 'TableNotFound') return empty;
    throw e;
  };
}

/** Whether a placeholder of the path's keys has no value (only an optional binding can be null here). */
function hasNullKey(path: PointPath, values: Record<string, unknown>): boolean {
  for (const bound of [path.partitionKey, path.rowKey]) {
    for (const [placeholder, b] of bound.bindings) if (b.optional && (values[placeholder] === null || values[placeholder] === undefined)) return true;
  }
  return false;
}

/**
 * A point query ("Point Query", the guide's most efficient lookup). Returns null when the entity does not exist
 * and the field is nullable (a dangling reference), and, with no storage call, when an optional reference's key
 * field is null.
 * Through an eventually consistent (inter-partition) index, when `@auth` decides on fields the keys do not give,
 * the entity itself is read too and decides — and answers only while it still has the value looked up.
 * @returns null also for an entity `@auth` leaves out once read (a nullable field: as if absent, no oracle)
 * @throws TablegraphError BAD_USER_INPUT when an argument cannot form a key (e.g. `id: "abc"` for a padded id);
 *   NOT_FOUND when a non-null field's entity does not exist (a dangling reference); LIMIT_EXCEEDED when a key is
 *   over the target's length limit; FORBIDDEN when `@auth` does not let the caller read it (from its keys, before
 *   the read, where they tell; or, for a non-null field, once read); STORAGE_UNAVAILABLE from the store
 */
export function pointResolver(path: PointPath): Resolver {
  return async (parent, args, ctx, info) => {
    const values = await bindingValues([path.tableTemplate, path.partitionKey, path.rowKey], { parent, args, ctx, info }, path.target);
    // An optional reference whose key field is null refers to nothing: null, and no storage call.
    if (hasNullKey(path, values)) return null;
    noteConsistency(path, ctx);
    const projection = ctx.projection(info);
    const partitionKey = renderKey(path.partitionKey.template, values);
    const rowKey = renderKey(path.rowKey.template, values);
    // Authorization from the keys first: an entity the keys show out of scope is never read.
    const policies = [path.auth, path.target.auth];
    const what = `read ${path.coordinate} at ${JSON.stringify(values)}`;
    const known = keyValues(path.index?.layout ?? path.target.layout, partitionKey, rowKey);
    const byField = authorizeBefore([path.auth], ctx.principal, known, what);
    // An eventually consistent index entity's keys are a copy that may be old: what they allow is decided again on
    // the entity itself, once read (what they deny is denied: it is the caller's own lookup that does not fit).
    const eventual = path.index?.scope === 'interPartition' && !!ctx.principal && path.target.authFields.size > 0;
    const later = authorizeTypeBefore(path.target, ctx.principal, known, what) || byField || eventual;
    // Only then whether the path is built: its refusal says something of the stored data (how far a build is).
    assertBuilt(path, ctx);
    const address = { table: tableName(path, values), partitionKey, rowKey };
    let stored = await (
      path.index
        ? ctx.loaders.point.load({ ...address, select: indexSelect(projection, path.index) })
        : loadEntity(ctx, path.target, address, entitySelect(projection, path.target))
    ).catch(absentTable(path, null));
    // A value looked up that no entity holds costs what one an entity out of scope holds costs: two point queries.
    // Otherwise the time of the answer (one read against two) would tell a caller whether an e-mail it may not read
    // exists.
    if (!stored && eventual && !path.tableTemplate) await decoyRead(ctx, path.target, entitySelect(projection, path.target));
    let type = stored ? nodeType(path, stored) : undefined;
    let fromIndex = !!path.index;
    if (stored && type && eventual && path.index) {
      // An eventually consistent index entity may hold an old copy of what the scope decides on (an e-mail changed
      // a moment ago): decide on the entity itself, and answer it only while it still has the value looked up.
      const primary = await loadEntity(ctx, path.target, primaryAddress(path.target, stored.properties), entitySelect(projection, path.target));
      const { layout } = path.index;
      const still = derivesIndexEntity(path.index, valuesIfOf(path.target, primary), { table: layout.table, partitionKey, rowKey });
      [stored, type, fromIndex] = still ? [primary, path.target, false] : [null, undefined, false];
    }
    if (stored && type) {
      // Through an interface, the stored entity's own type decides too (unknown before the read).
      if (allowsEntity([...policies, type.auth], ctx.principal, stored.properties)) return fromIndex ? toNode(path, stored, type) : { entity: type, stored };
      // Decided on what was read: out of scope, a nullable field answers as if nothing were there — a FORBIDDEN
      // would tell the caller that something exists at keys it chose (an e-mail address, say).
      if (!later || isNonNullType(info.returnType)) throw forbidden(what, ctx.principal!);
      return null;
    }
    if (isNonNullType(info.returnType)) {
      throw new TablegraphError(ErrorCode.NOT_FOUND, `${path.coordinate}: the ${path.target.name} it refers to does not exist`, {
        partitionKey: renderKey(path.partitionKey.template, values),
        rowKey: renderKey(path.rowKey.template, values),
      });
    }
    return null;
  };
}

/** The address of a decoy read, chosen to be empty: whatever is there is dropped. */
const DECOY_ADDRESS = { partitionKey: '~tablegraph~decoy', rowKey: '~' };

/** A point query of the entity's table, its answer dropped: it takes the time a read does. */
async function decoyRead(ctx: RequestContext, entity: EntityModel, select: string[]): Promise<void> {
  await ctx.loaders.point.load({ table: entity.layout.table, ...DECOY_ADDRESS, select }).catch(() => null);
}

/**
 * An entity by its address through the request's point loader: one point query, or for a wide entity one per part,
 * all in the same wave, merged (the guide's "Wide entities pattern", wide-entities.ts).
 */
function loadEntity(ctx: RequestContext, entity: EntityModel, address: EntityAddress, select: string[]): Promise<StoredEntity | null> {
  const wide = entity.wide;
  if (!wide) return ctx.loaders.point.load({ ...address, select });
  return Promise.all(partAddresses(wide, address).map((a, i) => ctx.loaders.point.load({ ...a, select: partSelect(entity, i, select) }))).then(mergeParts);
}

interface Edge {
  readonly cursor: string;
  node: EntityNode;
}

interface Connection {
  edges: Edge[];
  pageInfo: { hasNextPage: boolean; hasPreviousPage: boolean; readonly startCursor: string | null; readonly endCursor: string | null };
}

/** A page entry: the entity read, and its cursor, sealed when first asked for. */
interface PageEntry {
  stored: StoredEntity;
  cursor: () => string;
}

/** `seal` memoised: a cursor is sealed (AES-GCM and an HMAC) only when a selection reads it, and then once. */
function lazily(seal: () => string): () => string {
  let sealed: string | undefined;
  return () => (sealed ??= seal());
}

/**
 * A page as a Relay connection, its cursors sealed when read.
 * @param endAt the end cursor, when it is not the last edge's (`@auth` left out entities at the end of the page)
 */
function connectionOf(edges: Edge[], more: boolean, endAt: (() => string) | undefined): Connection {
  const endCursor = endAt ?? (() => edges.at(-1)?.cursor ?? null);
  return {
    edges,
    pageInfo: {
      hasNextPage: more,
      hasPreviousPage: false,
      get startCursor() {
        return edges[0]?.cursor ?? null;
      },
      get endCursor() {
        return endCursor();
      },
    },
  };
}

/** An edge whose `cursor` is sealed when it is read: a page that does not select it pays nothing for it. */
function edgeOf(cursor: () => string, node: EntityNode): Edge {
  return {
    node,
    get cursor() {
      return cursor();
    },
  };
}

/**
 * A range query over one partition, as a Relay connection: `first` entities (default `path.pageSize`, at most
 * `path.maxPageSize`) after the `after` cursor, in RowKey order — on a service that does not sort range results
 * (Cosmos DB), in RowKey order within each service page and every entity exactly once (TableStore.queryRange).
 * Entities `@auth` leaves out still count towards `first`: such a page may hold fewer edges, even none, with
 * `hasNextPage` true and an `endCursor` past the last entity read.
 * @throws TablegraphError BAD_USER_INPUT when `first` is negative or above the maximum, or the cursor is invalid
 */
export function rangeResolver(path: RangePath): GraphQLFieldResolver<EntityNode | undefined, RequestContext, Record<string, unknown>, Promise<Connection>> {
  return async (parent, args, ctx, info) => {
    const first = (args.first as number | null | undefined) ?? path.pageSize;
    if (!Number.isInteger(first) || first < 0 || first > path.maxPageSize) {
      throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `first must be between 0 and ${path.maxPageSize} (got ${first})`, {
        argument: 'first',
        max: path.maxPageSize,
      });
    }
    const values = await bindingValues(
      [path.tableTemplate, path.partitionKey, path.rowKeyPrefix, path.rowKeyFrom, path.rowKeyTo],
      { parent, args, ctx, info },
      path.target,
    );
    const table = tableName(path, values);
    noteConsistency(path, ctx);
    const partitionKey = renderKey(path.partitionKey.template, values);
    let rowKeyFrom: string | undefined;
    let rowKeyTo: string | undefined;
    if (path.rowKeyPrefix) {
      rowKeyFrom = renderKey(path.rowKeyPrefix.template, values);
      rowKeyTo = prefixUpperBound(rowKeyFrom);
    } else {
      rowKeyFrom = path.rowKeyFrom && renderKey(path.rowKeyFrom.template, values);
      rowKeyTo = path.rowKeyTo && renderKey(path.rowKeyTo.template, values);
    }
    // Authorization from the partition first: a list wholly out of scope is never read.
    const read = readType(path);
    const policies = [path.auth, read.auth];
    const known = keyValues(path.index?.layout ?? read.layout, partitionKey);
    const what = `read ${path.coordinate} in partition ${JSON.stringify(partitionKey)}`;
    authorizeBefore([path.auth], ctx.principal, known, what);
    authorizeTypeBefore(read, ctx.principal, known, what);
    assertBuilt(path, ctx);
    // Bounds as declared: inclusive or exclusive at either end (prefix form: from inclusive, to exclusive). A bound
    // is a prefix: a key template may go on after it (`invoice_{date}` before `_{id}`), so an inclusive `to` takes
    // every RowKey that starts with it, and an exclusive `from` leaves every one out.
    const fromExclusive = !path.rowKeyPrefix && path.fromInclusive === false;
    const toInclusive = !path.rowKeyPrefix && path.toInclusive === true;
    const scope = JSON.stringify([table, partitionKey, rowKeyFrom ?? '', rowKeyTo ?? null, fromExclusive, toInclusive]);
    if (fromExclusive && rowKeyFrom) rowKeyFrom = prefixUpperBound(rowKeyFrom) ?? rowKeyFrom;
    if (toInclusive && rowKeyTo !== undefined) rowKeyTo = prefixUpperBound(rowKeyTo);
    const after = typeof args.after === 'string' ? ctx.cursors.decode(scope, args.after) : undefined;
    const projection = ctx.projection(info);
    const { entities, more, positions } = await ctx.loaders.range
      .load({
        table,
        partitionKey,
        rowKeyFrom: rowKeyFrom || undefined,
        after,
        rowKeyTo,
        limit: first,
        select: path.join ? joinSelect(path.join, path.index) : path.index ? indexSelect(projection, path.index) : entitySelect(projection, path.target),
      })
      .catch(absentTable(path, { entities: [], more: false, positions: [] }));
    const page = entities
      .map((stored, i) => ({ stored, cursor: lazily(() => ctx.cursors.encode(scope, positions[i])), type: nodeType(path, stored) }))
      .filter(
        ({ stored, type }) => type && allowsEntity([...policies, type.auth], ctx.principal, stored.properties) && !copyElsewhere(path, stored, type, ctx),
      );
    const edges = path.join
      ? await joinEdges(path, page, ctx, projection, info)
      : page.map(({ stored, cursor, type }) => edgeOf(cursor, toNode(path, stored, path.index ? path.target : type!)));
    // `@auth` may leave out entities read at the end of the page (or all of it): the end cursor is where the read
    // stopped, so the next page starts after them and every entity in scope further on can still be reached.
    const lastRead = positions.at(-1);
    const endAt = page.length === entities.length || lastRead === undefined ? undefined : lazily(() => ctx.cursors.encode(scope, lastRead));
    return connectionOf(edges, more, endAt);
  };
}

/** What a many-to-many range reads of each join entity: its keys, what its reference binds, what `@auth` decides on. */
function joinSelect(join: NonNullable<RangePath['join']>, index: RangePath['index']): string[] {
  const fields = new Set([...join.entity.keyFields, ...join.entity.authFields, ...referenceFields(join.reference), ...join.covered.values()]);
  return [...fields]
    .filter((f) => !index || index.projection.has(f))
    .concat(ENTITY_TYPE_PROPERTY)
    .sort();
}

/**
 * The nodes of a many-to-many page: the entity each join entity's reference points at, read in one batched wave
 * (the point loader) — two through a unique index of the target: the index entities, then the entities their keys
 * give. A join entity whose target is gone, or out of the caller's `@auth` scope, is left out.
 */
async function joinEdges(
  path: RangePath,
  page: PageEntry[],
  ctx: RequestContext,
  projection: Projection,
  info: GraphQLResolveInfo,
): Promise<Connection['edges']> {
  const { reference, covered } = path.join!;
  const target = path.target;
  // The target's fields the page must answer. Through an index the join entities do not hold the target's keys,
  // which every projection lists: what the selection asks, and what `@auth` decides on, is what counts there.
  const needed = reference.index
    ? new Set([...selectedNodeFields(info)].filter((f) => target.fields.has(f) || f === 'etag').concat([...target.authFields]))
    : (projection.get(target.name) ?? new Set([...target.keyFields, ...target.authFields]));
  const read = (stored: StoredEntity) =>
    readReferenced(reference, stored.properties, (a, step) =>
      ctx.loaders.point.load({ ...a, select: step === 'index' ? [...target.keyFields, ENTITY_TYPE_PROPERTY] : entitySelect(projection, target) }),
    );
  if ([...needed].every((f) => covered.has(f))) return coveredEdges(path, page, ctx, reference.index ? read : undefined);
  const found = await Promise.all(page.map(({ stored }) => read(stored)));
  if (reference.index?.scope === 'interPartition') ctx.eventuallyConsistent.add(`${target.name}.${reference.index.name}`);
  return page.flatMap(({ cursor }, i) => {
    const stored = found[i];
    if (!stored || !allowsEntity([target.auth], ctx.principal, stored.properties)) return [];
    return [edgeOf(cursor, { entity: target, stored })];
  });
}

/**
 * A many-to-many page served from the join entities alone — no second wave — when they hold every field of the
 * target the request needs: its keys (or through a unique index, its id) and its copies (`@copy`, the guide's
 * "Denormalization pattern"). Each node reads as if from an index entity holding those fields: one that needs more
 * (its ETag) reads the target then — by its keys, or with `read` through the index.
 */
function coveredEdges(
  path: RangePath,
  page: PageEntry[],
  ctx: RequestContext,
  read?: (join: StoredEntity) => Promise<StoredEntity | null>,
): Connection['edges'] {
  const { entity: join, reference, covered } = path.join!;
  const target = path.target;
  const holds = {
    name: `${join.name}.${reference.fieldName}`,
    entity: target,
    layout: target.layout,
    scope: 'intraPartition' as const,
    projection: new Set(covered.keys()),
    unique: false,
    entityType: target.entityType,
  };
  // Copies lag behind their targets, and a join entity whose target was deleted still shows: eventually consistent.
  ctx.eventuallyConsistent.add(holds.name);
  return page.flatMap(({ stored, cursor }) => {
    const properties: Record<string, unknown> = { [ENTITY_TYPE_PROPERTY]: target.entityType };
    for (const [field, from] of covered) if (stored.properties[from] !== undefined) properties[field] = stored.properties[from];
    // A non-null field of the target whose copy is null: the worker nulled it, the target is gone — left out, as the
    // second wave leaves out a target it does not find, until the worker deletes the join entity too.
    if ([...covered.keys()].some((f) => target.fields.get(f)?.nonNull && (properties[f] === undefined || properties[f] === null))) return [];
    if (!allowsEntity([target.auth], ctx.principal, properties)) return [];
    const node: EntityNode = { entity: target, stored: { partitionKey: '', rowKey: '', etag: '', properties }, fromIndex: holds };
    if (read) node.primary = () => read(stored);
    return [edgeOf(cursor, node)];
  });
}
