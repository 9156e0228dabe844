/**
 * QueueStore against the real Azurite the test run starts: send, receive, delete, defer, depth, the lease that
 * keeps a message hidden, the 64 KiB limit checked before sending, queue-name validation and error mapping.
 */
import { randomBytes } from 'node:crypto';
import { ErrorCode, isTablegraphError, TablegraphError } from '../src/errors';
import { MAX_MESSAGE_BYTES, QueueStore, queueName } from '../src/storage/queue-store';
import { pause } from './support/wait';

const connectionString = process.env.AZURE_STORAGE_CONNECTION_STRING ?? '';
const prefix = `qs${randomBytes(4).toString('hex')}`;
const store = new QueueStore({ connectionString, retry: { maxTries: 2, retryDelayInMs: 50 } });
const made: string[] = [];

async function fresh(base: string): Promise<string> {
  const name = queueName(prefix, base);
  await store.ensureQueue(name);
  made.push(name);
  return name;
}

async function rejection(p: Promise<unknown> | (() => unknown)): Promise<TablegraphError> {
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (e) {
    if (isTablegraphError(e)) return e;
    throw e;
  }
  throw new Error('expected a TablegraphError, the call succeeded');
}

afterAll(async () => {
  await Promise.all(made.map((q) => store.deleteQueue(q)));
});

describe('queueName', () => {
  it('lower-cases and joins the prefix with a hyphen, or uses the base alone', () => {
    expect(queueName('tAbc12', 'fanout')).toBe('tabc12-fanout');
    expect(queueName('', 'fanout')).toBe('fanout');
    expect(queueName('', 'FanOut-Poison')).toBe('fanout-poison');
  });

  it.each([
    ['', 'ab'], // too short
    ['', 'a'.repeat(64)], // too long
    ['x', 'a'.repeat(62)], // 64 with the prefix
    ['', 'fan--out'], // double hyphen
    ['', '-fanout'],
    ['', 'fanout-'],
    ['t-', 'fanout'], // the join makes a double hyphen
    ['', 'fan_out'],
    ['', 'fanöut'],
  ])('refuses %j + %j with CONFIG_INVALID', async (p, base) => {
    const err = await rejection(() => queueName(p, base));
    expect(err.code).toBe(ErrorCode.CONFIG_INVALID);
  });

  it('accepts 3 and 63 characters', () => {
    expect(queueName('', 'abc')).toBe('abc');
    expect(queueName('', 'a'.repeat(63))).toHaveLength(63);
  });
});

describe('QueueStore', () => {
  it('sends, receives with a visibility timeout, and deletes', async () => {
    const q = await fresh('basic');
    for (const text of ['one', 'two <&> "three"', 'drei ünïcödé']) await store.send(q, text);
    expect(await store.approximateDepth(q)).toBe(3);

    const got = await store.receive(q, { max: 32, visibilityTimeoutSeconds: 30 });
    expect(got.map((m) => m.text).sort()).toEqual(['drei ünïcödé', 'one', 'two <&> "three"']);
    for (const m of got) {
      expect(m.dequeueCount).toBe(1);
      expect(m.insertedOn).toBeInstanceOf(Date);
      expect(typeof m.popReceipt).toBe('string');
    }
    // Received messages are hidden, not gone.
    expect(await store.receive(q, { max: 32, visibilityTimeoutSeconds: 30 })).toEqual([]);
    expect(await store.approximateDepth(q)).toBe(3);

    for (const m of got) await store.delete(q, m);
    expect(await store.approximateDepth(q)).toBe(0);
    await store.delete(q, got[0]); // already gone: fine
  });

  it('defer hides a message again, can replace its text, and returns the popReceipt that now works', async () => {
    const q = await fresh('defer');
    await store.send(q, 'original');
    const [m] = await store.receive(q, { max: 1, visibilityTimeoutSeconds: 30 });
    const receipt = await store.defer(q, m, 0, 'rewritten');
    expect(receipt).not.toBe(m.popReceipt);

    const [again] = await store.receive(q, { max: 1, visibilityTimeoutSeconds: 30 });
    expect(again).toMatchObject({ id: m.id, text: 'rewritten', dequeueCount: 2 });
    const later = await store.defer(q, again, 30);
    expect(await store.receive(q, { max: 1, visibilityTimeoutSeconds: 30 })).toEqual([]);

    // The receipt from before the defer no longer works: another consumer may hold the message.
    const stale = await rejection(store.delete(q, again));
    expect(stale.code).toBe(ErrorCode.CONFLICT);
    expect(stale.details).toMatchObject({ reason: 'PopReceiptMismatch', queue: q, operation: 'delete' });
    await store.delete(q, { id: m.id, popReceipt: later });
    expect(await store.approximateDepth(q)).toBe(0);
  });

  it('send with a visibility delay keeps the message hidden', async () => {
    const q = await fresh('delayed');
    await store.send(q, 'later', { visibilityDelaySeconds: 60 });
    expect(await store.receive(q, { max: 5, visibilityTimeoutSeconds: 1 })).toEqual([]);
    expect(await store.approximateDepth(q)).toBe(1);
  });

  it('keepHidden renews the visibility timeout while a job runs and hands back the current popReceipt', async () => {
    const q = await fresh('lease');
    await store.send(q, 'long job');
    const [m] = await store.receive(q, { max: 1, visibilityTimeoutSeconds: 2 });
    const errors: unknown[] = [];
    const lease = store.keepHidden(q, m, 2, (e) => errors.push(e));
    await pause(3000, 'clock'); // past the first 2 s timeout: only the renewals (every 1 s) keep it hidden
    expect(await store.receive(q, { max: 1, visibilityTimeoutSeconds: 30 })).toEqual([]);
    const receipt = await lease.release();
    expect(receipt).not.toBe(m.popReceipt);
    expect(errors).toEqual([]);
    await store.delete(q, { id: m.id, popReceipt: receipt }); // would be CONFLICT with a stale receipt
    expect(await store.approximateDepth(q)).toBe(0);
  });

  it('refuses a message over 64 KiB of UTF-8 before sending (LIMIT_EXCEEDED)', async () => {
    const q = await fresh('limit');
    await store.send(q, 'x'.repeat(MAX_MESSAGE_BYTES)); // exactly the limit is fine
    const ascii = await rejection(store.send(q, 'x'.repeat(MAX_MESSAGE_BYTES + 1)));
    expect(ascii.code).toBe(ErrorCode.LIMIT_EXCEEDED);
    expect(ascii.details).toMatchObject({ bytes: MAX_MESSAGE_BYTES + 1, limit: MAX_MESSAGE_BYTES, queue: q });
    // Fewer characters than the limit, more bytes: the limit is on bytes.
    const utf8 = await rejection(store.send(q, 'é'.repeat(MAX_MESSAGE_BYTES / 2 + 1)));
    expect(utf8.code).toBe(ErrorCode.LIMIT_EXCEEDED);
    const [m] = await store.receive(q, { max: 1, visibilityTimeoutSeconds: 30 });
    const big = await rejection(store.defer(q, m, 0, 'y'.repeat(MAX_MESSAGE_BYTES + 1)));
    expect(big.code).toBe(ErrorCode.LIMIT_EXCEEDED);
    expect(await store.approximateDepth(q)).toBe(1);
  });

  it('checks arguments: receive 1–32 messages, whole seconds, valid queue names', async () => {
    const q = await fresh('args');
    for (const max of [0, 33, 1.5]) {
      const err = await rejection(store.receive(q, { max, visibilityTimeoutSeconds: 1 }));
      expect(err.code).toBe(ErrorCode.BAD_USER_INPUT);
    }
    const zero = await rejection(store.receive(q, { max: 1, visibilityTimeoutSeconds: 0 }));
    expect(zero.code).toBe(ErrorCode.BAD_USER_INPUT);
    expect((await rejection(store.send(q, 'x', { visibilityDelaySeconds: -1 }))).code).toBe(ErrorCode.BAD_USER_INPUT);
    expect((await rejection(store.send('Bad_Name', 'x'))).code).toBe(ErrorCode.CONFIG_INVALID);
  });

  it('maps a missing queue to NOT_FOUND and drops queues idempotently', async () => {
    const q = queueName(prefix, 'missing');
    const missing = await rejection(store.receive(q, { max: 1, visibilityTimeoutSeconds: 1 }));
    expect(missing.code).toBe(ErrorCode.NOT_FOUND);
    expect(missing.details).toMatchObject({ queue: q, status: 404, storageCode: 'QueueNotFound' });
    expect(missing.message).toContain(q);

    await store.ensureQueue(q);
    await store.ensureQueue(q); // cached, and createIfNotExists anyway
    await store.send(q, 'x');
    await store.deleteQueue(q);
    expect((await rejection(store.approximateDepth(q))).code).toBe(ErrorCode.NOT_FOUND);
    await store.deleteQueue(q); // missing: fine
  });

  it('maps an unreachable service to STORAGE_UNAVAILABLE, a malformed connection string CONFIG_INVALID', async () => {
    const dead = connectionString.replace(/QueueEndpoint=http:\/\/[^:]+:\d+/, 'QueueEndpoint=http://127.0.0.1:1');
    expect(dead).not.toBe(connectionString);
    const offline = new QueueStore({ connectionString: dead, retry: { maxTries: 1 }, timeoutMs: 2000 });
    const err = await rejection(offline.receive('anything', { max: 1, visibilityTimeoutSeconds: 1 }));
    expect(err.code).toBe(ErrorCode.STORAGE_UNAVAILABLE);
    expect(err.details).toMatchObject({ queue: 'anything', operation: 'receive' });
    const malformed = await rejection(() => new QueueStore({ connectionString: 'nonsense' }));
    expect(malformed.code).toBe(ErrorCode.CONFIG_INVALID);
  });
});
