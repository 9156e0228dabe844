/**
 * Gives the compiled schema its resolvers, generically from the model: every access path gets a point or range
 * resolver, every stored field of an entity a property reader. Nothing here is specific to the HR schema.
 */
import {
  getNamedType,
  isInterfaceType,
  isObjectType,
  isScalarType,
  isUnionType,
  type GraphQLFieldResolver,
  type GraphQLResolveInfo,
  type GraphQLSchema,
} from 'graphql';
import { ErrorCode, TablegraphError } from '../errors';
import { decide, forbidden } from '../model/authorization';
import { primaryAddress } from '../model/entity-codec';
import { pathId, summaryPathId } from '../model/derived-paths';
import type { EntityModel, Model } from '../model/types';
import type { RequestContext } from './context';
import { ETAG_FIELD } from '../model/write-inputs';
import { etagOf, fieldValue, type EntityNode } from './entity-node';
import { pointResolver, rangeResolver } from './path-resolvers';
import { writeResolver } from './write-resolvers';
import { transactionResolver } from './transaction-resolvers';
import { implementScalars } from './scalars';
import { attachFederation } from './federation-resolvers';
import { attachNodes } from './node-resolvers';

/**
 * Sets `resolve` on every field that reads storage or a stored property, and implements the custom scalars.
 * Mutates and returns `schema` (built by compileSchema from the same SDL as `model`).
 */
export function attachResolvers(schema: GraphQLSchema, model: Model): GraphQLSchema {
  for (const type of Object.values(schema.getTypeMap())) {
    if (!isObjectType(type)) continue;
    const entity = model.entities.get(type.name);
    for (const field of Object.values(type.getFields())) {
      const path = model.accessPaths.get(`${type.name}.${field.name}`);
      const write = model.writes.get(`${type.name}.${field.name}`);
      const transaction = model.transactions.get(`${type.name}.${field.name}`);
      const sas = model.sasFields.get(`${type.name}.${field.name}`);
      if (sas) {
        // No storage call: the entity was read (and its @auth decided) by the field that returned it.
        field.resolve = (node: EntityNode, _args, ctx: RequestContext) => {
          if (!ctx.signSas) throw new TablegraphError(ErrorCode.CONFIG_INVALID, 'This server cannot sign shared access signatures.');
          const { table, partitionKey } = primaryAddress(sas.entity, node.stored.properties);
          return ctx.signSas(table, partitionKey, sas.expiresInSeconds).url;
        };
      } else if (write) {
        field.resolve = writeResolver(write);
      } else if (transaction) {
        field.resolve = transactionResolver(transaction);
        // Its items' entities come back as their own types (a union of the types written).
        const result = getNamedType(field.type);
        if (isUnionType(result)) result.resolveType = (node: EntityNode) => node.entity.name;
      } else if (path) {
        field.resolve = path.kind === 'point' ? pointResolver(path) : rangeResolver(path);
      } else if (entity?.exposesEtag && field.name === ETAG_FIELD) {
        field.resolve = (node: EntityNode, _args, ctx: RequestContext, info) => etagOf(node, ctx, info);
      } else if (entity?.fields.has(field.name)) {
        field.resolve = storedFieldResolver(model, entity, type.name, field.name);
      }
    }
  }
  // A stored interface's entities come back as their own types: the one whose EntityType each carries.
  for (const name of model.interfaces.keys()) {
    const type = schema.getType(name);
    if (isInterfaceType(type)) type.resolveType = (node: EntityNode) => node.entity.name;
  }
  const scalar = (name: string) => {
    const t = schema.getType(name);
    return isScalarType(t) ? t : undefined;
  };
  implementScalars({ Long: scalar('Long'), DateTime: scalar('DateTime'), Decimal: scalar('Decimal') });
  attachFederation(schema, model);
  attachNodes(schema, model);
  return schema;
}

/**
 * The resolver of a stored field: its `@auth` beside the type decided on the entity it belongs to, whether its path
 * is built, whether it is eventually consistent (extensions.consistency), a `@blob` field's read URL. Synchronous
 * unless it must wait (an `@auth` beside the field, the entity read after its index entity): a resolver that returns
 * a promise costs the executor a promise and a later turn for every field of every node.
 */
function storedFieldResolver(model: Model, entity: EntityModel, type: string, name: string): GraphQLFieldResolver<EntityNode, RequestContext> {
  const { auth, blob } = entity.fields.get(name)!;
  const coordinate = `${type}.${name}`;
  // A summary kept by the worker may lag behind the writes: the response says so (extensions.consistency).
  const eventual = model.summaries.get(coordinate)?.scope === 'eventual' ? coordinate : undefined;
  const derived = derivedPathOf(model, type, name);
  const readable = (node: EntityNode, ctx: RequestContext, info: GraphQLResolveInfo): unknown => {
    // Only after its @auth, whether its path is built: a caller that may not read the field learns nothing of its state.
    if (derived) ctx.paths?.assertReadable(derived, coordinate);
    if (eventual) ctx.eventualSummaries.add(eventual);
    const value = fieldValue(node, name, ctx, info);
    if (!blob) return value;
    return value instanceof Promise ? value.then((v) => blobUrl(ctx, blob, v)) : blobUrl(ctx, blob, value);
  };
  if (!auth) return (node, _args, ctx, info) => readable(node, ctx, info);
  // A field guarded beside its type (a payroll for some roles only): decided on the entity it belongs to.
  const scope = [...new Set(auth.rules.flatMap((r) => r.scope.map((s) => s.field)))];
  return async (node, _args, ctx, info) => {
    if (ctx.principal) {
      const values = Object.fromEntries(await Promise.all(scope.map(async (f) => [f, await fieldValue(node, f, ctx, info)] as const)));
      if (decide(auth, ctx.principal, (f) => values[f] ?? null) !== 'allow') throw forbidden(`read ${type}.${name}`, ctx.principal);
    }
    return readable(node, ctx, info);
  };
}

/** The read URL of a `@blob` field's blob name (the guide's "Large entities pattern": the entity holds the name). */
function blobUrl(ctx: RequestContext, blob: { container: string; expiresInSeconds: number }, value: unknown): unknown {
  if (typeof value !== 'string') return value;
  if (!ctx.blobs) throw new TablegraphError(ErrorCode.CONFIG_INVALID, 'This server has no blob store to sign @blob URLs with.');
  return ctx.blobs.readUrl(blob.container, value, blob.expiresInSeconds);
}

/** The derived path a stored field's value comes from — a summary's or a copy's — if it is one. */
function derivedPathOf(model: Model, type: string, field: string): string | undefined {
  const summary = model.summaries.get(`${type}.${field}`);
  if (summary) return summaryPathId(summary);
  return model.entities.get(type)?.copies.has(field) ? pathId('copy', type, field) : undefined;
}
