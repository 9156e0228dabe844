/**
 * Generated SDL, as Amplify's `@model` generates it from a few lines: for every `@entity` type `T`, the Relay types
 * (`TConnection`, `TEdge`, `PageInfo`) and the mutation types (`CreateTInput`, `UpdateTInput`,
 * `ReplaceTInput`, `DeleteTInput`, `MoveTInput`, `IncrementTInput` with `IntSeriesIncrement`/`FloatSeriesIncrement`,
 * `TPayload`) and the subscription type (`TChange`, with the enum `ChangeKind`); for every value object type `V` (an
 * object type without `@entity` that a stored field holds: value-types.ts) its input `VInput`. A type is generated only when the schema refers to it by that name
 * and does not declare it: a declared one always wins, and nothing unused is added.
 *
 * The inputs follow the entity's stored fields (scalar, enum and value object fields without arguments, neither `etag`, a `@summary`,
 * a `@copy`, nor a `@sas` field): a create or replace takes them with the entity's nullability; an update takes the key
 * fields as declared and every other field nullable (merge: only those given change); update, replace and delete take
 * `ifMatch: String`; a `@blob` field is given as a `BlobInput` (what to upload). Works on the parsed SDL, before the
 * schema is built, so that a schema referring to generated types validates.
 */
import {
  Kind,
  parse,
  print,
  visit,
  type ConstDirectiveNode,
  type DocumentNode,
  type FieldDefinitionNode,
  type ObjectTypeDefinitionNode,
  type TypeNode,
} from 'graphql';

/** Directives that make a field something other than a stored field. */
const NOT_STORED = new Set(['summary', 'copy', 'sas', 'point', 'range']);
const BUILT_IN_SCALARS = new Set(['Int', 'Float', 'String', 'Boolean', 'ID']);

interface EntityShape {
  name: string;
  keyFields: Set<string>;
  stored: FieldDefinitionNode[];
}

/**
 * The SDL to add to `document`: every generated type the document refers to and does not declare.
 * @returns SDL text (empty when nothing is missing)
 */
export function generateSdl(document: DocumentNode): string {
  const { declared, referenced, entities, values } = readDocument(document);
  const generators = generatorsFor(document, entities, values);
  // A generated type may refer to another (a connection to its edge and PageInfo): repeat until nothing is missing.
  const out: string[] = [];
  let missing = [...referenced].filter((n) => !declared.has(n) && generators.has(n));
  while (missing.length > 0) {
    const texts = missing.map((n) => generators.get(n)!());
    missing.forEach((n) => declared.add(n));
    out.push(...texts);
    missing = [];
    visit(parse(texts.join('\n')), {
      NamedType(node) {
        const n = node.name.value;
        if (!declared.has(n) && generators.has(n) && !missing.includes(n)) missing.push(n);
      },
    });
  }
  return out.length ? print(parse(out.join('\n\n'))) : '';
}

/**
 * The type names `document` declares, those it refers to, the shape of each of its `@entity` types, and its object
 * types without `@entity` (the value objects among them are those a stored field holds).
 */
function readDocument(document: DocumentNode): {
  declared: Set<string>;
  referenced: Set<string>;
  entities: Map<string, EntityShape>;
  values: Map<string, ObjectTypeDefinitionNode>;
} {
  const declared = new Set<string>();
  const referenced = new Set<string>();
  const leaf = new Set(BUILT_IN_SCALARS);
  const objects: ObjectTypeDefinitionNode[] = [];
  for (const def of document.definitions) {
    if ('name' in def && def.name && def.kind.endsWith('Definition') && def.kind !== Kind.DIRECTIVE_DEFINITION) declared.add(def.name.value);
    if (def.kind === Kind.SCALAR_TYPE_DEFINITION || def.kind === Kind.ENUM_TYPE_DEFINITION) leaf.add(def.name.value);
    if (def.kind === Kind.OBJECT_TYPE_DEFINITION) objects.push(def);
  }
  visit(document, {
    NamedType(node) {
      referenced.add(node.name.value);
    },
  });
  const entities = new Map<string, EntityShape>();
  // An object type without @entity that a field holds is a value object (value-types.ts): a stored field of its holder.
  const values = new Map(objects.filter((t) => !t.directives?.some((d) => d.name.value === 'entity')).map((t) => [t.name.value, t]));
  for (const type of objects) {
    const entity = type.directives?.find((d) => d.name.value === 'entity');
    if (!entity) continue;
    entities.set(type.name.value, {
      name: type.name.value,
      keyFields: new Set(['partitionKey', 'rowKey'].flatMap((arg) => placeholders(stringArgument(entity, arg)))),
      stored: (type.fields ?? []).filter(
        (f) =>
          !f.arguments?.length &&
          (leaf.has(namedType(f.type)) || values.has(namedType(f.type))) &&
          !(f.name.value === 'etag' && namedType(f.type) === 'String') &&
          !f.directives?.some((d) => NOT_STORED.has(d.name.value)),
      ),
    });
  }
  return { declared, referenced, entities, values };
}

/** The text of each type tablegraph can generate for `document`, by name. */
function generatorsFor(document: DocumentNode, entities: Map<string, EntityShape>, values: Map<string, ObjectTypeDefinitionNode>): Map<string, () => string> {
  const generators = new Map<string, () => string>();
  for (const v of values.values()) generators.set(`${v.name.value}Input`, () => valueInput(v, values));
  generators.set('PageInfo', pageInfo);
  // A connection of an interface (the guide's "Inheritance relationships"): its nodes are of its implementations.
  for (const def of document.definitions) {
    if (def.kind !== Kind.INTERFACE_TYPE_DEFINITION) continue;
    const name = def.name.value;
    generators.set(
      `${name}Edge`,
      () => `"""An edge of a ${name}Connection: one ${name} and the cursor after it."""\ntype ${name}Edge { cursor: String! node: ${name}! }`,
    );
    generators.set(
      `${name}Connection`,
      () =>
        `"""A page of ${name} entities, each as its own type (a Relay connection): pass pageInfo.endCursor as \`after\` for the next page."""\ntype ${name}Connection { edges: [${name}Edge!]! pageInfo: PageInfo! }`,
    );
  }
  for (const element of ['Int', 'Float']) {
    generators.set(
      `${element}SeriesIncrement`,
      () =>
        `"""What an INCREMENT adds to one element of a @series of ${element}."""\ninput ${element}SeriesIncrement {\n"""The element (0-based)."""\nat: Int!\n"""Added to it (may be negative)."""\nby: ${element}!\n}`,
    );
  }
  for (const e of entities.values()) {
    generators.set(`Increment${e.name}Input`, () => incrementInput(e));
    generators.set(
      `${e.name}Edge`,
      () => `"""An edge of a ${e.name}Connection: one ${e.name} and the cursor after it."""\ntype ${e.name}Edge { cursor: String! node: ${e.name}! }`,
    );
    generators.set(
      `${e.name}Connection`,
      () =>
        `"""A page of ${e.name} entities (a Relay connection): pass pageInfo.endCursor as \`after\` for the next page."""\ntype ${e.name}Connection { edges: [${e.name}Edge!]! pageInfo: PageInfo! }`,
    );
    generators.set(
      `${e.name}Payload`,
      () => `"""The ${e.name} as written (for a delete: as it was)."""\ntype ${e.name}Payload { ${lowerFirst(e.name)}: ${e.name}! }`,
    );
    generators.set(`Create${e.name}Input`, () => input(e, 'Create', `The new ${e.name}: CONFLICT when one with these keys exists.`, values));
    generators.set(`Update${e.name}Input`, () => input(e, 'Update', 'Merge: only the fields given change; a field given as null is cleared.', values));
    generators.set(`Replace${e.name}Input`, () => input(e, 'Replace', 'Replace: fields not given become null.', values));
    generators.set(`Delete${e.name}Input`, () => input(e, 'Delete', `The keys of the ${e.name} to delete.`, values));
    generators.set(`Move${e.name}Input`, () => moveInput(e));
    generators.set(`${e.name}Change`, () => changeType(e));
  }
  generators.set(
    'ChangeKind',
    () =>
      '"""What a write did to an entity."""\nenum ChangeKind {\n"""It was created."""\nCREATED\n"""It was changed."""\nUPDATED\n"""It was deleted."""\nDELETED\n}',
  );

  return generators;
}

function pageInfo(): string {
  return `"""Where a page of a connection sits in the whole list."""
type PageInfo { hasNextPage: Boolean! hasPreviousPage: Boolean! startCursor: String endCursor: String }`;
}

function isBlob(f: FieldDefinitionNode): boolean {
  return Boolean(f.directives?.some((d) => d.name.value === 'blob'));
}

function isSeries(f: FieldDefinitionNode): boolean {
  return Boolean(f.directives?.some((d) => d.name.value === 'series'));
}

/** An INCREMENT input: the key fields, and for each `@series` field what to add to which element (nullable). */
function incrementInput(e: EntityShape): string {
  const keys = e.stored.filter((f) => e.keyFields.has(f.name.value));
  const lines = [
    ...keys.map((f) => field(f, print(f.type))),
    ...e.stored.filter(isSeries).map((f) => `"""What to add to ${f.name.value}; omitted: it stays."""\n${f.name.value}: ${namedType(f.type)}SeriesIncrement`),
  ];
  return `"""The keys of the ${e.name} (created when absent) and what to add to its series."""\ninput Increment${e.name}Input {\n${lines.join('\n')}\n}`;
}

/**
 * A value object's input (`DimensionsInput` for `Dimensions`): its fields with their types and nullability, a nested
 * value object's as its own input.
 */
function valueInput(v: ObjectTypeDefinitionNode, values: Map<string, ObjectTypeDefinitionNode>): string {
  const lines = (v.fields ?? []).map((f) => field(f, print(asInput(f.type, values))));
  const description = `${v.name.value} as a write gives it: kept inside the entity that holds it, all its fields at once.`;
  return `"""${description}"""\ninput ${v.name.value}Input {\n${lines.join('\n')}\n}`;
}

/** A field's type as an input takes it: a value object named as its input, every wrapper kept. */
function asInput(type: TypeNode, values: Map<string, ObjectTypeDefinitionNode>): TypeNode {
  if (type.kind === Kind.NAMED_TYPE) return values.has(type.name.value) ? { ...type, name: { ...type.name, value: `${type.name.value}Input` } } : type;
  if (type.kind === Kind.LIST_TYPE) return { ...type, type: asInput(type.type, values) };
  return { ...type, type: asInput(type.type, values) as typeof type.type };
}

function input(e: EntityShape, kind: 'Create' | 'Update' | 'Replace' | 'Delete', description: string, values: Map<string, ObjectTypeDefinitionNode>): string {
  const lines: string[] = [];
  const keys = e.stored.filter((f) => e.keyFields.has(f.name.value));
  // A series is changed by INCREMENT only.
  const others = e.stored.filter((f) => !e.keyFields.has(f.name.value) && !isSeries(f));
  for (const f of keys) lines.push(field(f, print(f.type)));
  if (kind !== 'Create') {
    lines.push('"""The ETag read: the write fails with CONFLICT if the entity changed since. Omitted: unconditional."""\nifMatch: String');
  }
  // A @blob field takes what to upload (BlobInput), never a blob name.
  const type = (f: FieldDefinitionNode) => (isBlob(f) ? 'BlobInput' : print(asInput(kind === 'Update' ? nullable(f.type) : f.type, values)));
  if (kind !== 'Delete') for (const f of others) lines.push(field(f, type(f)));
  return `"""${description}"""\ninput ${kind}${e.name}Input {\n${lines.join('\n')}\n}`;
}

/** What a subscription (`@subscribe`) reports of a write: its kind, the entity's keys, the entity now and a cursor. */
function changeType(e: EntityShape): string {
  const keys = e.stored.filter((f) => e.keyFields.has(f.name.value));
  const lines = [
    '"""What the write did."""\nkind: ChangeKind!',
    ...keys.map((f) => field(f, print(f.type))),
    `"""The ${e.name} as stored when the change was read (null once deleted, or when @auth hides it from the subscriber)."""\nnode: ${e.name}`,
    '"""Pass as `after` to resume after this change: a client that reconnects with it misses no write made since."""\ncursor: String!',
  ];
  return `"""A write to a ${e.name}, as a subscription reports it."""\ntype ${e.name}Change {\n${lines.join('\n')}\n}`;
}

/** A MOVE input: the key fields, ifMatch, and `to<Field>` for each key field (nullable: omitted, the key stays). */
function moveInput(e: EntityShape): string {
  const keys = e.stored.filter((f) => e.keyFields.has(f.name.value));
  const lines = [
    ...keys.map((f) => field(f, print(f.type))),
    '"""The ETag read: the move is refused with CONFLICT if the entity changed since. Omitted: unconditional."""\nifMatch: String',
    ...keys.map(
      (f) => `"""The new ${f.name.value}; omitted: it stays."""\nto${f.name.value.charAt(0).toUpperCase()}${f.name.value.slice(1)}: ${print(nullable(f.type))}`,
    ),
  ];
  return `"""Where the ${e.name} goes: queued, then carried out by the worker (copy, then delete)."""\ninput Move${e.name}Input {\n${lines.join('\n')}\n}`;
}

function field(f: FieldDefinitionNode, type: string): string {
  return `${f.description ? `${JSON.stringify(f.description.value)}\n` : ''}${f.name.value}: ${type}`;
}

function nullable(type: TypeNode): TypeNode {
  return type.kind === Kind.NON_NULL_TYPE ? type.type : type;
}

function namedType(type: TypeNode): string {
  return type.kind === Kind.NAMED_TYPE ? type.name.value : namedType(type.type);
}

function stringArgument(d: ConstDirectiveNode, name: string): string {
  const arg = d.arguments?.find((a) => a.name.value === name);
  return arg?.value.kind === Kind.STRING ? arg.value.value : '';
}

/** The field names of a key template's placeholders: `empid_{id:08}` → id. */
function placeholders(template: string): string[] {
  return [...template.matchAll(/\{([A-Za-z_][A-Za-z0-9_]*)(?::[^}]*)?\}/g)].map((m) => m[1]);
}

function lowerFirst(s: string): string {
  return s.charAt(0).toLowerCase() + s.slice(1);
}
