/**
 * The guide's "Inheritance relationships", as the HR schema declares it: the interface `Worker` and its concrete types
 * `Contractor` and `Volunteer`, stored alike (the department's partition of the Directory table, RowKey
 * `worker_{id:08}`) and told apart by EntityType — a field returning the interface is one point query, its connection
 * one range query, each entity returned as its own type; the concrete types' own reads and writes never take one for
 * the other.
 */
import { ErrorCode } from '../src/errors';
import { verifyDerived } from '../src/maintenance/verify-derived';
import { compileHr, startTestServer, type TestServer } from './support/harness';

let server: TestServer;
let directory: string;
beforeAll(async () => {
  server = await startTestServer();
  directory = `${server.config.tablePrefix}Directory`;
  const c = await server.query(CREATE_CONTRACTOR, {
    input: { departmentId: 'Sales', id: '500', name: 'Ada Byron', agency: 'Analytical Staffing', dailyRate: '640.50' },
  });
  const v = await server.query(CREATE_VOLUNTEER, { input: { departmentId: 'Sales', id: '501', name: 'Grace Hopper', hoursPerWeek: 6 } });
  expect([c.errors, v.errors]).toEqual([undefined, undefined]);
});
afterAll(async () => server?.close());

const CREATE_CONTRACTOR = `mutation ($input: CreateContractorInput!) { createContractor(input: $input) { contractor { id name } } }`;
const UPDATE_CONTRACTOR = `mutation ($input: UpdateContractorInput!) { updateContractor(input: $input) { contractor { id agency } } }`;
const CREATE_VOLUNTEER = `mutation ($input: CreateVolunteerInput!) { createVolunteer(input: $input) { volunteer { id name } } }`;
const DELETE_VOLUNTEER = `mutation ($input: DeleteVolunteerInput!) { deleteVolunteer(input: $input) { volunteer { id } } }`;
const WORKER = `query ($id: ID!) { worker(departmentId: "Sales", id: $id) { __typename id name ... on Contractor { agency dailyRate } ... on Volunteer { hoursPerWeek } } }`;

test('stored as the guide draws it: one table and key shape for both types, the EntityType property telling them apart', async () => {
  const contractor = await server.store.getEntity({ table: directory, partitionKey: 'Sales', rowKey: 'worker_00000500' });
  const volunteer = await server.store.getEntity({ table: directory, partitionKey: 'Sales', rowKey: 'worker_00000501' });
  expect(contractor?.properties).toMatchObject({ EntityType: 'Contractor', name: 'Ada Byron', agency: 'Analytical Staffing', dailyRate: '640.5' });
  expect(volunteer?.properties).toMatchObject({ EntityType: 'Volunteer', name: 'Grace Hopper', hoursPerWeek: 6 });
  expect(volunteer?.properties).not.toHaveProperty('agency');
});

test('Query.worker: one point query, the entity as its own type', async () => {
  const a = await server.query(WORKER, { id: '500' });
  const b = await server.query(WORKER, { id: '501' });
  expect(a.errors).toBeUndefined();
  expect(a.data.worker).toEqual({ __typename: 'Contractor', id: '500', name: 'Ada Byron', agency: 'Analytical Staffing', dailyRate: '640.5' });
  expect(b.data.worker).toEqual({ __typename: 'Volunteer', id: '501', name: 'Grace Hopper', hoursPerWeek: 6 });
  expect(a.extensions.cost).toMatchObject({ pointQueries: 1, rangeQueries: 0, roundTrips: 1 });
  const none = await server.query(WORKER, { id: '599' });
  expect(none.data.worker).toBeNull();
});

test('Department.workers: one range query, each entity as its own type, in id order; the employees range reads none', async () => {
  const r = await server.query(
    `{ department(id: "Sales") { workers { edges { node { __typename id ... on Contractor { agency } ... on Volunteer { hoursPerWeek } } } } employees { edges { node { id } } } } }`,
  );
  expect(r.errors).toBeUndefined();
  expect(r.data.department.workers.edges.map((e: any) => e.node)).toEqual([
    { __typename: 'Contractor', id: '500', agency: 'Analytical Staffing' },
    { __typename: 'Volunteer', id: '501', hoursPerWeek: 6 },
  ]);
  expect(r.data.department.employees.edges.map((e: any) => e.node.id)).toEqual(['10']);
  // the department, then its workers and its employees: 1 point query and 2 range queries, 4 entities
  expect(r.extensions.cost).toMatchObject({ pointQueries: 1, rangeQueries: 2, roundTrips: 3, entitiesRead: 4 });
});

test("a concrete type's point query does not take a sibling for itself: Query.contractor of a volunteer is null", async () => {
  const r = await server.query(`{ volunteer: contractor(departmentId: "Sales", id: "501") { id } contractor(departmentId: "Sales", id: "500") { id agency } }`);
  expect(r.errors).toBeUndefined();
  expect(r.data).toEqual({ volunteer: null, contractor: { id: '500', agency: 'Analytical Staffing' } });
});

test("writes of one type never change, replace or delete the other's entity at the same keys", async () => {
  const taken = await server.query(CREATE_VOLUNTEER, { input: { departmentId: 'Sales', id: '500', name: 'Someone Else' } });
  expect(taken.errors?.[0]).toMatchObject({ extensions: { code: ErrorCode.CONFLICT, reason: 'EntityAlreadyExists', entityType: 'Contractor' } });
  const update = await server.query(UPDATE_CONTRACTOR, { input: { departmentId: 'Sales', id: '501', agency: 'Nobody' } });
  expect(update.errors?.[0]).toMatchObject({ extensions: { code: ErrorCode.NOT_FOUND, entityType: 'Volunteer' } });
  const remove = await server.query(DELETE_VOLUNTEER, { input: { departmentId: 'Sales', id: '500' } });
  expect(remove.errors?.[0]).toMatchObject({ extensions: { code: ErrorCode.NOT_FOUND, entityType: 'Contractor' } });
  const bad = await server.query(CREATE_CONTRACTOR, { input: { departmentId: 'Sales', id: '502', name: 'Neg', agency: 'A', dailyRate: '-1' } });
  expect(bad.errors?.[0]).toMatchObject({ extensions: { code: ErrorCode.BAD_USER_INPUT } });
  // Nothing changed: both as they were, and nothing at 502.
  expect((await server.query(WORKER, { id: '500' })).data.worker).toMatchObject({ __typename: 'Contractor', agency: 'Analytical Staffing' });
  expect((await server.query(WORKER, { id: '501' })).data.worker).toMatchObject({ __typename: 'Volunteer', name: 'Grace Hopper' });
  expect(await server.store.getEntity({ table: directory, partitionKey: 'Sales', rowKey: 'worker_00000502' })).toBeNull();
});

test('delete and recreate as the other type, and 24 concurrent creates of both types at one address over two servers: one wins, as its own type', async () => {
  expect((await server.query(DELETE_VOLUNTEER, { input: { departmentId: 'Sales', id: '501' } })).errors).toBeUndefined();
  const recreated = await server.query(CREATE_CONTRACTOR, {
    input: { departmentId: 'Sales', id: '501', name: 'Grace Hopper', agency: 'Navy Reserve', dailyRate: '1' },
  });
  expect(recreated.errors).toBeUndefined();
  expect((await server.query(WORKER, { id: '501' })).data.worker).toMatchObject({ __typename: 'Contractor', agency: 'Navy Reserve' });

  const other = await startTestServer({ TABLEGRAPH_TABLE_PREFIX: server.config.tablePrefix, TABLEGRAPH_WORKER: 'off' });
  try {
    const results = await Promise.all(
      Array.from({ length: 24 }, (_, i) => {
        const on = i % 2 ? other : server;
        return i % 3 === 0
          ? on
              .query(CREATE_VOLUNTEER, { input: { departmentId: 'Sales', id: '600', name: `volunteer ${i}` } })
              .then((r) => ({ r, as: 'Volunteer', name: `volunteer ${i}` }))
          : on
              .query(CREATE_CONTRACTOR, { input: { departmentId: 'Sales', id: '600', name: `contractor ${i}`, agency: 'A', dailyRate: '2' } })
              .then((r) => ({ r, as: 'Contractor', name: `contractor ${i}` }));
      }),
    );
    const won = results.filter(({ r }) => !r.errors);
    expect(won).toHaveLength(1);
    expect(results.filter(({ r }) => r.errors).map(({ r }) => r.errors![0].extensions.code)).toEqual(Array(23).fill(ErrorCode.CONFLICT));
    const stored = await server.query(WORKER, { id: '600' });
    expect(stored.data.worker).toMatchObject({ __typename: won[0].as, name: won[0].name });
  } finally {
    await other.close();
  }
  const report = await verifyDerived({ store: server.store, model: compileHr(server.config.tablePrefix).model });
  expect(report.ok).toBe(true);
});
