/**
 * The offline-first web client (examples/web-client, on packages/sync) in a real browser: Debian's Chromium
 * (playwright-core) loads a department, goes offline, reloads and still lists it, makes an edit and a create
 * offline while another client changes the same employee and a third creates one through the API; back online, the
 * create is stored once (its first answer lost on the way back, it is sent again and acknowledged once), the edit
 * comes back as a conflict with both versions, the user's choice is what is stored, and the third client's employee
 * appears without a reload. And 20 pages follow one partition while 200 writes run, each dropped five times (a proxy
 * closes its connections): each page shows the partition as stored at the end.
 */
import pLimit from 'p-limit';
import type { Browser } from 'playwright-core';
import type { TestServer } from './support/harness';
import { severableLink as newLink, type SeverableLink } from './support/severable-link';
import { startWebClientRig, type WebClientRig } from './support/web-client';
import { pause } from './support/wait';

const SECRET = 'an-offline-client-secret-of-32-chars!';
const DEPARTMENT = 'Marketing';

let rig: WebClientRig;
let webUrl: string;
let server: TestServer;
let browser: Browser;
let token: string;

beforeAll(async () => {
  rig = await startWebClientRig(SECRET);
  ({ webUrl, server, browser, token } = rig);
}, 60_000);

/** The proxies the swarm's clients go through (severableLink), closed whatever the test's outcome. */
const links = new Set<SeverableLink>();

afterAll(async () => {
  await Promise.all([...links].map((l) => l.close()));
  await rig?.close();
});

/**
 * Another client: one GraphQL request straight to the API, sent again after an OVERLOADED refusal (made before the
 * request ran: nothing of it was done), as a client does.
 */
async function api(query: string, variables: Record<string, unknown>): Promise<any> {
  for (let attempt = 1; ; attempt++) {
    const res = await fetch(server.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ query, variables }),
    });
    const body = (await res.json()) as { data?: any; errors?: Array<{ extensions?: { code?: string } }> };
    if (attempt < 20 && body.errors?.length === 1 && body.errors[0].extensions?.code === 'OVERLOADED') {
      await pause(250, 'backoff');
      continue;
    }
    expect(body.errors).toBeUndefined();
    return body.data;
  }
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

test('20 clients follow one partition while 200 writes run, each dropped and resumed 5 times: every local copy equals the partition', async () => {
  const department = `SWARM ${Date.now() % 1_000_000}`;
  await api('mutation ($input: CreateDepartmentInput!) { createDepartment(input: $input) { department { id } } }', {
    input: { id: department, name: department },
  });
  // Opened four at a time: twenty pages starting at once on two cores beside other test files would wait on each
  // other, not on the server, for the first answer.
  const opening = pLimit(4);
  const clients = await Promise.all(
    Array.from({ length: 20 }, () =>
      opening(async () => {
        // Each client reaches the API through a proxy of its own: a drop closes its connections (a browser's offline
        // mode alone keeps an open stream).
        const link = await newLink(new URL(server.url));
        links.add(link);
        const api = server.url.replace(/:\d+\//, `:${link.port}/`);
        const context = await browser.newContext();
        const page = await context.newPage();
        await page.goto(`${webUrl}?${new URLSearchParams({ api, department, token }).toString()}`);
        await page.locator('#status', { hasText: 'live' }).waitFor({ timeout: 60_000 });
        // Counts the times the page lost its subscription (its status says so).
        await page.evaluate(`{
        const status = document.getElementById('status');
        window.lost = 0;
        new MutationObserver(() => { if (status.textContent.startsWith('offline')) window.lost++; })
          .observe(status, { childList: true, characterData: true, subtree: true });
      }`);
        return { context, page, link };
      }),
    ),
  );

  // 200 writes, four at a time: creates, title changes and deletes of 40 ids (a deleted id may be created again).
  const exists = new Map<number, boolean>();
  let written = 0;
  const writer = async (w: number) => {
    for (let n = w; n < 200; n += 4) {
      const id = 70_000_000 + (n % 40) * 4 + w; // each writer its own ids: no two writes race on one key
      const input = { departmentId: department, id: String(id) };
      if (!exists.get(id)) {
        await api('mutation ($input: CreateEmployeeInput!) { createEmployee(input: $input) { employee { id } } }', {
          input: { ...input, firstName: 'Swarm', lastName: `N${id}`, email: `swarm.${id}@example.test` },
        });
        exists.set(id, true);
      } else if (n % 3 === 0) {
        await api('mutation ($input: DeleteEmployeeInput!) { deleteEmployee(input: $input) { employee { id } } }', { input });
        exists.set(id, false);
      } else {
        await api('mutation ($input: UpdateEmployeeInput!) { updateEmployee(input: $input) { employee { id } } }', { input: { ...input, title: `T${n}` } });
      }
      written++;
    }
  };
  // Each client dropped 5 times meanwhile: offline for 0.3–1 s, then back.
  let drops = 0;
  const dropper = async ({ context, link }: (typeof clients)[number], i: number) => {
    for (let k = 0; k < 5; k++) {
      await pause(300 + ((i * 7 + k * 13) % 10) * 150, 'pace'); // online for 0.3–1.65 s
      await context.setOffline(true);
      link.sever();
      await pause(300 + ((i * 11 + k * 5) % 8) * 100, 'pace'); // offline for 0.3–1 s
      link.restore();
      await context.setOffline(false);
      drops++;
    }
  };
  await Promise.all([...[0, 1, 2, 3].map(writer), ...clients.map((c, i) => dropper(c, i))]);
  expect(written).toBe(200);
  expect(drops).toBe(100);

  // The partition as stored, and each client's copy as its page shows it.
  const data = await api('query ($id: ID!) { department(id: $id) { employees(first: 100) { edges { node { id firstName lastName title } } } } }', {
    id: department,
  });
  const expected = data.department.employees.edges
    .map(
      (e: { node: { id: string; firstName: string; lastName: string; title: string | null } }) =>
        `${e.node.id} ${e.node.firstName} ${e.node.lastName}${e.node.title ? ` — ${e.node.title}` : ''}`,
    )
    .sort();
  expect(expected.length).toBe([...exists.values()].filter(Boolean).length);
  const SHOWN = "[...document.querySelectorAll('#employees li')].map((li) => li.dataset.id + ' ' + li.textContent).sort()";
  // Settled: the page has shown the partition as stored for 2 s (a page that resumed late passes through older
  // states while it applies what it missed).
  const SETTLED = `(() => {
    if (JSON.stringify(${SHOWN}) !== ${JSON.stringify(JSON.stringify(expected))}) return (window.equalSince = 0), false;
    window.equalSince ||= Date.now();
    return Date.now() - window.equalSince >= 2000;
  })()`;
  for (const { page } of clients) {
    await page.waitForFunction(SETTLED, undefined, { timeout: 60_000, polling: 250 }).catch(() => undefined);
    const got = await page.evaluate(SHOWN);
    expect(got).toEqual(expected);
    expect(await page.evaluate('window.lost')).toBeGreaterThanOrEqual(5);
  }
  await Promise.all(clients.map((c) => c.context.close()));
}, 240_000);
