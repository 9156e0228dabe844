/**
 * The urql Graphcache configuration of a schema (cache-keys.ts), as the text of a TypeScript module: `keys` — each
 * entity type keyed by its PartitionKey and RowKey fields, every other object type embedded in what holds it
 * (Graphcache would key it by `id`, or warn) — and `resolvers` with `relayPagination()` on each Relay connection field,
 * so that pages fetched one after another are one list, and on each root point query whose arguments are its entity's
 * keys, answered from the entity the cache holds. For `cacheExchange({ keys, resolvers })`.
 */
import type { CacheKeys } from './cache-keys';

/**
 * @param keys the schema's cache keys (cacheKeys)
 * @returns the module's text, importing `@urql/exchange-graphcache`
 * @example
 * import { Client, fetchExchange } from '@urql/core';
 * import { cacheExchange } from '@urql/exchange-graphcache';
 * import { keys, resolvers } from './generated/urql-cache';
 * const client = new Client({ url: '/graphql', exchanges: [cacheExchange({ keys, resolvers }), fetchExchange] });
 */
export function renderUrqlCacheConfig(keys: CacheKeys): string {
  const lines = keys.types.map((t) => (t.keyFields ? `  ${t.type}: (data) => keyOf(data, ${JSON.stringify(t.keyFields)}),` : `  ${t.type}: () => null,`));
  const byType = new Map<string, string[]>();
  for (const c of keys.connections) byType.set(c.type, [...(byType.get(c.type) ?? []), `${c.field}: relayPagination()`]);
  for (const r of keys.redirects) {
    const object = Object.entries(r.args).map(([field, arg]) => `${JSON.stringify(field)}: args.${arg}`);
    byType.set('Query', [...(byType.get('Query') ?? []), `${r.field}: (_, args) => ({ __typename: ${JSON.stringify(r.type)}, ${object.join(', ')} })`]);
  }
  const resolvers = [...byType].map(([type, fields]) => `  ${type}: { ${fields.join(', ')} },`);
  return [
    "import type { CacheExchangeOpts, Data } from '@urql/exchange-graphcache';",
    "import { relayPagination } from '@urql/exchange-graphcache/extras';",
    '',
    "/** The key of an entity: its key fields' values, in order; null (kept inside what holds it) when one is not selected. */",
    'function keyOf(data: Data, fields: string[]): string | null {',
    '  const values = fields.map((f) => data[f]);',
    '  return values.some((v) => v === undefined || v === null) ? null : JSON.stringify(values);',
    '}',
    '',
    '/** Each entity type keyed by its PartitionKey and RowKey fields; every other object type embedded. */',
    "export const keys: NonNullable<CacheExchangeOpts['keys']> = {",
    ...lines,
    '};',
    '',
    '/** Each Relay connection field one list per value of its other arguments, pages appended; each point query by its keys. */',
    "export const resolvers: NonNullable<CacheExchangeOpts['resolvers']> = {",
    ...resolvers,
    '};',
    '',
  ].join('\n');
}
