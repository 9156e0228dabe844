/**
 * The schema compiler: SDL with storage directives → an executable schema's type system plus the Model that
 * says how every field is served. Runs once at start-up; any field that would need a scan stops the start.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { buildASTSchema, concatAST, getDirectiveValues, GraphQLError, Kind, parse, Source, visit, type DocumentNode, type GraphQLSchema } from 'graphql';
import { validateSDL } from 'graphql/validation/validate';
import { buildAccessPaths, findConnections, type PageDefaults } from './access-paths';
import { buildCopies, coverJoins } from './build-copies';
import { buildDependents } from './build-dependents';
import { buildSasFields } from './sas-fields';
import { buildEntities } from './layouts';
import { buildSubscriptions } from './subscriptions';
import { buildWrites } from './writes';
import { buildTransactions } from './transactions';
import { generateSdl } from './generated-sdl';
import { SchemaProblems } from './schema-errors';
import type { Model, PointPath } from '../model/types';
import { buildAuthorization } from './build-authorization';
import { checkPeriodTableUses } from './period-tables';
import { checkWideUses } from './wide-layouts';
import { checkBlobUses } from './blob-directives';
import { buildInterfaces } from './build-interfaces';
import { buildSummaries } from './build-summaries';
import { buildTenancy, checkTenantIsolation } from './tenant-isolation';
import { packageRoot } from '../package-root';
import { buildSubgraphSchema } from '@apollo/subgraph';
import { errorCauses } from '@apollo/federation-internals';
import { federationLink, subgraphSdl, withGeneratedKeys, type FederationLink } from './federation-link';
import { buildFederation, refuseNestedKeys } from './federation';
import { buildNodes, withNodeInterface } from './node-interface';

/** tablegraph's directive definitions, added to a schema that does not declare them. */
export const BUILT_IN_DIRECTIVES = path.join(packageRoot(), 'schema', 'directives.graphql');

/** The name errors in generated SDL cite. */
export const GENERATED_SOURCE = 'tablegraph:generated.graphql';

/** One SDL file: its text and the name errors cite (e.g. `examples/hr/hr.graphql`). */
export interface SdlSource {
  name: string;
  body: string;
}

export interface CompileOptions extends Partial<PageDefaults> {
  /**
   * Put before every table name (letters and digits): several deployments, or test runs, share one storage
   * account without sharing tables. Default ''.
   */
  tablePrefix?: string;
}

/** The compiler's output. */
export interface CompiledSchema {
  /** The GraphQL type system, without resolvers (src/server/resolvers.ts adds them). */
  schema: GraphQLSchema;
  model: Model;
  /** The SDL generated for types the schema refers to and does not declare (generated-sdl.ts); '' if none. */
  generatedSdl: string;
  /**
   * The whole document compiled, as text: each source file (and tablegraph's directive definitions when the
   * schema does not declare them), then the generated SDL, each under a `# file` comment. Served as
   * `GET /schema.graphql`: unlike introspection, it keeps the directives that say how each field is read.
   */
  sdl: string;
}

/**
 * Compiles SDL sources into a schema and its model.
 * @param sources the SDL files; without definitions of the directives, tablegraph's own (schema/directives.graphql)
 *   are added; types the sources refer to and do not declare are generated where they can be (generated-sdl.ts)
 * @param options page sizes (entities) for `@range` fields that do not set their own; a table name prefix
 * @throws TablegraphError SCHEMA_INVALID listing every problem with `Type.field (file:line:column)` — graphql-js's
 *   own (syntax, unknown types or directive arguments) with `SDL (file:line:column)`
 */
export function compileSchema(sources: SdlSource[], options: CompileOptions = {}): CompiledSchema {
  const problems = new SchemaProblems();
  const { texts, documents, generatedSdl } = readSources(sources, problems);
  let document = concatAST(documents);
  problems.locateIn(document);
  const link = federationLink(document);
  if (link) {
    document = withGeneratedKeys(document, link, GENERATED_SOURCE);
    // `@apollo/subgraph` fails on a nested key of a scalar with an error of its own, unlocated: refused first, here.
    if (refuseNestedKeys(document, link, problems)) problems.throwIfAny();
  }
  // Relay's Node interface, when the schema asks for it: its fields are added before the schema is built.
  document = withNodeInterface(document, problems);
  problems.throwIfAny();
  const schema = buildSchema(document, problems, link);
  const model = buildModel(schema, options, problems);
  if (link) model.federation = buildFederation(document, model, link, subgraphSdl(document, builtInDirectives()), problems);
  buildAuthorization(schema, model, problems);
  checkPeriodTableUses(schema, model, problems);
  checkWideUses(schema, model, problems);
  checkBlobUses(model, problems);
  checkTenantIsolation(schema, model, problems);
  problems.throwIfAny();
  const sdl = texts.map((t) => `# ${t.name}\n${t.body.trimEnd()}\n`).join('\n');
  return { schema, model, generatedSdl, sdl };
}

/**
 * The sources parsed, with tablegraph's directive definitions when they lack them, and the SDL generated for the
 * types they refer to and do not declare. @throws TablegraphError SCHEMA_INVALID on a syntax error
 */
function readSources(sources: SdlSource[], problems: SchemaProblems): { texts: SdlSource[]; documents: DocumentNode[]; generatedSdl: string } {
  // graphql-js's own errors — syntax, unknown types, directive arguments misspelled or of the wrong type — are
  // reported like the compiler's: SCHEMA_INVALID with file:line:column, every one of them, no stack trace.
  const texts = [...sources];
  const documents = sources.flatMap((s) => {
    try {
      return [parse(new Source(s.body, s.name))];
    } catch (e) {
      if (!(e instanceof GraphQLError)) throw e;
      problems.addGraphQLError(e);
      return [];
    }
  });
  problems.throwIfAny();
  // A schema folder without the directive definitions gets tablegraph's own.
  if (!documents.some((d) => d.definitions.some((def) => def.kind === Kind.DIRECTIVE_DEFINITION && def.name.value === 'entity'))) {
    const builtIn = { name: 'tablegraph:directives.graphql', body: readFileSync(BUILT_IN_DIRECTIVES, 'utf8') };
    texts.unshift(builtIn);
    documents.unshift(parse(new Source(builtIn.body, builtIn.name)));
  }
  const generatedSdl = generateSdl(concatAST(documents));
  if (generatedSdl) {
    texts.push({ name: GENERATED_SOURCE, body: generatedSdl });
    documents.push(parse(new Source(generatedSdl, GENERATED_SOURCE)));
  }
  return { texts, documents, generatedSdl };
}

let builtIn: DocumentNode | undefined;

/** tablegraph's directive definitions, parsed once. */
function builtInDirectives(): DocumentNode {
  builtIn ??= parse(new Source(readFileSync(BUILT_IN_DIRECTIVES, 'utf8'), 'tablegraph:directives.graphql'));
  return builtIn;
}

/**
 * The schema of the document, its SDL and its directives' arguments checked. A schema that links Apollo Federation 2
 * is built by `@apollo/subgraph`: its federation directives defined and checked, `_service` and `_entities` added.
 * @throws TablegraphError SCHEMA_INVALID
 */
function buildSchema(document: DocumentNode, problems: SchemaProblems, link: FederationLink | undefined): GraphQLSchema {
  const built = link ? buildFederatedSchema(document, problems) : buildPlainSchema(document, problems);
  problems.throwIfAny();
  const schema = built!; // undefined only with a problem recorded
  // Directive argument values of the wrong type (`table: 5`) are not SDL validation's business: checked here.
  visit(document, {
    Directive(node) {
      const def = schema.getDirective(node.name.value);
      if (!def) return;
      try {
        getDirectiveValues(def, { directives: [node] });
      } catch (e) {
        if (!(e instanceof GraphQLError)) throw e;
        problems.addGraphQLError(new GraphQLError(`@${node.name.value}: ${e.message}`, { nodes: node }));
      }
    },
  });
  problems.throwIfAny();
  return schema;
}

function buildPlainSchema(document: DocumentNode, problems: SchemaProblems): GraphQLSchema | undefined {
  for (const e of validateSDL(document)) problems.addGraphQLError(e);
  problems.throwIfAny();
  return buildASTSchema(document, { assumeValidSDL: true });
}

/** The subgraph schema `@apollo/subgraph` builds; its validation errors, each located, as problems. */
function buildFederatedSchema(document: DocumentNode, problems: SchemaProblems): GraphQLSchema | undefined {
  try {
    return buildSubgraphSchema(document);
  } catch (e) {
    const causes = e instanceof Error ? errorCauses(e) : undefined;
    // Any other failure of the library is still the schema's: a SCHEMA_INVALID, never a crash at start-up.
    if (!causes) problems.add('schema', `Apollo Federation cannot build this subgraph: ${(e as Error).message}`);
    for (const cause of causes ?? []) problems.addGraphQLError(cause);
    return undefined;
  }
}

/** The model of a valid schema: one pass per directive or concern. @throws TablegraphError SCHEMA_INVALID */
function buildModel(schema: GraphQLSchema, options: CompileOptions, problems: SchemaProblems): Model {
  const defaults = { pageSize: options.pageSize ?? 20, maxPageSize: options.maxPageSize ?? 100 };
  const tenancy = buildTenancy(schema, problems);
  const entities = buildEntities(schema, problems, options.tablePrefix ?? '', tenancy !== undefined);
  // One mistake, one error: every later check stands on the entities' layouts, so a wrong one (a misspelled key
  // field) is reported alone rather than again by each field, mutation and input that uses the type.
  problems.throwIfAny();
  const interfaces = buildInterfaces(schema, entities, problems);
  // What a field may return: an entity type, or an interface stored as one (the guide's "Inheritance relationships").
  const targets = new Map([...entities, ...interfaces]);
  const { connections, edges } = findConnections(schema, targets, problems);
  const accessPaths = buildAccessPaths(schema, { entities: targets, connections, edges, defaults, tablePrefix: options.tablePrefix }, problems);
  // Summaries and copies first: they mark the fields a mutation input may not set.
  const summaries = buildSummaries(schema, entities, accessPaths, problems);
  const copiesOf = buildCopies(schema, entities, accessPaths, summaries, problems);
  coverJoins(accessPaths);
  const { writes } = buildWrites(schema, entities, problems);
  const subscriptions = buildSubscriptions(schema, entities, problems);
  for (const s of subscriptions.values()) s.entity.changeLogged = true;
  const tables = new Set<string>();
  for (const e of entities.values()) {
    if (e.layout.tableTemplate) continue; // a table per period is created by the write that first needs it
    tables.add(e.layout.table);
    for (const i of e.indexes.values()) tables.add(i.layout.table);
  }
  const sasFields = buildSasFields(schema, entities, problems);
  const references = new Map<string, PointPath[]>();
  for (const path of accessPaths.values()) {
    if (path.kind !== 'point' || !path.checkOnWrite) continue;
    references.set(path.parentType, [...(references.get(path.parentType) ?? []), path]);
  }
  const dependentsOf = buildDependents(schema, { entities, accessPaths, references, writes, summaries }, problems);
  const transactions = buildTransactions(schema, { writes, summaries, copiesOf, dependentsOf }, problems);
  const nodes = buildNodes(schema, entities);
  return {
    ...(tenancy && { tenancy }),
    ...(nodes && { nodes }),
    entities,
    interfaces,
    accessPaths,
    connections,
    summaries,
    writes,
    transactions,
    subscriptions,
    tables: [...tables].sort(),
    sasFields,
    references,
    copiesOf,
    dependentsOf,
  };
}
