/**
 * The IDE: GraphiQL served by the server itself, from the npm packages `graphiql` (its UMD build, fonts inlined in
 * its stylesheet) and React 18's UMD builds. A browser that opens `/graphql` gets it; nothing is loaded from
 * elsewhere (a Content-Security-Policy of 'self' says so to the browser), there is no telemetry, and it works with
 * no network at all. It has the schema's docs, a variables editor, a headers editor for `Authorization: Bearer …`
 * (not persisted in the browser's storage) and shows each response whole, its `extensions` (storage cost,
 * consistency) included. Subscriptions run over SSE (graphql-sse's browser build), with the headers editor's token. `GET /schema.graphql` answers the SDL the server compiled, directives and all.
 */
import fs from 'node:fs';
import path from 'node:path';
import type express from 'express';
import type { Request, Response, NextFunction } from 'express';
import { UNAUTHENTICATED, type Authenticator } from './auth';
import { sendHttpError } from './http-errors';
import { requestIdOf } from './request-log';

/** Where the IDE's files are served from. */
export const IDE_ASSETS = '/ide';

/**
 * The first query the IDE shows when the schema folder has none of its own (`ide-query.gql`, see ideQueryOf): a
 * query any schema answers, and where to look next.
 */
export const GENERIC_IDE_QUERY = `# Every response says what it cost in storage: see "extensions" in the result.
# The schema's fields are in the docs (the book icon, top left).
{
  __typename
}
`;

/** The file of a schema folder whose text the IDE shows first (not `.graphql`: those are the folder's SDL files). */
export const IDE_QUERY_FILE = 'ide-query.gql';

/**
 * The IDE's first query for a schema folder: its `ide-query.gql`, or GENERIC_IDE_QUERY.
 * @throws the fs error when the file exists but cannot be read
 */
export function ideQueryOf(schemaDir: string): string {
  const file = path.join(schemaDir, IDE_QUERY_FILE);
  return fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : GENERIC_IDE_QUERY;
}

const packageFile = (pkg: string, file: string) => path.join(path.dirname(require.resolve(`${pkg}/package.json`)), file);

/** The files served under IDE_ASSETS: a fixed list, never a folder. */
function assetFiles(): Record<string, { file: string; type: string }> {
  return {
    'react.production.min.js': { file: packageFile('react', 'umd/react.production.min.js'), type: 'text/javascript' },
    'react-dom.production.min.js': { file: packageFile('react-dom', 'umd/react-dom.production.min.js'), type: 'text/javascript' },
    'graphiql.min.js': { file: packageFile('graphiql', 'graphiql.min.js'), type: 'text/javascript' },
    'graphiql.min.css': { file: packageFile('graphiql', 'graphiql.min.css'), type: 'text/css' },
    'graphql-sse.js': { file: packageFile('graphql-sse', 'umd/graphql-sse.js'), type: 'text/javascript' },
    'start.js': { file: '', type: 'text/javascript' },
  };
}

/** The script that mounts GraphiQL on the page, talking to the endpoint the page was served at. */
function startScript(defaultQuery: string): string {
  // A separate file rather than an inline script, so that the page's policy can forbid inline scripts.
  return `'use strict';
(function () {
  var endpoint = window.location.pathname;
  var http = GraphiQL.createFetcher({ url: endpoint });
  // Subscriptions go over SSE (graphql-sse), with the headers editor's headers: its token included.
  // Whether the operation to run is a subscription: its keyword at the start of a definition (comments left out).
  var isSubscription = function (params) {
    var text = String(params.query || '').replace(/#[^\\n\\r]*/g, '');
    var name = params.operationName ? '\\\\s+' + params.operationName + '\\\\b' : '\\\\b';
    return new RegExp('(^|\\\\})\\\\s*subscription' + name).test(text);
  };
  var fetcher = function (params, opts) {
    if (!isSubscription(params)) return http(params, opts);
    var client = graphqlSse.createClient({ url: endpoint + '/stream', headers: (opts && opts.headers) || {}, retryAttempts: 0 });
    return client.iterate(params);
  };
  var root = ReactDOM.createRoot(document.getElementById('graphiql'));
  root.render(React.createElement(GraphiQL, {
    fetcher: fetcher,
    defaultQuery: ${JSON.stringify(defaultQuery)},
    defaultHeaders: '{}',
    isHeadersEditorEnabled: true,
    shouldPersistHeaders: false,
    defaultEditorToolsVisibility: true,
  }));
})();
`;
}

function page(): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>tablegraph — GraphiQL</title>
<link rel="icon" href="/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="${IDE_ASSETS}/graphiql.min.css">
<style>html, body, #graphiql { height: 100%; margin: 0; }</style>
</head>
<body>
<div id="graphiql">Loading GraphiQL…</div>
<script src="${IDE_ASSETS}/react.production.min.js"></script>
<script src="${IDE_ASSETS}/react-dom.production.min.js"></script>
<script src="${IDE_ASSETS}/graphiql.min.js"></script>
<script src="${IDE_ASSETS}/graphql-sse.js"></script>
<script src="${IDE_ASSETS}/start.js"></script>
</body>
</html>
`;
}

/**
 * Only this server's files, fetches to this server, and the data: URLs graphiql's stylesheet inlines its fonts and
 * icons as. Inline styles are GraphiQL's own (its editor positions elements with them); inline scripts are not allowed.
 */
/** A table of three rows: the IDE tab's icon. */
const FAVICON =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect x="1" y="2" width="14" height="12" rx="1.5" fill="#1f6feb"/>' +
  '<path d="M2 6h12M2 10h12M6 3v10" stroke="#fff" stroke-width="1.2"/></svg>';

const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "font-src 'self' data:",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const wantsHtml = (req: Request) => req.method === 'GET' && req.accepts(['application/json', 'application/graphql-response+json', 'text/html']) === 'text/html';

/**
 * Adds the IDE's routes to `app`: `GET <endpoint>` for a browser (Accept: text/html; an API client's GET goes on to
 * GraphQL) and the files under IDE_ASSETS. Files are read once, at the first request for them (about 1.4 MB in
 * all), and cached by the browser for an hour. On the app itself, not a nested router: a router that matched the
 * path would answer a CORS preflight (OPTIONS) itself, before the endpoint's CORS handling.
 */
export function mountIde(app: express.Express, endpoint: string, defaultQuery = GENERIC_IDE_QUERY): void {
  const assets = assetFiles();
  const cache = new Map<string, Buffer>();
  const html = page();
  app.get(endpoint, (req: Request, res: Response, next: NextFunction) => {
    if (!wantsHtml(req)) return next();
    res.setHeader('content-security-policy', CONTENT_SECURITY_POLICY);
    res.setHeader('x-content-type-options', 'nosniff');
    res.type('html').send(html);
  });
  // The tab's icon; a browser that asks /favicon.ico anyway is told there is none, without an error in its console.
  app.get('/favicon.svg', (_req: Request, res: Response) => {
    res.setHeader('cache-control', 'public, max-age=86400');
    res.setHeader('x-content-type-options', 'nosniff');
    res.type('image/svg+xml').send(FAVICON);
  });
  app.get('/favicon.ico', (_req: Request, res: Response) => void res.setHeader('cache-control', 'public, max-age=86400').status(204).end());
  app.get(`${IDE_ASSETS}/:name`, (req: Request, res: Response, next: NextFunction) => {
    const name = String(req.params.name);
    const asset = Object.hasOwn(assets, name) ? assets[name] : undefined;
    if (!asset) return next();
    let body = cache.get(name);
    if (!body) {
      body = asset.file ? fs.readFileSync(asset.file) : Buffer.from(startScript(defaultQuery));
      cache.set(name, body);
    }
    res.setHeader('cache-control', 'public, max-age=3600');
    res.setHeader('x-content-type-options', 'nosniff');
    res.type(asset.type).send(body);
  });
}

/** What `/schema.graphql` says of itself, first: it is not what clients see. */
const AUTHORS_VIEW =
  "# The schema's author's view: its SDL files with tablegraph's storage directives, then the SDL generated for them.\n" +
  "# Clients (introspection, the IDE's docs, code generators) see the API without the directives and their types.\n";

/**
 * `GET /schema.graphql`: the compiled SDL as UTF-8 text, the author's view (introspection serves the client's,
 * src/compiler/client-schema.ts) (mounted only when introspection is on: it tells as much).
 * With `authenticate`, only for a valid bearer token, as introspection through /graphql is: the SDL spells out the
 * `@auth` rules too. Without one: 401 UNAUTHENTICATED as JSON.
 */
export function schemaSdlHandler(sdl: string, authenticate?: Authenticator) {
  return async (req: Request, res: Response) => {
    if (authenticate) {
      try {
        await authenticate(req.headers.authorization);
      } catch (e) {
        res.setHeader('www-authenticate', 'Bearer');
        sendHttpError(res, 401, UNAUTHENTICATED, e instanceof Error ? e.message : 'Authentication required.', requestIdOf(req));
        return;
      }
    }
    res.setHeader('x-content-type-options', 'nosniff');
    res.type('text/plain; charset=utf-8').send(`${AUTHORS_VIEW}\n${sdl}`);
  };
}
