/**
 * Apollo Federation 2, as the schema's SDL asks for it: the `@link` that opts in, the federation directives' names
 * under it, and the two documents made from the schema's own — the one built into the executable subgraph schema
 * (every `@entity` type given its `@key` where its author gave none) and the one served as `_service { sdl }`
 * (tablegraph's storage directives taken out). Syntax only: what a key costs is decided in federation.ts.
 * @see https://www.apollographql.com/docs/graphos/schema-design/federated-schemas/reference/directives
 */
import {
  Kind,
  print,
  visit,
  type ConstDirectiveNode,
  type DefinitionNode,
  type DocumentNode,
  type ObjectTypeDefinitionNode,
  type StringValueNode,
} from 'graphql';
import { KeyTemplateSyntaxError, parseKeyTemplate } from '../model/key-template';

/** The specification a schema links to opt in: Federation 2 (`v2.0` … `v2.x`). */
const FEDERATION_SPEC = /^https:\/\/specs\.apollo\.dev\/federation\/v2\.(\d+)$/;

/** The federation link of a schema: the directives' names in this schema, by their names in the specification. */
export interface FederationLink {
  /** The `@link`'s `url`, e.g. `https://specs.apollo.dev/federation/v2.7`. */
  url: string;
  /** `key` → the name written in this schema: `key` when imported, `federation__key` when not, an alias when renamed. */
  names: Map<string, string>;
  /** The `@link` directive, for error locations. */
  node: ConstDirectiveNode;
}

/** Every directive of Federation 2.x, by its name in the specification. */
export const FEDERATION_DIRECTIVES = [
  'key',
  'shareable',
  'external',
  'requires',
  'provides',
  'inaccessible',
  'override',
  'tag',
  'extends',
  'composeDirective',
  'interfaceObject',
  'authenticated',
  'requiresScopes',
  'policy',
  'context',
  'fromContext',
  'cost',
  'listSize',
] as const;

/**
 * The schema's link to Federation 2, if it has one: `extend schema @link(url: "https://specs.apollo.dev/federation/v2.7",
 * import: ["@key", "@shareable"])`, as Apollo users write it.
 * @returns undefined for a schema that does not opt in (a plain GraphQL API, no `_service` or `_entities`)
 */
export function federationLink(document: DocumentNode): FederationLink | undefined {
  for (const def of document.definitions) {
    if (def.kind !== Kind.SCHEMA_DEFINITION && def.kind !== Kind.SCHEMA_EXTENSION) continue;
    for (const d of def.directives ?? []) {
      if (d.name.value !== 'link') continue;
      const url = stringArgument(d, 'url');
      if (!url || !FEDERATION_SPEC.test(url)) continue;
      const prefix = stringArgument(d, 'as') ?? 'federation';
      const names = new Map<string, string>(FEDERATION_DIRECTIVES.map((n) => [n, `${prefix}__${n}`]));
      const imports = d.arguments?.find((a) => a.name.value === 'import')?.value;
      for (const item of imports?.kind === Kind.LIST ? imports.values : []) {
        if (item.kind === Kind.STRING && item.value.startsWith('@')) names.set(item.value.slice(1), item.value.slice(1));
        if (item.kind !== Kind.OBJECT) continue;
        const field = (n: string) => item.fields.find((f) => f.name.value === n)?.value;
        const name = field('name');
        const as = field('as');
        if (name?.kind === Kind.STRING && name.value.startsWith('@')) {
          names.set(name.value.slice(1), as?.kind === Kind.STRING ? as.value.replace(/^@/, '') : name.value.slice(1));
        }
      }
      return { url, names, node: d };
    }
  }
  return undefined;
}

function stringArgument(d: ConstDirectiveNode, name: string): string | undefined {
  const v = d.arguments?.find((a) => a.name.value === name)?.value;
  return v?.kind === Kind.STRING ? v.value : undefined;
}

/** The federation directive a directive application is, by its name in the specification; undefined for any other. */
export function federationDirective(link: FederationLink, name: string): string | undefined {
  for (const [spec, local] of link.names) if (local === name) return spec;
  return undefined;
}

/**
 * The fields of an `@entity` type's keys, in order: its table template's (a table per period), its PartitionKey's,
 * then its RowKey's — what `_entities` needs to address one entity with a point query. Undefined when a template
 * does not parse (the layout pass reports it).
 */
export function primaryKeyFields(entity: ConstDirectiveNode): string[] | undefined {
  const fields: string[] = [];
  for (const arg of ['table', 'partitionKey', 'rowKey']) {
    const source = stringArgument(entity, arg);
    if (source === undefined) continue;
    try {
      for (const f of parseKeyTemplate(source).fields) if (!fields.includes(f)) fields.push(f);
    } catch (e) {
      if (e instanceof KeyTemplateSyntaxError) return undefined;
      throw e;
    }
  }
  return fields;
}

/**
 * The document the subgraph schema is built from: each `@entity` object type without a `@key` of its author's given
 * `@key(fields: "<PartitionKey fields> <RowKey fields>")`, and a generated `PageInfo` (generated-sdl.ts) made
 * `@shareable`, so that other subgraphs may have one too.
 * @param generatedSource the source name of the generated SDL
 */
export function withGeneratedKeys(document: DocumentNode, link: FederationLink, generatedSource: string): DocumentNode {
  const key = link.names.get('key')!;
  const shareable = link.names.get('shareable')!;
  const definitions = document.definitions.map((def): DefinitionNode => {
    if (def.kind !== Kind.OBJECT_TYPE_DEFINITION) return def;
    if (def.name.value === 'PageInfo' && def.loc?.source.name === generatedSource) return withDirective(def, shareable, []);
    const entity = def.directives?.find((d) => d.name.value === 'entity');
    if (!entity || def.directives?.some((d) => d.name.value === key)) return def;
    const fields = primaryKeyFields(entity);
    if (!fields?.length) return def;
    const value: StringValueNode = { kind: Kind.STRING, value: fields.join(' ') };
    return withDirective(def, key, [{ kind: Kind.ARGUMENT, name: { kind: Kind.NAME, value: 'fields' }, value }]);
  });
  return { ...document, definitions };
}

function withDirective(def: ObjectTypeDefinitionNode, name: string, args: NonNullable<ConstDirectiveNode['arguments']>): ObjectTypeDefinitionNode {
  const directive: ConstDirectiveNode = { kind: Kind.DIRECTIVE, name: { kind: Kind.NAME, value: name }, arguments: args };
  return { ...def, directives: [...(def.directives ?? []), directive] };
}

/**
 * The SDL served as `_service { sdl }`: the document without tablegraph's storage directives — their definitions,
 * every application, and the types only they use (`AuthRule`, `OnDelete`, …) — so that the supergraph carries no
 * table names, keys or access rules, and no type of tablegraph's own that another subgraph could collide with.
 * @param builtIn tablegraph's directive definitions document (schema/directives.graphql)
 */
export function subgraphSdl(document: DocumentNode, builtIn: DocumentNode): string {
  const directives = new Set<string>();
  const types = new Set<string>();
  for (const def of builtIn.definitions) {
    if (def.kind === Kind.DIRECTIVE_DEFINITION) directives.add(def.name.value);
    else if ('name' in def && def.name) types.add(def.name.value);
  }
  const stripped = visit(document, {
    DirectiveDefinition: (node) => (directives.has(node.name.value) ? null : undefined),
    Directive: (node) => (directives.has(node.name.value) ? null : undefined),
  });
  const kept = usedTypes(stripped, types);
  const definitions = stripped.definitions.filter(
    (def) =>
      !('name' in def && def.name && types.has(def.name.value) && !kept.has(def.name.value)) &&
      // `extend schema @tenancy(…)` or `@nodeInterface` with its directive gone is no SDL at all.
      !(def.kind === Kind.SCHEMA_EXTENSION && !def.directives?.length && !def.operationTypes?.length),
  );
  return print({ ...stripped, definitions });
}

/** Of `candidates`, those the document refers to from a definition that is kept (to a fixed point). */
function usedTypes(document: DocumentNode, candidates: Set<string>): Set<string> {
  const byName = new Map<string, DefinitionNode>();
  for (const def of document.definitions) if ('name' in def && def.name) byName.set(def.name.value, def);
  const kept = new Set<string>();
  const pending: DefinitionNode[] = document.definitions.filter((def) => !('name' in def && def.name && candidates.has(def.name.value)));
  while (pending.length > 0) {
    visit(pending.pop()!, {
      NamedType(node) {
        const name = node.name.value;
        if (!candidates.has(name) || kept.has(name)) return;
        kept.add(name);
        const def = byName.get(name);
        if (def) pending.push(def);
      },
    });
  }
  return kept;
}
