/**
 * Writes through a Table service that pushes back (test/support/storage-proxy.ts): 503 ServerBusy, 429 with
 * `x-ms-retry-after-ms`, requests applied and then answered 500 OperationTimedOut or with the connection reset, slow
 * requests. A write is acknowledged if and only if it is stored: concurrent creates, updates with ETags and
 * increments into one partition, each answered or refused with a code — every acknowledged create stored and no
 * other, every acknowledged update's value stored and a refused one's not, every acknowledged increment counted once
 * and a refused one never; the summaries equal to a recount; `verify` clean once the faults stop and the queue drains.
 * Continuous backup captured the same: each entity's last captured change is its stored state (its WriteId), and an
 * entity not stored has none, or a delete. Then throttling through every retry: STORAGE_BUSY, HTTP 503 with Retry-After. On a schema written for the test (a
 * unique e-mail index held in a table of its own, a count and a sum kept in the EGT, a data series).
 */
import { loadEntities } from '../src/load/load-entities';
import { formatVerifyReport, verifyDerived } from '../src/maintenance/verify-derived';
import { TableStore } from '../src/storage/table-store';
import { testStore, uniquePrefix } from './support/harness';
import type { FaultRates, StorageProxy } from './support/storage-proxy';
import { startProxiedServer, type ProxiedServer } from './support/proxied-server';
import { testSeed } from './support/seed';
import { lastCapturedChanges } from './support/captured-changes';
import { replayKey } from '../src/backup/change-format';
import { until } from './support/wait';
import { limited } from './support/limited';

const SDL = `
type Bank @entity(table: "Banks", partitionKey: "{bank}", rowKey: "bank") {
  bank: ID!
  accounts: Int! @summary(of: "Account", via: "home", count: true)
  deposits: Int! @summary(of: "Account", via: "home", sum: ["balance"])
}
type Account @entity(table: "Banks", partitionKey: "{bank}", rowKey: "account_{id}")
  @index(name: "byEmail", table: "AccountsByEmail", partitionKey: "{email}", rowKey: "account", unique: true) {
  etag: String!
  bank: ID!
  id: ID!
  email: String!
  balance: Int!
  home: Bank! @point(partitionKey: "{bank}", rowKey: "bank")
}
type Meter @entity(table: "Banks", partitionKey: "{bank}", rowKey: "meter_{id}") {
  bank: ID!
  id: ID!
  hourly: [Int!]! @series(length: 24)
}
type Query {
  bank(bank: ID!): Bank @point
  account(bank: ID!, id: ID!): Account @point
  meter(bank: ID!, id: ID!): Meter @point
}
type Mutation {
  createBank(input: CreateBankInput!): BankPayload! @write(entity: "Bank", action: CREATE)
  createAccount(input: CreateAccountInput!): AccountPayload! @write(entity: "Account", action: CREATE)
  updateAccount(input: UpdateAccountInput!): AccountPayload! @write(entity: "Account", action: UPDATE)
  deleteAccount(input: DeleteAccountInput!): AccountPayload! @write(entity: "Account", action: DELETE)
  moveAccount(input: MoveAccountInput!): AccountPayload! @write(entity: "Account", action: MOVE)
  countHit(input: IncrementMeterInput!): MeterPayload! @write(entity: "Meter", action: INCREMENT)
}
`;

const seed = testSeed();
const prefix = uniquePrefix();
let proxy: StorageProxy;
let ctx: ProxiedServer['ctx'];
let server: ProxiedServer | undefined;
beforeAll(async () => {
  // A message a failed call left hidden is back in 5 s, not 30 (renewed while it is being handled).
  server = await startProxiedServer(SDL, { seed, prefix, env: { TABLEGRAPH_VISIBILITY_TIMEOUT_SECONDS: '5' } });
  ({ proxy, ctx } = server);
}, 60_000);
afterAll(() => server?.close());

/**
 * `verify` once the queue drains: every derived entity as its entity says (reservations settled by themselves), read
 * again each second for up to a minute while the worker catches up.
 */
async function settledVerify() {
  const store = testStore();
  let report = await verifyDerived({ store, model: ctx.model });
  if (!report.ok) {
    const clean = async () => (report = await verifyDerived({ store, model: ctx.model })).ok;
    await until('verify clean', clean, { timeoutMs: 60_000, everyMs: 1000 }).catch(() => undefined); // the report says what is not
  }
  if (!report.ok) console.log(formatVerifyReport(report));
  return report;
}

/** How many writes of each kind a run sends. */
interface Mix {
  creates: number;
  updates: number;
  increments: number;
  deletes: number;
  moves: number;
}

/**
 * One run: accounts of bank `label` (to update, delete and move) made before the faults; then, at 8 in flight with
 * `faults` injected, creates, updates with the ETag read, increments of five meters' series, deletes (half with
 * `ifMatch`) and moves to bank `<label>-to` (carried out by the worker). Asserts every write acknowledged if and only
 * if stored, the summaries equal to a recount, `verify` clean after the drain.
 */
async function mixUnderFaults(label: string, faults: FaultRates, mix: Mix): Promise<void> {
  const run = async (query: string, variables?: Record<string, unknown>) => {
    const r = await ctx.server.query(query, variables);
    return { data: r.data, code: r.errors?.[0]?.extensions?.code as string | undefined, message: r.errors?.[0]?.message as string | undefined };
  };
  const must = async (query: string, variables?: Record<string, unknown>) => {
    const r = await run(query, variables);
    expect({ code: r.code, message: r.message }).toEqual({ code: undefined, message: undefined });
    return r.data;
  };
  proxy.setFaults({});
  const to = `${label}-to`;
  const CREATE = 'mutation ($input: CreateAccountInput!) { createAccount(input: $input) { account { id etag } } }';
  // Before the faults: the banks, and 100 accounts to update, each read for its ETag — stored whatever the shared
  // Azurite is doing (a write refused for a pause of its own is sent again, one answered CONFLICT after that read).
  const stored = async (query: string, input: Record<string, unknown>, readBack: (data: any) => unknown) => {
    for (let attempt = 1; ; attempt++) {
      const r = await run(query, { input });
      if (!r.code) return r.data;
      const transient = /^(STORAGE_BUSY|STORAGE_UNAVAILABLE|OVERLOADED|REQUEST_TIMEOUT)$/.test(r.code) || (r.code === 'CONFLICT' && attempt > 1);
      if (!transient || attempt === 5) throw new Error(`before the faults, ${JSON.stringify(input)}: ${r.code} ${r.message} (attempt ${attempt})`);
      if (r.code === 'CONFLICT') return readBack(input);
    }
  };
  const CREATE_BANK = 'mutation ($input: CreateBankInput!) { createBank(input: $input) { bank { bank } } }';
  for (const bank of [label, to]) await stored(CREATE_BANK, { bank }, () => undefined);
  const etagOf = async (input: any) =>
    (await must('query ($b: ID!, $id: ID!) { account(bank: $b, id: $id) { etag } }', { b: input.bank, id: input.id })).account.etag;
  const etags = new Map<string, string>();
  const before = (n: number, p: string) => Array.from({ length: n }, (_, i) => `${p}${i + 1}`);
  for (const id of [...before(mix.updates, 'u'), ...before(mix.deletes, 'd'), ...before(mix.moves, 'v')]) {
    const input = { bank: label, id, email: `${label}-${id}@faults.example`, balance: 1 };
    const data = await stored(CREATE, input, async () => ({ createAccount: { account: { etag: await etagOf(input) } } }));
    etags.set(id, (data as any).createAccount.account.etag);
  }
  proxy.setFaults(faults);
  type Op = { kind: 'create' | 'update' | 'increment' | 'delete' | 'move'; key: string; value: number };
  const ops: Op[] = [
    ...Array.from({ length: mix.creates }, (_, i): Op => ({ kind: 'create', key: `c${i + 1}`, value: (i % 7) + 1 })),
    ...Array.from({ length: mix.updates }, (_, i): Op => ({ kind: 'update', key: `u${i + 1}`, value: 100 + i })),
    ...Array.from({ length: mix.increments }, (_, i): Op => ({ kind: 'increment', key: `m${i % 5}/${i % 3}`, value: (i % 3) + 1 })),
    // Deletes: half with the ETag read (`ifMatch`), half without.
    ...Array.from({ length: mix.deletes }, (_, i): Op => ({ kind: 'delete', key: `d${i + 1}`, value: i % 2 })),
    // Moves to the other bank, carried out by the worker.
    ...Array.from({ length: mix.moves }, (_, i): Op => ({ kind: 'move', key: `v${i + 1}`, value: 0 })),
  ].sort((a, b) => (a.key + a.kind < b.key + b.kind ? -1 : 1));
  const answers = await limited(
    8,
    ops.map((op) => async () => {
      if (op.kind === 'create')
        return { op, ...(await run(CREATE, { input: { bank: label, id: op.key, email: `${label}-${op.key}@faults.example`, balance: op.value } })) };
      if (op.kind === 'update') {
        const input = { bank: label, id: op.key, balance: op.value, ifMatch: etags.get(op.key) };
        return { op, ...(await run('mutation ($input: UpdateAccountInput!) { updateAccount(input: $input) { account { id } } }', { input })) };
      }
      if (op.kind === 'move') {
        const input = { bank: label, id: op.key, toBank: to };
        return { op, ...(await run('mutation ($input: MoveAccountInput!) { moveAccount(input: $input) { account { id } } }', { input })) };
      }
      if (op.kind === 'delete') {
        const input = { bank: label, id: op.key, ...(op.value ? { ifMatch: etags.get(op.key) } : {}) };
        return { op, ...(await run('mutation ($input: DeleteAccountInput!) { deleteAccount(input: $input) { account { id } } }', { input })) };
      }
      const [id, at] = op.key.split('/');
      const input = { bank: label, id, hourly: { at: Number(at), by: op.value } };
      return { op, ...(await run('mutation ($input: IncrementMeterInput!) { countHit(input: $input) { meter { id } } }', { input })) };
    }),
  );
  proxy.setFaults({});
  const codes: Record<string, number> = {};
  for (const a of answers) {
    const key = `${a.op.kind}${a.op.kind === 'delete' && a.op.value ? ' ifMatch' : ''} ${a.code ?? 'ok'}`;
    codes[key] = (codes[key] ?? 0) + 1;
  }
  console.log(`storage faults ${label} (seed ${seed}): ${JSON.stringify(codes)}; injected so far ${JSON.stringify(proxy.injected())}`);
  // Refusals say why, and none is a conflict with the write's own first attempt.
  for (const a of answers)
    if (a.code) expect([a.op.kind, a.code]).toEqual([a.op.kind, expect.stringMatching(/^(STORAGE_BUSY|STORAGE_UNAVAILABLE|OVERLOADED)$/)]);

  // What is stored, read around the proxy.
  const store = testStore();
  const partition = (await store.queryRange({ table: `${prefix}Banks`, partitionKey: label, rowKeyFrom: 'a', rowKeyTo: 'n', limit: 10_000 })).entities;
  const accounts = new Map(partition.filter((e) => e.rowKey.startsWith('account_')).map((e) => [String(e.properties.id), Number(e.properties.balance)]));
  const wrong: string[] = [];
  for (const { op, code } of answers.filter((a) => a.op.kind !== 'increment')) {
    const stored = accounts.get(op.key);
    if (op.kind === 'create' && (code === undefined) !== (stored !== undefined))
      wrong.push(`create ${op.key}: ${code ?? 'acknowledged'}, ${stored === undefined ? 'not ' : ''}stored`);
    if (op.kind === 'update' && (code === undefined ? stored !== op.value : stored !== 1))
      wrong.push(`update ${op.key}: ${code ?? 'acknowledged'}, stored ${stored}`);
  }
  for (let m = 0; m < 5; m++) {
    const meter = partition.find((e) => e.rowKey === `meter_m${m}`);
    for (let at = 0; at < 3; at++) {
      const acknowledged = answers.filter((a) => a.op.kind === 'increment' && a.op.key === `m${m}/${at}` && !a.code).reduce((n, a) => n + a.op.value, 0);
      const stored = Number(meter?.properties[`hourly${String(at).padStart(2, '0')}`] ?? 0);
      if (stored !== acknowledged) wrong.push(`meter m${m} hour ${at}: ${acknowledged} acknowledged, ${stored} stored`);
    }
  }
  expect(wrong).toEqual([]);
  // Once the queue drains, every derived entity is as its entity says: reservations settled by themselves.
  expect((await settledVerify()).problems).toBe(0);
  // The summaries equal a recount once the worker has carried out the moves (the messages that throttling sent back
  // to the queue come again after their visibility timeout).
  const movedIn = async () =>
    new Set(
      (await store.queryRange({ table: `${prefix}Banks`, partitionKey: to, rowKeyFrom: 'account_', rowKeyTo: 'account`', limit: 1000 })).entities
        .filter((e) => !e.properties.MovedIn)
        .map((e) => String(e.properties.id)),
    );
  const acknowledgedMoves = answers.filter((a) => a.op.kind === 'move' && !a.code).map((a) => a.op.key);
  const carriedOut = async () => {
    const done = await movedIn();
    return acknowledgedMoves.every((id) => done.has(id));
  };
  await until('the acknowledged moves carried out', carriedOut, { timeoutMs: 120_000, everyMs: 500 }).catch(() => undefined); // verify names what is not
  expect((await settledVerify()).problems).toBe(0);
  const inB = (await store.queryRange({ table: `${prefix}Banks`, partitionKey: label, rowKeyFrom: 'account_', rowKeyTo: 'account`', limit: 10_000 })).entities;
  const accountsNow = new Set(inB.map((e) => String(e.properties.id)));
  const bank = await must('query ($b: ID!) { bank(bank: $b) { accounts deposits } }', { b: label });
  expect(bank.bank).toEqual({ accounts: inB.length, deposits: inB.reduce((n, e) => n + Number(e.properties.balance), 0) });
  // A move acknowledged is carried out by the worker: the account in the other bank only; one refused stays.
  const inC = new Set(
    (await store.queryRange({ table: `${prefix}Banks`, partitionKey: to, rowKeyFrom: 'account_', rowKeyTo: 'account`', limit: 1000 })).entities.map((e) =>
      String(e.properties.id),
    ),
  );
  // (A move whose outcome could not be read back, STORAGE_UNAVAILABLE, may be either.)
  const moves = answers.filter((a) => a.op.kind === 'move' && a.code !== 'STORAGE_UNAVAILABLE');
  const misplaced = moves.filter(({ op, code }) =>
    code === undefined ? !inC.has(op.key) || accountsNow.has(op.key) : inC.has(op.key) || !accountsNow.has(op.key),
  );
  expect(misplaced.map(({ op, code }) => `${op.key}: ${code ?? 'acknowledged'}`)).toEqual([]);
  const banks = await must('query ($b: ID!, $c: ID!) { b: bank(bank: $b) { accounts } c: bank(bank: $c) { accounts } }', { b: label, c: to });
  expect([banks.b.accounts, banks.c.accounts]).toEqual([accountsNow.size, inC.size]);
  await expectCapturedAsStored(label, [label, to]);
}

/**
 * Continuous backup captured exactly what is stored in `partitions`: of each account and meter stored, the last
 * change captured holds its state (the same WriteId); of each one captured and not stored, the last change is a delete.
 */
async function expectCapturedAsStored(label: string, partitions: string[]): Promise<void> {
  const captured = await lastCapturedChanges(ctx.model, prefix, `${prefix}-${label}`.toLowerCase().replace(/[^a-z0-9-]/g, ''));
  const wrong: string[] = [];
  const stored = new Set<string>();
  for (const partitionKey of partitions) {
    const { entities } = await testStore().queryRange({ table: `${prefix}Banks`, partitionKey, rowKeyFrom: 'account_', rowKeyTo: 'n', limit: 10_000 });
    for (const e of entities) {
      const key = replayKey('Banks', partitionKey, e.rowKey);
      stored.add(key);
      const image = captured.get(key)?.image?.[0]?.entity.properties.WriteId?.value;
      if (image !== e.properties.WriteId) wrong.push(`${partitionKey}/${e.rowKey}: stored by ${String(e.properties.WriteId)}, captured ${String(image)}`);
    }
  }
  for (const [key, c] of captured)
    if (partitions.includes(c.partitionKey) && c.of !== 'Bank' && !stored.has(key) && c.kind !== 'DELETED')
      wrong.push(`${key}: not stored, captured ${c.kind}`);
  expect(wrong).toEqual([]);
}

test('300 concurrent creates, updates with ETags and increments through storage that throttles and loses replies: acknowledged if and only if stored', async () => {
  // The rates: 5% 503 ServerBusy, 5% 429, 3% applied then 500 OperationTimedOut, 2% applied then reset, 2% slow;
  // and deletes and moves beside them.
  await mixUnderFaults(
    'b',
    { busy: 0.05, throttled: 0.05, timedOutAfterApply: 0.03, resetAfterApply: 0.02, slow: 0.02 },
    { creates: 100, updates: 100, increments: 100, deletes: 60, moves: 20 },
  );
}, 300_000);

test.each(['busy', 'throttled', 'timedOutAfterApply', 'resetAfterApply', 'slow'] as const)(
  'every action under %s alone (15%% of requests): acknowledged if and only if stored',
  async (kind) => {
    await mixUnderFaults(`k-${kind}`, { [kind]: 0.15 }, { creates: 12, updates: 12, increments: 12, deletes: 12, moves: 6 });
  },
  180_000,
);

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
  // What the throttling cut short (a reservation's confirmation, the worker's messages) settles by itself.
  expect((await settledVerify()).problems).toBe(0);
}, 60_000);

test('a load through storage that throttles and loses replies completes, slower: every row stored once, the summaries exact', async () => {
  proxy.setFaults({ busy: 0.05, throttled: 0.1, timedOutAfterApply: 0.03, resetAfterApply: 0.02 });
  // The loader's own store, through the proxy (its back-off on top of the SDK's).
  const store = new TableStore({ connectionString: proxy.connectionString, target: 'azurite', timeoutMs: 10_000 });
  const rows = (async function* () {
    yield { line: 2, values: { bank: 'load' } };
  })();
  const accounts = (async function* () {
    for (let i = 1; i <= 120; i++) yield { line: i + 1, values: { bank: 'load', id: `l${i}`, email: `l${i}@load.faults.example`, balance: i } };
  })();
  const report = await loadEntities({
    store,
    model: ctx.model,
    steps: [
      { type: 'Bank', rows },
      { type: 'Account', rows: accounts },
    ],
  });
  proxy.setFaults({});
  expect(report.failed).toEqual([]);
  expect(report.steps.map((s) => [s.type, s.loaded])).toEqual([
    ['Bank', 1],
    ['Account', 120],
  ]);
  const bank = await ctx.server.query('{ bank(bank: "load") { accounts deposits } }');
  expect(bank.data.bank).toEqual({ accounts: 120, deposits: (120 * 121) / 2 });
  expect((await settledVerify()).problems).toBe(0);
  console.log(`load under faults: ${report.retries} retries; injected ${JSON.stringify(proxy.injected())}`);
}, 180_000);
