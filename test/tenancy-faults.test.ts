/**
 * Tenants' writes through a Table service that pushes back (test/support/storage-proxy.ts: 503 ServerBusy, 429,
 * requests applied and then answered 500 or with the connection reset), on a tenant-scoped schema written for the test:
 * two tenants write the very same keys at once — creates, updates with the ETag read, deletes, one key deleted and
 * created again and again — with a unique e-mail (reserved in a table of its own), a count and a sum kept in the EGT,
 * and a count and an inter-partition index kept by the worker (whose messages, sent back by the faults, come again).
 * Each tenant's write is acknowledged if and only if it is stored, in its own key range; each tenant's summaries equal
 * a recount of its own entities; `verify` is clean once the queue drains. The fault schedule comes from a printed seed.
 */
import { SignJWT } from 'jose';
import { formatVerifyReport, verifyDerived } from '../src/maintenance/verify-derived';
import { startSdlServer, testStore, uniquePrefix } from './support/harness';
import { startStorageProxy, type StorageProxy } from './support/storage-proxy';
import { testSeed } from './support/seed';
import { until } from './support/wait';
import { limited } from './support/limited';

const SECRET = 'a-tenancy-faults-secret-of-32-characters';
const TENANTS = ['north', 'south'] as const;
type Tenant = (typeof TENANTS)[number];

const SDL = `
extend schema @tenancy(claim: "tid")
type Team @entity(table: "Teams", partitionKey: "team_{team}", rowKey: "team") {
  team: ID!
  members: Int! @summary(of: "Member", via: "home", count: true)
  points: Int! @summary(of: "Member", via: "home", sum: ["points"])
}
type Role @entity(table: "Roles", partitionKey: "roles", rowKey: "{role}") {
  role: ID!
  holders: Int! @summary(of: "Member", via: "position", count: true)
}
type Member @entity(table: "Teams", partitionKey: "team_{team}", rowKey: "member_{id}")
  @index(name: "byEmail", table: "MembersByEmail", partitionKey: "email", rowKey: "{email}", unique: true)
  @index(name: "byRole", table: "MembersByRole", partitionKey: "role_{role}", rowKey: "{team}_{id}", include: ["name"]) {
  etag: String!
  team: ID!
  id: ID!
  email: String!
  name: String!
  role: ID!
  points: Int!
  home: Team! @point(partitionKey: "team_{team}", rowKey: "team")
  position: Role! @point(partitionKey: "roles", rowKey: "{role}")
}
type Query {
  team(team: ID!): Team @point
  role(role: ID!): Role @point(partitionKey: "roles")
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
let proxy: StorageProxy;
let ctx: Awaited<ReturnType<typeof startSdlServer>>;
const tokens = new Map<Tenant, string>();

beforeAll(async () => {
  proxy = await startStorageProxy(process.env.AZURE_STORAGE_CONNECTION_STRING!, { seed });
  ctx = await startSdlServer(SDL, {
    TABLEGRAPH_JWT_SECRET: SECRET,
    TABLEGRAPH_TABLE_PREFIX: prefix,
    AZURE_STORAGE_CONNECTION_STRING: proxy.connectionString,
    TABLEGRAPH_STORAGE_TIMEOUT_MS: '10000',
    TABLEGRAPH_RATE_LIMIT: '1000000',
    TABLEGRAPH_TENANT_TRANSACTIONS_PER_SECOND: '1000000',
    // A message a failed call left hidden is back in 5 s, not 30.
    TABLEGRAPH_VISIBILITY_TIMEOUT_SECONDS: '5',
  });
  for (const t of TENANTS) {
    tokens.set(
      t,
      await new SignJWT({ sub: `lead@${t}.test`, tid: t }).setProtectedHeader({ alg: 'HS256' }).setExpirationTime('30m').sign(new TextEncoder().encode(SECRET)),
    );
  }
}, 60_000);
afterAll(async () => {
  await ctx?.close();
  await proxy?.close();
});

async function as(t: Tenant, query: string, variables?: Record<string, unknown>): Promise<{ data?: any; code?: string }> {
  const res = await fetch(ctx.server.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${tokens.get(t)}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await res.json()) as { data?: any; errors?: Array<{ extensions?: { code?: string } }> };
  return { data: body.data, code: body.errors?.[0]?.extensions?.code };
}

const CREATE = 'mutation($i: CreateMemberInput!) { createMember(input: $i) { member { id etag } } }';
const UPDATE = 'mutation($i: UpdateMemberInput!) { updateMember(input: $i) { member { id } } }';
const DELETE = 'mutation($i: DeleteMemberInput!) { deleteMember(input: $i) { member { id } } }';
const member = (t: Tenant, id: string, points: number, role = 'dev') => ({ team: 'a', id, email: `${id}@team.test`, name: `${t}: ${id}`, role, points });

test('two tenants writing the same keys under storage faults: acknowledged iff stored, each in its own range; summaries exact; verify clean', async () => {
  const etags = new Map<string, string>();
  for (const t of TENANTS) {
    for (const q of ['mutation { createTeam(input: { team: "a" }) { team { team } } }', 'mutation { createRole(input: { role: "dev" }) { role { role } } }']) {
      expect((await as(t, q)).code).toBeUndefined();
    }
    // Before the faults: members to update and to delete.
    for (const id of [...Array.from({ length: 15 }, (_, i) => `u${i}`), ...Array.from({ length: 8 }, (_, i) => `d${i}`)]) {
      const r = await as(t, CREATE, { i: member(t, id, 1) });
      expect(r.code).toBeUndefined();
      etags.set(`${t}/${id}`, r.data.createMember.member.etag);
    }
  }
  proxy.setFaults({ busy: 0.04, throttled: 0.04, timedOutAfterApply: 0.02, resetAfterApply: 0.02 });
  type Op = { t: Tenant; kind: 'create' | 'update' | 'delete' | 'churn'; id: string; points: number };
  const ops: Op[] = TENANTS.flatMap((t) => [
    ...Array.from({ length: 30 }, (_, i): Op => ({ t, kind: 'create', id: `c${i}`, points: (i % 5) + 1 })),
    ...Array.from({ length: 15 }, (_, i): Op => ({ t, kind: 'update', id: `u${i}`, points: 10 + i })),
    ...Array.from({ length: 8 }, (_, i): Op => ({ t, kind: 'delete', id: `d${i}`, points: 0 })),
  ]);
  // The same key deleted and created again, one write after the other, in each tenant beside the rest.
  const churn = async (t: Tenant) => {
    const outcomes: Array<{ kind: 'create' | 'delete'; code?: string }> = [];
    for (let round = 0; round < 6; round++) {
      outcomes.push({ kind: 'create', code: (await as(t, CREATE, { i: member(t, 'x', round + 1) })).code });
      outcomes.push({ kind: 'delete', code: (await as(t, DELETE, { i: { team: 'a', id: 'x' } })).code });
    }
    outcomes.push({ kind: 'create', code: (await as(t, CREATE, { i: member(t, 'x', 7) })).code });
    return outcomes;
  };
  const [answers, ...churned] = await Promise.all([
    limited(
      8,
      ops.map((op) => async () => {
        const input =
          op.kind === 'create'
            ? member(op.t, op.id, op.points)
            : op.kind === 'update'
              ? { team: 'a', id: op.id, points: op.points, ifMatch: etags.get(`${op.t}/${op.id}`) }
              : { team: 'a', id: op.id };
        return { op, ...(await as(op.t, op.kind === 'create' ? CREATE : op.kind === 'update' ? UPDATE : DELETE, { i: input })) };
      }),
    ),
    ...TENANTS.map(churn),
  ]);
  proxy.setFaults({});
  const codes: Record<string, number> = {};
  for (const a of answers) codes[`${a.op.kind} ${a.code ?? 'ok'}`] = (codes[`${a.op.kind} ${a.code ?? 'ok'}`] ?? 0) + 1;
  console.log(`tenancy faults (seed ${seed}): ${JSON.stringify(codes)}; injected ${JSON.stringify(proxy.injected())}`);
  // A refusal says the storage pushed back, never a conflict with the write's own first attempt.
  for (const a of answers)
    if (a.code) expect([a.op.kind, a.code]).toEqual([a.op.kind, expect.stringMatching(/^(STORAGE_BUSY|STORAGE_UNAVAILABLE|OVERLOADED)$/)]);

  const store = testStore();
  for (const t of TENANTS) {
    // What is stored, read around the proxy, in the tenant's own partition.
    const { entities } = await store.queryRange({
      table: `${prefix}Teams`,
      partitionKey: `${t}_team_a`,
      rowKeyFrom: 'member_',
      rowKeyTo: 'member`',
      limit: 1000,
    });
    const stored = new Map(entities.map((e) => [String(e.properties.id), e]));
    for (const e of entities) expect([e.properties._tenant, String(e.properties.name).startsWith(`${t}:`)]).toEqual([t, true]);
    const wrong: string[] = [];
    for (const { op, code } of answers.filter((a) => a.op.t === t)) {
      const s = stored.get(op.id);
      // A write whose outcome storage never told (STORAGE_UNAVAILABLE) may be either.
      if (code === 'STORAGE_UNAVAILABLE') continue;
      if (op.kind === 'create' && (code === undefined) !== (s !== undefined))
        wrong.push(`create ${op.id}: ${code ?? 'acknowledged'}, ${s ? '' : 'not '}stored`);
      if (op.kind === 'update' && Number(s?.properties.points) !== (code === undefined ? op.points : 1))
        wrong.push(`update ${op.id}: ${code ?? 'acknowledged'}, stored ${s?.properties.points}`);
      if (op.kind === 'delete' && (code === undefined) === (s !== undefined))
        wrong.push(`delete ${op.id}: ${code ?? 'acknowledged'}, ${s ? '' : 'not '}stored`);
    }
    // The churned key: the last acknowledged write of it is what is stored.
    const last = churned[TENANTS.indexOf(t)].filter((o) => o.code === undefined).at(-1);
    if (last && churned[TENANTS.indexOf(t)].at(-1)!.code !== 'STORAGE_UNAVAILABLE')
      expect({ key: 'x', stored: stored.has('x') }).toEqual({ key: 'x', stored: last.kind === 'create' });
    expect(wrong).toEqual([]);
    // The summaries kept in the EGT are a recount of the tenant's own members.
    const team = await as(t, 'query { team(team: "a") { members points } }');
    expect(team.data.team).toEqual({ members: entities.length, points: entities.reduce((n, e) => n + Number(e.properties.points), 0) });
    // The count kept by the worker, once the queue drains (messages the faults sent back come again).
    await until(
      `${t}'s role counts its ${entities.length} members`,
      async () => (await as(t, 'query { role(role: "dev") { holders } }')).data?.role?.holders === entities.length,
      {
        timeoutMs: 90_000,
        everyMs: 500,
      },
    );
  }
  let report = await verifyDerived({ store, model: ctx.model });
  if (!report.ok)
    await until('verify clean', async () => (report = await verifyDerived({ store, model: ctx.model })).ok, { timeoutMs: 60_000, everyMs: 1000 }).catch(
      () => undefined,
    );
  if (!report.ok) console.log(formatVerifyReport(report));
  expect(report.ok).toBe(true);
}, 240_000);
