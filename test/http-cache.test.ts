/**
 * HTTP caching of GET queries (src/server/http-cache.ts): `Cache-Control` from the schema — a short max-age for
 * types a write can change, a long one for types none changes, `no-store` for data under a scoped `@auth` rule and for every
 * answer that is not a GET query's without errors — `private` on a server that requires a token; an ETag of the
 * data, and 304 to a conditional GET until a write changes the answer. On a schema written for this test.
 */
import { SignJWT } from 'jose';
import { parse } from 'graphql';
import { cachePolicyOf, DEFAULT_HTTP_CACHE } from '../src/server/http-cache';
import fs from 'node:fs';
import { compileSchema } from '../src/compiler/compile';
import { DIRECTIVES_FILE, startSdlServer } from './support/harness';

/** The schema, with `@auth` on every type and mutation (as a schema that uses it must) or none. */
const sdl = (auth: boolean) => {
  const a = (rules: string) => (auth ? ` @auth(rules: ${rules})` : '');
  const anyone = a('[{ roles: ["keeper", "visitor"] }]');
  const keeper = a('[{ roles: ["keeper"] }]');
  return `
type Garden @entity(table: "Gardens", partitionKey: "{garden}", rowKey: "garden")${anyone} {
  garden: ID!
  name: String!
  gate: String${a('[{ roles: ["keeper"], scope: [{ field: "garden", claim: "garden" }] }]')}
  beds(first: Int, after: String): BedConnection! @range(rowKeyPrefix: "bed_")
  plots(first: Int, after: String): PlotConnection! @range(rowKeyPrefix: "plot_")
}
type Plot @entity(table: "Gardens", partitionKey: "{garden}", rowKey: "plot_{id}")${a('[{ roles: ["keeper"], scope: [{ field: "garden", claim: "garden" }] }]')} {
  garden: ID!
  id: ID!
}
type Bed @entity(table: "Gardens", partitionKey: "{garden}", rowKey: "bed_{id}")${anyone} {
  garden: ID!
  id: ID!
  plant: String!
}
type Almanac @entity(table: "Almanac", partitionKey: "{year}", rowKey: "{day}")${anyone} {
  year: ID!
  day: ID!
  sunrise: String!
}
type Query {
  garden(garden: ID!): Garden @point
  almanac(year: ID!, day: ID!): Almanac @point
}
type Mutation {
  createGarden(input: CreateGardenInput!): GardenPayload! @write(entity: "Garden", action: CREATE)${keeper}
  updateGarden(input: UpdateGardenInput!): GardenPayload! @write(entity: "Garden", action: UPDATE)${keeper}
  createBed(input: CreateBedInput!): BedPayload! @write(entity: "Bed", action: CREATE)${keeper}
}
`;
};

const SECRET = 'a-test-secret-of-at-least-32-characters';
const KEEPER = () =>
  new SignJWT({ sub: 'keeper@example.test', roles: ['keeper'], garden: 'g1' })
    .setProtectedHeader({ alg: 'HS256' })
    .setExpirationTime('10m')
    .sign(new TextEncoder().encode(SECRET));

let open: Awaited<ReturnType<typeof startSdlServer>>;
let guarded: Awaited<ReturnType<typeof startSdlServer>>;
beforeAll(async () => {
  open = await startSdlServer(sdl(false), { TABLEGRAPH_AUTH: 'off' });
  guarded = await startSdlServer(sdl(true), { TABLEGRAPH_JWT_SECRET: SECRET, TABLEGRAPH_CACHE_MAX_AGE: '7', TABLEGRAPH_CACHE_MAX_AGE_UNWRITTEN: '300' });
  const w = await open.server.query('mutation { createGarden(input: { garden: "g1", name: "Rose", gate: "north" }) { garden { garden } } }');
  expect(w.errors).toBeUndefined();
});
afterAll(async () => {
  await open?.close();
  await guarded?.close();
});

async function get(url: string, query: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${url}?${new URLSearchParams({ query }).toString()}`, {
    headers: { accept: 'application/json', 'apollo-require-preflight': 'true', ...headers },
  });
  const text = await res.text();
  return {
    status: res.status,
    cacheControl: res.headers.get('cache-control'),
    etag: res.headers.get('etag'),
    vary: res.headers.get('vary'),
    text,
    json: text ? JSON.parse(text) : undefined,
  };
}

test('a GET query of types writes change: public, the short max-age, and an ETag of its data', async () => {
  const a = await get(open.server.url, '{ garden(garden: "g1") { name beds(first: 5) { edges { node { plant } } } } }');
  expect(a.status).toBe(200);
  expect(a.json.data.garden.name).toBe('Rose');
  expect(a.cacheControl).toBe('public, max-age=5');
  expect(a.etag).toMatch(/^W\/"[A-Za-z0-9_-]{43}"$/);
  // Only types no mutation writes: the long max-age; the schema's own fields change nothing.
  expect((await get(open.server.url, '{ almanac(year: "2026", day: "001") { sunrise } }')).cacheControl).toBe('public, max-age=60');
  expect((await get(open.server.url, '{ __typename }')).cacheControl).toBe('public, max-age=60');
  // A GET with none of the headers a browser adds only on purpose is refused (Apollo Server's CSRF prevention).
  const simple = await fetch(`${open.server.url}?${new URLSearchParams({ query: '{ __typename }' }).toString()}`);
  expect(simple.status).toBe(400);
  expect(simple.headers.get('cache-control')).toBe('no-store');
  // Both kinds in one query: the shorter age.
  expect((await get(open.server.url, '{ almanac(year: "2026", day: "001") { sunrise } garden(garden: "g1") { name } }')).cacheControl).toBe(
    'public, max-age=5',
  );
});

test('a conditional GET is answered 304 with no body until a write changes the data', async () => {
  const query = '{ garden(garden: "g1") { name } }';
  const first = await get(open.server.url, query);
  // As a browser's cache revalidates: fetch() itself would add `Cache-Control: no-cache` to a conditional request,
  // which asks for a fresh answer (RFC 9111), unless the request says otherwise.
  const revalidate = (etag: string) => ({ 'if-none-match': etag, 'cache-control': 'max-age=0' });
  const again = await get(open.server.url, query, revalidate(first.etag!));
  expect(again.status).toBe(304);
  expect(again.text).toBe('');
  // The storage cost differs between the two answers; the data, and so the ETag, does not.
  expect((await get(open.server.url, query)).etag).toBe(first.etag);
  const w = await open.server.query('mutation { updateGarden(input: { garden: "g1", name: "Tulip" }) { garden { name } } }');
  expect(w.errors).toBeUndefined();
  const changed = await get(open.server.url, query, revalidate(first.etag!));
  expect(changed.status).toBe(200);
  expect(changed.json.data.garden.name).toBe('Tulip');
  expect(changed.etag).not.toBe(first.etag);
});

test('no-store: data under a scoped @auth rule, answers with errors, POSTs and mutations', async () => {
  const t = await KEEPER();
  const auth = { authorization: `Bearer ${t}` };
  const gate = await get(guarded.server.url, '{ garden(garden: "g1") { gate } }', auth);
  expect(gate.status).toBe(200);
  expect(gate.cacheControl).toBe('no-store');
  expect(gate.etag).toBeNull();
  // A fragment does not hide it.
  expect((await get(guarded.server.url, '{ garden(garden: "g1") { ...G } } fragment G on Garden { name gate }', auth)).cacheControl).toBe('no-store');
  // A list of a scoped type differs per caller even when it selects none of its fields: its cursors, its page info.
  const plots = await get(guarded.server.url, '{ garden(garden: "g1") { plots { edges { cursor } pageInfo { hasNextPage endCursor } } } }', auth);
  expect(plots.status).toBe(200);
  expect(plots.cacheControl).toBe('no-store');
  // With a token required, what is not under @auth is kept only by the caller's own browser — and for its token.
  const kept = await get(guarded.server.url, '{ garden(garden: "g1") { name } }', auth);
  expect(kept.cacheControl).toBe('private, max-age=7');
  expect(kept.vary).toBe('Authorization');
  expect((await get(guarded.server.url, '{ almanac(year: "1", day: "1") { sunrise } }', auth)).cacheControl).toBe('private, max-age=300');
  // Refused for want of a token: not kept.
  const refused = await get(guarded.server.url, '{ garden(garden: "g1") { name } }');
  expect(refused.status).toBe(401);
  expect(refused.cacheControl).toBe('no-store');
  // An answer with an error (a page larger than the server serves) is not kept either.
  const failed = await get(open.server.url, '{ garden(garden: "g1") { beds(first: 100000) { edges { node { id } } } } }');
  expect(failed.json.errors).toBeDefined();
  expect(failed.cacheControl).toBe('no-store');
  const post = await fetch(open.server.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query: '{ garden(garden: "g1") { name } }' }),
  });
  expect(post.status).toBe(200);
  expect(post.headers.get('cache-control')).toBe('no-store');
  expect(post.headers.get('etag')).toBeNull();
  // A mutation over GET is refused (Apollo Server runs mutations on POST only), and not kept.
  const mutation = await get(open.server.url, 'mutation { createBed(input: { garden: "g1", id: "1", plant: "kale" }) { bed { id } } }');
  expect(mutation.status).toBe(405);
  expect(mutation.cacheControl).toBe('no-store');
});

test('no-store for signed URLs: @sas and @blob fields', () => {
  const sdl = `${fs.readFileSync(DIRECTIVES_FILE, 'utf8')}
type Album @entity(table: "Albums", partitionKey: "{album}", rowKey: "album") {
  album: ID!
  title: String!
  readerSas: String @sas(expiresInSeconds: 600)
  cover: String @blob(container: "covers", maxBytes: 65536, contentTypes: ["image/png"])
}
type Query {
  album(album: ID!): Album @point
}
`;
  const { schema, model } = compileSchema([{ name: 'albums.graphql', body: sdl }]);
  const policy = (query: string) => cachePolicyOf(schema, model, parse(query), DEFAULT_HTTP_CACHE);
  // No mutation writes albums: the long age.
  expect(policy('{ album(album: "a") { title } }')).toEqual({ store: true, maxAgeSeconds: 60 });
  expect(policy('{ album(album: "a") { title readerSas } }')).toEqual({ store: false });
  expect(policy('{ album(album: "a") { cover } }')).toEqual({ store: false });
  // A max-age of 0 turns caching off.
  expect(cachePolicyOf(schema, model, parse('{ album(album: "a") { title } }'), { maxAgeSeconds: 5, unwrittenMaxAgeSeconds: 0 })).toEqual({ store: false });
});
