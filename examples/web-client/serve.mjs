/**
 * Serves the web client (this folder, the sync package of packages/sync, and the browser builds of graphql-sse and
 * idb) on its own origin, as a frontend app is: `node examples/web-client/serve.mjs`, then open the URL it prints.
 * The API must allow that origin: `TABLEGRAPH_CORS_ORIGINS=http://127.0.0.1:5173 npm start`. PORT chooses the port
 * (default 5173; 0: any free one).
 */
import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const JS = 'text/javascript; charset=utf-8';
const sseLib = path.join(path.dirname(require.resolve('graphql-sse')), '..', 'lib');
const syncPackage = path.join(here, '..', '..', 'packages', 'sync');
const FILES = {
  '/': { file: path.join(here, 'index.html'), type: 'text/html; charset=utf-8' },
  '/app.js': { file: path.join(here, 'app.js'), type: JS },
  '/operations.js': { file: path.join(here, 'operations.js'), type: JS },
  '/sw.js': { file: path.join(here, 'sw.js'), type: JS },
  '/vendor/idb.js': { file: path.join(path.dirname(require.resolve('idb')), 'index.js'), type: JS },
  ...Object.fromEntries(
    ['client', 'common', 'parser', 'utils'].map((f) => [`/vendor/graphql-sse/${f}.mjs`, { file: path.join(sseLib, `${f}.mjs`), type: JS }]),
  ),
  ...Object.fromEntries(
    ['index', 'follow', 'outbox', 'replica-store', 'graphql-http'].map((f) => [`/sync/${f}.js`, { file: path.join(syncPackage, `${f}.js`), type: JS }]),
  ),
};

/**
 * Starts the static server.
 * @param {number} port 0 for any free port
 * @returns {Promise<{ url: string, close(): Promise<void> }>}
 */
export async function serveWebClient(port = 5173, host = '127.0.0.1') {
  const server = createServer(async (req, res) => {
    const entry = FILES[new URL(req.url ?? '/', 'http://x').pathname];
    if (!entry || req.method !== 'GET') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    res.writeHead(200, { 'content-type': entry.type, 'cache-control': 'no-cache' }).end(await readFile(entry.file));
  });
  await new Promise((resolve) => server.listen(port, host, resolve));
  const url = `http://${host}:${server.address().port}/`;
  return { url, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { url } = await serveWebClient(Number(process.env.PORT ?? 5173));
  console.log(`web client at ${url} (the API must allow this origin: TABLEGRAPH_CORS_ORIGINS=${url.replace(/\/$/, '')})`);
}
