/**
 * The query lane (src/server/query-lane.ts) keeps, per document, what depends on the document alone
 * (prepared-documents.ts): nothing of a request may come back from it. One document sent again and again with other
 * variables, other tokens and scopes, and after a path it reads changed state, answers each request as Apollo answers
 * the same request (a GET goes to Apollo: the reference), on the HR fixtures.
 */
import { SignJWT } from 'jose';
import { compileHr, startSdlServer, startTestServer, type TestServer } from './support/harness';
import { employeeRow, writeFixtures } from './support/read-fixtures';
import { Catalogue } from '../src/evolution/catalogue';

const SECRET = 'a-test-secret-of-at-least-32-characters';
let server: TestServer;

const token = (claims: Record<string, unknown>) =>
  new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).setExpirationTime('10m').sign(new TextEncoder().encode(SECRET));

/** The document every test sends: its `first` a variable, its employee's keys variables. */
const DOC = `query Lane($d: ID!, $id: ID!, $n: Int) {
  employee(departmentId: $d, id: $id) { id firstName department { id } }
  department(id: $d) { employees(first: $n) { edges { node { id } } } }
}`;

async function post(t: string | undefined, variables: Record<string, unknown>, query = DOC) {
  const res = await fetch(server.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(t && { authorization: `Bearer ${t}` }) },
    body: JSON.stringify({ query, variables }),
  });
  return { status: res.status, body: (await res.json()) as { data?: any; errors?: any[]; extensions?: any } };
}

/** The same request as a GET: Apollo's pipeline answers it, not the lane. */
async function viaApollo(t: string | undefined, variables: Record<string, unknown>, query = DOC) {
  const url = `${server.url}?${new URLSearchParams({ query, variables: JSON.stringify(variables) }).toString()}`;
  const res = await fetch(url, { headers: { 'apollo-require-preflight': 'true', ...(t && { authorization: `Bearer ${t}` }) } });
  return { status: res.status, body: (await res.json()) as { data?: any; errors?: any[]; extensions?: any } };
}

/** The figures that may differ between two runs of one request: the time storage took. */
const timeless = (body: { extensions?: any }) => {
  const cost = body.extensions?.cost;
  if (cost?.storageMs !== undefined) cost.storageMs = 0;
  return body;
};

beforeAll(async () => {
  server = await startTestServer({ TABLEGRAPH_JWT_SECRET: SECRET, TABLEGRAPH_RATE_LIMIT: '100000' });
  await writeFixtures(server.store, compileHr(server.config.tablePrefix).model);
}, 60_000);
afterAll(() => server?.close());

test('other variables: other entities and another estimate; a first over the maximum, or variables that do not coerce, refused as Apollo refuses them', async () => {
  const admin = await token({ sub: 'admin@example.test', roles: ['hr-admin'] });
  const a = employeeRow('ENGINEERING', 12);
  const b = employeeRow('FINANCE', 1003);
  const first = await post(admin, { d: a.departmentId, id: a.id, n: 2 });
  const second = await post(admin, { d: b.departmentId, id: b.id, n: 5 });
  expect(first.body.data.employee).toMatchObject({ id: a.id, department: { id: a.departmentId } });
  expect(second.body.data.employee).toMatchObject({ id: b.id, department: { id: b.departmentId } });
  expect(first.body.data.department.employees.edges).toHaveLength(2);
  expect(second.body.data.department.employees.edges).toHaveLength(5);
  expect(first.body.extensions.cost.estimate.entitiesRead).toBeLessThan(second.body.extensions.cost.estimate.entitiesRead);
  // Each answer is Apollo's answer to the same request, its extensions included.
  for (const [r, v] of [
    [first, { d: a.departmentId, id: a.id, n: 2 }],
    [second, { d: b.departmentId, id: b.id, n: 5 }],
  ] as const) {
    expect(timeless(r.body)).toEqual(timeless((await viaApollo(admin, v)).body));
  }
  // A `first` over the maximum is the request's own error, whatever the document ran with before.
  const over = await post(admin, { d: a.departmentId, id: a.id, n: 101 });
  expect(over.body.errors?.[0].extensions.code).toBe('BAD_USER_INPUT');
  expect((await post(admin, { d: a.departmentId, id: a.id, n: 2 })).body.data.department.employees.edges).toHaveLength(2);
  // Variables that do not coerce: refused as Apollo refuses them (400).
  const bad = await post(admin, { d: a.departmentId, id: a.id, n: 'two' });
  expect(bad.status).toBe(400);
  expect(bad.body.errors?.[0].extensions.code).toBe('BAD_USER_INPUT');
});

test('other tokens: each caller its own scope, its own cost visibility, and a refused token refused', async () => {
  const me = employeeRow('ENGINEERING', 12);
  const other = employeeRow('ENGINEERING', 13);
  const admin = await token({ sub: 'admin@example.test', roles: ['hr-admin'] });
  const reader = await token({ sub: 'r@example.test', roles: ['reader'], department: 'ENGINEERING' });
  const outsider = await token({ sub: 'o@example.test', roles: ['reader'], department: 'SALES' });
  const asAdmin = await post(admin, { d: me.departmentId, id: other.id, n: 2 });
  const asReader = await post(reader, { d: me.departmentId, id: other.id, n: 2 });
  const asOutsider = await post(outsider, { d: me.departmentId, id: other.id, n: 2 });
  expect(asAdmin.body.data.employee.id).toBe(other.id);
  expect(asReader.body.data.employee.id).toBe(other.id);
  expect(asOutsider.body.data?.employee ?? null).toBeNull();
  expect(asOutsider.body.errors?.[0].extensions.code).toBe('FORBIDDEN');
  // A caller let through by a scope sees the estimate alone; the admin sees what it cost.
  expect(asReader.body.extensions.cost).toMatchObject({ withheld: 'ScopedRead' });
  expect(asAdmin.body.extensions.cost.withheld).toBeUndefined();
  expect(asAdmin.body.extensions.cost.pointQueries).toBeGreaterThan(0);
  for (const [t, r] of [
    [admin, asAdmin],
    [reader, asReader],
    [outsider, asOutsider],
  ] as const) {
    const reference = (await viaApollo(t, { d: me.departmentId, id: other.id, n: 2 })).body;
    const strip = (b: any) => ({ ...timeless(b), errors: b.errors?.map((e: any) => ({ ...e, extensions: { ...e.extensions, requestId: 'x' } })) });
    expect(strip(r.body)).toEqual(strip(reference));
  }
  // No token, or a forged one: 401, though the document ran a moment ago.
  const forged = await new SignJWT({ sub: 'x', roles: ['hr-admin'] })
    .setProtectedHeader({ alg: 'HS256' })
    .setExpirationTime('10m')
    .sign(new TextEncoder().encode('another-secret-of-at-least-32-characters'));
  for (const t of [undefined, forged]) {
    const r = await post(t, { d: me.departmentId, id: other.id, n: 2 });
    expect([r.status, r.body.errors?.[0].extensions.code, r.body.data]).toEqual([401, 'UNAUTHENTICATED', undefined]);
  }
});

test('a path it reads changing state: refused while it is not ready, served again after, though the document is kept', async () => {
  const admin = await token({ sub: 'admin@example.test', roles: ['hr-admin'] });
  const e = employeeRow('ENGINEERING', 12);
  const query = 'query ByName($n: String!) { employeesByLastName(lastName: $n, first: 3) { edges { node { id } } } }';
  expect((await post(admin, { n: e.lastName }, query)).body.errors).toBeUndefined();
  // The index the query reads goes back to building (as after a schema change): the catalogue says so.
  const catalogue = new Catalogue(server.store, server.config.tablePrefix);
  const row = (await catalogue.path('index:Employee.byLastName'))!;
  await catalogue.putPath({ ...row, state: 'building' });
  await server.refreshPathStates(); // the server reads the states now, not at its next refresh
  const refused = await post(admin, { n: e.lastName }, query);
  expect(refused.body.errors?.[0].extensions).toMatchObject({ code: 'ACCESS_PATH_BUILDING', accessPath: 'index:Employee.byLastName' });
  const now = (await catalogue.path('index:Employee.byLastName'))!;
  await catalogue.putPath({ ...now, state: 'ready' });
  await server.refreshPathStates();
  expect((await post(admin, { n: e.lastName }, query)).body.data.employeesByLastName.edges.map((x: { node: { id: string } }) => x.node.id)).toContain(e.id);
});

test('another schema: the same text is another document there, prepared by that server', async () => {
  const query = '{ department(id: "ENGINEERING") { id nickname } }';
  // `nickname` is no field of the HR schema: refused there (Apollo's words), however often it is sent.
  for (let i = 0; i < 2; i++) {
    const r = await post(await token({ sub: 'a@example.test', roles: ['hr-admin'] }), {}, query);
    expect([r.status, r.body.errors?.[0].extensions.code]).toEqual([400, 'GRAPHQL_VALIDATION_FAILED']);
  }
  // A schema whose departments have one: the same text answers there.
  const other = await startSdlServer(`
type Department @entity(table: "Depts", partitionKey: "depts", rowKey: "{id}") { id: ID! nickname: String }
type Query { department(id: ID!): Department @point }
type Mutation { createDepartment(input: CreateDepartmentInput!): DepartmentPayload! @write(entity: "Department", action: CREATE) }`);
  try {
    await other.server.query('mutation { createDepartment(input: { id: "ENGINEERING", nickname: "eng" }) { department { id } } }');
    for (let i = 0; i < 2; i++) expect((await other.server.query(query)).data).toEqual({ department: { id: 'ENGINEERING', nickname: 'eng' } });
  } finally {
    await other.close();
  }
});
