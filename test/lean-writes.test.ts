/**
 * Inserts and EGTs sent without the SDK's pipeline (src/storage/lean-writes.ts), through a proxy in front of the test
 * run's Azurite that counts what reaches the service and fails chosen requests: one request per write when nothing
 * goes wrong, the service's refusals as the SDK reports them, and a throttled or lost first attempt sent again through
 * the SDK — counted among the call's attempts, so that a refusal the retry meets is known to be maybe its own.
 */
import { TableStore } from '../src/storage/table-store';
import { isTablegraphError, type TablegraphError } from '../src/errors';
import type { EntityToWrite, TransactionOperation } from '../src/storage/storage-types';
import { testStore, uniquePrefix } from './support/harness';
import { startStorageProxy, type FaultRates, type StorageProxy } from './support/storage-proxy';

const direct = testStore();
let proxy: StorageProxy;
/** Requests the proxy may fail: the next `armed` POSTs. */
let armed = 0;
let store: TableStore;
let table: string;

beforeAll(async () => {
  proxy = await startStorageProxy(process.env.AZURE_STORAGE_CONNECTION_STRING!, {
    faultable: (method) => method === 'POST' && armed-- > 0,
    retryAfterMs: 50,
  });
  store = new TableStore({ connectionString: proxy.connectionString, target: 'azurite', retry: { maxRetries: 2, retryDelayInMs: 50 } });
});

afterAll(() => proxy.close());

beforeEach(async () => {
  table = `${uniquePrefix()}Lean`;
  await direct.ensureTable(table);
  armed = 0;
  proxy.setFaults({});
});

function entity(rowKey: string, n = 1): EntityToWrite {
  return { partitionKey: 'p', rowKey, properties: { N: { type: 'Int32', value: n }, S: { type: 'String', value: `it's ${rowKey}` } } };
}

/**
 * The writes' POSTs the service answered since `from` (an index into proxy.forwarded()), not those that create tables:
 * their statuses, and the SDK's marked.
 */
function postsSince(from: number): string[] {
  return proxy
    .forwarded()
    .slice(from)
    .filter((r) => r.method === 'POST' && !/\/Tables(\?|$)/.test(r.path))
    .map((r) => `${r.status}${r.sdk ? ' (SDK)' : ''}`);
}

/** Fails the next POST with `fault`. */
function failNext(fault: keyof FaultRates): void {
  armed = 1;
  proxy.setFaults({ [fault]: 1 });
}

async function refusal(p: Promise<unknown>): Promise<TablegraphError> {
  const e = await p.then(
    () => undefined,
    (error: unknown) => error,
  );
  if (!isTablegraphError(e)) throw new Error(`expected a TablegraphError, got ${String(e)}`);
  return e;
}

test('an insert and an EGT: one request each, with the ETags the entities have', async () => {
  const from = proxy.forwarded().length;
  const etag = await store.createEntity(table, entity('a'));
  const ops: TransactionOperation[] = [
    { kind: 'create', entity: entity('b', 2) },
    { kind: 'update', entity: entity('a', 3), mode: 'merge', ifMatch: etag },
  ];
  const etags = await store.submitTransaction(table, ops);
  expect(postsSince(from)).toEqual(['204', '202']);
  const a = await direct.getEntity({ table, partitionKey: 'p', rowKey: 'a' });
  const b = await direct.getEntity({ table, partitionKey: 'p', rowKey: 'b' });
  expect(etags).toEqual([b?.etag, a?.etag]);
  expect(a?.properties).toMatchObject({ N: 3, S: "it's a" });
  expect(b?.properties).toMatchObject({ N: 2 });
});

test("the service's refusals, as the SDK reports them, after one request", async () => {
  await store.createEntity(table, entity('a'));
  const from = proxy.forwarded().length;
  const taken = await refusal(store.createEntity(table, entity('a')));
  expect(taken).toMatchObject({ code: 'CONFLICT', details: { reason: 'EntityAlreadyExists', status: 409 } });
  expect(taken.details.attempts).toBeUndefined();
  const ops: TransactionOperation[] = [
    { kind: 'create', entity: entity('c') },
    { kind: 'create', entity: entity('a') },
  ];
  const egt = await refusal(store.submitTransaction(table, ops));
  expect(egt).toMatchObject({ code: 'CONFLICT', details: { reason: 'EntityAlreadyExists', operationIndex: 1, rowKey: 'a' } });
  expect(egt.details.attempts).toBeUndefined();
  const missing = await refusal(store.createEntity(`${table}Gone`, entity('a')));
  expect(missing).toMatchObject({ code: 'NOT_FOUND', details: { reason: 'TableNotFound' } });
  expect(postsSince(from)).toEqual(['409', '202', '404']);
  expect(await direct.getEntity({ table, partitionKey: 'p', rowKey: 'c' })).toBeNull();
});

test.each(['busy', 'throttled'] as const)('a first attempt answered %s (not applied) is sent again through the SDK and stored once', async (fault) => {
  failNext(fault);
  const from = proxy.forwarded().length;
  const etag = await store.createEntity(table, entity('a'));
  failNext(fault);
  const etags = await store.submitTransaction(table, [{ kind: 'create', entity: entity('b') }]);
  expect(proxy.injected()[fault]).toBe(2);
  // Each refused first attempt was not passed on: the service saw the SDK's alone.
  expect(postsSince(from)).toEqual(['204 (SDK)', '202 (SDK)']);
  expect(etag).toBe((await direct.getEntity({ table, partitionKey: 'p', rowKey: 'a' }))?.etag);
  expect(etags).toEqual([(await direct.getEntity({ table, partitionKey: 'p', rowKey: 'b' }))?.etag]);
});

test.each(['timedOutAfterApply', 'resetAfterApply'] as const)(
  "a first attempt applied with its answer lost (%s): the SDK's attempt is refused, known to be maybe the first's doing",
  async (fault) => {
    const from = proxy.forwarded().length;
    failNext(fault);
    const insert = await refusal(store.createEntity(table, entity('a')));
    expect(insert).toMatchObject({ code: 'CONFLICT', details: { reason: 'EntityAlreadyExists', attempts: 2 } });
    failNext(fault);
    const egt = await refusal(store.submitTransaction(table, [{ kind: 'create', entity: entity('b') }]));
    expect(egt).toMatchObject({ code: 'CONFLICT', details: { reason: 'EntityAlreadyExists', operationIndex: 0, attempts: 2 } });
    expect(proxy.injected()[fault]).toBe(2);
    expect(postsSince(from)).toEqual(['204', '409 (SDK)', '202', '202 (SDK)']);
    // Both were applied, once.
    expect(await direct.getEntity({ table, partitionKey: 'p', rowKey: 'a' })).toMatchObject({ properties: { N: 1 } });
    expect(await direct.getEntity({ table, partitionKey: 'p', rowKey: 'b' })).toMatchObject({ properties: { N: 1 } });
  },
);

test("a placed table's insert and EGT go to the place's table", async () => {
  const placed = new TableStore({ connectionString: proxy.connectionString, target: 'azurite' });
  const place = `${table}Own`;
  await direct.ensureTable(place);
  // PartitionKey `own…` of the table lives in a table of its own (as a tenant of tier TABLE does).
  placed.usePlacement({
    placeOf: (t, partitionKey) => (t === table && partitionKey.startsWith('own') ? { store: placed, table: place } : undefined),
    scanPlaces: () => undefined,
  });
  const from = proxy.forwarded().length;
  await placed.createEntity(table, { ...entity('a'), partitionKey: 'own1' });
  await placed.submitTransaction(table, [{ kind: 'create', entity: { ...entity('b'), partitionKey: 'own1' } }]);
  await placed.createEntity(table, entity('c'));
  expect(postsSince(from)).toEqual(['204', '202', '204']);
  for (const rowKey of ['a', 'b']) {
    expect(await direct.getEntity({ table: place, partitionKey: 'own1', rowKey })).not.toBeNull();
    expect(await direct.getEntity({ table, partitionKey: 'own1', rowKey })).toBeNull();
  }
  expect(await direct.getEntity({ table, partitionKey: 'p', rowKey: 'c' })).not.toBeNull();
});
