/**
 * The Apollo Client cache configuration of a schema (cache-keys.ts), as the text of a TypeScript module: `typePolicies`
 * — each entity type's `keyFields`, `keyFields: false` for the other types that have an `id` (Apollo would key them by
 * it), each Relay connection field `relayStylePagination(keyArgs)` so that `fetchMore` pages append to one list, each
 * root point query by its entity's keys answered from the cache when it holds that entity (a cache redirect) — and
 * `possibleTypes`, for fragments on interfaces and unions. For `new InMemoryCache({ typePolicies, possibleTypes })`.
 */
import type { CacheKeys } from './cache-keys';

/**
 * @param keys the schema's cache keys (cacheKeys)
 * @param fieldsOf the field names of each object type, to tell which have an `id` or `_id`
 * @returns the module's text, importing `@apollo/client` (3.x)
 * @example
 * import { InMemoryCache } from '@apollo/client';
 * import { typePolicies, possibleTypes } from './generated/apollo-cache';
 * const cache = new InMemoryCache({ typePolicies, possibleTypes });
 */
export function renderApolloTypePolicies(keys: CacheKeys, fieldsOf: (type: string) => string[]): string {
  const policies = new Map<string, string[]>();
  const add = (type: string, entry: string) => policies.set(type, [...(policies.get(type) ?? []), entry]);
  for (const t of keys.types) {
    if (t.keyFields) add(t.type, `keyFields: ${JSON.stringify(t.keyFields)}`);
    else if (fieldsOf(t.type).some((f) => f === 'id' || f === '_id')) add(t.type, 'keyFields: false');
  }
  const connections = new Map<string, string[]>();
  for (const c of keys.connections) {
    const keyArgs = c.keyArgs.length > 0 ? JSON.stringify(c.keyArgs) : 'false';
    connections.set(c.type, [...(connections.get(c.type) ?? []), `${c.field}: relayStylePagination(${keyArgs})`]);
  }
  for (const r of keys.redirects) {
    const object = Object.entries(r.args).map(([field, arg]) => `${JSON.stringify(field)}: args?.${arg}`);
    const read = `read: (_, { args, toReference }) => toReference({ __typename: ${JSON.stringify(r.type)}, ${object.join(', ')} })`;
    connections.set('Query', [...(connections.get('Query') ?? []), `${r.field}: { ${read} }`]);
  }
  for (const [type, fields] of connections) add(type, `fields: { ${fields.join(', ')} }`);
  const lines = [...policies].sort(([a], [b]) => a.localeCompare(b)).map(([type, entries]) => `  ${type}: { ${entries.join(', ')} },`);
  return [
    "import type { PossibleTypesMap, TypePolicies } from '@apollo/client';",
    "import { relayStylePagination } from '@apollo/client/utilities';",
    '',
    '/**',
    ' * Each entity type keyed by its PartitionKey and RowKey fields (a query must select them wherever it selects the',
    ' * type: Apollo Client refuses an object without its key fields), the other types with an `id` not normalised, and',
    ' * each Relay connection field one list per value of its other arguments, each point query by its keys answered',
    ' * from the entity the cache holds.',
    ' */',
    'export const typePolicies: TypePolicies = {',
    ...lines,
    '};',
    '',
    '/** The object types of each interface and union, for fragments on them. */',
    `export const possibleTypes: PossibleTypesMap = ${JSON.stringify(keys.possibleTypes, null, 2)};`,
    '',
  ].join('\n');
}
