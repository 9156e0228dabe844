/**
 * Start-up errors of the schema compiler. Each problem names the type, the field and the SDL location, the
 * way graphql-js reports a validation error; all problems of one compile are reported together.
 */
import { GraphQLError, type ASTNode, type DocumentNode } from 'graphql';
import { ErrorCode, TablegraphError } from '../errors';

/** One problem found in the schema: a GraphQLError whose `locations` point into the SDL file. */
export interface SchemaProblem {
  coordinate: string;
  message: string;
  error: GraphQLError;
}

/** Collects problems while the compiler walks the schema. */
export class SchemaProblems {
  readonly list: SchemaProblem[] = [];
  /** The parsed sources, where a problem without a located node is found by its coordinate. */
  private document?: DocumentNode;

  /**
   * The sources the schema was built from: a problem whose node carries no location — a schema `@apollo/subgraph`
   * built, whose nodes are its own — is located at its coordinate's definition there.
   */
  locateIn(document: DocumentNode): void {
    this.document = document;
  }

  /** Records that `coordinate` (`Type` or `Type.field`) is wrong; `node` gives the SDL location. */
  add(coordinate: string, message: string, node?: ASTNode | null): void {
    const located = node?.loc ? node : (this.document && definitionOf(this.document, coordinate)) || node;
    const error = new GraphQLError(`${coordinate}: ${message}`, { nodes: located ?? undefined });
    this.list.push({ coordinate, message, error });
  }

  /** Records an error graphql-js found in the SDL itself (syntax, an unknown directive argument…), with its location. */
  addGraphQLError(error: GraphQLError): void {
    this.list.push({ coordinate: SDL, message: error.message, error });
  }

  /**
   * Throws TablegraphError(SCHEMA_INVALID) listing every problem as `Type.field (file:line:column): message`
   * when there is at least one; `details.problems` holds them as `{ coordinate, message, locations }`.
   */
  throwIfAny(): void {
    if (this.list.length === 0) return;
    const lines = this.list.map((p) => `  - ${p.coordinate}${where(p.error)}: ${p.message}`);
    throw new TablegraphError(ErrorCode.SCHEMA_INVALID, `${this.heading()} (${this.list.length} problem(s)):\n${lines.join('\n')}`, {
      problems: this.list.map((p) => ({
        coordinate: p.coordinate,
        message: p.message,
        source: p.error.source?.name,
        locations: p.error.locations ?? [],
      })),
    });
  }

  /** What the problems are: mistakes in the SDL's GraphQL (a typo, a syntax error), in its storage design, or both. */
  private heading(): string {
    const sdl = this.list.filter((p) => p.coordinate === SDL).length;
    if (sdl === this.list.length) return 'The schema is not valid GraphQL: fix these first';
    if (sdl === 0) return 'The schema cannot be served without scans or is inconsistent';
    return 'The schema is not valid GraphQL, and cannot be served without scans or is inconsistent';
  }
}

/** The coordinate of a problem graphql-js found in the SDL itself. */
const SDL = 'SDL';

function where(error: GraphQLError): string {
  const loc = error.locations?.[0];
  if (!loc) return '';
  return ` (${error.source?.name ?? 'schema'}:${loc.line}:${loc.column})`;
}

/**
 * The definition a coordinate names in the sources: `Type` (or `Type@index(…)`, a type's directive) its type's first
 * definition or extension, `Type.field` (or `Type.field(arg)`, `Type.field@…`) that field's. Undefined when none has it.
 */
function definitionOf(document: DocumentNode, coordinate: string): ASTNode | undefined {
  const [, typeName, fieldName] = /^(\w+)(?:\.(\w+))?/.exec(coordinate) ?? [];
  if (!typeName) return undefined;
  for (const def of document.definitions) {
    if (!('name' in def) || def.name?.value !== typeName) continue;
    if (fieldName === undefined) return def;
    const fields = 'fields' in def ? (def.fields as ReadonlyArray<{ name: { value: string } } & ASTNode> | undefined) : undefined;
    const field = fields?.find((f) => f.name.value === fieldName);
    if (field) return field;
  }
  return undefined;
}
