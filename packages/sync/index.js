/**
 * tablegraph's offline-first client for browsers: partitions a page follows are kept in IndexedDB and current from
 * their `@subscribe` fields; the page reads them locally, online or not; writes made offline wait in an outbox and
 * are sent, in order, with the ETag they were based on, when the API answers again; a write the entity changed under
 * is handed back to the app with both versions (never overwritten in silence).
 *
 * | call | what it does |
 * | --- | --- |
 * | `openReplica({ name, url, streamUrl?, headers? })` | opens the app's database; `name` one per app and user |
 * | `replica.follow(spec)` | follows a partition (follow.js): loaded once, then kept current |
 * | `replica.nodes(partition)` | the partition as the page shows it: the stored entities with the outbox's writes on top, each with `pending` |
 * | `replica.define(name, definition)` | how writes named `name` are sent and read back (outbox.js WriteDefinition) |
 * | `replica.write(write)` | queues a write and sends it when it can; the local copy shows it at once |
 * | `replica.conflicts()` / `replica.resolve(seq, 'mine' \| 'stored')` | the writes set aside, and the app's choice for one |
 * | `replica.on(event, listener)` | `change` (the local copy changed), `status` (a partition's), `conflict`, `rejected`, `outbox` (`empty`, or `waiting`: a write could not be sent now) |
 * | `reachability(url)` | why the API gives no answer: `offline`, `origin-refused` (CORS), `unreachable` or `reachable` (graphql-http.js) |
 *
 * @example
 * const replica = await openReplica({ name: 'hr:alice', url: 'https://api.example/graphql' });
 * replica.follow({ partition: 'Employee/Sales', load: { … }, subscription: { … }, key: (e) => e.id });
 * replica.on('change', () => render(replica.nodes('Employee/Sales')));
 */
import { followPartition } from './follow.js';
import { flushOutbox } from './outbox.js';
import { openReplicaStore, partitionNodes } from './replica-store.js';

export { reachability } from './graphql-http.js';

/** How often the outbox is tried again while it waits for the API (ms), besides the browser's `online` event. */
const RETRY_EVERY_MS = 3000;

/**
 * Opens the replica.
 * @param {{ name: string, url: string, streamUrl?: string, headers?: () => Record<string, string> }} options
 *   `url` the GraphQL endpoint; `streamUrl` its SSE endpoint (default: `url` + `/stream`); `headers` each request's (a token)
 */
export async function openReplica(options) {
  const db = await openReplicaStore(options.name);
  const api = { url: options.url, streamUrl: options.streamUrl ?? `${options.url}/stream`, headers: options.headers };
  const definitions = new Map();
  const listeners = { change: new Set(), status: new Set(), conflict: new Set(), rejected: new Set(), outbox: new Set() };
  const emit = (event, ...args) => listeners[event].forEach((l) => l(...args));
  const follows = [];
  let flushing = null;
  let again = false;

  /** Sends the outbox; one flush at a time, and one more when a write came during it. */
  const flush = () => {
    if (flushing) {
      again = true;
      return flushing;
    }
    flushing = flushOutbox(db, api, definitions, {
      settled: () => emit('change'),
      conflict: (c) => emit('conflict', c),
      rejected: (w, e) => emit('rejected', w, e),
    })
      .catch((e) => {
        emit('rejected', null, e);
        return 'waiting';
      })
      .then((state) => {
        emit('outbox', state);
        return state;
      })
      .finally(() => {
        flushing = null;
        if (again) {
          again = false;
          void flush();
        }
      });
    return flushing;
  };
  const timer = setInterval(() => void flush(), RETRY_EVERY_MS);
  const online = () => void flush();
  globalThis.addEventListener?.('online', online);

  return {
    follow(spec) {
      follows.push(followPartition(db, api, spec, { changed: () => emit('change'), status: (s, e) => emit('status', spec.partition, s, e) }));
    },
    /** @param {string} name @param {import('./outbox.js').WriteDefinition} definition */
    define(name, definition) {
      definitions.set(name, definition);
      void flush();
    },
    /**
     * The partition as the page shows it: stored entities, then each queued write applied in order (a conflict
     * shows the stored version until the app chooses).
     * @returns {Promise<Array<Record<string, unknown> & { pending?: boolean }>>}
     */
    async nodes(partition) {
      const shown = new Map((await partitionNodes(db, partition)).map((r) => [r.key, r.node]));
      for (const w of await db.getAll('outbox')) {
        if (w.partition !== partition) continue;
        if (w.kind === 'delete') shown.delete(w.key);
        else shown.set(w.key, { ...shown.get(w.key), ...w.node, pending: true });
      }
      return [...shown.values()];
    },
    /** @param {import('./outbox.js').QueuedWrite} write */
    async write(write) {
      await db.add('outbox', write);
      emit('change');
      void flush();
    },
    /** @returns {Promise<Array<{ seq: number, write: any, stored: any }>>} */
    conflicts() {
      return db.getAll('conflicts');
    },
    /**
     * The app's choice for a conflict: `mine` sends its version again, based on the stored one's ETag (an update,
     * or a delete); `stored` keeps what is stored and drops the write.
     */
    async resolve(seq, choice) {
      const c = await db.get('conflicts', seq);
      if (!c) throw new Error(`no conflict ${seq}`);
      const tx = db.transaction(['conflicts', 'nodes', 'outbox'], 'readwrite');
      await tx.objectStore('conflicts').delete(seq);
      const { partition, key } = c.write;
      if (c.stored) await tx.objectStore('nodes').put({ partition, key, node: c.stored });
      else await tx.objectStore('nodes').delete([partition, key]);
      if (choice === 'mine') {
        const kind = c.write.kind === 'delete' ? 'delete' : c.stored ? 'update' : 'create';
        const definition = c.write.kind === kind ? c.write.definition : c.write.resendAs?.[kind];
        if (!definition) throw new Error(`the write ${c.write.definition} names no definition to send a ${kind} with (resendAs.${kind})`);
        const { seq: _set, ...write } = c.write; // a new place, last in the outbox
        await tx.objectStore('outbox').add({ ...write, kind, definition, baseEtag: c.stored?.etag ?? null });
      }
      await tx.done;
      emit('change');
      void flush();
    },
    /** Writes waiting to be sent. */
    pending() {
      return db.count('outbox');
    },
    flush,
    on(event, listener) {
      listeners[event].add(listener);
      return () => listeners[event].delete(listener);
    },
    close() {
      clearInterval(timer);
      globalThis.removeEventListener?.('online', online);
      for (const f of follows) f.stop();
      db.close();
    },
  };
}
