/**
 * The offline-first web client (examples/web-client, on packages/sync) in a real browser: Debian's Chromium
 * (playwright-core) loads a department, goes offline, reloads and still lists it, makes an edit and a create
 * offline while another client changes the same employee and a third creates one through the API; back online, the
 * create is stored once (its first answer lost on the way back, it is sent again and acknowledged once), the edit
 * comes back as a conflict with both versions, the user's choice is what is stored, and the third client's employee
 * appears without a reload.
 */
import { SignJWT } from 'jose';
import type { Browser } from 'playwright-core';
import type { TestServer } from './support/harness';
import { startWebClientRig, type WebClientRig } from './support/web-client';

const SECRET = 'an-offline-client-secret-of-32-chars!';
const DEPARTMENT = 'Marketing';

let rig: WebClientRig;
let webUrl: string;
let server: TestServer;
let browser: Browser;
let token: string;

beforeAll(async () => {
  rig = await startWebClientRig(SECRET);
  ({ webUrl, server, browser } = rig);
  token = await new SignJWT({ sub: 'admin@example.test', roles: ['hr-admin'] })
    .setProtectedHeader({ alg: 'HS256' })
    .setExpirationTime('10m')
    .sign(new TextEncoder().encode(SECRET));
}, 60_000);

afterAll(() => rig?.close());

/** Another client: one GraphQL request straight to the API. */
async function api(query: string, variables: Record<string, unknown>): Promise<any> {
  const res = await fetch(server.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await res.json()) as { data?: any; errors?: unknown[] };
  expect(body.errors).toBeUndefined();
  return body.data;
}

const READ = 'query ($d: ID!, $id: ID!) { employee(departmentId: $d, id: $id) { id etag firstName lastName title } }';

test('offline: listed after a reload, an edit and a create kept and sent on return; the create stored once, the edit a conflict resolved by the user; a third client seen without a reload', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  const failures: string[] = [];
  page.on('pageerror', (e) => failures.push(e.message));
  await page.goto(`${webUrl}?${new URLSearchParams({ api: server.url, department: DEPARTMENT, token }).toString()}`);
  await page.locator('#status', { hasText: 'live' }).waitFor({ timeout: 15_000 });
  await page.evaluate('navigator.serviceWorker.ready.then(() => true)'); // its files kept for offline
  const listed = await page.locator('#employees li').count();
  expect(listed).toBeGreaterThan(0);
  const edited = (await page.locator('#employees li').first().getAttribute('data-id'))!;

  // Offline, and the page opened again: its files from the service worker, the department from IndexedDB.
  await context.setOffline(true);
  await page.reload();
  await page.locator(`#employees li[data-id="${edited}"]`).waitFor({ timeout: 10_000 });
  expect(await page.locator('#employees li').count()).toBe(listed);
  await page.locator('#status', { hasText: 'offline' }).waitFor({ timeout: 15_000 });

  // An edit and a create made offline: shown at once, pending.
  await page.fill('#edit input[name=id]', edited);
  await page.fill('#edit input[name=title]', 'Edited offline');
  await page.click('#edit button[type=submit]');
  const created = String(80_000_000 + Math.floor(Math.random() * 9_000_000));
  await page.fill('#create input[name=id]', created);
  await page.fill('#create input[name=firstName]', 'Offline');
  await page.fill('#create input[name=lastName]', `Created${created}`);
  await page.fill('#create input[name=email]', `offline.${created}@example.test`);
  await page.click('#create button[type=submit]');
  await page.locator(`#employees li.pending[data-id="${created}"]`).waitFor();
  expect(await page.locator(`#employees li[data-id="${edited}"]`).textContent()).toContain('Edited offline (pending)');
  expect(await page.locator('#pending').textContent()).toBe('2');

  // Meanwhile another client changes the same employee, and a third creates one.
  await api('mutation ($input: UpdateEmployeeInput!) { updateEmployee(input: $input) { employee { id } } }', {
    input: { departmentId: DEPARTMENT, id: edited, title: 'Changed by another client' },
  });
  const third = String(Number(created) + 1);
  await api('mutation ($input: CreateEmployeeInput!) { createEmployee(input: $input) { employee { id } } }', {
    input: { departmentId: DEPARTMENT, id: third, firstName: 'Third', lastName: `Client${third}`, email: `third.${third}@example.test` },
  });

  // The create's first answer is lost on its way back (the server stored it): the page sends it again.
  let createsSent = 0;
  await page.route(server.url, async (route) => {
    const body = route.request().postData() ?? '';
    if (!body.includes('createEmployee')) return route.continue();
    createsSent++;
    if (createsSent > 1) return route.continue();
    await route.fetch();
    await route.abort('connectionreset');
  });
  await context.setOffline(false);

  // Back online: the create acknowledged once, the edit a conflict with both versions.
  const conflict = page.locator(`#conflicts li[data-id="${edited}"]`);
  await conflict.waitFor({ timeout: 20_000 });
  expect(await conflict.textContent()).toContain('yours "');
  expect(await conflict.textContent()).toContain('Edited offline');
  expect(await conflict.textContent()).toContain('Changed by another client');
  await page.locator(`#employees li[data-id="${created}"]:not(.pending)`).waitFor({ timeout: 20_000 });
  expect(createsSent).toBe(2);
  const stored = await api(READ, { d: DEPARTMENT, id: created });
  expect(stored.employee).toMatchObject({ firstName: 'Offline', lastName: `Created${created}` });
  // Until the user chooses, nothing overwrote the other client's change.
  expect((await api(READ, { d: DEPARTMENT, id: edited })).employee.title).toBe('Changed by another client');

  // The user keeps theirs: sent again, based on the stored ETag.
  await conflict.locator('button[data-choice=mine]').click();
  await page.locator(`#employees li:not(.pending)[data-id="${edited}"]`, { hasText: 'Edited offline' }).waitFor({ timeout: 20_000 });
  expect(await page.locator('#pending').textContent()).toBe('0');
  expect(await page.locator('#conflicts li').count()).toBe(0);
  expect((await api(READ, { d: DEPARTMENT, id: edited })).employee.title).toBe('Edited offline');

  // The third client's employee came by the subscription, without a reload.
  await page.locator(`#employees li[data-id="${third}"]`).waitFor({ timeout: 20_000 });
  expect(await page.locator(`#employees li[data-id="${created}"]`).count()).toBe(1);
  expect(await page.locator('#employees li').count()).toBe(listed + 2);
  expect(await page.locator('#error').textContent()).not.toMatch(/CONFLICT|BAD_USER_INPUT|FORBIDDEN/);
  expect(failures).toEqual([]);
  await context.close();
}, 120_000);
