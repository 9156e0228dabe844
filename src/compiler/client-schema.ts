/**
 * The schema a client sees: the compiled one without tablegraph's storage directives (`@entity`, `@point`, `@auth`, …)
 * and the types only their arguments use (`OnDelete`, `WriteAction`, `TenantIsolation`, `AuthRule`, `ClaimScope`).
 * Introspection, GraphiQL's docs and code generators get it; they show the API, not how it is stored. The author's
 * view, directives and all, stays at `GET /schema.graphql` (src/server/ide.ts), and a subgraph's `_service { sdl }`
 * strips the same (federation-link.ts subgraphSdl).
 */
import { readFileSync } from 'node:fs';
import { GraphQLSchema, Kind, parse } from 'graphql';
import { BUILT_IN_DIRECTIVES } from './compile';

/** The names tablegraph's directive definitions declare: the directives, and the types beside them. */
let builtIn: { directives: Set<string>; types: Set<string> } | undefined;

function builtInNames(): { directives: Set<string>; types: Set<string> } {
  if (builtIn) return builtIn;
  const directives = new Set<string>();
  const types = new Set<string>();
  for (const def of parse(readFileSync(BUILT_IN_DIRECTIVES, 'utf8')).definitions) {
    if (def.kind === Kind.DIRECTIVE_DEFINITION) directives.add(def.name.value);
    else if ('name' in def && def.name) types.add(def.name.value);
  }
  builtIn = { directives, types };
  return builtIn;
}

/**
 * `schema` without tablegraph's directives, and without the types of theirs that no field, argument or input of the
 * API uses (a scalar such as `DateTime`, or `BlobInput`, stays where the API uses it). The types themselves are the
 * same objects, resolvers included: attach them before or after.
 * @param schema a compiled schema (compileSchema)
 * @returns a new schema of the same types, for serving
 */
export function clientSchema(schema: GraphQLSchema): GraphQLSchema {
  const { directives, types } = builtInNames();
  const config = schema.toConfig();
  return new GraphQLSchema({
    ...config,
    directives: config.directives.filter((d) => !directives.has(d.name)),
    // Types reachable from the roots are kept whatever this list holds: only the unreached storage types go.
    types: config.types.filter((t) => !types.has(t.name)),
  });
}
