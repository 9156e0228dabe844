/**
 * The resolvers of an Apollo Federation 2 subgraph (docs/federation.md): `_service { sdl }` serves the schema without
 * tablegraph's storage directives; `_entities(representations:)` answers each representation with the point query of
 * its type's key (src/compiler/federation.ts) through the request's point loader — N representations in one wave,
 * de-duplicated — under `@auth` exactly as a nullable `@point` field is.
 */
import { getNamedType, isLeafType, isObjectType, isUnionType, type GraphQLObjectType, type GraphQLResolveInfo, type GraphQLSchema } from 'graphql';
import { ErrorCode, TablegraphError } from '../errors';
import type { FederationKey, FederationModel, Model } from '../model/types';
import type { RequestContext } from './context';
import type { EntityNode } from './entity-node';
import { pointResolver } from './path-resolvers';
import { representationKey } from '../model/federation-keys';

type KeyResolver = { key: FederationKey; resolve: ReturnType<typeof pointResolver> };

/** Sets the resolvers of `_service`, `_entities` and the `_Entity` union, when the model is a subgraph's. Mutates `schema`. */
export function attachFederation(schema: GraphQLSchema, model: Model): void {
  const federation = model.federation;
  const query = schema.getQueryType();
  if (!federation || !query) return;
  const fields = query.getFields();
  const sdl = { sdl: federation.sdl };
  if (fields._service) fields._service.resolve = () => sdl;
  const union = schema.getType('_Entity');
  if (isUnionType(union)) union.resolveType = (node: EntityNode) => node.entity.name;
  if (fields._entities) fields._entities.resolve = entitiesResolver(schema, federation);
}

/**
 * `_entities(representations: [_Any!]!): [_Entity]!`: one entity per representation, in order; null for one that does
 * not exist or that `@auth` leaves out once read (as a nullable `@point` field answers).
 * @throws per representation (its list item is null, the error at its index): BAD_USER_INPUT reason BadRepresentation
 *   for a representation that is not an object, names a type without a resolvable key, or carries no key's fields,
 *   or whose key value is not of its field's type; then whatever the point query throws (FORBIDDEN, LIMIT_EXCEEDED,
 *   STORAGE_UNAVAILABLE, …)
 */
function entitiesResolver(schema: GraphQLSchema, federation: FederationModel) {
  const byType = new Map<string, { type: GraphQLObjectType; keys: KeyResolver[] }>();
  for (const [name, keys] of federation.keys) {
    const type = schema.getType(name);
    const resolvable = keys.filter((k) => k.path).map((key) => ({ key, resolve: pointResolver(key.path!) }));
    if (isObjectType(type) && resolvable.length > 0) byType.set(name, { type, keys: resolvable });
  }
  return (_source: unknown, args: { representations: unknown[] }, ctx: RequestContext, info: GraphQLResolveInfo) =>
    args.representations.map(async (representation, index) => {
      const bad = (why: string) =>
        new TablegraphError(ErrorCode.BAD_USER_INPUT, `_entities: representation ${index} ${why}`, { reason: 'BadRepresentation', index });
      if (!representation || typeof representation !== 'object' || Array.isArray(representation)) throw bad('is not an object');
      const values = representation as Record<string, unknown>;
      const typename = values.__typename;
      const entry = typeof typename === 'string' ? byType.get(typename) : undefined;
      if (!entry) throw bad(`names ${JSON.stringify(typename)}, which is not an entity type this subgraph resolves`);
      const chosen = representationKey(
        entry.keys.map((k) => k.key),
        values,
      );
      const match = entry.keys.find((k) => k.key === chosen);
      if (!match) throw bad(`carries none of ${typename}'s keys: ${entry.keys.map(({ key }) => `"${key.fields.join(' ')}"`).join(', ')}`);
      // The values come as JSON, uncoerced: each key field's scalar reads its own, as it would an argument's.
      const keyArgs: Record<string, unknown> = {};
      for (const f of match.key.fields) {
        const leaf = getNamedType(entry.type.getFields()[f]!.type);
        try {
          keyArgs[f] = isLeafType(leaf) ? leaf.parseValue(values[f]) : values[f];
        } catch (e) {
          throw bad(`has a ${f} that is not a ${leaf.name}: ${(e as Error).message}`);
        }
      }
      // Nullable, whatever `_entities` is: an entity that is not there (or out of scope, once read) is a null item.
      return match.resolve(undefined, keyArgs, ctx, { ...info, returnType: entry.type });
    });
}
