/**
 * Run-time protection: the server-wide admission of storage reads (round-robin between requests, OVERLOADED when
 * its queue is full), a request's deadline (no storage call after it), and rate limits per caller.
 */
import { SignJWT } from 'jose';
import { expectNoRequestReads } from './support/request-reads';
import { StorageAdmission } from '../src/read/admission';
import { RequestAdmission } from '../src/read/request-admission';
import { gate } from './support/fanout-fixtures';
import { startTestServer, type TestServer } from './support/harness';
import { pause, until } from './support/wait';

describe('StorageAdmission', () => {
  test('lanes are served round-robin: one call of a light request is not queued behind a heavy request', async () => {
    const admission = new StorageAdmission({ maxInFlight: 1, maxQueued: 100 });
    const order: string[] = [];
    const held = gate();
    const first = admission.run('heavy', async () => {
      order.push('heavy-0');
      await held.wait;
    });
    const heavy = Array.from({ length: 10 }, (_, i) => admission.run('heavy', async () => void order.push(`heavy-${i + 1}`)));
    const light = admission.run('light', async () => void order.push('light'));
    expect(admission.load()).toEqual({ inFlight: 1, queued: 11 });
    held.open();
    await Promise.all([first, ...heavy, light]);
    expect(order.indexOf('light')).toBe(2); // right after the heavy call that was waiting first
    expect(admission.load()).toEqual({ inFlight: 0, queued: 0 });
  });

  test('a call beyond the queue is refused with OVERLOADED; the queue drains', async () => {
    const admission = new StorageAdmission({ maxInFlight: 1, maxQueued: 2 });
    const held = gate();
    const running = [admission.run('a', () => held.wait), admission.run('b', async () => 1), admission.run('c', async () => 2)];
    expect(admission.saturated()).toBe(true);
    await expect(admission.run('d', async () => 3)).rejects.toMatchObject({ code: 'OVERLOADED' });
    held.open();
    await Promise.all(running);
    expect(admission.saturated()).toBe(false);
  });
});

describe('RequestAdmission', () => {
  test('heavy requests run a few at a time, first come first served; light ones never wait', async () => {
    const admission = new RequestAdmission({ maxHeavy: 2, heavyCalls: 10, initialRunMs: 10 });
    const first = await admission.admit(50);
    const second = await admission.admit(50);
    const started: number[] = [];
    const waiting = [3, 4, 5].map((n) => admission.admit(50).then((t) => (started.push(n), t)));
    expect(await admission.admit(10)).toBeDefined(); // light: at once
    expect(admission.load()).toMatchObject({ running: 2, waiting: 3 });
    first.release();
    first.release(); // twice is once
    await new Promise((r) => setImmediate(r));
    expect(started).toEqual([3]);
    second.release();
    const [third, fourth] = await Promise.all(waiting.slice(0, 2));
    expect(started).toEqual([3, 4]);
    third.release();
    (await waiting[2]).release();
    fourth.release();
    expect(admission.load()).toMatchObject({ running: 0, waiting: 0 });
  });

  test('a heavy request that could not finish before its deadline is refused at once with OVERLOADED and a Retry-After', async () => {
    const admission = new RequestAdmission({ maxHeavy: 1, heavyCalls: 1, initialRunMs: 1000 });
    const running = await admission.admit(5, Date.now() + 30_000);
    const queued = admission.admit(5, Date.now() + 30_000); // 1 s to wait, 1 s to run: fits half of 30 s
    const t = Date.now();
    await expect(admission.admit(5, Date.now() + 3000)).rejects.toMatchObject({
      code: 'OVERLOADED',
      details: { reason: 'HeavyRequestsQueued', retryAfterSeconds: 2 },
    });
    expect(Date.now() - t).toBeLessThan(100);
    running.release();
    (await queued).release();
  });

  test('a request still waiting when only its run time is left is refused then, not left to time out', async () => {
    const admission = new RequestAdmission({ maxHeavy: 1, heavyCalls: 1, initialRunMs: 50 });
    const running = await admission.admit(5);
    const late = admission.admit(5, Date.now() + 400);
    await expect(late).rejects.toMatchObject({ code: 'OVERLOADED' });
    expect(admission.load().waiting).toBe(0);
    running.release();
    expect(admission.load().running).toBe(0);
  });
});

describe('the server', () => {
  afterEach(() => jest.restoreAllMocks());

  test('many heavy queries at once: each completes or is refused early with 503 OVERLOADED and Retry-After, none times out; a light query is served', async () => {
    // Each heavy query (the departments, then their employees, then each one's department) makes 3 range queries
    // of 100 ms here; 30 of them at once, sharing 8 storage calls in flight, all end past their 1 s deadline.
    const server = await startTestServer({ TABLEGRAPH_REQUEST_TIMEOUT_MS: '1000', TABLEGRAPH_MAX_HEAVY_REQUESTS: '2', TABLEGRAPH_HEAVY_REQUEST_CALLS: '2' });
    try {
      const range = server.store.queryRange.bind(server.store);
      jest.spyOn(server.store, 'queryRange').mockImplementation(async (q, o) => {
        await pause(100, 'latency');
        return range(q, o);
      });
      const heavy = '{ departments(first: 10) { edges { node { id employees(first: 10) { edges { node { id department { name } } } } } } } }';
      const send = async (query: string) => {
        const t = performance.now();
        const res = await fetch(server.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query }) });
        return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as any, ms: performance.now() - t };
      };
      const answers = await Promise.all([...Array.from({ length: 30 }, () => send(heavy)), send('{ department(id: "Sales") { name } }')]);
      const light = answers.pop()!;
      expect(light.body).toMatchObject({ data: { department: { name: 'Sales' } } });
      const codes = answers.map((a) => a.body.errors?.[0]?.extensions?.code ?? 'OK');
      expect(codes.filter((c) => c !== 'OK' && c !== 'OVERLOADED')).toEqual([]); // no REQUEST_TIMEOUT
      expect(codes.filter((c) => c === 'OK').length).toBeGreaterThanOrEqual(2);
      const refused = answers.filter((a) => a.body.errors);
      expect(refused.length).toBeGreaterThan(0);
      for (const r of refused) {
        expect([r.status, r.body.errors[0].extensions.reason, Number(r.retryAfter)]).toEqual([503, 'HeavyRequestsQueued', expect.any(Number)]);
        expect(Number(r.retryAfter)).toBeGreaterThanOrEqual(1);
      }
    } finally {
      await server.close();
    }
  });

  test('a request past its deadline sends no further storage call: REQUEST_TIMEOUT', async () => {
    const server = await startTestServer({ TABLEGRAPH_REQUEST_TIMEOUT_MS: '100' });
    try {
      const get = server.store.getEntity.bind(server.store);
      jest.spyOn(server.store, 'getEntity').mockImplementation(async (a, o) => {
        await pause(150, 'latency');
        return get(a, o);
      });
      const range = jest.spyOn(server.store, 'queryRange');
      // Wave 1: the department (slow, past the deadline); wave 2 — its employees — must not be sent.
      const r = await server.query('{ department(id: "Sales") { name employees { edges { node { id } } } } }');
      expect(r.errors?.[0].extensions).toMatchObject({ code: 'REQUEST_TIMEOUT' });
      expectNoRequestReads([range], server.config.tablePrefix);
    } finally {
      await server.close();
    }
  });

  test('storage reads queued to the limit: a new request is turned away at the door, 503 OVERLOADED', async () => {
    const server = await startTestServer({ TABLEGRAPH_MAX_STORAGE_INFLIGHT: '1', TABLEGRAPH_MAX_STORAGE_QUEUE: '1' });
    try {
      const held = gate();
      const get = server.store.getEntity.bind(server.store);
      jest.spyOn(server.store, 'getEntity').mockImplementation(async (a, o) => {
        await held.wait;
        return get(a, o);
      });
      const first = server.query('{ department(id: "Sales") { name } }');
      const second = server.query('{ department(id: "Marketing") { name } }');
      // Once both are in (one call in flight, one waiting), a request that reads nothing is turned away at the door;
      // asked until then (answered while the second is still on its way in).
      const ask = () =>
        fetch(server.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: '{ __typename }' }) });
      const res = await until('the door to refuse', async () => {
        const r = await ask();
        return r.status === 503 ? r : void (await r.text());
      });
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('1');
      expect(((await res.json()) as any).errors[0].extensions.code).toBe('OVERLOADED');
      held.open();
      expect((await first).data).toEqual({ department: { name: 'Sales' } });
      expect((await second).data).toEqual({ department: { name: 'Marketing' } });
    } finally {
      await server.close();
    }
  });

  test('rate limits per caller: each subject has a budget of its own; over it, 429 RATE_LIMITED with Retry-After', async () => {
    const secret = 'a-test-secret-of-at-least-32-characters';
    const server: TestServer = await startTestServer({ TABLEGRAPH_RATE_LIMIT: '3', TABLEGRAPH_JWT_SECRET: secret });
    const token = (sub: string) => new SignJWT({ sub }).setProtectedHeader({ alg: 'HS256' }).setExpirationTime('5m').sign(new TextEncoder().encode(secret));
    const ask = async (t: string) =>
      fetch(server.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${t}` },
        body: JSON.stringify({ query: '{ __typename }' }),
      });
    try {
      const ana = await token('ana@example.test');
      for (let i = 0; i < 3; i++) expect((await ask(ana)).status).toBe(200);
      const refused = await ask(ana);
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(((await refused.json()) as any).errors[0].extensions).toMatchObject({ code: 'RATE_LIMITED' });
      // Another subject has a budget of its own.
      expect((await ask(await token('bo@example.test'))).status).toBe(200);
    } finally {
      await server.close();
    }
  });
});
