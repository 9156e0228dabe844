/** The schema every command compiles: the configured schema folder, page sizes and table prefix. */
import type { Config } from './config';
import { compileSchema, type CompiledSchema } from '../compiler/compile';
import { loadSchemaSources } from '../compiler/load-schema';

/**
 * @throws TablegraphError SCHEMA_INVALID (SDL that is not valid GraphQL, a field no point or range query serves…,
 *   each with file:line:column) or CONFIG_INVALID (no schema folder)
 */
export function compileConfiguredSchema(config: Config): CompiledSchema {
  return compileSchema(loadSchemaSources(config.schemaDir), {
    pageSize: config.defaultPageSize,
    maxPageSize: config.maxPageSize,
    tablePrefix: config.tablePrefix,
  });
}
