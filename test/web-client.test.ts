/**
 * The web client of examples/web-client in a real browser: Debian's Chromium (playwright-core) opens the page twice,
 * from its own origin (`node examples/web-client/serve.mjs`) against a server that allows that origin (CORS) and
 * requires a token. Both pages list the department's employees and follow `employeeChanged` over SSE; an employee
 * created through the form of one appears in the other.
 */
import { SignJWT } from 'jose';
import { until } from './support/wait';
import type { Browser } from 'playwright-core';
import { startTestServer, type TestServer } from './support/harness';
import { startWebClientRig, type WebClientRig } from './support/web-client';

const SECRET = 'a-web-client-secret-of-32-characters!';

let rig: WebClientRig;
let webUrl: string;
let server: TestServer;
let browser: Browser;

beforeAll(async () => {
  rig = await startWebClientRig(SECRET);
  ({ webUrl, server, browser } = rig);
}, 60_000);

afterAll(() => rig?.close());

test('an employee created in one page appears in the other', async () => {
  const token = await new SignJWT({ sub: 'admin@example.test', roles: ['hr-admin'] })
    .setProtectedHeader({ alg: 'HS256' })
    .setExpirationTime('10m')
    .sign(new TextEncoder().encode(SECRET));
  const url = `${webUrl}?${new URLSearchParams({ api: server.url, department: 'Marketing', token }).toString()}`;
  const [writer, watcher] = await Promise.all([browser.newPage(), browser.newPage()]);
  const failures: string[] = [];
  for (const page of [writer, watcher]) {
    page.on('pageerror', (e) => failures.push(e.message));
    await page.goto(url);
    await page.locator('#status', { hasText: 'live' }).waitFor({ timeout: 15_000 });
  }
  // The list came from the query: the seeded department has employees.
  expect(await watcher.locator('#employees li').count()).toBeGreaterThan(0);
  const before = await watcher.locator('#employees li').count();
  const id = String(90_000_000 + Math.floor(Math.random() * 9_000_000));
  await writer.fill('input[name=id]', id);
  await writer.fill('input[name=firstName]', 'Ada');
  await writer.fill('input[name=lastName]', `Browser${id}`);
  await writer.fill('input[name=email]', `ada.${id}@example.test`);
  const sent = Date.now();
  await writer.click('button[type=submit]');
  const arrived = watcher.locator(`#employees li[data-id="${id}"]`);
  await arrived.waitFor({ timeout: 10_000 });
  const latencyMs = Date.now() - sent;
  expect(await arrived.textContent()).toBe(`Ada Browser${id}`);
  expect(await watcher.locator('#employees li').count()).toBe(before + 1);
  // The writer's own page sees it too, through the same subscription; the form was cleared and no error shown.
  await writer.locator(`#employees li[data-id="${id}"]`).waitFor({ timeout: 10_000 });
  expect(await writer.inputValue('input[name=id]')).toBe('');
  expect(await writer.locator('#error').textContent()).toBe('');
  expect(failures).toEqual([]);
  console.log(`web client: created in one page, shown in the other after ${latencyMs} ms`);
});

test('a page the server ends (fallen behind) resumes from its last change and goes on following', async () => {
  // A server that ends a subscriber as soon as three events wait for it, polling once a second: a burst of eight
  // creates, made at once, lands in one poll or two, and one of them holds more than three (on a busy machine too).
  const strict = await startTestServer({
    TABLEGRAPH_JWT_SECRET: SECRET,
    TABLEGRAPH_CORS_ORIGINS: new URL(webUrl).origin,
    TABLEGRAPH_SUBSCRIPTION_POLL_MS: '1000',
    TABLEGRAPH_SUBSCRIPTION_BUFFER: '3',
  });
  try {
    const token = await new SignJWT({ sub: 'admin@example.test', roles: ['hr-admin'] })
      .setProtectedHeader({ alg: 'HS256' })
      .setExpirationTime('10m')
      .sign(new TextEncoder().encode(SECRET));
    const page = await browser.newPage();
    const failures: string[] = [];
    page.on('pageerror', (e) => failures.push(e.message));
    // What the page tells its console when its connection ends: kept, where the error line shows it only while down.
    const ended: string[] = [];
    page.on('console', (m) => void (m.text().startsWith('tablegraph web client: the connection ended') && ended.push(m.text())));
    await page.goto(`${webUrl}?${new URLSearchParams({ api: strict.url, department: 'Sales', token }).toString()}`);
    await page.locator('#status', { hasText: 'live' }).waitFor({ timeout: 15_000 });
    const create = (id: number) =>
      fetch(strict.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({
          query: 'mutation ($input: CreateEmployeeInput!) { createEmployee(input: $input) { employee { id } } }',
          variables: { input: { departmentId: 'Sales', id: String(id), firstName: 'Burst', lastName: `N${id}`, email: `burst.${id}@example.test` } },
        }),
      }).then(async (r) => expect(((await r.json()) as any).errors).toBeUndefined());
    // A burst the subscriber cannot hold: the server ends it with OVERLOADED after the events it holds.
    const base = 91_000_000 + Math.floor(Math.random() * 100_000) * 10;
    const burst = [0, 1, 2, 3, 4, 5, 6, 7];
    await Promise.all(burst.map((i) => create(base + i)));
    await until('the server ended the page for falling behind', () =>
      ended.some((t) => t.includes('OVERLOADED') && t.includes('fell more than 3 events behind')),
    );
    // The page subscribed again with its last cursor: a later write still arrives.
    await create(base + 9);
    await page.locator(`#employees li[data-id="${base + 9}"]`).waitFor({ timeout: 10_000 });
    for (const i of burst) expect(await page.locator(`#employees li[data-id="${base + i}"]`).count()).toBe(1);
    expect(failures).toEqual([]);
    await page.close();
  } finally {
    await strict.close();
  }
});
