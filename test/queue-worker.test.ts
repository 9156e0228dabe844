/**
 * QueueWorker against real Azurite queues: every message handled once under concurrency, retryLater,
 * poisoning with the error, stop() waiting for a message in hand, competing consumers, lag stats, a failing
 * service not ending the loop. Visibility timeouts of 1 s keep the suite to seconds. Plus LagStats alone.
 */
import { randomBytes } from 'node:crypto';
import { ErrorCode, isTablegraphError, TablegraphError } from '../src/errors';
import { QueueStore, queueName } from '../src/storage/queue-store';
import { LagStats } from '../src/worker/lag-stats';
import { HandlerResult, QueueWorker, QueueWorkerOptions } from '../src/worker/queue-worker';
import { pause, until } from './support/wait';

const connectionString = process.env.AZURE_STORAGE_CONNECTION_STRING ?? '';
const prefix = `qw${randomBytes(4).toString('hex')}`;
const queues = new QueueStore({ connectionString, retry: { maxTries: 2, retryDelayInMs: 50 } });
const made: string[] = [];
const done: HandlerResult = { kind: 'done' };

/** A fresh queue and poison queue, and worker options for them with short timings. */
async function setup(base: string, texts: string[]): Promise<Omit<QueueWorkerOptions, 'handle'>> {
  const queue = queueName(prefix, base);
  const poisonQueue = queueName(prefix, `${base}-poison`);
  made.push(queue, poisonQueue);
  await queues.ensureQueue(queue);
  await queues.ensureQueue(poisonQueue);
  for (const t of texts) await queues.send(queue, t);
  return { queues, queue, poisonQueue, visibilityTimeoutSeconds: 1, idleBackoffMs: { min: 10, max: 100 } };
}

const numbered = (n: number, tag: string): string[] => Array.from({ length: n }, (_, i) => `${tag}${i}`);

afterAll(async () => {
  await Promise.all(made.map((q) => queues.deleteQueue(q)));
});

describe('QueueWorker', () => {
  it('handles every message exactly once, several at a time but never more than `concurrency`', async () => {
    const texts = numbered(40, 'm');
    const opts = await setup('once', texts);
    const seen: string[] = [];
    let running = 0;
    let peak = 0;
    const worker = new QueueWorker({
      ...opts,
      concurrency: 4,
      batchSize: 8,
      handle: async (text) => {
        peak = Math.max(peak, ++running);
        await pause(15, 'latency'); // a handler's work: long enough for others to start beside it
        seen.push(text);
        running--;
        return done;
      },
    });
    expect(await worker.drain()).toEqual({ handled: 40, poisoned: 0, retried: 0 });
    expect([...seen].sort()).toEqual([...texts].sort());
    expect(peak).toBeGreaterThan(1);
    expect(peak).toBeLessThanOrEqual(4);
    expect(await queues.approximateDepth(opts.queue)).toBe(0);
    expect(worker.stats()).toMatchObject({ handled: 40, failed: 0, running: false });
  });

  it('re-delivers a message after a retryLater delay', async () => {
    const opts = await setup('later', ['wait for version 2']);
    const deliveries: number[] = [];
    const worker = new QueueWorker({
      ...opts,
      handle: async (_text, meta) => {
        deliveries.push(meta.dequeueCount);
        return meta.dequeueCount === 1 ? { kind: 'retryLater', afterMs: 300 } : done; // 300 ms → 1 s
      },
    });
    expect(await worker.drain({ timeoutMs: 15_000 })).toEqual({ handled: 1, poisoned: 0, retried: 1 });
    expect(deliveries).toEqual([1, 2]);
    expect(await queues.approximateDepth(opts.queue)).toBe(0);
  });

  it('moves a message that keeps failing to the poison queue with its error, and handles the rest', async () => {
    const good = numbered(5, 'ok');
    const opts = await setup('poison', ['bad', ...good]);
    const handled: string[] = [];
    let badCalls = 0;
    const worker = new QueueWorker({
      ...opts,
      maxDequeueCount: 2,
      handle: async (text) => {
        if (text === 'bad') {
          badCalls++;
          throw new Error(`boom ${badCalls}`);
        }
        handled.push(text);
        return done;
      },
    });
    expect(await worker.drain({ timeoutMs: 20_000 })).toEqual({ handled: 5, poisoned: 1, retried: 0 });
    expect(handled.sort()).toEqual(good);
    expect(badCalls).toBe(2); // received a third time, it went to the poison queue unhandled
    expect(worker.stats()).toMatchObject({ failed: 2, poisoned: 1, lastError: 'boom 2' });
    expect(await queues.approximateDepth(opts.queue)).toBe(0);

    const [entry] = await queues.receive(opts.poisonQueue, { max: 32, visibilityTimeoutSeconds: 30 });
    const body = JSON.parse(entry.text) as Record<string, unknown>;
    expect(body).toMatchObject({ message: 'bad', dequeueCount: 3, error: 'boom 2' });
    expect(typeof body.id).toBe('string');
    expect(Number.isNaN(Date.parse(String(body.poisonedAt)))).toBe(false);
  });

  it('a message that fails only because storage is throttled or away is sent again later, never poisoned', async () => {
    const opts = await setup('transient', ['throttled']);
    let calls = 0;
    const worker = new QueueWorker({
      ...opts,
      maxDequeueCount: 2,
      handle: async () => {
        calls++;
        // Storage busy for the first five attempts — past the poison threshold — then back.
        if (calls <= 5) throw new TablegraphError(ErrorCode.STORAGE_BUSY, 'busy', { retryAfterMs: 100 });
        return done;
      },
    });
    const result = await worker.drain({ timeoutMs: 30_000 });
    expect(calls).toBe(6);
    expect(result.handled).toBe(1);
    expect(result.poisoned).toBe(0);
    expect(await queues.approximateDepth(opts.poisonQueue)).toBe(0);
    expect(await queues.approximateDepth(opts.queue)).toBe(0);
  });

  it('stop() waits for the message in hand, keeps it hidden meanwhile, then receives nothing new', async () => {
    const opts = await setup('stop', ['slow']);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const calls: string[] = [];
    let finished = false;
    const worker = new QueueWorker({
      ...opts,
      handle: async (text) => {
        calls.push(text);
        await gate;
        finished = true;
        return done;
      },
    });
    worker.start();
    await until('the handler to start', () => calls.length === 1, { everyMs: 10 });
    // Past the 1 s visibility timeout: without the lease renewals the running loop would receive it again.
    await pause(1600, 'clock');
    expect(calls).toEqual(['slow']);

    let stopped = false;
    const stopping = worker.stop().then(() => (stopped = true));
    await pause(200, 'quiet'); // stop() waits for the message in hand
    expect(stopped).toBe(false);
    expect(worker.stats().running).toBe(false);
    release();
    await stopping;
    expect(finished).toBe(true);
    expect(worker.stats().handled).toBe(1);
    expect(await queues.approximateDepth(opts.queue)).toBe(0);
    await worker.stop(); // idempotent

    await queues.send(opts.queue, 'after stop');
    await pause(300, 'quiet'); // a stopped worker receives nothing
    expect(calls).toEqual(['slow']);
    const [left] = await queues.receive(opts.queue, { max: 1, visibilityTimeoutSeconds: 30 });
    expect(left).toMatchObject({ text: 'after stop', dequeueCount: 1 }); // nobody received it before
  });

  it('shares a queue between two competing workers with no message handled twice', async () => {
    const texts = numbered(60, 'c');
    const opts = await setup('compete', texts);
    const byWorker: string[][] = [[], []];
    const make = (i: number): QueueWorker =>
      new QueueWorker({
        ...opts,
        visibilityTimeoutSeconds: 30,
        concurrency: 4,
        handle: async (text) => {
          await pause(5, 'latency'); // a handler's work
          byWorker[i].push(text);
          return done;
        },
      });
    const [a, b] = [make(0), make(1)];
    const [ra, rb] = await Promise.all([a.drain(), b.drain()]);
    const all = [...byWorker[0], ...byWorker[1]];
    expect(ra.handled + rb.handled).toBe(60);
    expect(all.sort()).toEqual([...texts].sort()); // same length and content: no duplicates
    expect(byWorker[0].length).toBeGreaterThan(0);
    expect(byWorker[1].length).toBeGreaterThan(0);
  });

  it('records lags from the caller’s enqueue time, falling back to insertedOn', async () => {
    const at = Date.now() - 60_000;
    const opts = await setup(
      'lag',
      numbered(3, 'x').map((id) => JSON.stringify({ id, at })),
    );
    await queues.send(opts.queue, 'not json');
    const worker = new QueueWorker({
      ...opts,
      handle: async () => done,
      enqueuedAt: (text) => (JSON.parse(text) as { at: number }).at,
    });
    await worker.drain();
    const lag = worker.stats().lag;
    expect(lag.count).toBe(4);
    expect(lag.maxMs).toBeGreaterThanOrEqual(60_000);
    expect(lag.p50Ms).toBeGreaterThanOrEqual(60_000); // 3 of 4 carry the minute-old time
    expect(lag.lastAt).toBeGreaterThanOrEqual(at);
  });

  it('keeps polling through storage errors, and drain() gives up after its timeout', async () => {
    const dead = connectionString.replace(/QueueEndpoint=http:\/\/[^:]+:\d+/, 'QueueEndpoint=http://127.0.0.1:1');
    const offline = new QueueStore({ connectionString: dead, retry: { maxTries: 1 }, timeoutMs: 1000 });
    const worker = new QueueWorker({
      queues: offline,
      queue: `${prefix}-dead`,
      poisonQueue: `${prefix}-dead-poison`,
      idleBackoffMs: { min: 10, max: 50 },
      handle: async () => done,
    });
    const err = await worker.drain({ timeoutMs: 500 }).catch((e: unknown) => e);
    expect(isTablegraphError(err, ErrorCode.STORAGE_UNAVAILABLE) && err.details.reason).toBe('drainTimeout');
    expect(worker.stats()).toMatchObject({ running: false, lastError: expect.stringContaining('Queue service') });

    worker.start();
    await pause(200, 'quiet'); // several receives fail meanwhile
    expect(worker.stats().running).toBe(true); // still looping despite the errors
    await worker.stop();
    expect(worker.stats().running).toBe(false);
  });

  it('refuses invalid options with CONFIG_INVALID', () => {
    const base = { queues, queue: 'abc', poisonQueue: 'abc-poison', handle: async () => done };
    for (const bad of [
      { batchSize: 33 },
      { concurrency: 0 },
      { poisonQueue: 'abc' },
      { queue: 'A_B' },
      { visibilityTimeoutSeconds: 0 },
      { maxDequeueCount: 0 },
      { idleBackoffMs: { min: 10, max: 5 } },
    ]) {
      let code: unknown;
      try {
        new QueueWorker({ ...base, ...bad });
      } catch (e) {
        code = isTablegraphError(e) && e.code;
      }
      expect([bad, code]).toEqual([bad, ErrorCode.CONFIG_INVALID]);
    }
  });
});

describe('LagStats', () => {
  it('summarises nearest-rank percentiles and keeps only the last `capacity` lags', () => {
    const empty = new LagStats().summary();
    expect(empty).toEqual({ count: 0, p50Ms: 0, p99Ms: 0, maxMs: 0, windowMs: 300_000 });

    const s = new LagStats(100);
    for (let i = 100; i >= 1; i--) s.record(i);
    expect(s.summary()).toMatchObject({ count: 100, p50Ms: 50, p99Ms: 99, maxMs: 100 });

    const ring = new LagStats(3);
    for (const ms of [1000, 2, 3, 4, -5]) ring.record(ms);
    expect(ring.summary()).toMatchObject({ count: 3, p50Ms: 3, maxMs: 4 }); // 1000 dropped, -5 counted as 0
    expect(ring.summary().lastAt).toEqual(expect.any(Number));
    expect(() => new LagStats(0)).toThrow(RangeError);
  });

  it('by default covers the whole 5-minute window, not the last 1,000 messages: 50 messages a second for 4 minutes', () => {
    let now = Date.UTC(2026, 10, 22, 12);
    const s = new LagStats(undefined, undefined, () => now);
    for (let i = 0; i < 12_000; i++) {
      s.record(i < 600 ? 3000 : 20); // a slow first 12 seconds, then fast
      now += 20;
    }
    expect(s.summary()).toMatchObject({ count: 12_000, p50Ms: 20, maxMs: 3000, windowMs: 300_000 });
    expect(s.summary().p99Ms).toBe(3000); // 600 of 12,000: the slow start is in the p99
  });

  it('covers a recent time window only: an hour after a burst, its lags no longer show', () => {
    let now = Date.UTC(2026, 10, 22, 12);
    const s = new LagStats(1000, 60_000, () => now);
    for (let i = 0; i < 100; i++) s.record(62_000); // the burst
    expect(s.summary()).toMatchObject({ count: 100, p99Ms: 62_000 });
    now += 3_600_000;
    expect(s.summary()).toMatchObject({ count: 0, p50Ms: 0, p99Ms: 0, maxMs: 0, windowMs: 60_000 });
    s.record(40);
    expect(s.summary()).toMatchObject({ count: 1, p50Ms: 40, p99Ms: 40, lastAt: now });
  });
});
