/**
 * One request's DataLoaders (src/read/loaders.ts) against the real Azurite the test run starts: the request's calls
 * stay within its concurrency however many keys it asks at once, every key gets its own entity, a call that fails
 * hands its slot on, and no call is sent after the deadline.
 */
import { randomBytes } from 'node:crypto';
import { ErrorCode, isTablegraphError } from '../src/errors';
import { createLoaders } from '../src/read/loaders';
import { TableStore } from '../src/storage/table-store';
import type { StorageCallRecord, StorageObserver, TransactionOperation } from '../src/storage/storage-types';

const connectionString = process.env.AZURE_STORAGE_CONNECTION_STRING ?? '';
const T = `loaders${randomBytes(4).toString('hex')}`;
const store = new TableStore({ connectionString, target: 'azurite', retry: { maxRetries: 1, retryDelayInMs: 50 } });
const KEYS = 40;
const rowKey = (i: number) => `row${String(i).padStart(3, '0')}`;

/** Counts the calls in flight at once, and the calls made. */
function inFlight(): StorageObserver & { now: number; most: number; calls: StorageCallRecord[] } {
  const o = {
    now: 0,
    most: 0,
    calls: [] as StorageCallRecord[],
    onCallStart: () => void (o.most = Math.max(o.most, ++o.now)),
    onCall: (r: StorageCallRecord) => void (o.now--, o.calls.push(r)),
  };
  return o;
}

beforeAll(async () => {
  await store.ensureTable(T);
  const ops: TransactionOperation[] = Array.from({ length: KEYS }, (_, i) => ({
    kind: 'upsertReplace',
    entity: { partitionKey: 'p', rowKey: rowKey(i), properties: { n: { type: 'Int32', value: i } } },
  }));
  await store.submitTransaction(T, ops);
});

// Its table is not under a test prefix (test/setup/environment.js drops those): dropped here.
afterAll(() => store.deleteTable(T));

test.each([1, 3, 16])('%i calls in flight at most, whatever the request asks at once; each key gets its entity', async (concurrency) => {
  const observer = inFlight();
  const loaders = createLoaders(store, { concurrency, observer });
  const keys = Array.from({ length: KEYS }, (_, i) => ({ table: T, partitionKey: 'p', rowKey: rowKey(i) }));
  // Asked in two waves: the second while the first still holds every slot.
  const first = loaders.point.loadMany(keys.slice(0, KEYS / 2));
  await Promise.resolve();
  const second = loaders.point.loadMany(keys.slice(KEYS / 2));
  const entities = [...(await first), ...(await second)];
  expect(entities.map((e) => (e instanceof Error || e === null ? e : e.properties.n))).toEqual(keys.map((_, i) => i));
  expect(observer.calls).toHaveLength(KEYS);
  expect(observer.most).toBe(concurrency);
  expect(observer.now).toBe(0);
});

test('a call that fails hands its slot on: the request goes on with its other reads', async () => {
  const observer = inFlight();
  const loaders = createLoaders(store, { concurrency: 2, observer });
  const missing = await loaders.point.loadMany(Array.from({ length: 6 }, (_, i) => ({ table: `${T}gone`, partitionKey: 'p', rowKey: rowKey(i) })));
  // A table that is not there holds no entity: each key answers null, or fails with the store's coded error.
  for (const m of missing) expect(m === null || isTablegraphError(m)).toBe(true);
  const ranges = await loaders.range.loadMany([0, 10, 20].map((from) => ({ table: T, partitionKey: 'p', rowKeyFrom: rowKey(from), limit: 5 })));
  expect(ranges.map((r) => (r instanceof Error ? r : r.entities.map((e) => e.properties.n)))).toEqual([
    [0, 1, 2, 3, 4],
    [10, 11, 12, 13, 14],
    [20, 21, 22, 23, 24],
  ]);
  expect(observer.most).toBe(2);
  expect(observer.now).toBe(0);
});

test('past the deadline no call is sent: every key fails REQUEST_TIMEOUT', async () => {
  const observer = inFlight();
  const loaders = createLoaders(store, { concurrency: 2, observer, deadline: Date.now() - 1 });
  const results = await loaders.point.loadMany(Array.from({ length: 5 }, (_, i) => ({ table: T, partitionKey: 'p', rowKey: rowKey(i) })));
  for (const r of results) expect(isTablegraphError(r, ErrorCode.REQUEST_TIMEOUT)).toBe(true);
  expect(observer.calls).toHaveLength(0);
});
