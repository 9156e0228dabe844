/**
 * Trusted documents (TABLEGRAPH_TRUSTED_DOCUMENTS): with a manifest, only its operations run — named by
 * `documentId`, by a persisted query's hash, or sent whole with a listed text — over POST and GET; anything else is
 * refused before it is parsed, and a manifest whose documents do not run on the schema stops the start. On a schema
 * written for this test.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startSdlServer } from './support/harness';
import { sha256 } from '../src/server/trusted-documents';
import { isTablegraphError } from '../src/errors';
import { sseSubscribe } from './support/subscription-clients';

const SDL = `
type Kite @entity(table: "Kites", partitionKey: "{field}", rowKey: "{id}") {
  field: ID!
  id: ID!
  colour: String!
}
type Query {
  kite(field: ID!, id: ID!): Kite @point
}
type Mutation {
  createKite(input: CreateKiteInput!): KitePayload! @write(entity: "Kite", action: CREATE)
}
type Subscription {
  kiteChanged(field: ID!): KiteChange! @subscribe(entity: "Kite")
}
`;

const READ = 'query ReadKite($field: ID!, $id: ID!) { kite(field: $field, id: $id) { id colour } }';
const CREATE =
  'mutation CreateKite($field: ID!, $id: ID!, $colour: String!) { createKite(input: { field: $field, id: $id, colour: $colour }) { kite { id } } }';
const FOLLOW = 'subscription Follow($field: ID!) { kiteChanged(field: $field) { kind id } }';
// Ids as GraphQL Code Generator's client preset writes them: the SHA-256 of each document's text.
const MANIFEST = { [sha256(READ)]: READ, [sha256(CREATE)]: CREATE, [sha256(FOLLOW)]: FOLLOW };

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-trusted-'));
const manifestFile = (name: string, body: unknown) => {
  const file = path.join(dir, name);
  fs.writeFileSync(file, JSON.stringify(body));
  return file;
};

let ctx: Awaited<ReturnType<typeof startSdlServer>>;
beforeAll(async () => void (ctx = await startSdlServer(SDL, { TABLEGRAPH_TRUSTED_DOCUMENTS: manifestFile('persisted-documents.json', MANIFEST) })));
afterAll(async () => {
  await ctx?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

async function post(body: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(ctx.server.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, json: await res.json() };
}

async function get(params: Record<string, string>): Promise<{ status: number; json: any; cacheControl: string | null }> {
  const url = `${ctx.server.url}?${new URLSearchParams(params).toString()}`;
  // A non-simple header, as GraphQL clients send on GET (Apollo Server's CSRF prevention asks for one).
  const res = await fetch(url, { headers: { accept: 'application/json', 'apollo-require-preflight': 'true' } });
  return { status: res.status, json: await res.json(), cacheControl: res.headers.get('cache-control') };
}

test('a listed operation runs by documentId (bare or sha256:-prefixed), by persisted query hash, and by its whole text', async () => {
  const created = await post({ documentId: sha256(CREATE), variables: { field: 'north', id: 'k1', colour: 'red' } });
  expect(created.json.errors).toBeUndefined();
  expect(created.json.data.createKite.kite.id).toBe('k1');
  const variables = { field: 'north', id: 'k1' };
  const answers = [
    await post({ documentId: `sha256:${sha256(READ)}`, variables }),
    await post({ extensions: { persistedQuery: { version: 1, sha256Hash: sha256(READ) } }, variables }),
    await post({ query: READ, variables }),
    await get({ documentId: sha256(READ), variables: JSON.stringify(variables) }),
    await get({ extensions: JSON.stringify({ persistedQuery: { version: 1, sha256Hash: sha256(READ) } }), variables: JSON.stringify(variables) }),
  ];
  for (const a of answers) {
    expect(a.json.errors).toBeUndefined();
    expect(a.status).toBe(200);
    expect(a.json.data.kite).toEqual({ id: 'k1', colour: 'red' });
  }
  // A GET by documentId is a short URL a CDN can key on, and it is answered with the schema's cache policy.
  expect((await get({ documentId: sha256(READ), variables: JSON.stringify(variables) })).cacheControl).toBe('public, max-age=5');
});

test('subscriptions too: a listed one runs over SSE (its text: the protocol requires a query), any other is refused', async () => {
  const listed = sseSubscribe(ctx.server.url, FOLLOW, { field: 'east' });
  await listed.started;
  await post({ documentId: sha256(CREATE), variables: { field: 'east', id: 'k9', colour: 'teal' } });
  expect((await listed.waitFor(1))[0].kiteChanged).toEqual({ kind: 'CREATED', id: 'k9' });
  listed.stop();
  const other = sseSubscribe(ctx.server.url, 'subscription { kiteChanged(field: "east") { id } }');
  await expect(other.waitFor(1, 3000)).rejects.toThrow(/ended/);
  expect(other.refusal?.status).toBe(400);
  expect(JSON.parse(other.refusal!.body).errors[0].extensions.code).toBe('PERSISTED_QUERY_NOT_ALLOWED');
});

test('anything else is refused with a stable code, and nothing runs', async () => {
  const other = await post({ query: '{ kite(field: "north", id: "k1") { colour } }' });
  expect(other.status).toBe(400);
  expect(other.json.errors[0].extensions.code).toBe('PERSISTED_QUERY_NOT_ALLOWED');
  expect(other.json.data).toBeUndefined();
  // A listed text with one character changed is another document.
  expect((await post({ query: `${READ} ` })).json.errors[0].extensions.code).toBe('PERSISTED_QUERY_NOT_ALLOWED');
  // A listed id does not let another text through with it.
  const smuggled = await post({
    documentId: sha256(READ),
    query: 'mutation { createKite(input: { field: "north", id: "evil", colour: "x" }) { kite { id } } }',
  });
  expect(smuggled.json.errors[0].extensions.code).toBe('PERSISTED_QUERY_NOT_ALLOWED');
  const unknown = await post({ documentId: 'sha256:0000' });
  expect(unknown.status).toBe(400);
  expect(unknown.json.errors[0].extensions.code).toBe('PERSISTED_QUERY_NOT_FOUND');
  expect(unknown.json.errors[0].extensions.requestId).toEqual(expect.any(String));
  expect((await post({ extensions: { persistedQuery: { version: 1, sha256Hash: 'f'.repeat(64) } } })).json.errors[0].extensions.code).toBe(
    'PERSISTED_QUERY_NOT_FOUND',
  );
  expect((await post({ variables: {} })).json.errors[0].extensions.code).toBe('PERSISTED_QUERY_NOT_ALLOWED');
  // Introspection is a document like any other.
  expect((await post({ query: '{ __schema { types { name } } }' })).json.errors[0].extensions.code).toBe('PERSISTED_QUERY_NOT_ALLOWED');
  // Over GET (Express's path) as over POST.
  const viaGet = await get({ query: '{ kite(field: "north", id: "k1") { colour } }' });
  expect(viaGet.status).toBe(400);
  expect(viaGet.json.errors[0].extensions.code).toBe('PERSISTED_QUERY_NOT_ALLOWED');
  expect((await get({ documentId: 'nope' })).json.errors[0].extensions.code).toBe('PERSISTED_QUERY_NOT_FOUND');
  // The smuggled create above wrote nothing.
  const evil = await post({ documentId: sha256(READ), variables: { field: 'north', id: 'evil' } });
  expect(evil.json.data.kite).toBeNull();
});

test("Apollo's persisted query manifest is read too", async () => {
  const file = manifestFile('apollo.json', {
    format: 'apollo-persisted-query-manifest',
    version: 1,
    operations: [{ id: 'read-kite', name: 'ReadKite', type: 'query', body: READ }],
  });
  const other = await startSdlServer(SDL, { TABLEGRAPH_TRUSTED_DOCUMENTS: file });
  try {
    const res = await fetch(other.server.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ documentId: 'read-kite', variables: { field: 'south', id: 'none' } }),
    });
    const json = (await res.json()) as any;
    expect(json.errors).toBeUndefined();
    expect(json.data).toEqual({ kite: null });
    expect((await other.server.query(CREATE, { field: 'a', id: 'b', colour: 'c' })).errors?.[0].extensions.code).toBe('PERSISTED_QUERY_NOT_ALLOWED');
  } finally {
    await other.close();
  }
});

test('a manifest whose documents do not run on the schema stops the start, naming each and why', async () => {
  const file = manifestFile('broken.json', {
    good: READ,
    typo: '{ kite(field: "a", id: "b") { color } }',
    syntax: '{ kite(',
  });
  const start = startSdlServer(SDL, { TABLEGRAPH_TRUSTED_DOCUMENTS: file });
  await expect(start).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
  const error = await start.catch((e: unknown) => e);
  expect(isTablegraphError(error)).toBe(true);
  const errors = (error as { details: { errors: Record<string, string> } }).details.errors;
  expect(Object.keys(errors).sort()).toEqual(['syntax', 'typo']);
  expect(errors.typo).toMatch(/Cannot query field "color"/);
  expect(errors.syntax).toMatch(/Syntax Error/);
  expect((error as Error).message).toMatch(/2 document\(s\) of .*broken\.json do not run on this schema/);
  await expect(startSdlServer(SDL, { TABLEGRAPH_TRUSTED_DOCUMENTS: path.join(dir, 'absent.json') })).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
  await expect(startSdlServer(SDL, { TABLEGRAPH_TRUSTED_DOCUMENTS: manifestFile('empty.json', {}) })).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
});
