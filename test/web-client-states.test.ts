/**
 * The web client (examples/web-client) says where it is, in a real browser (Debian's Chromium): reloaded offline, its
 * status says so and its error line holds none of the browser's words; back online with its outbox empty, no error of
 * the drop is left on the page; offline with writes waiting it does not say `live`, though
 * its stream stays open; against an API that does not allow the page's origin, it says so (not merely "offline"); and
 * a large department's first rows are drawn while its later pages are still held back.
 */
import type { Browser, Page } from 'playwright-core';
import { loadEntities } from '../src/load/load-entities';
import { compileHr, startTestServer, type TestServer } from './support/harness';
import { severableLink, type SeverableLink } from './support/severable-link';
import { startWebClientRig, type WebClientRig } from './support/web-client';

jest.setTimeout(120_000);

const SECRET = 'a-web-client-states-secret-of-32-chars';
let rig: WebClientRig;
let webUrl: string;
let server: TestServer;
let browser: Browser;
let token: string;
const links: SeverableLink[] = [];

beforeAll(async () => {
  rig = await startWebClientRig(SECRET);
  ({ webUrl, server, browser, token } = rig);
}, 60_000);

afterAll(async () => {
  await Promise.all(links.map((l) => l.close()));
  await rig?.close();
});

/** A new page on the department through `api`; `pageErrors` collects its uncaught errors. */
async function open(api: string, department: string): Promise<{ page: Page; close(): Promise<void>; pageErrors: string[] }> {
  const context = await browser.newContext();
  const page = await context.newPage();
  const pageErrors: string[] = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await page.goto(`${webUrl}?${new URLSearchParams({ api, department, token }).toString()}`);
  return { page, pageErrors, close: () => context.close() };
}

const text = (page: Page, selector: string) => page.locator(selector).textContent();

test("offline, reloaded: only the status says so, never the browser's words; back online with the outbox empty, no error", async () => {
  const link = await severableLink(new URL(server.url));
  links.push(link);
  const { page, close, pageErrors } = await open(server.url.replace(/:\d+\//, `:${link.port}/`), 'Marketing');
  const ended: string[] = [];
  page.on('console', (m) => void (m.text().startsWith('tablegraph web client: the connection ended') && ended.push(m.text())));
  await page.locator('#status', { hasText: 'live' }).waitFor({ timeout: 20_000 });
  expect(await text(page, '#api')).toBe(server.url.replace(/:\d+\//, `:${link.port}/`));
  await page.context().setOffline(true);
  link.sever();
  // Reloaded offline (the service worker keeps the page): it lists the department from its copy, and its connection
  // fails for want of an answer.
  await page.reload();
  await page.locator('#status', { hasText: 'offline' }).waitFor({ timeout: 20_000 });
  await page.locator('#status[data-follow="reconnecting"]').waitFor({ timeout: 20_000 });
  expect(ended.length).toBeGreaterThan(0);
  expect(await text(page, '#error')).toBe('');
  link.restore();
  await page.context().setOffline(false);
  await page.locator('#status', { hasText: /^live$/ }).waitFor({ timeout: 30_000 });
  expect([await text(page, '#error'), await text(page, '#pending')]).toEqual(['', '0']);
  expect(pageErrors).toEqual([]);
  await close();
});

test('offline with two writes waiting: the page says offline and how many wait, never live; then they are sent', async () => {
  const { page, close, pageErrors } = await open(server.url, 'Sales');
  await page.locator('#status', { hasText: 'live' }).waitFor({ timeout: 20_000 });
  // The browser's offline mode alone: the event stream stays open, the writes cannot go.
  await page.context().setOffline(true);
  for (const id of ['91000001', '91000002']) {
    await page.fill('#create input[name=id]', id);
    await page.fill('#create input[name=firstName]', 'Wait');
    await page.fill('#create input[name=lastName]', `Ing${id}`);
    await page.fill('#create input[name=email]', `wait.${id}@example.test`);
    await page.click('#create button[type=submit]');
  }
  await page.locator('#pending', { hasText: '2' }).waitFor();
  await page.locator('#status', { hasText: 'offline: 2 writes waiting' }).waitFor({ timeout: 10_000 });
  expect(await text(page, '#status')).not.toContain('live');
  await page.context().setOffline(false);
  await page.locator('#pending', { hasText: '0' }).waitFor({ timeout: 30_000 });
  await page.locator('#status', { hasText: /^live$/ }).waitFor({ timeout: 30_000 });
  expect(await page.locator('#employees li[data-id="91000002"]:not(.pending)').count()).toBe(1);
  expect(pageErrors).toEqual([]);
  await close();
});

test("an API that does not allow the page's origin: the page says so, and what admits it", async () => {
  const closed = await startTestServer({ TABLEGRAPH_JWT_SECRET: SECRET }); // no TABLEGRAPH_CORS_ORIGINS
  try {
    const { page, close } = await open(closed.url, 'Marketing');
    await page.locator('#status', { hasText: 'does not allow this page' }).waitFor({ timeout: 20_000 });
    expect(await text(page, '#error')).toContain(`ORIGIN_NOT_ALLOWED: start the API with TABLEGRAPH_CORS_ORIGINS=${new URL(webUrl).origin}`);
    await close();
  } finally {
    await closed.close();
  }
});

test('a department of 1,000 employees: its first page is drawn while the later ones are held back', async () => {
  const department = `BIG ${Date.now() % 1_000_000}`;
  const { model } = compileHr(server.config.tablePrefix);
  async function* departments() {
    yield { line: 1, values: { id: department, name: department } };
  }
  async function* employees() {
    for (let i = 1; i <= 1000; i++)
      yield {
        line: i,
        values: { departmentId: department, id: String(i), firstName: 'Big', lastName: `N${i}`, email: `big.${i}@${department.replace(' ', '')}.test` },
      };
  }
  await loadEntities({
    store: server.store,
    model,
    steps: [
      { type: 'Department', rows: departments() },
      { type: 'Employee', rows: employees() },
    ],
  });

  const { page, close, pageErrors } = await open(server.url, department);
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let held = 0;
  await page.route(server.url, async (route) => {
    const body = route.request().postData() ?? '';
    // Every page after the first waits until the test has seen the first drawn.
    if (body.includes('DepartmentEmployees') && JSON.parse(body).variables?.after) {
      held++;
      await released;
    }
    await route.continue();
  });
  await page.locator('#employees li').nth(99).waitFor({ timeout: 30_000 });
  const drawnEarly = await page.locator('#employees li').count();
  expect(held).toBe(1);
  expect(drawnEarly).toBe(100);
  expect(await text(page, '#status')).toBe('loading…');
  release();
  await page.locator('#employees li').nth(999).waitFor({ timeout: 60_000 });
  await page.locator('#status', { hasText: /^live$/ }).waitFor({ timeout: 30_000 });
  expect(await page.locator('#employees li').count()).toBe(1000);
  expect(pageErrors).toEqual([]);
  await close();
});
