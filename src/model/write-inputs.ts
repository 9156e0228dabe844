/**
 * The names of what the generated write inputs and entity types hold besides stored fields: what the compiler
 * generates and the resolvers read, in one place.
 */

/** The input type of a `@blob` field (schema/directives.graphql): what to upload. */
export const BLOB_INPUT = 'BlobInput';

/** The input field that carries the ETag a client read (UPDATE, REPLACE, DELETE). */
export const IF_MATCH_FIELD = 'ifMatch';

/** The field that exposes the entity's ETag; not stored. */
export const ETAG_FIELD = 'etag';

/** The input field that gives a key field's new value in a MOVE: `customerId` → `toCustomerId`. */
export function moveField(key: string): string {
  return `to${key.charAt(0).toUpperCase()}${key.slice(1)}`;
}
