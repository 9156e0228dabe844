/**
 * Relay's Global Object Identification (`extend schema @nodeInterface`, src/compiler/node-interface.ts,
 * src/resolvers/node-resolvers.ts) on a schema written for this test, under `@tenancy`: two tenants hold teams and
 * players at the very same keys (an Int among them). Every entity's `nodeId` is opaque and unique across types and
 * tenants; `node(nodeId:)` answers it with one point query, `nodes(nodeIds:)` a list in one wave, in order; an id of
 * another tenant, a forged one or one out of the caller's `@auth` answers null — the first two with no storage call,
 * the last after its one point query.
 */
import { SignJWT } from 'jose';
import { startSdlServer } from './support/harness';

const SECRET = 'a-node-interface-test-secret-of-32-chars';
const SDL = `
extend schema @tenancy(claim: "tid")
extend schema @nodeInterface

type Team @entity(table: "Teams", partitionKey: "{code}", rowKey: "team") @auth(rules: [{ roles: ["coach", "player"] }]) {
  code: ID!
  name: String!
  players(first: Int, after: String): PlayerConnection! @range(partitionKey: "{code}", rowKeyPrefix: "player_")
}
type Player @entity(table: "Teams", partitionKey: "{team}", rowKey: "player_{number:03}")
  @auth(rules: [{ roles: ["coach"] }, { roles: ["player"], scope: [{ field: "email", claim: "sub" }] }]) {
  team: ID!
  number: Int!
  email: String!
  name: String!
}
type Query {
  team(code: ID!): Team @point
  player(team: ID!, number: Int!): Player @point
}
type Mutation {
  createTeam(input: CreateTeamInput!): TeamPayload! @write(entity: "Team", action: CREATE) @auth(rules: [{ roles: ["coach"] }])
  createPlayer(input: CreatePlayerInput!): PlayerPayload! @write(entity: "Player", action: CREATE) @auth(rules: [{ roles: ["coach"] }])
  deletePlayer(input: DeletePlayerInput!): PlayerPayload! @write(entity: "Player", action: DELETE) @auth(rules: [{ roles: ["coach"] }])
}
`;

let ctx: Awaited<ReturnType<typeof startSdlServer>>;
const token = (tid: string, roles: string[], sub = 'coach@example.com') =>
  new SignJWT({ tid, roles, sub }).setProtectedHeader({ alg: 'HS256' }).setExpirationTime('10m').sign(new TextEncoder().encode(SECRET));

/** A request as `tid` with `roles`: its data, first error code and actual storage cost. */
async function as(who: { tid: string; roles: string[]; sub?: string }, query: string, variables?: Record<string, unknown>) {
  const res = await fetch(ctx.server.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${await token(who.tid, who.roles, who.sub)}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await res.json()) as any;
  return { data: body.data, code: body.errors?.[0]?.extensions?.code as string | undefined, cost: body.extensions?.cost };
}

const coach = (tid: string) => ({ tid, roles: ['coach'] });
const TEAM = `{ team(code: "red") { nodeId code name players { edges { node { nodeId team number name } } } } }`;

beforeAll(async () => {
  ctx = await startSdlServer(SDL, { TABLEGRAPH_JWT_SECRET: SECRET, TABLEGRAPH_RATE_LIMIT: '1000000' });
  for (const tid of ['alpha', 'bravo']) {
    const team = await as(coach(tid), `mutation { createTeam(input: { code: "red", name: "Red of ${tid}" }) { team { code } } }`);
    expect(team.code).toBeUndefined();
    for (const n of [1, 2]) {
      const input = `{ team: "red", number: ${n}, email: "p${n}@${tid}.example", name: "Player ${n} of ${tid}" }`;
      expect((await as(coach(tid), `mutation { createPlayer(input: ${input}) { player { number } } }`)).code).toBeUndefined();
    }
  }
}, 60_000);
afterAll(() => ctx?.close());

/** The ids of tenant `tid`'s team and players: [team, player 1, player 2]. */
async function idsOf(tid: string): Promise<string[]> {
  const { data, code } = await as(coach(tid), TEAM);
  expect(code).toBeUndefined();
  return [data.team.nodeId, ...data.team.players.edges.map((e: any) => e.node.nodeId)];
}

test('every entity has an opaque id of its own, unique across types and tenants; node(nodeId:) is its one point query', async () => {
  const alpha = await idsOf('alpha');
  const bravo = await idsOf('bravo');
  expect(new Set([...alpha, ...bravo]).size).toBe(6);
  for (const id of alpha) expect(id).not.toMatch(/red|alpha|player|team/i);
  const NODE = 'query ($id: ID!) { node(nodeId: $id) { __typename nodeId ... on Team { code name } ... on Player { team number name } } }';
  const team = await as(coach('alpha'), NODE, { id: alpha[0] });
  expect(team.data.node).toEqual({ __typename: 'Team', nodeId: alpha[0], code: 'red', name: 'Red of alpha' });
  expect(team.cost).toMatchObject({ pointQueries: 1, rangeQueries: 0, partitionScans: 0, tableScans: 0 });
  const player = await as(coach('bravo'), NODE, { id: bravo[2] });
  expect(player.data.node).toEqual({ __typename: 'Player', nodeId: bravo[2], team: 'red', number: 2, name: 'Player 2 of bravo' });
});

test('nodes(nodeIds:) answers each id in order, in one wave of point queries; the worst case counted before it runs', async () => {
  const [team, p1, p2] = await idsOf('alpha');
  const r = await as(coach('alpha'), 'query ($ids: [ID!]!) { nodes(nodeIds: $ids) { __typename ... on Player { number } } }', { ids: [p2, team, p1] });
  expect(r.data.nodes).toEqual([{ __typename: 'Player', number: 2 }, { __typename: 'Team' }, { __typename: 'Player', number: 1 }]);
  expect(r.cost).toMatchObject({ pointQueries: 3, waves: 1, estimate: expect.objectContaining({ storageCalls: 3 }) });
});

test('an id of another tenant, a forged one and one that is no id answer null, with no storage call', async () => {
  const [team, p1] = await idsOf('alpha');
  const forged = `${team.slice(0, 20)}${team[20] === 'A' ? 'B' : 'A'}${team.slice(21)}`;
  const r = await as(coach('bravo'), 'query ($ids: [ID!]!) { nodes(nodeIds: $ids) { nodeId } }', { ids: [team, p1, forged, 'not-an-id', ''] });
  expect(r.code).toBeUndefined();
  expect(r.data.nodes).toEqual([null, null, null, null, null]);
  expect(r.cost).toMatchObject({ pointQueries: 0, rangeQueries: 0 });
});

test("under @auth: a player's token reads its own player by id and none other; a token without a role reads none", async () => {
  const [, p1, p2] = await idsOf('alpha');
  const player = { tid: 'alpha', roles: ['player'], sub: 'p1@alpha.example' };
  const NODES = 'query ($ids: [ID!]!) { nodes(nodeIds: $ids) { ... on Player { number email } } }';
  const own = await as(player, NODES, { ids: [p1, p2] });
  expect(own.code).toBeUndefined();
  expect(own.data.nodes).toEqual([{ number: 1, email: 'p1@alpha.example' }, null]);
  // A scope decides on the entity read: its actual cost is not shown (it would tell what the scope left out).
  expect(own.cost.pointQueries).toBeUndefined();
  const none = await as({ tid: 'alpha', roles: [] }, NODES, { ids: [p1, p2] });
  expect(none.code).toBeUndefined();
  expect(none.data.nodes).toEqual([null, null]);
});

test("a write's payload has the entity's id: a create's is the one reads give, a delete's names the record gone (Relay's @deleteRecord)", async () => {
  const created = await as(
    coach('alpha'),
    'mutation { createPlayer(input: { team: "red", number: 9, email: "p9@alpha.example", name: "Nine" }) { player { nodeId } } }',
  );
  expect(created.code).toBeUndefined();
  const id = created.data.createPlayer.player.nodeId;
  expect(await idsOf('alpha')).toContain(id);
  const deleted = await as(coach('alpha'), 'mutation { deletePlayer(input: { team: "red", number: 9 }) { player { nodeId } } }');
  expect(deleted.data.deletePlayer.player.nodeId).toBe(id);
  const after = await as(coach('alpha'), 'query ($id: ID!) { node(nodeId: $id) { nodeId } }', { id });
  expect([after.code, after.data.node]).toEqual([undefined, null]);
});
