/**
 * The compiler pass for an Apollo Federation 2 subgraph (docs/federation.md): every `@key` becomes the point query
 * `_entities` serves it with — the entity's own keys, or a unique `@index`'s — or a located error; and a federation
 * directive that means nothing for a stored type is refused where it is written.
 */
import {
  Kind,
  type ConstDirectiveNode,
  type DocumentNode,
  type InterfaceTypeDefinitionNode,
  type InterfaceTypeExtensionNode,
  type ObjectTypeDefinitionNode,
  type ObjectTypeExtensionNode,
} from 'graphql';
import type { EntityModel, FederationKey, FederationModel, IndexModel, Model, PointPath } from '../model/types';
import { ownKeyPath } from './own-key-path';
import type { KeyTemplate } from '../model/key-template';
import { TENANT_FIELD } from '../model/tenancy';
import { federationDirective, type FederationLink } from './federation-link';
import type { SchemaProblems } from './schema-errors';

/** Federation directives tablegraph refuses, and why: each asks for a field tablegraph does not store or serve. */
const REFUSED: Record<string, string> = {
  external:
    'marks a field another subgraph resolves, but every field of a tablegraph type is stored in its table or served by its access path: declare it only in the subgraph that resolves it',
  requires: "computes a field from another subgraph's fields, but a tablegraph field is a stored property or an access path, never computed",
  provides: "says a field returns other subgraphs' fields, but tablegraph returns only its own stored types",
  interfaceObject: 'stands for an interface of another subgraph, but a tablegraph type is stored: its own @entity type or a stored interface',
  extends: 'is Federation 1 syntax: in Federation 2, write the type with @key (no extension needed)',
  context: 'passes values down to @fromContext arguments, and a tablegraph field takes its values from its keys, not from context',
  fromContext: 'takes an argument from an ancestor, and a tablegraph field takes its values from its keys, not from context',
};

/**
 * @param document the document the subgraph schema was built from (federation-link.ts withGeneratedKeys): its nodes
 *   carry the locations errors cite
 * @param link the schema's federation link (federation-link.ts)
 * @param sdl what `_service { sdl }` serves (federation-link.ts subgraphSdl)
 * @returns every keyed type's keys with their point queries
 */
export function buildFederation(document: DocumentNode, model: Model, link: FederationLink, sdl: string, problems: SchemaProblems): FederationModel {
  const keys = new Map<string, FederationKey[]>();
  const keyName = link.names.get('key')!;
  for (const def of document.definitions) {
    if (!TYPE_KINDS.has(def.kind)) continue;
    const type = def as ObjectTypeDefinitionNode | ObjectTypeExtensionNode | InterfaceTypeDefinitionNode | InterfaceTypeExtensionNode;
    const name = type.name.value;
    refuseDirectives(type, link, problems);
    const declared = (type.directives ?? []).filter((d) => d.name.value === keyName);
    if (declared.length === 0) continue;
    const entity = model.entities.get(name);
    if (!entity || entity.implementations) {
      const why = entity
        ? 'is a stored interface: resolve its implementations by their own keys'
        : 'is not an @entity type: tablegraph resolves only the types it stores';
      problems.add(name, `@key: ${name} ${why}`, declared[0]);
      continue;
    }
    const typeKeys = keys.get(name) ?? [];
    for (const d of declared) {
      const key = compileKey(entity, d, problems);
      if (key) typeKeys.push(key);
    }
    keys.set(name, typeKeys);
  }
  return { keys, sdl };
}

const TYPE_KINDS = new Set<string>([Kind.OBJECT_TYPE_DEFINITION, Kind.OBJECT_TYPE_EXTENSION, Kind.INTERFACE_TYPE_DEFINITION, Kind.INTERFACE_TYPE_EXTENSION]);

/** One `@key` of an entity type: its point query, or a problem recorded. */
function compileKey(entity: EntityModel, d: ConstDirectiveNode, problems: SchemaProblems): FederationKey | undefined {
  const fields = argument(d, 'fields');
  if (fields === undefined || /[{}()]/.test(fields)) return undefined; // the subgraph's validation, or refuseNestedKeys, refused it
  const names = fields.trim().split(/[\s,]+/);
  const resolvable = d.arguments?.find((a) => a.name.value === 'resolvable')?.value;
  if (resolvable?.kind === Kind.BOOLEAN && !resolvable.value) return { fields: names };
  const path = keyPath(entity, names);
  if (typeof path !== 'string') return { fields: names, path };
  problems.add(entity.name, `@key(fields: "${fields}") cannot be served by a point query: ${path}`, d);
  return undefined;
}

/**
 * Records a problem at each `@key` whose fields select into another type (`"id owner { id }"`): an entity's keys
 * are its own stored fields. Checked on the document, before `@apollo/subgraph` builds the schema.
 * @returns whether there was one
 */
export function refuseNestedKeys(document: DocumentNode, link: FederationLink, problems: SchemaProblems): boolean {
  let found = false;
  const key = link.names.get('key');
  for (const def of document.definitions) {
    if (!TYPE_KINDS.has(def.kind)) continue;
    const type = def as ObjectTypeDefinitionNode | ObjectTypeExtensionNode | InterfaceTypeDefinitionNode | InterfaceTypeExtensionNode;
    for (const d of type.directives ?? []) {
      const fields = d.name.value === key ? argument(d, 'fields') : undefined;
      if (fields === undefined || !/[{}()]/.test(fields)) continue;
      problems.add(type.name.value, `@key(fields: "${fields}"): a nested key names fields of another type, and an entity's keys are its own stored fields`, d);
      found = true;
    }
  }
  return found;
}

/** The string value of a directive's argument, if it is a string. */
function argument(d: ConstDirectiveNode, name: string): string | undefined {
  const v = d.arguments?.find((a) => a.name.value === name)?.value;
  return v?.kind === Kind.STRING ? v.value : undefined;
}

/** Records a problem at each refused federation directive on the type, its fields and their arguments. */
function refuseDirectives(
  type: ObjectTypeDefinitionNode | ObjectTypeExtensionNode | InterfaceTypeDefinitionNode | InterfaceTypeExtensionNode,
  link: FederationLink,
  problems: SchemaProblems,
): void {
  const name = type.name.value;
  const at: Array<{ coordinate: string; directives: readonly ConstDirectiveNode[] | undefined }> = [{ coordinate: name, directives: type.directives }];
  for (const f of type.fields ?? []) {
    at.push({ coordinate: `${name}.${f.name.value}`, directives: f.directives });
    for (const a of f.arguments ?? []) at.push({ coordinate: `${name}.${f.name.value}(${a.name.value}:)`, directives: a.directives });
  }
  for (const { coordinate, directives } of at) {
    for (const d of directives ?? []) {
      const spec = federationDirective(link, d.name.value);
      if (spec && REFUSED[spec]) problems.add(coordinate, `@${d.name.value} ${REFUSED[spec]}`, d);
    }
  }
}

/** A template's fields other than the tenant's (which comes from the request's token, never from a representation). */
function ownFields(t: KeyTemplate | undefined): string[] {
  return t ? t.fields.filter((f) => f !== TENANT_FIELD) : [];
}

/** The fields an index entity's keys are made of, each once. */
function indexFields(index: IndexModel): string[] {
  return [...new Set([...ownFields(index.layout.partitionKey), ...ownFields(index.layout.rowKey)])];
}

function sameSet(a: string[], b: string[]): boolean {
  const set = new Set(b);
  return new Set(a).size === set.size && a.every((x) => set.has(x));
}

/**
 * The point query that serves a key: the entity's own keys when the key's fields are the fields of its table,
 * PartitionKey and RowKey templates; else a unique index whose keys are made of exactly those fields.
 * @returns the path, or why no point query serves the key
 */
function keyPath(entity: EntityModel, fields: string[]): PointPath | string {
  const { tableTemplate, partitionKey, rowKey } = entity.layout;
  const primary = [...new Set([...ownFields(tableTemplate), ...ownFields(partitionKey), ...ownFields(rowKey)])];
  if (sameSet(fields, primary))
    return ownKeyPath(entity, entity.layout, { coordinate: `${entity.name}.@key`, parentType: entity.name, fieldName: '_entities' });
  for (const index of entity.indexes.values()) {
    if (index.unique && sameSet(fields, indexFields(index))) {
      return ownKeyPath(entity, index.layout, { coordinate: `${entity.name}.@key`, parentType: entity.name, fieldName: '_entities' }, index);
    }
  }
  const unique = [...entity.indexes.values()].filter((i) => i.unique).map((i) => `"${indexFields(i).join(' ')}" (@index ${i.name})`);
  return `${entity.name}'s keys take "${primary.join(' ')}"${unique.length ? `, its unique indexes ${unique.join(', ')}` : ' and it has no unique @index'}; anything else would be a scan`;
}
