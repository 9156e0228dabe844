/**
 * A tenant moved between tiers and back while the Table service pushes back (test/support/storage-proxy.ts: 503
 * ServerBusy, 429, requests applied and then answered 500 or with the connection reset), on a schema written for the
 * test: two tenants write the same keys without pause — creates, updates, deletes and creates again of one key — with
 * a unique e-mail (reserved in a table of its own), a count and a sum kept in the EGT, and a count and an index kept by
 * the worker (whose messages, sent back by the faults, come again, late and out of order). The server, its inline
 * worker and `npm run tenant -- move` all reach the tables through the proxy; a move the faults stop is run again, as
 * the docs say. One tenant goes PARTITION_PREFIX → TABLE, then TABLE → PARTITION_PREFIX, then to an account of its own
 * (a second Azurite behind a fault proxy of its own). After each move: a write is
 * acknowledged if and only if it is stored (one whose outcome storage never told is read back), summaries equal a
 * recount, `verify` is clean, and a raw listing finds each tenant's entities at its place only. The fault schedule
 * comes from a printed seed.
 */
import { SignJWT } from 'jose';
import { untilConverged } from './support/fanout-fixtures';
import { isReservedName } from '../src/storage/reserved-names';
import { tenantTable } from '../src/model/tenancy';
import { startSdlServer, testStore, uniquePrefix } from './support/harness';
import { startStorageProxy, type StorageProxy } from './support/storage-proxy';
import { killCommandProcesses, runCommand } from './support/processes';
import { testSeed } from './support/seed';
import { until } from './support/wait';
import { startAzurite, type AzuriteHandle } from '../src/storage/azurite';
import { TableStore } from '../src/storage/table-store';

const SECRET = 'a-tenant-move-faults-secret-of-32-chars';
const TENANTS = ['mover', 'stay'] as const;
type Tenant = (typeof TENANTS)[number];

const SDL = `
extend schema @tenancy(claim: "tid")
type Team @entity(table: "Squads", partitionKey: "team_{team}", rowKey: "team") {
  team: ID!
  members: Int! @summary(of: "Member", via: "home", count: true)
  points: Int! @summary(of: "Member", via: "home", sum: ["points"])
}
type Role @entity(table: "Roles", partitionKey: "roles", rowKey: "{role}") {
  role: ID!
  holders: Int! @summary(of: "Member", via: "position", count: true)
}
type Member @entity(table: "Squads", partitionKey: "team_{team}", rowKey: "member_{id}")
  @index(name: "byEmail", table: "MembersByEmail", partitionKey: "email", rowKey: "{email}", unique: true)
  @index(name: "byRole", table: "MembersByRole", partitionKey: "role_{role}", rowKey: "{team}_{id}", include: ["points"]) {
  team: ID!
  id: ID!
  email: String!
  role: ID!
  points: Int!
  home: Team! @point(partitionKey: "team_{team}", rowKey: "team")
  position: Role! @point(partitionKey: "roles", rowKey: "{role}")
}
type Query {
  team(team: ID!): Team @point
  role(role: ID!): Role @point(partitionKey: "roles")
  member(team: ID!, id: ID!): Member @point
}
type Mutation {
  createTeam(input: CreateTeamInput!): TeamPayload! @write(entity: "Team", action: CREATE)
  createRole(input: CreateRoleInput!): RolePayload! @write(entity: "Role", action: CREATE)
  createMember(input: CreateMemberInput!): MemberPayload! @write(entity: "Member", action: CREATE)
  updateMember(input: UpdateMemberInput!): MemberPayload! @write(entity: "Member", action: UPDATE)
  deleteMember(input: DeleteMemberInput!): MemberPayload! @write(entity: "Member", action: DELETE)
}
`;

const seed = testSeed();
const prefix = uniquePrefix();
const FAULTS = { busy: 0.03, throttled: 0.03, timedOutAfterApply: 0.015, resetAfterApply: 0.015 };
const IDS = Array.from({ length: 10 }, (_, i) => `m${i}`);
/** What every process waits out: a move's freeze the storage timeout, its clean-up a request. */
const TIMEOUTS = { TABLEGRAPH_REQUEST_TIMEOUT_MS: '10000', TABLEGRAPH_STORAGE_TIMEOUT_MS: '10000' };
let proxy: StorageProxy;
/** The moved tenant's own account at the end (tier ACCOUNT): a second Azurite, behind a fault proxy of its own. */
let account: AzuriteHandle;
let accountProxy: StorageProxy;
const ACCOUNT_VARIABLE = 'TABLEGRAPH_TEST_FAULTS_MOVER_ACCOUNT';
let ctx: Awaited<ReturnType<typeof startSdlServer>>;
const tokens = new Map<Tenant, string>();

beforeAll(async () => {
  proxy = await startStorageProxy(process.env.AZURE_STORAGE_CONNECTION_STRING!, { seed });
  account = await startAzurite({ inMemory: true });
  accountProxy = await startStorageProxy(account.connectionString, { seed: seed + 1 });
  process.env[ACCOUNT_VARIABLE] = accountProxy.connectionString;
  ctx = await startSdlServer(SDL, {
    TABLEGRAPH_JWT_SECRET: SECRET,
    TABLEGRAPH_TABLE_PREFIX: prefix,
    AZURE_STORAGE_CONNECTION_STRING: proxy.connectionString,
    TABLEGRAPH_RATE_LIMIT: '1000000',
    TABLEGRAPH_TENANT_TRANSACTIONS_PER_SECOND: '1000000',
    TABLEGRAPH_TENANT_ENTITIES_PER_SECOND: '10000000',
    // A message a failed call left hidden is back in 3 s, not 30.
    TABLEGRAPH_VISIBILITY_TIMEOUT_SECONDS: '3',
    ...TIMEOUTS,
  });
  for (const t of TENANTS) {
    tokens.set(
      t,
      await new SignJWT({ sub: `lead@${t}.test`, tid: t }).setProtectedHeader({ alg: 'HS256' }).setExpirationTime('30m').sign(new TextEncoder().encode(SECRET)),
    );
  }
  for (const t of TENANTS) {
    for (const q of ['mutation { createTeam(input: { team: "a" }) { team { team } } }', 'mutation { createRole(input: { role: "dev" }) { role { role } } }']) {
      expect((await as(t, q)).code).toBeUndefined();
    }
  }
  console.log(`tenant move under storage faults: seed ${seed}`);
}, 60_000);
afterAll(async () => {
  killCommandProcesses();
  await ctx?.close();
  await proxy?.close();
  await accountProxy?.close();
  await account?.stop();
  delete process.env[ACCOUNT_VARIABLE];
});

async function as(t: Tenant, query: string, variables?: Record<string, unknown>): Promise<{ data?: any; code?: string; reason?: string }> {
  const res = await fetch(ctx.server.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${tokens.get(t)}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await res.json()) as { data?: any; errors?: Array<{ extensions?: { code?: string; reason?: string } }> };
  return { data: body.data, code: body.errors?.[0]?.extensions?.code, reason: body.errors?.[0]?.extensions?.reason };
}

/** Codes a write may be answered with under faults or a move's freeze: storage pushed back, nothing else. */
const PUSHED_BACK = /^(STORAGE_BUSY|STORAGE_UNAVAILABLE|OVERLOADED)$/;
/** Each key's state by its acknowledged writes (and, for a write storage never told the outcome of, as read back). */
const expected = new Map<string, number | null>();
const answers: Record<string, number> = {};

/** A member's points as stored, read through the server until it answers (null: none). */
async function readBack(t: Tenant, id: string): Promise<number | null> {
  for (;;) {
    const a = await as(t, 'query($id: ID!) { member(team: "a", id: $id) { points } }', { id });
    if (!a.code) return a.data.member?.points ?? null;
    expect(a.code).toMatch(PUSHED_BACK);
  }
}

/** One writer per key and tenant: create, updates, delete, create again… until `running()` is false. */
async function writer(t: Tenant, id: string, running: () => boolean): Promise<void> {
  const key = `${t}/${id}`;
  // Keys out of step with each other: each deletes in another round of four.
  const phase = IDS.indexOf(id) % 4;
  for (let round = 0; running(); round++) {
    const state = expected.get(key) ?? null;
    const points = (round % 9) + 1;
    const deletes = (round + phase) % 4 === 3;
    const [query, input] =
      state === null
        ? ['mutation($i: CreateMemberInput!) { createMember(input: $i) { member { id } } }', { team: 'a', id, email: `${id}@team.test`, role: 'dev', points }]
        : deletes
          ? ['mutation($i: DeleteMemberInput!) { deleteMember(input: $i) { member { id } } }', { team: 'a', id }]
          : ['mutation($i: UpdateMemberInput!) { updateMember(input: $i) { member { id } } }', { team: 'a', id, points }];
    const a = await as(t, query, { i: input });
    const kind = `${state === null ? 'create' : deletes ? 'delete' : 'update'} ${a.code ?? 'ok'}`;
    answers[kind] = (answers[kind] ?? 0) + 1;
    if (a.code === undefined) expected.set(key, state === null ? points : deletes ? null : points);
    else {
      // Or its unique e-mail still held by the write before, one storage never told the outcome of: try again.
      if (a.reason !== 'ReservationBusy') expect([kind, a.code]).toEqual([kind, expect.stringMatching(PUSHED_BACK)]);
      // Refused for sure (busy, throttled, frozen) or never told: what is stored says which.
      expected.set(key, await readBack(t, id));
    }
  }
}

/** A move run until it ends well: one the faults stop is run again, and goes on where it stopped. @returns its runs */
async function move(to: string, ...more: string[]): Promise<number> {
  const env = {
    [ACCOUNT_VARIABLE]: accountProxy.connectionString,
    AZURE_STORAGE_CONNECTION_STRING: proxy.connectionString,
    TABLEGRAPH_SCHEMA_DIR: ctx.dir,
    TABLEGRAPH_TABLE_PREFIX: prefix,
    TABLEGRAPH_JWT_SECRET: SECRET,
    TABLEGRAPH_SETTLE_MS: '1000',
    ...TIMEOUTS,
  };
  for (let run = 1; ; run++) {
    const p = runCommand('tenant', ['move', 'mover', '--isolation', to, ...more], undefined, env);
    const { code } = await p.exited;
    if (code === 0) {
      expect(p.output()).toMatch(new RegExp(`tenant mover moved from \\w+ to ${to}`));
      return run;
    }
    // Stopped by storage pushing back, never by anything else.
    expect(p.output()).toMatch(/STORAGE_BUSY|STORAGE_UNAVAILABLE|ServerBusy|OperationTimedOut|ECONNRESET|socket hang up|throttl/i);
    expect(run).toBeLessThan(8);
  }
}

/** Writers of both tenants run, with faults on, while `during` runs, and a while after; then faults off. */
async function storm(during: () => Promise<void>): Promise<void> {
  let running = true;
  proxy.setFaults(FAULTS);
  accountProxy.setFaults(FAULTS);
  const writers = TENANTS.flatMap((t) => IDS.map((id) => writer(t, id, () => running)));
  try {
    await during();
    const after = Object.values(answers).reduce((a, b) => a + b, 0);
    await until('writes at the new place', () => Object.values(answers).reduce((a, b) => a + b, 0) > after + 40, { timeoutMs: 60_000 });
  } finally {
    running = false;
    await Promise.all(writers);
    proxy.setFaults({});
    accountProxy.setFaults({});
  }
}

/** Stored state equals the acknowledged writes; summaries equal a recount; the worker's count converges; verify clean. */
async function expectStored(): Promise<void> {
  for (const t of TENANTS) {
    const live = IDS.filter((id) => expected.get(`${t}/${id}`) != null);
    for (const id of IDS) expect([t, id, await readBack(t, id)]).toEqual([t, id, expected.get(`${t}/${id}`) ?? null]);
    const team = await as(t, 'query { team(team: "a") { members points } }');
    expect(team.data.team).toEqual({ members: live.length, points: live.reduce((n, id) => n + expected.get(`${t}/${id}`)!, 0) });
    await until(
      `${t}'s role counts its ${live.length} members`,
      async () => (await as(t, 'query { role(role: "dev") { holders } }')).data?.role?.holders === live.length,
      {
        timeoutMs: 90_000,
        everyMs: 500,
      },
    );
  }
  await untilConverged({ store: ctx.server.store, model: ctx.model });
}

/** Tenants of the rows of every table of the deployment, read raw around the proxy: table → tenants found. */
async function rawTenants(store: TableStore = testStore()): Promise<Map<string, Set<string>>> {
  const found = new Map<string, Set<string>>();
  for (const table of (await store.listTables(prefix)).filter((n) => !isReservedName(n.slice(prefix.length)))) {
    const tenants = new Set<string>();
    for await (const page of store.scan(table)) for (const r of page) tenants.add(r.partitionKey.slice(0, r.partitionKey.indexOf('_')));
    found.set(table, tenants);
  }
  return found;
}

const ownTables = () => new Set(ctx.model.tables.map((t) => tenantTable(t, 'mover')));

test('moved to TABLE under storage faults and a write storm: acknowledged iff stored, summaries exact, verify clean', async () => {
  let runs = 0;
  await storm(async () => {
    runs = await move('TABLE');
  });
  console.log(`to TABLE in ${runs} run(s); answers ${JSON.stringify(answers)}; injected ${JSON.stringify(proxy.injected())}`);
  expect(proxy.injected().timedOutAfterApply + proxy.injected().resetAfterApply).toBeGreaterThan(0);
  await expectStored();
  const own = ownTables();
  // A table may be empty (every member of a tenant deleted at the end); none holds another's.
  for (const [table, tenants] of await rawTenants()) expect([table, [...tenants]]).toEqual([table, tenants.size ? [own.has(table) ? 'mover' : 'stay'] : []]);
}, 600_000);

test('moved back to PARTITION_PREFIX under the same: the same, and its own tables dropped', async () => {
  let runs = 0;
  await storm(async () => {
    runs = await move('PARTITION_PREFIX');
  });
  console.log(`back to PARTITION_PREFIX in ${runs} run(s); answers ${JSON.stringify(answers)}; injected ${JSON.stringify(proxy.injected())}`);
  await expectStored();
  const listed = await rawTenants();
  expect([...listed.keys()].filter((t) => ownTables().has(t))).toEqual([]);
  expect(new Set([...listed.values()].flatMap((t) => [...t]))).toEqual(new Set(TENANTS));
}, 600_000);

test('moved on to an account of its own, behind faults of its own: the same, and nothing of it left in the shared tables', async () => {
  let runs = 0;
  await storm(async () => {
    runs = await move('ACCOUNT', '--account', `env:${ACCOUNT_VARIABLE}`);
  });
  console.log(`to ACCOUNT in ${runs} run(s); answers ${JSON.stringify(answers)}; injected ${JSON.stringify(accountProxy.injected())} at the account`);
  expect(accountProxy.injected().timedOutAfterApply + accountProxy.injected().resetAfterApply).toBeGreaterThan(0);
  await expectStored();
  for (const [table, tenants] of await rawTenants()) expect([table, [...tenants]]).toEqual([table, tenants.size ? ['stay'] : []]);
  const theirs = await rawTenants(new TableStore({ connectionString: account.connectionString, target: 'azurite' }));
  expect(new Set([...theirs.values()].flatMap((t) => [...t]))).toEqual(new Set(['mover']));
}, 600_000);
