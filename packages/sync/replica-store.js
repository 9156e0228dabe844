/**
 * The browser's copy, in IndexedDB (through idb): one database per app, three object stores.
 *
 * | store | key | value |
 * | --- | --- | --- |
 * | `nodes` | `[partition, key]` | `{ partition, key, node }`: an entity as the server last said it (its `etag` included) |
 * | `partitions` | `partition` | `{ partition, cursor, loaded }`: the last change applied (`after` to resume), and whether the first load ended |
 * | `outbox` | an increasing number | a write not yet acknowledged, in the order it was made (outbox.js) |
 * | `conflicts` | the outbox number | a write the server refused because the entity changed: it waits for the app's choice |
 */
import { openDB } from 'idb';

const VERSION = 1;

/**
 * Opens (or creates) the app's database.
 * @param {string} name the database name: one per app and user (a page of another user must not read this copy)
 * @returns {Promise<import('idb').IDBPDatabase>}
 */
export function openReplicaStore(name) {
  return openDB(name, VERSION, {
    upgrade(db) {
      const nodes = db.createObjectStore('nodes', { keyPath: ['partition', 'key'] });
      nodes.createIndex('byPartition', 'partition');
      db.createObjectStore('partitions', { keyPath: 'partition' });
      db.createObjectStore('outbox', { keyPath: 'seq', autoIncrement: true });
      db.createObjectStore('conflicts', { keyPath: 'seq' });
    },
  });
}

/**
 * The entities of one partition held locally, each with its key.
 * @returns {Promise<Array<{ key: string, node: Record<string, unknown> }>>}
 */
export async function partitionNodes(db, partition) {
  return (await db.getAllFromIndex('nodes', 'byPartition', partition)).map((r) => ({ key: r.key, node: r.node }));
}

/** Forgets where a partition's changes were followed to: its next subscription reads it again whole. */
export async function forgetCursor(db, partition) {
  await db.delete('partitions', partition);
}
