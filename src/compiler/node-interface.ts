/**
 * Relay's Global Object Identification (`extend schema @nodeInterface`): the document gains `interface Node`, every
 * entity type implements it with an opaque id field (`nodeId` by default, PostGraphile's convention), and the query
 * type gains `node` and `nodes`. Each entity type's id is served by the point query of its own keys (own-key-path.ts);
 * sealing and opening the id is the resolvers' (src/resolvers/node-resolvers.ts).
 */
import { getDirectiveValues, Kind, parse, type DocumentNode, type FieldDefinitionNode, type GraphQLSchema, type ObjectTypeDefinitionNode } from 'graphql';
import type { EntityModel, NodeModel } from '../model/types';
import { ownKeyPath } from './own-key-path';
import type { SchemaProblems } from './schema-errors';

/** The interface's name, as Relay expects it. */
export const NODE_INTERFACE = 'Node';

/** The `@nodeInterface` of a document: its id field's name; undefined when the schema does not declare it. */
function declaredIdField(document: DocumentNode): { idField: string; node: DocumentNode['definitions'][number] } | undefined {
  for (const def of document.definitions) {
    if (def.kind !== Kind.SCHEMA_DEFINITION && def.kind !== Kind.SCHEMA_EXTENSION) continue;
    const directive = def.directives?.find((d) => d.name.value === 'nodeInterface');
    if (!directive) continue;
    const arg = directive.arguments?.find((a) => a.name.value === 'idField');
    return { idField: arg?.value.kind === Kind.STRING ? arg.value.value : 'nodeId', node: def };
  }
  return undefined;
}

/** The id field's name when the built schema declares `@nodeInterface`: what the other passes leave to this one. */
export function nodeIdField(schema: GraphQLSchema): string | undefined {
  const directive = schema.getDirective('nodeInterface');
  if (!directive) return undefined;
  for (const node of [schema.astNode, ...schema.extensionASTNodes]) {
    const values = node && getDirectiveValues(directive, node);
    if (values) return values.idField as string;
  }
  return undefined;
}

/** The query type's fields this pass adds, for the access-path compiler to leave alone. */
export function nodeRootFields(idField: string | undefined): Set<string> {
  return new Set(idField ? ['node', 'nodes'] : []);
}

/**
 * @returns `document` with `interface Node`, each `@entity` object type implementing it, and the query type's `node`
 *   and `nodes`; `document` itself when it does not declare `@nodeInterface`. Problems (a type `Node` of the schema's
 *   own, an entity type with a field of the id's name, a query type with `node` or `nodes`, a name GraphQL refuses)
 *   are added to `problems`.
 */
export function withNodeInterface(document: DocumentNode, problems: SchemaProblems): DocumentNode {
  const declared = declaredIdField(document);
  if (!declared) return document;
  const { idField } = declared;
  if (!/^[_A-Za-z][_0-9A-Za-z]*$/.test(idField) || idField.startsWith('__')) {
    problems.add('schema', `@nodeInterface(idField: ${JSON.stringify(idField)}) is not a GraphQL field name`, declared.node);
    return document;
  }
  const queryName = rootQueryName(document);
  const idDefinition = field(`"""The entity's global id: its type and keys, sealed (Relay's Global Object Identification)."""\n${idField}: ID!`);
  const definitions = document.definitions.map((def) => {
    if ((def.kind === Kind.OBJECT_TYPE_DEFINITION || def.kind === Kind.INTERFACE_TYPE_DEFINITION) && def.name.value === NODE_INTERFACE) {
      problems.add(NODE_INTERFACE, `the schema declares a type ${NODE_INTERFACE} of its own; @nodeInterface defines it (rename the schema's)`, def);
    }
    if (def.kind !== Kind.OBJECT_TYPE_DEFINITION) return def;
    if (def.directives?.some((d) => d.name.value === 'entity')) return implementNode(def, idDefinition, problems);
    if (def.name.value === queryName) return withRootFields(def, idField, problems);
    return def;
  });
  const node = parse(
    `"""An object with a global id (Relay's Global Object Identification): every entity type."""\ninterface ${NODE_INTERFACE} { ${idField}: ID! }`,
  ).definitions[0];
  return { ...document, definitions: [...definitions, node] };
}

function rootQueryName(document: DocumentNode): string {
  for (const def of document.definitions) {
    if (def.kind !== Kind.SCHEMA_DEFINITION) continue;
    const query = def.operationTypes.find((o) => o.operation === 'query');
    if (query) return query.type.name.value;
  }
  return 'Query';
}

function field(sdl: string): FieldDefinitionNode {
  const type = parse(`type X {\n${sdl}\n}`).definitions[0] as ObjectTypeDefinitionNode;
  return type.fields![0];
}

function implementNode(def: ObjectTypeDefinitionNode, idDefinition: FieldDefinitionNode, problems: SchemaProblems): ObjectTypeDefinitionNode {
  const own = def.fields?.find((f) => f.name.value === idDefinition.name.value);
  if (own) {
    problems.add(
      `${def.name.value}.${own.name.value}`,
      `is a field of the type's own; @nodeInterface's global id needs a field of its own name (idField: "nodeId", the default)`,
      own,
    );
    return def;
  }
  const named = { kind: Kind.NAMED_TYPE, name: { kind: Kind.NAME, value: NODE_INTERFACE } } as const;
  return { ...def, interfaces: [...(def.interfaces ?? []), named], fields: [...(def.fields ?? []), idDefinition] };
}

function withRootFields(def: ObjectTypeDefinitionNode, idField: string, problems: SchemaProblems): ObjectTypeDefinitionNode {
  const taken = def.fields?.filter((f) => f.name.value === 'node' || f.name.value === 'nodes') ?? [];
  for (const f of taken) problems.add(`${def.name.value}.${f.name.value}`, "is a field of the schema's own; @nodeInterface defines it", f);
  if (taken.length > 0) return def;
  const added = [
    field(`"""The entity a global id names; null when none does (or it is out of the caller's scope)."""\nnode(${idField}: ID!): ${NODE_INTERFACE}`),
    field(
      `"""The entities global ids name, in order, in one wave of point queries; null for each one that none does."""\nnodes(${idField}s: [ID!]!): [${NODE_INTERFACE}]!`,
    ),
  ];
  return { ...def, fields: [...(def.fields ?? []), ...added] };
}

/**
 * @param entities every entity type, by name
 * @returns the model of the node interface: each entity type's point query by its own keys; undefined when the schema
 *   does not declare `@nodeInterface`
 */
export function buildNodes(schema: GraphQLSchema, entities: Map<string, EntityModel>): NodeModel | undefined {
  const idField = nodeIdField(schema);
  if (!idField) return undefined;
  const paths = new Map(
    [...entities.values()].map((e) => [
      e.name,
      ownKeyPath(e, e.layout, { coordinate: `${schema.getQueryType()?.name ?? 'Query'}.node`, parentType: e.name, fieldName: 'node' }),
    ]),
  );
  return { idField, paths };
}
