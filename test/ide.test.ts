/**
 * The IDE in a real browser: Debian's Chromium driven by playwright-core opens `/graphql` on a server that requires
 * a bearer token, types the README's Marketing query, runs it without a token (refused), puts the token in the
 * headers editor, runs it again and reads the answer — data and the storage cost in `extensions` — from the page.
 * Then it runs a subscription and sees a create arrive in it. Every request the page makes is recorded: none may
 * leave the server (no CDN, no fonts, no telemetry), and the page's Content-Security-Policy must refuse nothing
 * GraphiQL needs.
 */
import { SignJWT } from 'jose';
import type { Browser, Page } from 'playwright-core';
import { launchChromium } from './support/chromium';
import { startTestServer, type TestServer } from './support/harness';
import { until } from './support/wait';

const SECRET = 'an-ide-test-secret-of-at-least-32-chars';
const README_QUERY = '{ department(id: "Marketing") { employeeCount employees { edges { node { id firstName lastName } } } } }';

let server: TestServer;
let browser: Browser;

beforeAll(async () => {
  server = await startTestServer({ TABLEGRAPH_JWT_SECRET: SECRET });
  browser = await launchChromium();
}, 60000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

/** Replaces the whole text of the CodeMirror editor inside `container` (typed as input, so no bracket is doubled). */
async function setEditor(page: Page, container: string, text: string): Promise<void> {
  await page.locator(`${container} .CodeMirror >> visible=true`).first().click();
  await page.keyboard.press('Control+A');
  await page.keyboard.press('Delete');
  await page.keyboard.insertText(text);
}

/** The response pane's text once it holds `expected`. */
async function responseText(page: Page, expected: string): Promise<string> {
  const pane = page.locator('.graphiql-response');
  await pane.getByText(expected, { exact: false }).first().waitFor({ timeout: 20000 });
  // CodeMirror draws only the lines in view: the whole text is its document's, on the editor's element.
  return pane
    .locator('.CodeMirror')
    .first()
    .evaluate((el) => (el as unknown as { CodeMirror: { getValue(): string } }).CodeMirror.getValue());
}

test('GraphiQL, served by the server with nothing from elsewhere, runs the README query with a bearer token from its headers editor', async () => {
  const origin = new URL(server.url).origin;
  const context = await browser.newContext();
  const page = await context.newPage();
  const elsewhere: string[] = [];
  const refused: string[] = [];
  await context.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith(origin) || url.startsWith('data:')) return route.continue();
    elsewhere.push(url);
    return route.abort();
  });
  page.on('console', (m) => {
    if (/Content Security Policy|Refused to/i.test(m.text())) refused.push(m.text());
  });
  page.on('pageerror', (e) => refused.push(`page error: ${e.message}`));
  // Nothing the page asks for is missing: its icon included (a 404 there is an error in the IDE's console).
  const missing: string[] = [];
  page.on('response', (r) => void (r.request().method() === 'GET' && r.status() >= 400 && missing.push(`${r.status()} ${r.url()}`)));

  const response = await page.goto(server.url);
  expect(response?.status()).toBe(200);
  expect(response?.headers()['content-security-policy']).toContain("script-src 'self'");
  await page.locator('.graphiql-container').waitFor({ timeout: 20000 });

  await setEditor(page, '.graphiql-query-editor', README_QUERY);
  await page.locator('.graphiql-execute-button').click();
  expect(await responseText(page, 'UNAUTHENTICATED')).toContain('"code": "UNAUTHENTICATED"');

  const token = await new SignJWT({ sub: 'ide-user', roles: ['hr-admin'] })
    .setProtectedHeader({ alg: 'HS256' })
    .setIssuedAt()
    .setExpirationTime('5m')
    .sign(new TextEncoder().encode(SECRET));
  await page.locator('.graphiql-editor-tools button[data-name="headers"]').click();
  await setEditor(page, '.graphiql-editor-tool', JSON.stringify({ Authorization: `Bearer ${token}` }));
  await page.locator('.graphiql-execute-button').click();
  const text = await responseText(page, 'employeeCount');
  const shown = JSON.parse(text);
  expect(shown.errors).toBeUndefined();
  expect(shown.data.department.employeeCount).toBe(2);
  expect(shown.data.department.employees.edges.map((e: any) => `${e.node.firstName} ${e.node.lastName}`).sort()).toEqual(['Don Hall', 'Jun Cao']);
  // The storage cost is on the page: the response is shown whole.
  expect(shown.extensions.cost).toMatchObject({ pointQueries: 1, rangeQueries: 1, roundTrips: 2 });

  // The docs: the schema is introspected through the same endpoint, with the token once it is in the headers.
  await page.getByRole('button', { name: /re-fetch graphql schema/i }).click();
  await page.getByRole('button', { name: /documentation explorer/i }).click();
  const docs = page.locator('.graphiql-doc-explorer');
  await docs.getByText('Root Types').waitFor({ timeout: 10000 });
  await docs.getByRole('link', { name: 'Query' }).first().click();
  await docs.getByText('employeeByEmail').first().waitFor({ timeout: 10000 });

  // A subscription runs from the IDE too (over SSE, with the headers editor's token): a create shows up in it.
  await setEditor(page, '.graphiql-query-editor', 'subscription { employeeChanged(departmentId: "Marketing") { kind id node { lastName } } }');
  await page.locator('.graphiql-execute-button').click();
  // Subscribed once the server counts a subscriber (its metrics), not after a guessed wait.
  await until('the IDE subscription to reach the server', async () =>
    /^tablegraph_subscriptions\{of="subscribers"\} [1-9]/m.test(await (await fetch(new URL('/metrics', server.url))).text()),
  );
  const created = await fetch(server.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({
      query: 'mutation ($input: CreateEmployeeInput!) { createEmployee(input: $input) { employee { id } } }',
      variables: { input: { departmentId: 'Marketing', id: '77', firstName: 'Ide', lastName: 'Subscriber', email: 'ide.subscriber@example.test' } },
    }),
  });
  expect(((await created.json()) as any).errors).toBeUndefined();
  const event = JSON.parse(await responseText(page, 'Subscriber'));
  expect(event.data.employeeChanged).toEqual({ kind: 'CREATED', id: '77', node: { lastName: 'Subscriber' } });
  await page.locator('.graphiql-execute-button').click(); // stops the subscription

  expect(elsewhere).toEqual([]);
  expect(refused).toEqual([]);
  expect(missing).toEqual([]);
  const icon = await fetch(new URL('/favicon.svg', server.url));
  expect([icon.status, icon.headers.get('content-type')]).toEqual([200, 'image/svg+xml; charset=utf-8']);
  expect((await fetch(new URL('/favicon.ico', server.url))).status).toBe(204);
  await context.close();
}, 90000);

test("GET /schema.graphql answers the compiled SDL, directives included; an API client's GET on /graphql is still GraphQL", async () => {
  const origin = new URL(server.url).origin;
  // Authentication is on: like introspection, the SDL is for a valid token only.
  expect((await fetch(`${origin}/schema.graphql`)).status).toBe(401);
  const token = await new SignJWT({ sub: 'ide-user' }).setProtectedHeader({ alg: 'HS256' }).setExpirationTime('5m').sign(new TextEncoder().encode(SECRET));
  const sdl = await fetch(`${origin}/schema.graphql`, { headers: { authorization: `Bearer ${token}` } });
  expect(sdl.status).toBe(200);
  expect(sdl.headers.get('content-type')).toMatch(/^text\/plain/);
  const text = await sdl.text();
  expect(text).toMatch(/^# The schema's author's view/);
  expect(text).toMatch(/type Department\s+@entity\(/);
  expect(text).toMatch(/enum OnDelete \{/);
  expect(text).toContain('# tablegraph:generated.graphql');

  const api = await fetch(`${server.url}?query=${encodeURIComponent('{ __typename }')}`, { headers: { accept: 'application/json' } });
  // GraphQL answered (Apollo's CSRF prevention wants a preflight header on a GET), not the IDE's page.
  expect(api.headers.get('content-type')).toMatch(/^application\/json/);
  expect(((await api.json()) as any).errors[0].extensions.code).toBe('BAD_REQUEST');
});

test("introspection, as GraphiQL's docs and code generators read it, shows the API: no storage directive, no type only theirs use", async () => {
  const token = await new SignJWT({ sub: 'ide-user' }).setProtectedHeader({ alg: 'HS256' }).setExpirationTime('5m').sign(new TextEncoder().encode(SECRET));
  const res = await fetch(server.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ query: '{ __schema { types { name } directives { name } } }' }),
  });
  const { types, directives } = ((await res.json()) as any).data.__schema as { types: Array<{ name: string }>; directives: Array<{ name: string }> };
  const typeNames = types.map((t) => t.name);
  for (const storage of ['OnDelete', 'WriteAction', 'TenantIsolation', 'AuthRule', 'ClaimScope']) expect(typeNames).not.toContain(storage);
  // The API's own stay, those the directives' file declares for it too: an upload's input, its scalars.
  for (const own of ['Department', 'Employee', 'CreateEmployeeInput', 'EmployeeConnection', 'BlobInput', 'DateTime']) expect(typeNames).toContain(own);
  expect(directives.map((d) => d.name).sort()).toEqual(['deprecated', 'include', 'oneOf', 'skip', 'specifiedBy']);
});
