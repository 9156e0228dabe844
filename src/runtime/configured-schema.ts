/** The schema every command compiles: the configured schema folder, page sizes and table prefix. */
import type { Config } from '../config';
import { compileSchema, type CompiledSchema } from '../model/compile';
import { loadSchemaSources } from '../model/load-schema';

/**
 * @throws TablegraphError SCHEMA_INVALID (a field no point or range query serves) or CONFIG_INVALID (no schema
 *   folder); a GraphQLError for SDL that is not valid GraphQL
 */
export function compileConfiguredSchema(config: Config): CompiledSchema {
  return compileSchema(loadSchemaSources(config.schemaDir), {
    pageSize: config.defaultPageSize,
    maxPageSize: config.maxPageSize,
    tablePrefix: config.tablePrefix,
  });
}
