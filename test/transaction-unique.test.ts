/**
 * Unique values in a `@transaction` (docs/reads-and-writes.md, "Transactions"), against the test Azurite, on a schema
 * written for the test: a team and its members in one partition, each member's e-mail unique through an index in
 * another table. Each item's new values are reserved before the EGT and confirmed after it, as a single mutation
 * reserves them; a value another entity has, or that two items give, refuses the call naming the item, nothing
 * written and nothing left reserved; a member deleted and made again keeps its value through the worker's late
 * message; racing calls for one value: one of them gets it; `verify` clean.
 */
import { formatVerifyReport, verifyDerived } from '../src/maintenance/verify-derived';
import { RESERVED_UNTIL_PROPERTY, WRITE_ID_PROPERTY } from '../src/model/types';
import { testQueues, testStore, uniquePrefix } from './support/harness';
import { drainWithRedelivery, queueWriter, seededRng } from './support/fanout-fixtures';
import { limited } from './support/limited';
import { testSeed } from './support/seed';
import { startProxiedServer, type ProxiedServer } from './support/proxied-server';

const SDL = `
type Team @entity(table: "Teams", partitionKey: "team_{id}", rowKey: "team") {
  id: ID! @constraint(maxLength: 20)
  name: String! @constraint(maxLength: 40)
  memberCount: Int! @summary(of: "Member", via: "team", count: true)
}
type Member @entity(table: "Teams", partitionKey: "team_{teamId}", rowKey: "member_{memberNo:03}")
  @index(name: "byEmail", table: "MembersByEmail", partitionKey: "{email}", rowKey: "member", unique: true) {
  teamId: ID! @constraint(maxLength: 20)
  memberNo: Int!
  email: String! @constraint(maxLength: 80)
  team: Team! @point(partitionKey: "team_{teamId}", rowKey: "team")
}
type Query {
  team(id: ID!): Team @point
  memberByEmail(email: String!): Member @point(index: "byEmail")
}
type Mutation {
  createTeam(input: CreateTeamInput!): TeamPayload! @write(entity: "Team", action: CREATE)
  createMember(input: CreateMemberInput!): MemberPayload! @write(entity: "Member", action: CREATE)
  updateMember(input: UpdateMemberInput!): MemberPayload! @write(entity: "Member", action: UPDATE)
  deleteMember(input: DeleteMemberInput!): MemberPayload! @write(entity: "Member", action: DELETE)
  staff(teamId: ID!, writes: [TeamWrite!]!): [TeamWritten]! @transaction(maxItems: 10)
}
input TeamWrite {
  createTeam: CreateTeamInput
  createMember: CreateMemberInput
  updateMember: UpdateMemberInput
  deleteMember: DeleteMemberInput
}
union TeamWritten = Team | Member
`;

const STAFF = `mutation ($teamId: ID!, $writes: [TeamWrite!]!) {
  staff(teamId: $teamId, writes: $writes) { __typename ... on Member { memberNo email } }
}`;
const BY_EMAIL = 'query ($email: String!) { memberByEmail(email: $email) { teamId memberNo } }';

const seed = testSeed();
let server: ProxiedServer;
let ctx: ProxiedServer['ctx'];

beforeAll(async () => {
  server = await startProxiedServer(SDL, { seed, prefix: uniquePrefix(), env: { TABLEGRAPH_WORKER: 'off' } });
  ({ ctx } = server);
}, 60_000);
afterAll(() => server?.close());

const member = (teamId: string, memberNo: number, email: string) => ({ createMember: { teamId, memberNo, email } });
const staff = (teamId: string, members: Array<[number, string]>, team = true) =>
  ctx.server.query(STAFF, {
    teamId,
    writes: [...(team ? [{ createTeam: { id: teamId, name: `Team ${teamId}` } }] : []), ...members.map(([n, email]) => member(teamId, n, email))],
  });
const byEmail = async (email: string) => (await ctx.server.query(BY_EMAIL, { email })).data.memberByEmail;
/** The index entity stored for `email`, as it is (null: none): a reservation still carries its WriteId and lease. */
const indexEntity = (email: string) =>
  ctx.server.store.getEntity({ table: `${ctx.server.config.tablePrefix}MembersByEmail`, partitionKey: email, rowKey: 'member' });
/** Delivers what the queue holds, every message twice, late and reversed, some deliveries killed (from `draws`' seed). */
const drain = (draws: number) => {
  const rng = seededRng(draws);
  const options = { model: ctx.model, store: ctx.server.store, writer: queueWriter(ctx.model, ctx.server), queues: testQueues() };
  return drainWithRedelivery({ ...options, tablePrefix: ctx.server.config.tablePrefix }, () => rng.int(0x7fffffff) / 0x7fffffff);
};
const teamOf = async (id: string) => (await ctx.server.query('query ($id: ID!) { team(id: $id) { memberCount } }', { id })).data.team;

test('a team and its members in one call: each e-mail reserved before the EGT and confirmed after it, answered at once', async () => {
  const r = await staff('t1', [
    [1, 'ann@example.com'],
    [2, 'bo "the, second"@example.com'],
  ]);
  expect(r.errors).toBeUndefined();
  // The estimate, per item of 10 at most: a member, its holder, its reference, a read back, its message, and its
  // e-mail's insert, confirmation and release; then the journal's mark and the EGT: 10 × 8 + 2.
  expect(r.extensions.cost.estimate.storageCalls).toBe(82);
  expect(await teamOf('t1')).toEqual({ memberCount: 2 });
  for (const [n, email] of [
    [1, 'ann@example.com'],
    [2, 'bo "the, second"@example.com'],
  ] as const) {
    expect(await byEmail(email)).toEqual({ teamId: 't1', memberNo: n });
    const stored = await indexEntity(email);
    expect(stored).not.toBeNull();
    // Confirmed: a plain index entity, no longer a reservation.
    expect([stored!.properties[WRITE_ID_PROPERTY], stored!.properties[RESERVED_UNTIL_PROPERTY]]).toEqual([undefined, undefined]);
  }
});

test('two items giving one e-mail: BAD_USER_INPUT naming the later one, before anything is sent', async () => {
  const r = await staff('t2', [
    [1, 'cy@example.com'],
    [2, 'cy@example.com'],
  ]);
  expect(r.errors![0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', itemIndex: 2, index: 'byEmail' });
  expect(r.extensions.cost.writes).toBe(0);
  expect(await teamOf('t2')).toBeNull();
  expect(await indexEntity('cy@example.com')).toBeNull();
});

test("an e-mail another member has refuses the call, naming the item; the call's other reservations released at once", async () => {
  const r = await staff('t3', [
    [1, 'dee@example.com'],
    [2, 'ann@example.com'],
    [3, 'eve@example.com'],
  ]);
  expect(r.errors![0].extensions).toMatchObject({ code: 'CONFLICT', reason: 'UniqueKeyTaken', index: 'byEmail', itemIndex: 2 });
  expect(await teamOf('t3')).toBeNull();
  expect(await byEmail('ann@example.com')).toEqual({ teamId: 't1', memberNo: 1 });
  // Released, not left for a lease to run out: the values are free for the next write now.
  for (const email of ['dee@example.com', 'eve@example.com']) expect([email, await indexEntity(email)]).toEqual([email, null]);
  const again = await staff('t3', [
    [1, 'dee@example.com'],
    [3, 'eve@example.com'],
  ]);
  expect(again.errors).toBeUndefined();
  expect(await byEmail('eve@example.com')).toEqual({ teamId: 't3', memberNo: 3 });
});

test('an update item that changes an e-mail takes the new one at once; the worker frees the old one', async () => {
  const r = await ctx.server.query(STAFF, {
    teamId: 't1',
    writes: [{ updateMember: { teamId: 't1', memberNo: 1, email: 'ann.new@example.com' } }, member('t1', 3, 'ann@example.com.au')],
  });
  expect(r.errors).toBeUndefined();
  expect(await byEmail('ann.new@example.com')).toEqual({ teamId: 't1', memberNo: 1 });
  await drain(seed);
  expect(await indexEntity('ann@example.com')).toBeNull();
  expect(await byEmail('ann@example.com')).toBeNull();
  expect(await teamOf('t1')).toEqual({ memberCount: 3 });
});

test('a member deleted and made again with its e-mail before the worker runs keeps it; the worker leaves it', async () => {
  const gone = await ctx.server.query(STAFF, { teamId: 't3', writes: [{ deleteMember: { teamId: 't3', memberNo: 3 } }] });
  expect(gone.errors).toBeUndefined();
  // The index entity of the deleted member is still there (the worker's to delete): the same key takes it over.
  const again = await staff('t3', [[3, 'eve@example.com']], false);
  expect(again.errors).toBeUndefined();
  await drain(seed + 2);
  expect(await byEmail('eve@example.com')).toEqual({ teamId: 't3', memberNo: 3 });
  expect(await teamOf('t3')).toEqual({ memberCount: 2 });
});

test('8 calls racing for one e-mail, each with one of its own: exactly one lands; the others leave nothing behind', async () => {
  const outcomes = await limited(
    8,
    Array.from({ length: 8 }, (_, i) => async () => {
      const r = await staff(`race${i}`, [
        [1, `own${i}@example.com`],
        [2, 'shared@example.com'],
      ]);
      return { i, error: r.errors?.[0]?.extensions };
    }),
  );
  const won = outcomes.filter((o) => !o.error);
  expect(won).toHaveLength(1);
  for (const o of outcomes) if (o.error) expect(o.error).toMatchObject({ code: 'CONFLICT', reason: 'UniqueKeyTaken', itemIndex: 2 });
  expect(await byEmail('shared@example.com')).toEqual({ teamId: `race${won[0].i}`, memberNo: 2 });
  for (const { i, error } of outcomes) {
    expect([i, await teamOf(`race${i}`)]).toEqual([i, error ? null : { memberCount: 2 }]);
    expect([i, (await indexEntity(`own${i}@example.com`)) !== null]).toEqual([i, !error]);
  }
  await drain(seed + 1);
  const report = await verifyDerived({ store: testStore(), model: ctx.model });
  if (!report.ok) console.log(formatVerifyReport(report));
  expect(report.ok).toBe(true);
}, 120_000);
