/**
 * A GraphQL Code Generator plugin writing a normalising client cache's configuration for a tablegraph schema: Apollo
 * Client's `typePolicies` and `possibleTypes` (apollo-type-policies.ts) or urql Graphcache's `keys` and `resolvers`
 * (urql-cache-config.ts), from the entity keys the schema declares (cache-keys.ts). The keys are in the `@entity`
 * directives, which the client schema a code generator loads does not carry: the plugin compiles the schema's folder
 * itself (`schemaDir`). Loaded from a `codegen.yml` through scripts/codegen-cache-plugin.cjs.
 * @example
 * # codegen.yml
 * generates:
 *   src/generated/apollo-cache.ts:
 *     plugins: [./scripts/codegen-cache-plugin.cjs]
 *     config: { schemaDir: schema, client: apollo }   # or client: urql
 */
import path from 'node:path';
import { compileSchema } from '../compiler/compile';
import { clientSchema } from '../compiler/client-schema';
import { loadSchemaSources } from '../compiler/load-schema';
import { isObjectType } from 'graphql';
import { cacheKeys } from '../client-cache/cache-keys';
import { renderApolloTypePolicies } from '../client-cache/apollo-type-policies';
import { renderUrqlCacheConfig } from '../client-cache/urql-cache-config';

/** The plugin's `config` in codegen.yml. */
export interface CachePluginConfig {
  /** The folder of the schema's `.graphql` files, relative to the working directory (as `npm start` is given it). */
  schemaDir?: string;
  /** Which client's configuration: `apollo` (the default) or `urql`. */
  client?: 'apollo' | 'urql';
}

/**
 * @param config the plugin's config
 * @returns the generated module's text
 * @throws Error when `schemaDir` is not set or `client` is neither `apollo` nor `urql`; the compiler's SCHEMA_INVALID
 *   error (with file:line:column) when the schema does not compile
 */
export function cacheConfigModule(config: CachePluginConfig): string {
  if (!config.schemaDir) throw new Error("tablegraph's cache plugin: set `config.schemaDir` to the folder of the schema's .graphql files");
  const client = config.client ?? 'apollo';
  if (client !== 'apollo' && client !== 'urql') throw new Error(`tablegraph's cache plugin: \`config.client\` is apollo or urql, not ${String(client)}`);
  const compiled = compileSchema(loadSchemaSources(path.resolve(config.schemaDir)));
  const schema = clientSchema(compiled.schema);
  const keys = cacheKeys(compiled.model, schema);
  if (client === 'urql') return renderUrqlCacheConfig(keys);
  return renderApolloTypePolicies(keys, (name) => {
    const type = schema.getType(name);
    return isObjectType(type) ? Object.keys(type.getFields()) : [];
  });
}

/** GraphQL Code Generator's plugin entry: the schema and documents it loaded are not read (see above). */
export function plugin(_schema: unknown, _documents: unknown, config: CachePluginConfig): string {
  return cacheConfigModule(config);
}
