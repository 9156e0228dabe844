/**
 * Relay against a real server (`extend schema @nodeInterface`), on a schema written for the test: Relay's own compiler
 * (relay-compiler, configured with PostGraphile's `nodeId` as docs/frontend.md says) compiles a query, a paginated
 * `@connection` fragment and a `@refetchable` fragment against the client schema the server serves; relay-runtime
 * runs them. Two teams have players numbered alike: the store keeps them apart (keyed by `nodeId`), the next page is
 * fetched through `node(nodeId:)` and appended to the connection, and a player refetched by its id is the one shown.
 */
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { printSchema } from 'graphql';
import {
  Environment,
  Network,
  RecordSource,
  Store,
  createOperationDescriptor,
  fetchQuery,
  getSelector,
  type GraphQLResponse,
  type GraphQLTaggedNode,
} from 'relay-runtime';
import { clientSchema } from '../src/compiler/client-schema';
import { compileSchema } from '../src/compiler/compile';
import { loadSchemaSources } from '../src/compiler/load-schema';
import { ROOT, startSdlServer } from './support/harness';

const SDL = `
extend schema @nodeInterface

type Team @entity(table: "Teams", partitionKey: "{code}", rowKey: "team") {
  code: ID!
  name: String!
  players(first: Int, after: String): PlayerConnection! @range(partitionKey: "{code}", rowKeyPrefix: "player_")
}
type Player @entity(table: "Teams", partitionKey: "{team}", rowKey: "player_{number:03}") {
  team: ID!
  number: Int!
  name: String!
}
type Query { team(code: ID!): Team @point }
type Mutation {
  createTeam(input: CreateTeamInput!): TeamPayload! @write(entity: "Team", action: CREATE)
  createPlayer(input: CreatePlayerInput!): PlayerPayload! @write(entity: "Player", action: CREATE)
}
`;

/** The app's operations, as a Relay app writes them (compiled by relay-compiler, never run as this text). */
const APP = `
const { graphql } = require('relay-runtime');
graphql\`query appTeamQuery($code: ID!) { team(code: $code) { nodeId name ...appTeam_players } }\`;
graphql\`
  fragment appTeam_players on Team
  @refetchable(queryName: "appTeamPlayersPaginationQuery")
  @argumentDefinitions(count: { type: "Int", defaultValue: 2 }, cursor: { type: "String" }) {
    players(first: $count, after: $cursor) @connection(key: "appTeam_players") { edges { node { nodeId number name ...appPlayer } } }
  }
\`;
graphql\`fragment appPlayer on Player @refetchable(queryName: "appPlayerRefetchQuery") { team number name }\`;
`;

let ctx: Awaited<ReturnType<typeof startSdlServer>>;
let artifacts: string;
beforeAll(async () => {
  ctx = await startSdlServer(SDL, { TABLEGRAPH_AUTH: 'off' });
  for (const [code, names] of Object.entries({ red: ['Ada', 'Bo', 'Cy'], blue: ['Di', 'Ed', 'Fy'] })) {
    expect((await ctx.server.query(`mutation { createTeam(input: { code: "${code}", name: "${code}" }) { team { code } } }`)).errors).toBeUndefined();
    for (const [i, name] of names.entries()) {
      const input = `{ team: "${code}", number: ${i + 1}, name: "${name}" }`;
      expect((await ctx.server.query(`mutation { createPlayer(input: ${input}) { player { number } } }`)).errors).toBeUndefined();
    }
  }
  // A Relay project: the client schema as served, the app's operations, relay-compiler's config; then its artifacts.
  const project = fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-relay-'));
  artifacts = path.join(project, 'src', '__generated__');
  fs.mkdirSync(artifacts, { recursive: true });
  fs.writeFileSync(path.join(project, 'schema.graphql'), printSchema(clientSchema(compileSchema(loadSchemaSources(ctx.dir)).schema)));
  fs.writeFileSync(path.join(project, 'src', 'app.js'), APP);
  const config = {
    src: './src',
    schema: './schema.graphql',
    language: 'javascript',
    artifactDirectory: './src/__generated__',
    // CommonJS artifacts, which jest requires as they are (ES modules by default).
    eagerEsModules: false,
    schemaConfig: { nodeInterfaceIdField: 'nodeId', nodeInterfaceIdVariableName: 'nodeId' },
  };
  fs.writeFileSync(path.join(project, 'relay.config.json'), JSON.stringify(config));
  execFileSync(path.join(ROOT, 'node_modules', '.bin', 'relay-compiler'), { cwd: project, stdio: 'pipe' });
}, 120_000);
afterAll(() => ctx?.close());

/** A compiled artifact of the app, by its operation or fragment name. */
const artifact = (name: string): GraphQLTaggedNode => createRequire(__filename)(path.join(artifacts, `${name}.graphql.js`));

function environment(): Environment {
  const network = Network.create(async (request, variables) => {
    const res = await fetch(ctx.server.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: request.text, variables }),
    });
    return (await res.json()) as GraphQLResponse;
  });
  // Relay's store keys a record by `id` unless told: by the global id (docs/frontend.md, "Relay").
  return new Environment({ network, store: new Store(new RecordSource()), getDataID: (value: any) => value.nodeId });
}

/** The team's players as the app's connection fragment reads them from the store. */
function playersShown(env: Environment, code: string): string[] {
  const query = createOperationDescriptor(artifact('appTeamQuery') as any, { code });
  const team = (env.lookup(query.fragment).data as any).team;
  const players = env.lookup(getSelector(artifact('appTeam_players') as any, team) as any).data as any;
  return players.players.edges.map((e: any) => `${e.node.number} ${e.node.name}`);
}

test('two teams with players numbered alike stay apart; the next page comes through node(nodeId:) and is appended', async () => {
  const env = environment();
  await fetchQuery(env, artifact('appTeamQuery'), { code: 'red' }).toPromise();
  const blue = (await fetchQuery(env, artifact('appTeamQuery'), { code: 'blue' }).toPromise()) as any;
  expect(playersShown(env, 'red')).toEqual(['1 Ada', '2 Bo']);
  expect(playersShown(env, 'blue')).toEqual(['1 Di', '2 Ed']);
  const red = env.lookup(createOperationDescriptor(artifact('appTeamQuery') as any, { code: 'red' }).fragment).data as any;
  const page = (env.lookup(getSelector(artifact('appTeam_players') as any, red.team) as any).data as any).players;
  expect(page.pageInfo.hasNextPage).toBe(true);
  // What Relay's usePaginationFragment sends for loadNext: the refetch query by the team's nodeId, after the end cursor.
  await fetchQuery(env, artifact('appTeamPlayersPaginationQuery'), { nodeId: red.team.nodeId, count: 2, cursor: page.pageInfo.endCursor }).toPromise();
  expect(playersShown(env, 'red')).toEqual(['1 Ada', '2 Bo', '3 Cy']);
  expect(playersShown(env, 'blue')).toEqual(['1 Di', '2 Ed']);
  expect(blue.team.nodeId).not.toBe(red.team.nodeId);
});

test('a player refetched by its nodeId (a @refetchable fragment) is that player', async () => {
  const env = environment();
  await fetchQuery(env, artifact('appTeamQuery'), { code: 'blue' }).toPromise();
  const blue = env.lookup(createOperationDescriptor(artifact('appTeamQuery') as any, { code: 'blue' }).fragment).data as any;
  const first = (env.lookup(getSelector(artifact('appTeam_players') as any, blue.team) as any).data as any).players.edges[0].node;
  const refetched = (await fetchQuery(env, artifact('appPlayerRefetchQuery'), { nodeId: first.nodeId }).toPromise()) as any;
  // The refetch query's answer is masked (its fragment's data is read through the fragment): the one record, by its id.
  expect(refetched.node.__id).toBe(first.nodeId);
  const shown = env.lookup(getSelector(artifact('appPlayer') as any, refetched.node) as any).data;
  expect(shown).toEqual({ team: 'blue', number: 1, name: 'Di', nodeId: first.nodeId });
});
