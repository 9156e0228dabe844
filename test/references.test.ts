/**
 * References (a `@point` field of an entity type whose keys come from the entity's own fields): optional
 * references cost no storage call while their key field is null; a write that points a reference at nothing is
 * refused with NOT_FOUND naming the field, and nothing of it is written; a reference whose target was deleted
 * later reads as null where the field is nullable. `@point(checkOnWrite: false)` turns the check off.
 * Guide section: "Modelling relationships" (the application keeps referential integrity).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DIRECTIVES_FILE, startTestServer, type TestServer } from './support/harness';
import { CREATE_DEPARTMENT, CREATE_EMPLOYEE, DELETE_EMPLOYEE, employeeInput, firstError, rawEntity } from './support/write-fixtures';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ TABLEGRAPH_WORKER: 'off' });
});
afterAll(() => server?.close());

const HEAD = 'query($id: ID!) { department(id: $id) { name headEmployeeId head { id lastName } } }';
const NAME = 'query($id: ID!) { department(id: $id) { name headEmployeeId } }';
const UPDATE = 'mutation($input: UpdateDepartmentInput!) { updateDepartment(input: $input) { department { headEmployeeId head { id } } } }';
const CREATE = 'mutation($input: CreateDepartmentInput!) { createDepartment(input: $input) { department { headEmployeeId head { id } } } }';

test('an optional reference with a null key field is null and costs no storage call', async () => {
  expect((await server.query(CREATE_DEPARTMENT, { input: { id: 'REF1', name: 'Ref one' } })).errors).toBeUndefined();
  const withHead = await server.query(HEAD, { id: 'REF1' });
  const without = await server.query(NAME, { id: 'REF1' });
  expect(withHead.errors).toBeUndefined();
  expect(withHead.data.department).toEqual({ name: 'Ref one', headEmployeeId: null, head: null });
  expect(withHead.extensions.cost.roundTrips).toBe(without.extensions.cost.roundTrips);
  expect(withHead.extensions.cost.roundTrips).toBe(1);
});

test('a reference to nothing is refused with NOT_FOUND naming the field, and nothing is written', async () => {
  expect((await server.query(CREATE_DEPARTMENT, { input: { id: 'REF2', name: 'Ref two' } })).errors).toBeUndefined();
  const table = `${server.config.tablePrefix}Directory`;
  const address = { table, partitionKey: 'REF2', rowKey: 'department' };
  const before = await rawEntity(server.store, address);

  const refused = await server.query(UPDATE, { input: { id: 'REF2', headEmployeeId: '7' } });
  expect(firstError(refused)).toMatchObject({ code: 'NOT_FOUND', extensions: { reason: 'ReferenceMissing', field: 'head' } });
  expect(firstError(refused).message).toContain('Department.head');
  expect((await rawEntity(server.store, address))!.etag).toBe(before!.etag);

  // On create too; and a key value that cannot form the RowKey is BAD_USER_INPUT.
  expect(firstError(await server.query(CREATE, { input: { id: 'REF3', name: 'x', headEmployeeId: '7' } }))).toMatchObject({
    code: 'NOT_FOUND',
    extensions: { field: 'head' },
  });
  expect(await rawEntity(server.store, { table, partitionKey: 'REF3', rowKey: 'department' })).toBeNull();
  expect(firstError(await server.query(UPDATE, { input: { id: 'REF2', headEmployeeId: 'seven' } })).code).toBe('BAD_USER_INPUT');

  // An employee of another department is not this department's head: the reference addresses REF2's partition.
  expect((await server.query(CREATE_DEPARTMENT, { input: { id: 'REF4', name: 'Ref four' } })).errors).toBeUndefined();
  expect((await server.query(CREATE_EMPLOYEE, { input: employeeInput('REF4', 7) })).errors).toBeUndefined();
  expect(firstError(await server.query(UPDATE, { input: { id: 'REF2', headEmployeeId: '7' } })).code).toBe('NOT_FOUND');
  expect((await rawEntity(server.store, address))!.etag).toBe(before!.etag);
});

test('a reference to an existing entity is kept; once its target is deleted it reads as null', async () => {
  expect((await server.query(CREATE_DEPARTMENT, { input: { id: 'REF5', name: 'Ref five' } })).errors).toBeUndefined();
  expect((await server.query(CREATE_EMPLOYEE, { input: employeeInput('REF5', 3) })).errors).toBeUndefined();
  const named = await server.query(UPDATE, { input: { id: 'REF5', headEmployeeId: '3' } });
  expect(named.errors).toBeUndefined();
  expect(named.data.updateDepartment.department).toEqual({ headEmployeeId: '3', head: { id: '3' } });
  // An update that leaves the reference alone is not checked again.
  expect((await server.query(UPDATE, { input: { id: 'REF5', name: 'Renamed' } })).errors).toBeUndefined();

  expect((await server.query(DELETE_EMPLOYEE, { input: { departmentId: 'REF5', id: '3' } })).errors).toBeUndefined();
  const dangling = await server.query(HEAD, { id: 'REF5' });
  expect(dangling.errors).toBeUndefined();
  expect(dangling.data.department).toEqual({ name: 'Renamed', headEmployeeId: '3', head: null });
  // Clearing the reference needs no check.
  expect((await server.query(UPDATE, { input: { id: 'REF5', headEmployeeId: null } })).data.updateDepartment.department).toEqual({
    headEmployeeId: null,
    head: null,
  });
});

describe('checkOnWrite: false, and a reference across tables', () => {
  const SDL = `
type Team @entity(table: "Teams", partitionKey: "teams", rowKey: "{id}") { id: ID! name: String! }
type Player @entity(table: "Players", partitionKey: "{league}", rowKey: "{id}") {
  league: ID! id: ID! teamId: ID formerTeamId: ID
  team: Team @point(partitionKey: "teams", rowKey: "{teamId}")
  formerTeam: Team @point(partitionKey: "teams", rowKey: "{formerTeamId}", checkOnWrite: false)
}
type Query { player(league: ID!, id: ID!): Player @point team(id: ID!): Team @point(partitionKey: "teams") }
input TeamInput { id: ID! name: String! }
type TeamPayload { team: Team! }
input PlayerInput { league: ID! id: ID! teamId: ID formerTeamId: ID }
type PlayerPayload { player: Player! }
type Mutation {
  createTeam(input: TeamInput!): TeamPayload! @write(entity: "Team", action: CREATE)
  createPlayer(input: PlayerInput!): PlayerPayload! @write(entity: "Player", action: CREATE)
}`;
  let league: TestServer;
  let dir: string;
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-refs-'));
    fs.copyFileSync(DIRECTIVES_FILE, path.join(dir, 'directives.graphql'));
    fs.writeFileSync(path.join(dir, 'league.graphql'), SDL);
    league = await startTestServer({ TABLEGRAPH_SCHEMA_DIR: dir, TABLEGRAPH_WORKER: 'off' });
  });
  afterAll(async () => {
    await league?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const CREATE_PLAYER = 'mutation($input: PlayerInput!) { createPlayer(input: $input) { player { id team { name } formerTeam { name } } } }';

  test('a checked reference in another table is read before the write; an unchecked one may dangle and reads as null', async () => {
    expect((await league.query('mutation { createTeam(input: { id: "bulls", name: "Bulls" }) { team { id } } }')).errors).toBeUndefined();
    const refused = await league.query(CREATE_PLAYER, { input: { league: 'nba', id: 'p1', teamId: 'nope' } });
    expect(firstError(refused)).toMatchObject({ code: 'NOT_FOUND', extensions: { reason: 'ReferenceMissing', field: 'team' } });
    expect(await rawEntity(league.store, { table: `${league.config.tablePrefix}Players`, partitionKey: 'nba', rowKey: 'p1' })).toBeNull();

    const created = await league.query(CREATE_PLAYER, { input: { league: 'nba', id: 'p1', teamId: 'bulls', formerTeamId: 'gone' } });
    expect(created.errors).toBeUndefined();
    expect(created.data.createPlayer.player).toEqual({ id: 'p1', team: { name: 'Bulls' }, formerTeam: null });
    // Without a team: nothing to check, and nothing to read.
    const free = await league.query(CREATE_PLAYER, { input: { league: 'nba', id: 'p2' } });
    expect(free.data.createPlayer.player).toEqual({ id: 'p2', team: null, formerTeam: null });
  });
});
