/**
 * Writes through a Table service that pushes back (test/support/storage-proxy.ts): 503 ServerBusy, 429 with
 * `x-ms-retry-after-ms`, requests applied and then answered 500 OperationTimedOut or with the connection reset, slow
 * requests. A write is acknowledged if and only if it is stored: concurrent creates into one partition, each answered
 * or refused with a code, the acknowledged ones exactly those stored; the summary equal to the stored count; `verify`
 * clean once the faults stop and the queue drains. On a schema written for the test (a unique e-mail index held in a
 * table of its own, a count and a sum kept in the EGT).
 */
import { formatVerifyReport, verifyDerived } from '../src/maintenance/verify';
import { CHANGE_ROW_KEY_PREFIX } from '../src/model/change-log';
import { startSdlServer, testStore, uniquePrefix } from './support/harness';
import { startStorageProxy, type StorageProxy } from './support/storage-proxy';

const SDL = `
type Bank @entity(table: "Banks", partitionKey: "{bank}", rowKey: "bank") {
  bank: ID!
  accounts: Int! @summary(of: "Account", via: "home", count: true)
  deposits: Int! @summary(of: "Account", via: "home", sum: ["balance"])
}
type Account @entity(table: "Banks", partitionKey: "{bank}", rowKey: "account_{id}")
  @index(name: "byEmail", table: "AccountsByEmail", partitionKey: "{email}", rowKey: "account", unique: true) {
  bank: ID!
  id: ID!
  email: String!
  balance: Int!
  home: Bank! @point(partitionKey: "{bank}", rowKey: "bank")
}
type Query {
  bank(bank: ID!): Bank @point
  account(bank: ID!, id: ID!): Account @point
}
type Mutation {
  createBank(input: CreateBankInput!): BankPayload! @write(entity: "Bank", action: CREATE)
  createAccount(input: CreateAccountInput!): AccountPayload! @write(entity: "Account", action: CREATE)
}
`;

const seed = Number(process.env.FANOUT_SEED) || Date.now() % 2 ** 31;
const prefix = uniquePrefix();
let proxy: StorageProxy;
let ctx: Awaited<ReturnType<typeof startSdlServer>>;
beforeAll(async () => {
  proxy = await startStorageProxy(process.env.AZURE_STORAGE_CONNECTION_STRING!, { seed });
  ctx = await startSdlServer(SDL, {
    TABLEGRAPH_AUTH: 'off',
    TABLEGRAPH_TABLE_PREFIX: prefix,
    AZURE_STORAGE_CONNECTION_STRING: proxy.connectionString,
    TABLEGRAPH_STORAGE_TIMEOUT_MS: '10000',
    TABLEGRAPH_RATE_LIMIT: '1000000',
  });
}, 60_000);
afterAll(async () => {
  await ctx?.close();
  await proxy?.close();
});

/** Runs `tasks` with at most `n` at once. */
async function limited<T>(n: number, tasks: Array<() => Promise<T>>): Promise<T[]> {
  const out: T[] = new Array(tasks.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < tasks.length) {
        const i = next++;
        out[i] = await tasks[i]();
      }
    }),
  );
  return out;
}

test('300 concurrent creates through storage that throttles and loses replies: acknowledged if and only if stored', async () => {
  const ok = await ctx.server.query('mutation { createBank(input: { bank: "b" }) { bank { bank } } }');
  expect(ok.errors).toBeUndefined();
  proxy.setFaults({ busy: 0.05, throttled: 0.05, timedOutAfterApply: 0.03, resetAfterApply: 0.02, slow: 0.02 });
  const ids = Array.from({ length: 300 }, (_, i) => String(i + 1));
  const answers = await limited(
    8,
    ids.map((id) => async () => {
      const r = await ctx.server.query(
        `mutation { createAccount(input: { bank: "b", id: "${id}", email: "a${id}@faults.example", balance: ${Number(id) % 7} }) { account { id } } }`,
      );
      return { id, code: r.errors?.[0]?.extensions?.code as string | undefined };
    }),
  );
  proxy.setFaults({});
  const acknowledged = new Set(answers.filter((a) => a.code === undefined).map((a) => a.id));
  const codes = answers.reduce<Record<string, number>>((m, a) => ({ ...m, [a.code ?? 'ok']: (m[a.code ?? 'ok'] ?? 0) + 1 }), {});
  // What is stored, read around the proxy.
  const store = testStore();
  const stored = (
    await store.queryRange({ table: `${prefix}Banks`, partitionKey: 'b', rowKeyFrom: 'account_', rowKeyTo: 'account`', limit: 10_000 })
  ).entities.map((e) => String(e.properties.id));
  const storedSet = new Set(stored);
  const notStored = [...acknowledged].filter((id) => !storedSet.has(id));
  const notAcknowledged = stored.filter((id) => !acknowledged.has(id)).map((id) => `${id}: ${answers.find((a) => a.id === id)!.code}`);
  console.log(`storage faults seed ${seed}: ${JSON.stringify(codes)}; injected ${JSON.stringify(proxy.injected())}`);
  expect(notStored).toEqual([]);
  expect(notAcknowledged).toEqual([]);
  for (const a of answers) if (a.code) expect(['STORAGE_BUSY', 'STORAGE_UNAVAILABLE', 'OVERLOADED']).toContain(a.code);
  const bank = await ctx.server.query('{ bank(bank: "b") { accounts deposits } }');
  expect(bank.data.bank).toEqual({ accounts: stored.length, deposits: stored.reduce((n, id) => n + (Number(id) % 7), 0) });
  // Once the queue drains, every derived entity is as its entity says.
  let report = await verifyDerived({ store, model: ctx.model });
  for (let i = 0; i < 60 && !report.ok; i++) {
    await new Promise((r) => setTimeout(r, 1000));
    report = await verifyDerived({ store, model: ctx.model });
  }
  if (!report.ok) console.log(formatVerifyReport(report));
  expect(report.problems).toBe(0);
  void CHANGE_ROW_KEY_PREFIX;
}, 240_000);

test('throttled through all the retries: STORAGE_BUSY, HTTP 503 with Retry-After, and a write so answered is not stored', async () => {
  const post = async (query: string) => {
    const res = await fetch(ctx.server.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query }) });
    return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as any };
  };
  proxy.setFaults({});
  expect((await post('mutation { createBank(input: { bank: "t" }) { bank { bank } } }')).body.errors).toBeUndefined();
  expect(
    (await post('mutation { createAccount(input: { bank: "t", id: "1", email: "t1@faults.example", balance: 1 }) { account { id } } }')).body.errors,
  ).toBeUndefined();
  // The Cosmos DB Table API's 429, asking for 100 ms each time: the SDK waits that, three times, then gives up.
  proxy.setFaults({ throttled: 1 });
  const read = await post('{ account(bank: "t", id: "1") { id } }');
  expect(read.status).toBe(503);
  expect(read.retryAfter).toBe('1');
  expect(read.body.errors[0].extensions).toMatchObject({ code: 'STORAGE_BUSY', retryAfterSeconds: 1 });
  const write = await post('mutation { createAccount(input: { bank: "t", id: "busy", email: "busy@faults.example", balance: 1 }) { account { id } } }');
  expect(write.status).toBe(503);
  expect(write.body.errors[0].extensions.code).toBe('STORAGE_BUSY');
  // Azure Table storage's 503 ServerBusy, with no wait asked: the SDK's own back-off, then 1 s.
  proxy.setFaults({ busy: 1 });
  const busy = await post('{ account(bank: "t", id: "1") { id } }');
  expect(busy.status).toBe(503);
  expect(busy.body.errors[0].extensions).toMatchObject({ code: 'STORAGE_BUSY', retryAfterSeconds: 1 });
  proxy.setFaults({});
  expect(await testStore().getEntity({ table: `${prefix}Banks`, partitionKey: 't', rowKey: 'account_busy' })).toBeNull();
  expect((await post('{ account(bank: "t", id: "1") { id } }')).body.data.account).toEqual({ id: '1' });
}, 60_000);
