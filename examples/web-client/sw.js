/*
 * The page's service worker: it keeps the page's own files (never the API's answers: those are the replica's, in
 * IndexedDB) so that the page opens offline. Network first, so a changed file is served as soon as it can be; the
 * copy kept when the network does not answer.
 */
const CACHE = 'tablegraph-web-client-v2';
const SHELL = [
  './',
  'app.js',
  'operations.js',
  'vendor/idb.js',
  'vendor/graphql-sse/client.mjs',
  'vendor/graphql-sse/common.mjs',
  'vendor/graphql-sse/parser.mjs',
  'vendor/graphql-sse/utils.mjs',
  'sync/index.js',
  'sync/follow.js',
  'sync/outbox.js',
  'sync/replica-store.js',
  'sync/graphql-http.js',
];

self.addEventListener('install', (event) => {
  event.waitUntil(
    caches
      .open(CACHE)
      .then((cache) => cache.addAll(SHELL))
      .then(() => self.skipWaiting()),
  );
});

self.addEventListener('activate', (event) => {
  event.waitUntil(self.clients.claim());
});

self.addEventListener('fetch', (event) => {
  const url = new URL(event.request.url);
  // Only the page's own files: the API (another origin) is not the service worker's to answer.
  if (event.request.method !== 'GET' || url.origin !== self.location.origin) return;
  event.respondWith(
    (async () => {
      const cache = await caches.open(CACHE);
      try {
        const fresh = await fetch(event.request);
        if (fresh.ok) await cache.put(url.pathname === '/' ? './' : event.request, fresh.clone());
        return fresh;
      } catch (e) {
        const kept = await cache.match(url.pathname === '/' ? './' : event.request, { ignoreSearch: true });
        if (kept) return kept;
        throw e;
      }
    })(),
  );
});
