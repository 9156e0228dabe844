/**
 * A followed partition: loaded once, then kept current from its `@subscribe` field — resumed by cursor after any
 * disconnection, loaded again when the server can no longer resume (`ChangesExpired`, `ResumeTooLarge`) — and held
 * in IndexedDB, so that the page's reads are answered locally, offline too, after a reload.
 *
 * Order of a first load: the subscription starts first (without `after`: the server also sends the changes made up to
 * a second before it started), then the list is read page by page; the changes that came meanwhile are applied after
 * it. A change's `node` is the entity as read after that change, so applying the changes in order ends at the newest
 * version even where one of them is older than the list's.
 */
import { createClient } from 'graphql-sse';
import { graphqlRequest } from './graphql-http.js';
import { forgetCursor } from './replica-store.js';

/** Server reasons after which a cursor cannot be resumed: the partition is read again. */
const RELOAD_REASONS = new Set(['ChangesExpired', 'ResumeTooLarge']);
/** Waits between attempts to resubscribe (ms): the first after 0.5 s, then doubling up to 10 s. */
const RETRY_MS = { first: 500, max: 10_000 };

/**
 * @typedef {object} FollowSpec
 * @property {string} partition the local name of the partition (e.g. the type and its PartitionKey's values)
 * @property {{ query: string, variables: Record<string, unknown>, connection: (data: any) => { edges: Array<{ node: any }>, pageInfo: { hasNextPage: boolean, endCursor: string | null } } }} load
 *   a query of the partition's Relay connection taking `$after` (String), and where its connection is in the answer
 * @property {{ query: string, variables: Record<string, unknown>, event: (data: any) => { kind: string, cursor: string, node: any } }} subscription
 *   the `@subscribe` field's subscription taking `$after` (String), and where its change is in each event
 * @property {(nodeOrChange: any) => string} key an entity's key within the partition, from the entity or from a change (which carries the key fields)
 */

/**
 * Starts following a partition.
 * @param {import('idb').IDBPDatabase} db the replica store (replica-store.js)
 * @param {{ url: string, streamUrl: string, headers?: () => Record<string, string> }} api
 * @param {FollowSpec} spec
 * @param {{ changed: () => void, status: (s: 'loading' | 'live' | 'reconnecting' | 'signed-out', error?: Error) => void }} on
 * @returns {{ stop(): void }}
 */
export function followPartition(db, api, spec, on) {
  const client = createClient({ url: api.streamUrl, headers: () => ({ ...api.headers?.() }), retryAttempts: 0 });
  let stopped = false;
  let unsubscribe = () => {};
  let waitMs = RETRY_MS.first;
  /** Subscribes again now, when a wait for it is under way (the browser came back online). */
  let retry;
  const online = () => retry?.();
  globalThis.addEventListener?.('online', online);

  const apply = async (changes) => {
    const tx = db.transaction(['nodes', 'partitions'], 'readwrite');
    const row = (await tx.objectStore('partitions').get(spec.partition)) ?? { partition: spec.partition, loaded: false };
    for (const change of changes) {
      const key = spec.key(change.node ?? change);
      // A deleted entity, or one the subscriber may no longer see (@auth): not in the local copy.
      if (change.kind === 'DELETED' || !change.node) await tx.objectStore('nodes').delete([spec.partition, key]);
      else await tx.objectStore('nodes').put({ partition: spec.partition, key, node: change.node });
      row.cursor = change.cursor;
    }
    await tx.objectStore('partitions').put(row);
    await tx.done;
    on.changed();
  };

  /**
   * Reads the partition page by page. A first load (no copy held) puts each page in as it arrives, so the page draws
   * it as it comes; a copy held (shown while offline) is replaced whole once the new one is read, in one transaction.
   */
  const load = async (first) => {
    let after = null;
    const nodes = [];
    for (;;) {
      const connection = spec.load.connection(await graphqlRequest(api, spec.load.query, { ...spec.load.variables, after }));
      const page = connection.edges.map((e) => e.node);
      nodes.push(...page);
      if (first && page.length > 0) {
        const tx = db.transaction('nodes', 'readwrite');
        for (const node of page) await tx.store.put({ partition: spec.partition, key: spec.key(node), node });
        await tx.done;
        on.changed();
      }
      if (!connection.pageInfo.hasNextPage) break;
      after = connection.pageInfo.endCursor;
    }
    const tx = db.transaction(['nodes', 'partitions'], 'readwrite');
    const held = tx.objectStore('nodes').index('byPartition');
    for (const key of await held.getAllKeys(spec.partition)) await tx.objectStore('nodes').delete(key);
    for (const node of nodes) await tx.objectStore('nodes').put({ partition: spec.partition, key: spec.key(node), node });
    await tx.objectStore('partitions').put({ partition: spec.partition, loaded: true });
    await tx.done;
  };

  /** Each subscription's number: an event of an earlier one, come late, is not applied over a later one's. */
  let generation = 0;

  const start = async () => {
    if (stopped) return;
    const mine = ++generation;
    const row = await db.get('partitions', spec.partition);
    // No cursor (nothing changed since the load, or the server can no longer resume it): read again, keeping the
    // copy held until the new one is in.
    const resuming = !!row?.loaded && !!row.cursor;
    if (!row?.loaded) on.status('loading');
    let buffered = resuming ? null : [];
    /** Changes come, not yet applied (followed, not loading). */
    const arrived = [];
    let ended = null;
    let over = false;
    let queue = Promise.resolve();
    const enqueue = (work) => (queue = queue.then(work).catch((e) => on.status('reconnecting', e)));
    /** The subscription ended (an error, the server, the network): subscribe again, once, after a wait. */
    const again = () => {
      if (over) return;
      over = true;
      unsubscribe();
      if (stopped) return;
      if (ended?.code === 'UNAUTHENTICATED') return on.status('signed-out', ended.error);
      on.status('reconnecting', ended?.error);
      const reload = RELOAD_REASONS.has(ended?.reason);
      retry = () => {
        clearTimeout(timer);
        retry = undefined;
        void enqueue(async () => {
          if (reload) await forgetCursor(db, spec.partition);
          await start();
        });
      };
      const timer = setTimeout(retry, waitMs);
      waitMs = Math.min(waitMs * 2, RETRY_MS.max);
    };
    unsubscribe = client.subscribe(
      { query: spec.subscription.query, variables: { ...spec.subscription.variables, after: resuming ? row.cursor : null } },
      {
        next(result) {
          if (mine !== generation) return;
          if (result.errors?.length) {
            const e = result.errors[0];
            ended = { code: e.extensions?.code, reason: e.extensions?.reason, error: new Error(`${e.extensions?.code}: ${e.message}`) };
            return;
          }
          const change = spec.subscription.event(result.data);
          if (buffered) return void buffered.push(change);
          // The changes that came while the last were applied go in together: one transaction, one redraw (a resume
          // after a long drop delivers many at once).
          arrived.push(change);
          if (arrived.length === 1) enqueue(() => (mine === generation ? apply(arrived.splice(0)) : undefined));
        },
        error(e) {
          const first = Array.isArray(e) ? e[0] : undefined;
          ended ??= {
            code: first?.extensions?.code,
            reason: first?.extensions?.reason,
            error: e instanceof Error ? e : new Error(String(first?.message ?? e)),
          };
          again();
        },
        complete: again,
      },
      {
        connected() {
          waitMs = RETRY_MS.first;
          if (!buffered) return on.status('live');
          // Subscribed: now the list, then what changed while it was read.
          enqueue(async () => {
            try {
              await load(!row?.loaded);
            } catch (e) {
              ended = { error: e };
              return again();
            }
            const changes = buffered;
            buffered = null;
            await apply(changes);
            on.status('live');
          });
        },
      },
    );
  };

  void start().catch((e) => on.status('reconnecting', e));
  return {
    stop() {
      stopped = true;
      globalThis.removeEventListener?.('online', online);
      unsubscribe();
    },
  };
}
