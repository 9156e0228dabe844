/**
 * Authentication (src/server/auth.ts): bearer JWTs signed in the test — HS256 with a shared secret, and RS256 with a
 * key whose JWKS a local HTTP server serves, as an OpenID provider would. A request without a valid token is
 * refused with UNAUTHENTICATED (HTTP 401) before any storage call; a server reachable from other machines refuses
 * to start without authentication unless TABLEGRAPH_AUTH=off says so.
 */
import { createServer, type Server } from 'node:http';
import { expectNoRequestReads } from './support/request-reads';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type KeyLike } from 'jose';
import { loadConfig } from '../src/runtime/config';
import { createLogger } from '../src/log';
import { startServer } from '../src/runtime/start-server';
import { ROOT, SCHEMA_DIR, startTestServer, testBlobs, testQueues, testStore, uniquePrefix, type TestServer } from './support/harness';

const SECRET = 'a-test-secret-of-at-least-32-characters';
const QUERY = JSON.stringify({ query: '{ department(id: "Sales") { name } }' });

async function ask(server: TestServer, token?: string): Promise<{ status: number; body: any; headers: Headers }> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (token !== undefined) headers.authorization = token.startsWith('Bearer') || token === '' ? token : `Bearer ${token}`;
  const res = await fetch(server.url, { method: 'POST', headers, body: QUERY });
  return { status: res.status, body: await res.json(), headers: res.headers };
}

function hs256(claims: Record<string, unknown>, expiresIn = '5m'): Promise<string> {
  return new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().setExpirationTime(expiresIn).sign(new TextEncoder().encode(SECRET));
}

describe('HS256 (development and tests)', () => {
  let server: TestServer;
  beforeAll(async () => void (server = await startTestServer({ TABLEGRAPH_JWT_SECRET: SECRET })));
  afterAll(() => server?.close());
  afterEach(() => jest.restoreAllMocks());

  test('no token, a malformed one, a forged one, an expired one, one without subject: 401 UNAUTHENTICATED, nothing read', async () => {
    const spies = [jest.spyOn(server.store, 'getEntity'), jest.spyOn(server.store, 'queryRange')];
    const forged = await new SignJWT({ sub: 'x' })
      .setProtectedHeader({ alg: 'HS256' })
      .setExpirationTime('5m')
      .sign(new TextEncoder().encode('another-secret-of-at-least-32-chars!!'));
    const cases: Array<[string | undefined, RegExp]> = [
      [undefined, /no token/],
      ['Basic dXNlcjpwYXNz', /not a bearer token/],
      [forged, /not valid/],
      [await hs256({ sub: 'ana@example.test' }, '-1m'), /expired/],
      [await hs256({}), /no subject/],
      [await new SignJWT({ sub: 'ana@example.test' }).setProtectedHeader({ alg: 'HS256' }).sign(new TextEncoder().encode(SECRET)), /no exp claim/],
    ];
    for (const [token, why] of cases) {
      const r = await ask(server, token);
      expect(r.status).toBe(401);
      expect(r.headers.get('www-authenticate')).toBe('Bearer');
      expect(r.body.errors[0].extensions.code).toBe('UNAUTHENTICATED');
      expect(r.body.errors[0].message).toMatch(why);
    }
    expectNoRequestReads(spies, server.config.tablePrefix);
  });

  test('requests with no token or a refused one count against their address: past its rate, 429 RATE_LIMITED, not 401 for ever', async () => {
    const limited = await startTestServer({ TABLEGRAPH_JWT_SECRET: SECRET, TABLEGRAPH_RATE_LIMIT: '5' });
    try {
      const forged = await new SignJWT({ sub: 'x' })
        .setProtectedHeader({ alg: 'HS256' })
        .setExpirationTime('5m')
        .sign(new TextEncoder().encode('another-secret-of-at-least-32-chars!!'));
      const statuses: number[] = [];
      for (let i = 0; i < 8; i++) statuses.push((await ask(limited, i % 2 ? forged : undefined)).status);
      expect(statuses.slice(0, 5)).toEqual([401, 401, 401, 401, 401]);
      const after = await ask(limited);
      expect([after.status, after.body.errors[0].extensions.code, Number(after.headers.get('retry-after')) > 0]).toEqual([429, 'RATE_LIMITED', true]);
      expect(statuses.slice(5)).toEqual([429, 429, 429]);
    } finally {
      await limited.close();
    }
  });

  test('TABLEGRAPH_JWT_REQUIRE_EXP=false accepts a token without exp (a setting said on purpose)', async () => {
    const lenient = await startTestServer({ TABLEGRAPH_JWT_SECRET: SECRET, TABLEGRAPH_JWT_REQUIRE_EXP: 'false' });
    try {
      const eternal = await new SignJWT({ sub: 'ana@example.test', roles: ['hr-admin'] })
        .setProtectedHeader({ alg: 'HS256' })
        .sign(new TextEncoder().encode(SECRET));
      expect((await ask(lenient, eternal)).status).toBe(200);
    } finally {
      await lenient.close();
    }
  });

  test('/schema.graphql, which spells out the @auth rules, only for a valid token, as introspection', async () => {
    const url = server.url.replace(/\/graphql$/, '/schema.graphql');
    const anonymous = await fetch(url);
    expect([anonymous.status, anonymous.headers.get('www-authenticate'), ((await anonymous.json()) as any).errors[0].extensions.code]).toEqual([
      401,
      'Bearer',
      'UNAUTHENTICATED',
    ]);
    const withToken = await fetch(url, { headers: { authorization: `Bearer ${await hs256({ sub: 'ana@example.test' })}` } });
    expect(withToken.status).toBe(200);
    expect(await withToken.text()).toMatch(/@auth\(rules:/);
  });

  test('a valid token is served', async () => {
    const r = await ask(server, await hs256({ sub: 'ana@example.test', roles: ['hr-admin'] }));
    expect(r.status).toBe(200);
    expect(r.body.data).toEqual({ department: { name: 'Sales' } });
  });
});

describe('RS256 against a JWKS (an OpenID provider)', () => {
  let jwks: Server;
  let server: TestServer;
  let privateKey: KeyLike;
  const issuer = 'https://login.example.test/tenant/v2.0';
  const audience = 'api://tablegraph';
  const rs256 = (claims: Record<string, unknown>, key: KeyLike = privateKey) =>
    new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid: 'k1' }).setIssuer(issuer).setAudience(audience).setExpirationTime('5m').sign(key);

  beforeAll(async () => {
    const pair = await generateKeyPair('RS256');
    privateKey = pair.privateKey;
    const jwk = { ...(await exportJWK(pair.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
    jwks = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] })));
    await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/keys`;
    server = await startTestServer({ TABLEGRAPH_JWKS_URL: url, TABLEGRAPH_JWT_ISSUER: issuer, TABLEGRAPH_JWT_AUDIENCE: audience });
  });
  afterAll(async () => {
    await server?.close();
    await new Promise<void>((resolve) => jwks.close(() => resolve()));
  });

  test('a token the provider signed, for this audience, from this issuer: served', async () => {
    const r = await ask(server, await rs256({ sub: 'ana@example.test', roles: ['hr-admin'] }));
    expect(r.body.data).toEqual({ department: { name: 'Sales' } });
  });

  test('another audience, another issuer, another key, or an HS256 token made with the public key: UNAUTHENTICATED', async () => {
    const other = await generateKeyPair('RS256');
    const wrongAudience = await new SignJWT({ sub: 'a' })
      .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
      .setIssuer(issuer)
      .setAudience('api://other')
      .setExpirationTime('5m')
      .sign(privateKey);
    const wrongIssuer = await new SignJWT({ sub: 'a' })
      .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
      .setIssuer('https://evil.example')
      .setAudience(audience)
      .setExpirationTime('5m')
      .sign(privateKey);
    const hs = await new SignJWT({ sub: 'a' })
      .setProtectedHeader({ alg: 'HS256', kid: 'k1' })
      .setIssuer(issuer)
      .setAudience(audience)
      .setExpirationTime('5m')
      .sign(new TextEncoder().encode(SECRET));
    for (const [token, why] of [
      [wrongAudience, /aud/],
      [wrongIssuer, /iss/],
      [await rs256({ sub: 'a' }, other.privateKey), /not valid/],
      [hs, /not valid/],
    ] as const) {
      const r = await ask(server, token);
      expect([r.status, r.body.errors[0].extensions.code]).toEqual([401, 'UNAUTHENTICATED']);
      expect(r.body.errors[0].message).toMatch(why);
    }
  });
});

describe('secure defaults', () => {
  const env = (extra: Record<string, string>) => ({
    PORT: '0',
    AZURE_STORAGE_CONNECTION_STRING: 'UseDevelopmentStorage=true',
    TABLEGRAPH_SCHEMA_DIR: SCHEMA_DIR,
    TABLEGRAPH_TABLE_PREFIX: uniquePrefix(),
    ...extra,
  });

  test('a non-loopback HOST without authentication: the server refuses to start, before binding or touching storage', async () => {
    const store = testStore();
    const ensure = jest.spyOn(store, 'ensureTable');
    const config = loadConfig(env({ HOST: '0.0.0.0' }), ROOT);
    const storage = {
      store,
      queues: testQueues(),
      blobs: testBlobs(),
      access: { kind: 'connection-string' as const, connectionString: 'unused' },
      target: 'azurite' as const,
      close: async () => {},
    };
    await expect(startServer(config, storage, createLogger({ level: 'silent' }))).rejects.toMatchObject({
      code: 'CONFIG_INVALID',
      message: expect.stringMatching(/TABLEGRAPH_AUTH=off/),
    });
    expect(ensure).not.toHaveBeenCalled();
  });

  test('contradictory or weak settings are CONFIG_INVALID', () => {
    expect(() => loadConfig(env({ TABLEGRAPH_JWKS_URL: 'https://login.example.test/keys' }), ROOT)).toThrow(
      /needs TABLEGRAPH_JWT_ISSUER and TABLEGRAPH_JWT_AUDIENCE/,
    );
    expect(() => loadConfig(env({ TABLEGRAPH_JWT_SECRET: 'short' }), ROOT)).toThrow(/at least 32 characters/);
    expect(() => loadConfig(env({ TABLEGRAPH_AUTH: 'off', TABLEGRAPH_JWT_SECRET: SECRET }), ROOT)).toThrow(/TABLEGRAPH_AUTH is off/);
    expect(loadConfig(env({ TABLEGRAPH_AUTH: 'off', HOST: '0.0.0.0' }), ROOT).auth.off).toBe(true);
  });
});
