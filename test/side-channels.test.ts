/**
 * What a caller could learn beside the answer, and what an idle or hostile client could cost: `/health` tells a
 * caller without the admin role its status alone and costs storage at most once a second however often it is asked;
 * a cursor's length does not tell the RowKey's; a value looked up through an eventually consistent index costs the
 * same reads whether an entity out of the caller's scope holds it or none does; a query string naming a parameter
 * twice is refused; a body dripped a byte at a time is cut off at TABLEGRAPH_BODY_TIMEOUT_MS.
 */
import net from 'node:net';
import { SignJWT } from 'jose';
import { CursorCodec } from '../src/read/cursor';
import { startTestServer, type TestServer } from './support/harness';
import { requestReads } from './support/request-reads';

const SECRET = 'a-test-secret-of-at-least-32-characters';

function token(claims: Record<string, unknown>): Promise<string> {
  return new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().setExpirationTime('5m').sign(new TextEncoder().encode(SECRET));
}

let server: TestServer;
let base: string;

beforeAll(async () => {
  server = await startTestServer({ TABLEGRAPH_JWT_SECRET: SECRET, TABLEGRAPH_ADMIN_ROLE: 'operator', TABLEGRAPH_BODY_TIMEOUT_MS: '1500' });
  base = server.url.replace(/\/graphql$/, '');
});
afterAll(() => server?.close());
afterEach(() => jest.restoreAllMocks());

describe('/health', () => {
  test('with authentication on, its details go to the admin role only', async () => {
    const anonymous = await (await fetch(`${base}/health`)).json();
    expect(anonymous).toEqual({ status: 'ok' });
    const reader = await (await fetch(`${base}/health`, { headers: { authorization: `Bearer ${await token({ sub: 'r', roles: ['reader'] })}` } })).json();
    expect(reader).toEqual({ status: 'ok' });
    const operator = (await (
      await fetch(`${base}/health`, { headers: { authorization: `Bearer ${await token({ sub: 'o', roles: ['operator'] })}` } })
    ).json()) as any;
    expect(operator).toMatchObject({ status: 'ok', storage: { answers: true }, fanout: { queueDepth: expect.any(Number) } });
    expect(operator.paths.map((p: { path: string }) => p.path)).toContain('index:Employee.byEmail');
  });

  test('200 requests, 20 at a time: a handful of storage pings, never one each', async () => {
    const ping = jest.spyOn(server.store, 'ping');
    const started = Date.now();
    const statuses: number[] = [];
    for (let round = 0; round < 10; round++) {
      statuses.push(...(await Promise.all(Array.from({ length: 20 }, async () => (await fetch(`${base}/health`)).status))));
    }
    expect(statuses.every((s) => s === 200)).toBe(true);
    // One check at a time, kept a second: at most one per second elapsed, and the first.
    expect(ping.mock.calls.length).toBeLessThanOrEqual(Math.ceil((Date.now() - started) / 1000) + 1);
  });
});

test("a cursor's length is the same for RowKeys of different lengths", () => {
  const codec = new CursorCodec('secret');
  const lengths = new Set(['A', 'WILLIAMS_POLICE_00000001', `${'X'.repeat(60)}_00000001`].map((rowKey) => codec.encode('scope', { rowKey }).length));
  expect(lengths.size).toBe(1);
  expect(codec.decode('scope', codec.encode('scope', { rowKey: 'A' }))).toEqual({ rowKey: 'A' });
});

test('an e-mail out of the caller scope and one nobody holds: the same answer, after the same reads', async () => {
  const reader = await token({ sub: 'kenk@contoso.com', roles: ['reader'], department: 'Sales' });
  const readsOf = async (email: string) => {
    const spy = jest.spyOn(server.store, 'getEntity');
    const res = await fetch(server.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${reader}` },
      body: JSON.stringify({ query: `{ employeeByEmail(email: "${email}") { id } }` }),
    });
    const body = (await res.json()) as any;
    const reads = requestReads([spy], server.config.tablePrefix);
    spy.mockRestore();
    return { body, reads: reads.length };
  };
  const outOfScope = await readsOf('donh@contoso.com'); // Marketing's
  const nobody = await readsOf('nobody@contoso.com');
  expect(outOfScope.body.data).toEqual({ employeeByEmail: null });
  expect(nobody.body.data).toEqual(outOfScope.body.data);
  expect(outOfScope.reads).toBe(2);
  expect(nobody.reads).toBe(outOfScope.reads);
  // In scope: answered.
  const own = await readsOf('kenk@contoso.com');
  expect(own.body.data).toEqual({ employeeByEmail: { id: '10' } });
});

test('a query string that names a parameter twice is refused, whichever comes first', async () => {
  for (const search of [
    'query=%7B__typename%7D&query=%7Bdepartments%7Bedges%7Bnode%7Bid%7D%7D%7D%7D',
    'query=%7B__typename%7D&variables=%7B%7D&variables=%7B%7D',
  ]) {
    const res = await fetch(`${server.url}?${search}`, { headers: { 'apollo-require-preflight': 'true' } });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { errors: Array<{ extensions: { code: string } }> }).errors[0].extensions.code).toBe('BAD_REQUEST');
  }
});

test('a body dripped a byte at a time is cut off once TABLEGRAPH_BODY_TIMEOUT_MS has passed', async () => {
  const { port } = new URL(server.url);
  const started = Date.now();
  const answer = await new Promise<string>((resolve) => {
    const socket = net.connect(Number(port), '127.0.0.1', () => {
      socket.write(`POST /graphql HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{`);
      // eslint-disable-next-line no-restricted-globals -- a client that sends its body a byte at a time (pace)
      const drip = setInterval(() => socket.write(' '), 200);
      let got = '';
      socket.on('data', (d) => (got += d.toString()));
      socket.on('close', () => {
        clearInterval(drip);
        resolve(got);
      });
      socket.on('error', () => undefined);
    });
  });
  expect(answer).toMatch(/^HTTP\/1\.1 408/);
  // Checked every second: cut off between the timeout and a second and a half after it.
  expect(Date.now() - started).toBeLessThan(1500 + 1500 + 1000);
});
