/**
 * Writes made in the browser, kept in IndexedDB in the order they were made and sent one at a time, each with the
 * ETag of the entity it was based on (`ifMatch`), whenever the API answers — at once online, later after a time
 * offline or a reload.
 *
 * | answer | what the outbox does |
 * | --- | --- |
 * | the write's payload | acknowledged: the entity as stored replaces the local one; later writes to the same entity based on the ETag it had are based on the new one |
 * | no answer (offline, the connection lost) or a code that says try again (`STORAGE_BUSY`, `RATE_LIMITED`, …) | kept, sent again later: its outcome is unknown |
 * | `CONFLICT` (`ETagMismatch`, `EntityAlreadyExists`) or `NOT_FOUND` | the entity is read: when it holds what this write sent (a create or an update resent after a lost answer; a delete's entity gone) it is acknowledged, once; otherwise a **conflict**, set aside with both versions for the app to choose |
 * | any other code (`BAD_USER_INPUT`, `FORBIDDEN`, …) | rejected: dropped, and handed to the app with its error |
 */
import { GraphQLRequestError, NetworkError, graphqlRequest } from './graphql-http.js';

/** Codes after which the same write may succeed later: it stays first in the outbox. */
const TRY_AGAIN = new Set(['RATE_LIMITED', 'OVERLOADED', 'REQUEST_TIMEOUT', 'STORAGE_UNAVAILABLE', 'STORAGE_BUSY', 'ACCESS_PATH_BUILDING']);
/** Codes that say the entity is not as the write expected: it is read to tell a lost answer from a conflict. */
const COMPARE = new Set(['CONFLICT', 'NOT_FOUND']);

/**
 * @typedef {object} WriteDefinition how writes of one kind are sent and checked; registered by name, since the
 *   outbox stores only data
 * @property {string} mutation a mutation taking `$input`
 * @property {(data: any) => any} payload where the written entity is in its answer (null for a delete)
 * @property {{ query: string, variables: (input: any) => Record<string, unknown>, pick: (data: any) => any }} read
 *   the point query of the written entity, its variables from the write's input, and where the entity is in its answer
 */

/**
 * @typedef {object} QueuedWrite
 * @property {number} [seq] its place in the outbox
 * @property {string} definition the name of its WriteDefinition
 * @property {'create' | 'update' | 'delete'} kind
 * @property {string} partition the followed partition the entity is in (local name)
 * @property {string} key the entity's key within it
 * @property {Record<string, unknown>} input the mutation's input, without `ifMatch`
 * @property {string | null} baseEtag the ETag of the entity as the edit saw it (null: a create, or unconditional)
 * @property {Record<string, unknown> | null} node the entity as the write makes it (null: a delete)
 * @property {{ create?: string, update?: string }} [resendAs] the definitions to send it again with after a conflict,
 *   when the entity is no longer as it was: a create's as an update (the entity exists now), an update's as a create
 *   (it was deleted)
 */

/**
 * Whether the stored entity holds what `write` sent: every field of its input that the entity has, equal.
 * @param {Record<string, unknown> | null} stored
 * @param {QueuedWrite} write
 */
export function holdsWrite(stored, write) {
  if (write.kind === 'delete') return stored === null;
  if (stored === null) return false;
  return Object.entries(write.input).every(([field, value]) => !(field in stored) || JSON.stringify(stored[field]) === JSON.stringify(value));
}

/**
 * Sends what is in the outbox, first to last, until it is empty or the API does not answer.
 * @param {import('idb').IDBPDatabase} db
 * @param {{ url: string, headers?: () => Record<string, string> }} api
 * @param {Map<string, WriteDefinition>} definitions
 * @param {{ settled: () => void, conflict: (c: any) => void, rejected: (write: QueuedWrite, error: Error) => void }} on
 * @returns {Promise<'empty' | 'waiting'>} `waiting`: a write could not be sent now (offline, try again later)
 */
export async function flushOutbox(db, api, definitions, on) {
  for (;;) {
    const cursor = await db.transaction('outbox').store.openCursor();
    if (!cursor) return 'empty';
    const write = cursor.value;
    const definition = definitions.get(write.definition);
    if (!definition) throw new Error(`no write definition named ${write.definition}: define it before the outbox is flushed`);
    const outcome = await send(api, definition, write);
    if (outcome.kind === 'later') return 'waiting';
    if (outcome.kind === 'stored') await acknowledge(db, write, outcome.node);
    else if (outcome.kind === 'conflict') {
      const tx = db.transaction(['outbox', 'conflicts'], 'readwrite');
      await tx.objectStore('outbox').delete(write.seq);
      await tx.objectStore('conflicts').put({ seq: write.seq, write, stored: outcome.stored });
      await tx.done;
      on.conflict({ seq: write.seq, write, mine: write.node, stored: outcome.stored });
    } else {
      await db.delete('outbox', write.seq);
      on.rejected(write, outcome.error);
    }
    on.settled();
  }
}

/** @returns {Promise<{ kind: 'stored', node: any } | { kind: 'later' } | { kind: 'conflict', stored: any } | { kind: 'rejected', error: Error }>} */
async function send(api, definition, write) {
  const input = write.baseEtag && write.kind !== 'create' ? { ...write.input, ifMatch: write.baseEtag } : write.input;
  try {
    return { kind: 'stored', node: definition.payload(await graphqlRequest(api, definition.mutation, { input })) ?? null };
  } catch (e) {
    if (e instanceof NetworkError || (e instanceof GraphQLRequestError && TRY_AGAIN.has(e.code))) return { kind: 'later' };
    if (!(e instanceof GraphQLRequestError) || !COMPARE.has(e.code)) return { kind: 'rejected', error: e };
  }
  // The entity is not as this write expected: its own earlier attempt (an answer lost), or someone else's write.
  let stored;
  try {
    stored = definition.read.pick(await graphqlRequest(api, definition.read.query, definition.read.variables(write.input))) ?? null;
  } catch (e) {
    if (e instanceof NetworkError || (e instanceof GraphQLRequestError && TRY_AGAIN.has(e.code))) return { kind: 'later' };
    return { kind: 'rejected', error: e };
  }
  return holdsWrite(stored, write) ? { kind: 'stored', node: stored } : { kind: 'conflict', stored };
}

/**
 * An acknowledged write: out of the outbox, the entity as stored in the local copy, and the later writes to the same
 * entity that were based on what this one replaced now based on what it stored.
 */
async function acknowledge(db, write, node) {
  const tx = db.transaction(['outbox', 'nodes'], 'readwrite');
  await tx.objectStore('outbox').delete(write.seq);
  if (node) await tx.objectStore('nodes').put({ partition: write.partition, key: write.key, node });
  else await tx.objectStore('nodes').delete([write.partition, write.key]);
  let cursor = await tx.objectStore('outbox').openCursor();
  while (cursor) {
    const later = cursor.value;
    if (later.partition === write.partition && later.key === write.key && later.baseEtag === write.baseEtag) {
      await cursor.update({ ...later, baseEtag: node?.etag ?? null });
    }
    cursor = await cursor.continue();
  }
  await tx.done;
}
