/**
 * Noisy neighbours (src/server/tenant-budgets.ts, src/server/tenant-cost-metrics.ts) on a tenant-scoped schema written
 * for this test: a tenant over its budget of storage calls a second is refused with RATE_LIMITED, HTTP 429 and a
 * `Retry-After`, while another tenant is served in the same second; /metrics shows each tenant's cost, equal to the
 * sum of its answers' `extensions.cost`; a tenant given a budget of its own (`npm run tenant -- budget`) is charged
 * against it.
 */
import { SignJWT } from 'jose';
import { connectionString, startSdlServer } from './support/harness';
import { exitedOk, runCommand } from './support/processes';
import { until } from './support/wait';

const SECRET = 'a-budget-test-secret-of-32-characters-at-least';
const SDL = `
extend schema @tenancy(claim: "tid")
type Note @entity(table: "Notes", partitionKey: "notes", rowKey: "{id}") {
  id: ID!
  text: String!
}
type Query {
  note(id: ID!): Note @point(partitionKey: "notes")
}
type Mutation {
  createNote(input: CreateNoteInput!): NotePayload! @write(entity: "Note", action: CREATE)
}
`;
/** A create is estimated at 8 storage calls (src/read/demand.ts WRITE_CALLS): one takes a whole second's budget. */
const BUDGET = 8;

let ctx: Awaited<ReturnType<typeof startSdlServer>>;
const sign = (tid: string) =>
  new SignJWT({ sub: `writer@${tid}.test`, tid }).setProtectedHeader({ alg: 'HS256' }).setExpirationTime('10m').sign(new TextEncoder().encode(SECRET));

async function as(token: string, query: string, variables?: Record<string, unknown>) {
  const res = await fetch(ctx.server.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ query, variables }),
  });
  return { status: res.status, retryAfter: res.headers.get('retry-after'), ...((await res.json()) as { data?: any; errors?: any[]; extensions?: any }) };
}
const CREATE = 'mutation($i: CreateNoteInput!) { createNote(input: $i) { note { id } } }';

beforeAll(async () => {
  ctx = await startSdlServer(SDL, {
    TABLEGRAPH_JWT_SECRET: SECRET,
    TABLEGRAPH_RATE_LIMIT: '1000000',
    TABLEGRAPH_TENANT_TRANSACTIONS_PER_SECOND: String(BUDGET),
  });
});
afterAll(() => ctx?.close());

test('a tenant over its budget is refused with RATE_LIMITED and Retry-After; another tenant is served in the same second', async () => {
  const [noisy, quiet] = [await sign('noisy'), await sign('quiet')];
  let refused: Awaited<ReturnType<typeof as>> | undefined;
  // Two creates at once: one spends the second's budget, the other is refused — unless a second ends between them.
  for (let attempt = 0; attempt < 20 && !refused; attempt++) {
    const pair = await Promise.all([0, 1].map((k) => as(noisy, CREATE, { i: { id: `n${attempt}-${k}`, text: 'noise' } })));
    refused = pair.find((r) => r.errors);
    if (refused) {
      // The quiet tenant has its own budget: served while the noisy one is refused.
      const served = await as(quiet, CREATE, { i: { id: `q${attempt}`, text: 'quiet' } });
      expect(served.errors).toBeUndefined();
    }
  }
  expect(refused).toBeDefined();
  expect(refused!.status).toBe(429);
  expect(Number(refused!.retryAfter)).toBeGreaterThanOrEqual(1);
  expect(refused!.errors![0].extensions).toMatchObject({ code: 'RATE_LIMITED', reason: 'TenantBudget', retryAfterSeconds: Number(refused!.retryAfter) });
  expect(refused!.data ?? null).toBeNull();
});

test('a tenant whose budget is spent is refused at the door, queries included; the refusal names no storage', async () => {
  const t = await sign('doorstep');
  let refused: Awaited<ReturnType<typeof as>> | undefined;
  for (let attempt = 0; attempt < 20 && !refused; attempt++) {
    // A create spends the second's budget; the point query right after it finds it spent.
    await as(t, CREATE, { i: { id: `d${attempt}`, text: 'x' } });
    const r = await as(t, 'query($id: ID!) { note(id: $id) { id } }', { id: `d${attempt}` });
    if (r.errors) refused = r;
  }
  expect(refused).toBeDefined();
  expect({ status: refused!.status, code: refused!.errors![0].extensions.code, reason: refused!.errors![0].extensions.reason }).toEqual({
    status: 429,
    code: 'RATE_LIMITED',
    reason: 'TenantBudget',
  });
  expect(refused!.extensions?.cost).toBeUndefined();
});

test('/metrics shows each tenant’s cost: the sum of its answers’ extensions.cost', async () => {
  const tenants = ['ledger-a', 'ledger-b'];
  const spent = new Map<string, number>();
  for (const tid of tenants) {
    const t = await sign(tid);
    let total = 0;
    // Three point queries: within the budget (8 calls a second), so all are answered.
    for (let i = 0; i < 3; i++) {
      const r = await as(t, 'query($id: ID!) { note(id: $id) { id } }', { id: `m${i}` });
      expect(r.errors).toBeUndefined();
      total += r.extensions.cost.azureTransactions;
    }
    expect(total).toBe(3);
    spent.set(tid, total);
  }
  const text = await (await fetch(ctx.server.url.replace(/\/graphql$/, '/metrics'))).text();
  for (const [tid, total] of spent) {
    const line = text.split('\n').find((l) => l.startsWith(`tablegraph_tenant_azure_transactions{tenant="${tid}"}`));
    expect(line).toBe(`tablegraph_tenant_azure_transactions{tenant="${tid}"} ${total}`);
  }
});

test('npm run tenant -- budget: a tenant of its own budget is served where the default refuses, until --default gives it back', async () => {
  const roomy = await sign('roomy');
  // Five creates at once cost 5 × 8 calls: over the default budget of 8 a second, within one of 1000.
  const five = async (round: string) => Promise.all([0, 1, 2, 3, 4].map((k) => as(roomy, CREATE, { i: { id: `${round}-${k}`, text: 'roomy' } })));
  expect((await five('first')).some((r) => r.errors?.[0]?.extensions?.reason === 'TenantBudget')).toBe(true);
  const env = {
    AZURE_STORAGE_CONNECTION_STRING: connectionString(),
    TABLEGRAPH_SCHEMA_DIR: ctx.dir,
    TABLEGRAPH_TABLE_PREFIX: ctx.server.config.tablePrefix,
  };
  const set = runCommand('tenant', ['budget', 'roomy', '--transactions-per-second', '1000'], undefined, env);
  expect(await exitedOk(set)).toMatch(/tenant roomy: 1000 storage calls and 10000 entities read a second/);
  const list = runCommand('tenant', ['list'], undefined, env);
  expect(await exitedOk(list)).toMatch(/roomy\s+PARTITION_PREFIX\s+open, its own budget: 1000 calls\/s, 10000 entities\/s/);
  // The server reads it within its refresh: then five at once are all served.
  let round = 0;
  await until('roomy served five at once', async () => (await five(`own${round++}`)).every((r) => !r.errors));
  const reset = runCommand('tenant', ['budget', 'roomy', '--default'], undefined, env);
  expect(await exitedOk(reset)).toMatch(/tenant roomy: the default budget/);
  await until('roomy refused again', async () => (await five(`back${round++}`)).some((r) => r.errors?.[0]?.extensions?.reason === 'TenantBudget'));
});
