/**
 * Compiles `@blob` fields (the guide's "Large entities pattern"): reads each field's container, size and type rules,
 * and refuses uses a blob cannot have. Blob names and containers at run time are src/model/blob-fields.ts.
 */
import { getDirectiveValues, isListType, isNonNullType, type DirectiveNode, type GraphQLField, type GraphQLSchema } from 'graphql';
import type { SchemaProblems } from './schema-errors';
import type { BlobSpec, Model } from '../model/types';
import { blobFields } from '../model/blob-fields';
import { isReservedName, RESERVED_NAME_PREFIX } from '../storage/reserved-names';

const MIN_SECONDS = 60;

const MAX_SECONDS = 7 * 24 * 3600;

/** The largest `maxBytes` (bytes): one Put Blob of a block blob takes 5000 MiB, a request body far less. */
const MAX_BYTES = 256 * 1024 * 1024;

const CONTAINER = /^[a-z0-9](?!.*--)[a-z0-9-]{1,61}[a-z0-9]$/;

/**
 * The `@blob` of a stored field, checked: on a nullable String without arguments, a valid container name (with the
 * table prefix), `maxBytes` from 1 to 256 MiB, `expiresInSeconds` from 60 s to 7 days.
 * @returns the spec, or undefined (with problems) when the field has none or it is wrong
 */
export function readBlob(
  schema: GraphQLSchema,
  field: GraphQLField<unknown, unknown>,
  coordinate: string,
  tablePrefix: string,
  problems: SchemaProblems,
): BlobSpec | undefined {
  const node = field.astNode?.directives?.find((d) => d.name.value === 'blob');
  const def = schema.getDirective('blob');
  if (!node || !def) return undefined;
  const v = getDirectiveValues(def, { directives: [node] }) as { container: string; maxBytes: number; contentTypes?: string[]; expiresInSeconds: number };
  const container = `${tablePrefix}${v.container}`.toLowerCase();
  const fail = (message: string) => {
    problems.add(coordinate, `@blob: ${message}`, node as DirectiveNode);
    return undefined;
  };
  if (isNonNullType(field.type) || isListType(field.type) || (field.type as { name?: string }).name !== 'String' || field.args.length > 0) {
    return fail("goes on a nullable String field without arguments: the entity holds the blob's name, null when there is none");
  }
  if (!CONTAINER.test(container)) return fail(`container "${container}" is not a container name (3–63 lowercase letters, digits and single hyphens)`);
  if (isReservedName(v.container))
    return fail(`container "${v.container}": names starting with "${RESERVED_NAME_PREFIX.toLowerCase()}" are tablegraph's own; choose another name`);
  if (!(v.maxBytes >= 1 && v.maxBytes <= MAX_BYTES)) return fail(`maxBytes: ${v.maxBytes}: between 1 and ${MAX_BYTES}`);
  if (!(v.expiresInSeconds >= MIN_SECONDS && v.expiresInSeconds <= MAX_SECONDS))
    return fail(`expiresInSeconds: ${v.expiresInSeconds}: between ${MIN_SECONDS} and ${MAX_SECONDS}`);
  const contentTypes = v.contentTypes ?? [];
  const bad = contentTypes.find((t) => !/^[\w.+-]+\/[\w.+-]+$/.test(t));
  if (bad !== undefined) return fail(`contentTypes: "${bad}" is not a type/subtype`);
  return { container, maxBytes: v.maxBytes, contentTypes: contentTypes.map((t) => t.toLowerCase()), expiresInSeconds: v.expiresInSeconds };
}

/**
 * `@blob` fields on layouts whose cleanup cannot list one entity's blobs by its address: a wide entity (its parts)
 * and a table per period (dropped by `expire` with no message for its blobs).
 */
export function checkBlobUses(model: Model, problems: SchemaProblems): void {
  for (const entity of model.entities.values()) {
    for (const f of blobFields(entity)) {
      const why = entity.wide
        ? 'is stored as several entities (wide)'
        : entity.layout.tableTemplate
          ? 'has a table per period, dropped whole by expire'
          : undefined;
      if (why) problems.add(`${entity.name}.${f.name}`, `@blob: ${entity.name} ${why}, so its blobs could not be cleaned up with it`, entity.node);
    }
  }
}
