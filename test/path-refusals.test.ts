/**
 * A read through a path whose build stopped: `@auth` decides first — a caller that may not read the path learns
 * nothing of its state — and the refusal of a caller that may names the reason only, never the entities the build
 * stopped on (their keys go to the worker's log and `npm run migrate -- status`).
 */
import { SignJWT } from 'jose';
import { Catalogue } from '../src/evolution/catalogue';
import { startTestServer, testStore, uniquePrefix, type TestServer } from './support/harness';

const SECRET = 'a-test-secret-of-at-least-32-characters';
const PATH = 'index:Employee.byEmail';
/** What the stopped build found: keys of entities no caller here may read. */
const HELD_TWICE = [{ table: 'Directory', partitionKey: 'ANIMAL CONTRL', rowKey: 'empid_00000524' }];

function token(claims: Record<string, unknown>): Promise<string> {
  return new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().setExpirationTime('5m').sign(new TextEncoder().encode(SECRET));
}

let server: TestServer;

beforeAll(async () => {
  const prefix = uniquePrefix();
  const env = { TABLEGRAPH_TABLE_PREFIX: prefix, TABLEGRAPH_JWT_SECRET: SECRET };
  await (await startTestServer(env)).close();
  // The build of the unique e-mail index stopped on a value two employees hold (as build-runner.ts records it).
  const catalogue = new Catalogue(testStore(), prefix);
  const row = (await catalogue.path(PATH))!;
  await catalogue.putPath({
    ...row,
    state: 'failed',
    problem: {
      reason: 'UniqueValueHeldTwice',
      message: `1 value(s) of byEmail are held by two entities, e.g. ${JSON.stringify(HELD_TWICE)}`,
      details: HELD_TWICE,
    },
  });
  server = await startTestServer(env);
});
afterAll(() => server?.close());

async function ask(bearer: string): Promise<any> {
  const res = await fetch(server.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${bearer}` },
    body: JSON.stringify({ query: '{ employeeByEmail(email: "ken.kwok@contoso.test") { id } }' }),
  });
  return res.json();
}

test('a caller whose roles allow no read of the type is refused by @auth, and learns nothing of the build', async () => {
  const r = await ask(await token({ sub: 'nobody', roles: [] }));
  expect(r.errors[0].extensions.code).toBe('FORBIDDEN');
  expect(JSON.stringify(r)).not.toMatch(/ANIMAL|empid_|failed|stopped|ACCESS_PATH_BUILDING/);
});

test("a caller that may read it is told the build stopped and why in one word, never the entities' keys", async () => {
  const r = await ask(await token({ sub: 'hr', roles: ['hr-admin'] }));
  expect(r.errors[0].extensions).toMatchObject({ code: 'ACCESS_PATH_BUILDING', reason: 'PathBuildFailed', state: 'failed' });
  expect(r.errors[0].message).toMatch(/build stopped \(UniqueValueHeldTwice\)/);
  expect(JSON.stringify(r)).not.toMatch(/ANIMAL|empid_|Directory/);
});
