/**
 * Authorization declared in the schema (`@auth`, src/model/authorization.ts) over the HR fixtures, with HS256
 * tokens signed in the test: `hr-admin` reads and writes everything; a `reader` reads only the department its
 * `department` claim names and writes nothing; an `employee` (subject = its e-mail) reads its own entity and may
 * change only its phone. A point query whose keys show it out of scope is refused before it is sent; a list never
 * shows an out-of-scope entity and never scans. Then a property: random tokens × random queries, never an entity
 * outside the token's scope — with default-valued variables, and lists paged to the end (pages left empty by
 * `@auth` included: every entity in scope is reached).
 */
import { AzureSASCredential, odata, TableClient } from '@azure/data-tables';
import fc from 'fast-check';
import { SignJWT } from 'jose';
import { compileSchema } from '../src/compiler/compile';
import { expectNoRequestReads } from './support/request-reads';
import { readFileSync } from 'node:fs';
import { compileHr, DIRECTIVES_FILE, startTestServer, type TestServer } from './support/harness';
import { employeeRow, writeFixtures } from './support/read-fixtures';
import { emailAddress } from './support/write-fixtures';
import { pause } from './support/wait';

const SECRET = 'a-test-secret-of-at-least-32-characters';
let server: TestServer;

function token(claims: Record<string, unknown>): Promise<string> {
  return new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).setExpirationTime('10m').sign(new TextEncoder().encode(SECRET));
}
const ADMIN = () => token({ sub: 'admin@example.test', roles: ['hr-admin'] });
const READER = (department: string) => token({ sub: 'r@example.test', roles: ['reader'], department });
const ME = employeeRow('ENGINEERING', 12); // an employee of the fixtures
const EMPLOYEE = (email = ME.email) => token({ sub: email, roles: ['employee'] });

async function as(t: string, query: string, variables?: Record<string, unknown>) {
  const res = await fetch(server.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${t}` },
    body: JSON.stringify({ query, variables }),
  });
  return (await res.json()) as { data?: any; errors?: any[]; extensions?: any };
}

beforeAll(async () => {
  server = await startTestServer({ TABLEGRAPH_JWT_SECRET: SECRET, TABLEGRAPH_RATE_LIMIT: '100000' });
  await writeFixtures(server.store, compileHr(server.config.tablePrefix).model);
}, 60_000);
afterAll(() => server?.close());
afterEach(() => jest.restoreAllMocks());

/**
 * Every page of `employeesByLastName(lastName)` for token `t`, `first` at a time, following endCursor.
 * @returns the employees seen (`departmentId/id`), every node as given, and how many pages came back empty with more to
 *   come
 */
async function pageAll(t: string, lastName: string, first = 2): Promise<{ seen: string[]; nodes: any[]; empty: number }> {
  const PAGE =
    'query($n: String!, $first: Int, $after: String) { employeesByLastName(lastName: $n, first: $first, after: $after) { edges { node { id departmentId email } } pageInfo { hasNextPage endCursor } } }';
  const nodes: any[] = [];
  let after: string | null = null;
  let empty = 0;
  for (let pages = 0; pages < 200; pages++) {
    const r = await as(t, PAGE, { n: lastName, first, after });
    if (r.errors) return { seen: [], nodes, empty }; // refused whole (a token that may read none of it)
    const { edges, pageInfo } = r.data.employeesByLastName;
    nodes.push(...edges.map((e: any) => e.node));
    if (edges.length === 0 && pageInfo.hasNextPage) empty++;
    if (!pageInfo.hasNextPage) return { seen: nodes.map((n) => `${n.departmentId}/${n.id}`), nodes, empty };
    expect(pageInfo.endCursor).toEqual(expect.any(String));
    after = pageInfo.endCursor;
  }
  throw new Error('more than 200 pages');
}

/**
 * Spies on the store's reads. The server's own refresh of its paths' states reads the catalogue every few seconds,
 * whatever requests come: its calls are left out (expectNoRequestReads).
 */
function spyStorage() {
  return [jest.spyOn(server.store, 'getEntity'), jest.spyOn(server.store, 'queryRange')];
}

describe('a reader of ENGINEERING', () => {
  test('another department, or an employee of it, by key: FORBIDDEN before any storage call', async () => {
    const t = await READER('ENGINEERING');
    for (const q of ['{ department(id: "FINANCE") { name } }', '{ employee(departmentId: "FINANCE", id: "1001") { id } }']) {
      const spies = spyStorage();
      const r = await as(t, q);
      expect(r.errors?.[0].extensions.code).toBe('FORBIDDEN');
      expectNoRequestReads(spies, server.config.tablePrefix);
      jest.restoreAllMocks();
    }
  });

  test('its own department and its employees; lists across departments show only its own, without a scan', async () => {
    const t = await READER('ENGINEERING');
    const own = await as(t, '{ department(id: "ENGINEERING") { employeeCount employees(first: 3) { edges { node { id departmentId } } } } }');
    expect(own.data.department.employeeCount).toBe(250);
    expect(own.data.department.employees.edges.map((e: any) => e.node.departmentId)).toEqual(['ENGINEERING', 'ENGINEERING', 'ENGINEERING']);
    const lists = await as(
      t,
      '{ departments(first: 10) { edges { node { id } } } employeesByLastName(lastName: "WILLIAMS", first: 100) { edges { node { id departmentId } } } }',
    );
    expect(lists.data.departments.edges.map((e: any) => e.node.id)).toEqual(['ENGINEERING']);
    const williams = lists.data.employeesByLastName.edges.map((e: any) => e.node.departmentId);
    expect(williams.length).toBeGreaterThan(0);
    expect(new Set(williams)).toEqual(new Set(['ENGINEERING'])); // FINANCE's WILLIAMS is left out
    expect(lists.extensions.cost).toMatchObject({ partitionScans: 0, tableScans: 0 });
  });

  test('a list across departments paged to the end: every entity in scope reached, none out of scope, pages left empty by @auth included', async () => {
    const everyone = (await pageAll(await ADMIN(), 'WILLIAMS')).seen;
    for (const department of ['ENGINEERING', 'FINANCE', 'A/B #1']) {
      const { seen, empty } = await pageAll(await READER(department), 'WILLIAMS');
      expect([department, seen]).toEqual([department, everyone.filter((k) => k.startsWith(`${department}/`))]);
      if (department === 'FINANCE') expect(empty).toBeGreaterThan(0); // ENGINEERING's 7 WILLIAMS come first
    }
  });

  test('an employee of another department found through the e-mail index answers as an address that does not exist: no e-mail oracle', async () => {
    const t = await READER('ENGINEERING');
    const other = await as(t, '{ employeeByEmail(email: "employee1001@finance.example") { id } }');
    const none = await as(t, '{ employeeByEmail(email: "nobody@finance.example") { id } }');
    expect(other).toEqual({ data: { employeeByEmail: null }, extensions: expect.anything() });
    expect(none).toEqual({ data: { employeeByEmail: null }, extensions: expect.anything() });
    // Nor does what it cost: a scoped reader gets the estimate alone, the same for both.
    expect(other.extensions).toEqual(none.extensions);
    expect(other.extensions!.cost).toEqual({
      withheld: 'ScopedRead',
      partitionScans: 0,
      tableScans: 0,
      estimate: expect.objectContaining({ storageCalls: expect.any(Number) }),
    });
    const mine = await as(t, '{ employeeByEmail(email: "employee12@engineering.example") { id } }');
    expect(mine.data.employeeByEmail).toEqual({ id: '12' });
    expect(mine.extensions!.cost.withheld).toBe('ScopedRead');
    // A caller no scope decides for sees what its reads cost.
    const admin = await as(await ADMIN(), '{ employeeByEmail(email: "employee1001@finance.example") { id } }');
    expect(admin.extensions!.cost).toMatchObject({ roundTrips: expect.any(Number), entitiesRead: expect.any(Number) });
  });

  test('a worker of another department, or any worker for a token with no role: FORBIDDEN before any storage call, as a contractor', async () => {
    for (const t of [await READER('ENGINEERING'), await token({ sub: 'x@example.test' })]) {
      for (const q of ['{ worker(departmentId: "FINANCE", id: "1") { id } }', '{ contractor(departmentId: "FINANCE", id: "1") { id } }']) {
        const spies = spyStorage();
        expect([q, (await as(t, q)).errors?.[0].extensions.code]).toEqual([q, 'FORBIDDEN']);
        expectNoRequestReads(spies, server.config.tablePrefix);
        jest.restoreAllMocks();
      }
    }
  });

  test('writes nothing', async () => {
    const spies = spyStorage();
    const r = await as(
      await READER('ENGINEERING'),
      'mutation { updateEmployee(input: { departmentId: "ENGINEERING", id: "12", phone: "555 0100" }) { employee { id } } }',
    );
    expect(r.errors?.[0].extensions.code).toBe('FORBIDDEN');
    expectNoRequestReads(spies, server.config.tablePrefix);
  });
});

describe('an employee', () => {
  const UPDATE = 'mutation($input: UpdateEmployeeInput!) { updateEmployee(input: $input) { employee { id phone } } }';

  test('reads its own entity, not another one', async () => {
    const t = await EMPLOYEE();
    expect((await as(t, `{ employee(departmentId: "ENGINEERING", id: "12") { id email } }`)).data.employee).toEqual({ id: '12', email: ME.email });
    // Another's: decided once read, so answered as if absent (a FORBIDDEN would say it exists).
    const other = await as(t, `{ employee(departmentId: "ENGINEERING", id: "13") { id } }`);
    expect([other.data, other.errors]).toEqual([{ employee: null }, undefined]);
    // A list shows it alone, whoever else shares its partition.
    const list = await as(t, '{ department(id: "ENGINEERING") { employees(first: 100) { edges { node { id } } } } }');
    expect(list.errors?.[0].extensions.code).toBe('FORBIDDEN'); // the department itself is not the employee's to read
  });

  test("changes its own phone, and nothing else; not another employee's", async () => {
    const t = await EMPLOYEE();
    const ok = await as(t, UPDATE, { input: { departmentId: 'ENGINEERING', id: '12', phone: '+1 312 555 0100' } });
    expect(ok.data.updateEmployee.employee).toEqual({ id: '12', phone: '+1 312 555 0100' });
    const name = await as(t, UPDATE, { input: { departmentId: 'ENGINEERING', id: '12', firstName: 'MALLORY' } });
    expect(name.errors?.[0].extensions.code).toBe('FORBIDDEN');
    const other = await as(t, UPDATE, { input: { departmentId: 'ENGINEERING', id: '13', phone: '555 0199' } });
    expect(other.errors?.[0].extensions.code).toBe('FORBIDDEN');
    const stored = await server.store.getEntity({ table: `${server.config.tablePrefix}Directory`, partitionKey: 'ENGINEERING', rowKey: 'empid_00000013' });
    expect(stored?.properties.phone).toBeUndefined();
    expect((await as(await ADMIN(), '{ employee(departmentId: "ENGINEERING", id: "12") { firstName } }')).data.employee.firstName).toBe(ME.firstName);
  });
});

test('after an e-mail change, a token of the old address reads nothing of the employee, though the e-mail index still names it', async () => {
  // The worker is off: the inter-partition e-mail index keeps its old entity for as long as the test needs.
  const stale = await startTestServer({ TABLEGRAPH_JWT_SECRET: SECRET, TABLEGRAPH_RATE_LIMIT: '100000', TABLEGRAPH_WORKER: 'off' });
  try {
    await writeFixtures(stale.store, compileHr(stale.config.tablePrefix).model);
    const ask = async (t: string, query: string, variables?: Record<string, unknown>) =>
      (await (
        await fetch(stale.url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${t}` },
          body: JSON.stringify({ query, variables }),
        })
      ).json()) as any;
    const old = employeeRow('ENGINEERING', 20).email;
    const Q = 'query($e: String!) { employeeByEmail(email: $e) { id email phone annualSalary } }';
    expect((await ask(await EMPLOYEE(old), Q, { e: old })).data.employeeByEmail).toMatchObject({ id: '20', email: old });
    const changed = await ask(
      await ADMIN(),
      'mutation { updateEmployee(input: { departmentId: "ENGINEERING", id: "20", email: "moved-on@example.test" }) { employee { email } } }',
    );
    expect(changed.errors).toBeUndefined();
    const indexEntity = await stale.store.getEntity(emailAddress(compileHr(stale.config.tablePrefix).model, old));
    expect(indexEntity).not.toBeNull(); // still there: the window the check must not trust
    const asOld = await EMPLOYEE(old);
    expect(await ask(asOld, Q, { e: old })).toMatchObject({ data: { employeeByEmail: null } });
    expect(await ask(asOld, '{ employee(departmentId: "ENGINEERING", id: "20") { phone } }')).toMatchObject({ data: { employee: null } });
    // The new address's owner reads it by key meanwhile; hr-admin through the stale index gets nothing stale.
    expect((await ask(await EMPLOYEE('moved-on@example.test'), '{ employee(departmentId: "ENGINEERING", id: "20") { email } }')).data.employee).toEqual({
      email: 'moved-on@example.test',
    });
    const admin = await ask(await ADMIN(), Q, { e: old });
    expect(admin.data.employeeByEmail === null || admin.data.employeeByEmail.email === old).toBe(true); // hr-admin: no scope to check, the index as it is
  } finally {
    await stale.close();
  }
});

test('e-mail changes racing reads: a node read for a token of one address always has that address', async () => {
  const ids = ['21', '22', '23'];
  const addresses = (id: string) => [employeeRow('ENGINEERING', Number(id)).email, `race${id}@example.test`];
  const admin = await ADMIN();
  let reads = 0;
  let answered = 0;
  const until = Date.now() + 2000;
  const flip = async (id: string) => {
    for (let i = 1; Date.now() < until; i++) {
      const r = await as(admin, 'mutation($input: UpdateEmployeeInput!) { updateEmployee(input: $input) { employee { id } } }', {
        input: { departmentId: 'ENGINEERING', id, email: addresses(id)[i % 2] },
      });
      expect(r.errors).toBeUndefined();
    }
  };
  const read = async (id: string) => {
    while (Date.now() < until) {
      const email = addresses(id)[reads % 2];
      const t = await EMPLOYEE(email);
      const r = await as(
        t,
        'query($e: String!, $id: ID!) { byEmail: employeeByEmail(email: $e) { email phone } byKey: employee(departmentId: "ENGINEERING", id: $id) { email phone } }',
        { e: email, id },
      );
      reads++;
      for (const node of [r.data?.byEmail, r.data?.byKey]) {
        if (!node) continue;
        answered++;
        expect(node.email).toBe(email);
      }
    }
  };
  await Promise.all([...ids.map(flip), ...ids.map(read)]);
  expect(reads).toBeGreaterThan(20);
  expect(answered).toBeGreaterThan(0);
  // Put the fixtures' addresses back for the other tests.
  for (const id of ids)
    await as(admin, 'mutation($input: UpdateEmployeeInput!) { updateEmployee(input: $input) { employee { id } } }', {
      input: { departmentId: 'ENGINEERING', id, email: addresses(id)[0] },
    });
}, 60_000);

test('hr-admin reads and writes everything; a token with no role reads nothing', async () => {
  const admin = await ADMIN();
  const r = await as(admin, '{ a: department(id: "FINANCE") { name } b: department(id: "ENGINEERING") { name } }');
  expect(r.data).toEqual({ a: { name: 'FINANCE' }, b: { name: 'ENGINEERING' } });
  const w = await as(admin, 'mutation { updateDepartment(input: { id: "FINANCE", name: "FINANCE" }) { department { id } } }');
  expect(w.errors).toBeUndefined();
  const nobody = await as(await token({ sub: 'x@example.test' }), '{ department(id: "FINANCE") { name } }');
  expect(nobody.errors?.[0].extensions.code).toBe('FORBIDDEN');
});

test("property: random tokens × random queries never return an entity outside the token's scope", async () => {
  const departments = ['ENGINEERING', 'FINANCE', 'A/B #1', 'Marketing', 'NOPE'];
  // While the property runs, hr-admin keeps changing one employee's e-mail between two addresses (both among the
  // tokens' subjects): reads race the change and its eventually consistent index entities.
  const FLIPPED = 'flipped@example.test';
  const emails = [ME.email, FLIPPED, employeeRow('FINANCE', 1015).email, 'nobody@example.test'];
  const principal = fc.record({
    roles: fc.subarray(['hr-admin', 'reader', 'employee']),
    department: fc.constantFrom(...departments),
    sub: fc.constantFrom(...emails),
  });
  const E = 'id departmentId email';
  const query = fc.oneof(
    fc.constantFrom(...departments).map((d) => `{ department(id: ${JSON.stringify(d)}) { id employees(first: 20) { edges { node { ${E} } } } } }`),
    fc
      .tuple(fc.constantFrom(...departments), fc.constantFrom('1', '12', '35', '1001', '1015', '2001'))
      .map(([d, id]) => `{ employee(departmentId: ${JSON.stringify(d)}, id: "${id}") { ${E} department { id } } }`),
    fc.constantFrom('WILLIAMS', 'SMITH', 'GARCIA').map((n) => `{ employeesByLastName(lastName: "${n}", first: 50) { edges { node { ${E} } } } }`),
    fc.constantFrom(...emails).map((e) => `{ employeeByEmail(email: "${e}") { ${E} } }`),
    fc.constant('{ departments(first: 20) { edges { node { id } } } }'),
    fc
      .constantFrom('ENGINEERING', 'FINANCE')
      .map((d) => `{ department(id: "${d}") { employeesByLastName(lastName: "WILLIAMS") { edges { node { ${E} } } } } }`),
    // Default-valued variables, sent without variables: demand control and scope as with the value written out.
    fc.constantFrom('WILLIAMS', 'SMITH').map((n) => `query($n: Int = 50) { employeesByLastName(lastName: "${n}", first: $n) { edges { node { ${E} } } } }`),
    fc
      .constantFrom(...departments)
      .map((d) => `query($f: Int = 20) { department(id: ${JSON.stringify(d)}) { id employees(first: $f) { edges { node { ${E} } } } } }`),
    // Paged to the end through endCursor (pageAll), pages left empty by @auth included.
    fc.constantFrom('WILLIAMS', 'GARCIA').map((n) => `#pageAll ${n}`),
  );
  const everyone = new Map<string, string[]>();
  for (const n of ['WILLIAMS', 'GARCIA']) everyone.set(n, (await pageAll(await ADMIN(), n, 50)).seen);
  let entitiesSeen = 0;
  let flips = 0;
  let flipping = true;
  const flipper = (async () => {
    const admin = await ADMIN();
    while (flipping) {
      const email = flips++ % 2 === 0 ? FLIPPED : ME.email;
      const r = await as(admin, 'mutation($input: UpdateEmployeeInput!) { updateEmployee(input: $input) { employee { id } } }', {
        input: { departmentId: 'ENGINEERING', id: ME.id, email },
      });
      if (r.errors) throw new Error(`the e-mail change failed: ${JSON.stringify(r.errors)}`);
      await pause(10, 'pace');
    }
  })();
  await fc
    .assert(
      fc.asyncProperty(principal, query, async (p, q) => {
        const t = await token({ sub: p.sub, roles: p.roles, department: p.department });
        if (q.startsWith('#pageAll ')) {
          const lastName = q.slice('#pageAll '.length);
          const { nodes, seen } = await pageAll(t, lastName, 3);
          const inScopeOfAll = (everyone.get(lastName) ?? []).filter(
            (k) => p.roles.includes('hr-admin') || (p.roles.includes('reader') && k.startsWith(`${p.department}/`)),
          );
          // Every entity in a reader's (or hr-admin's) scope is reached.
          expect(seen.filter((k) => inScopeOfAll.includes(k))).toEqual(inScopeOfAll);
          for (const node of nodes) {
            entitiesSeen++;
            const ok =
              p.roles.includes('hr-admin') ||
              (p.roles.includes('reader') && node.departmentId === p.department) ||
              (p.roles.includes('employee') && node.email === p.sub);
            if (!ok) throw new Error(`${JSON.stringify(p)} saw ${JSON.stringify(node)} paging ${lastName}`);
          }
          return;
        }
        const r = await as(t, q);
        expect(r.extensions?.cost).toMatchObject({ partitionScans: 0, tableScans: 0 });
        const admin = p.roles.includes('hr-admin');
        const inScope = (type: 'Employee' | 'Department', node: any) =>
          admin ||
          (type === 'Department'
            ? p.roles.includes('reader') && node.id === p.department
            : (p.roles.includes('reader') && node.departmentId === p.department) || (p.roles.includes('employee') && node.email === p.sub));
        // Every Employee selected carries departmentId; every Department selected carries id and no departmentId.
        const walk = (value: any): void => {
          if (Array.isArray(value)) return value.forEach(walk);
          if (!value || typeof value !== 'object') return;
          const type = 'departmentId' in value ? 'Employee' : 'id' in value ? 'Department' : undefined;
          if (type) {
            entitiesSeen++;
            if (!inScope(type, value)) throw new Error(`${JSON.stringify(p)} saw ${type} ${JSON.stringify(value)} with ${q}`);
          }
          Object.values(value).forEach(walk);
        };
        walk(r.data ?? {});
      }),
      { numRuns: 150, seed: Number(process.env.AUTH_SEED) || undefined },
    )
    .finally(async () => {
      flipping = false;
      await flipper;
    });
  expect(entitiesSeen).toBeGreaterThan(50);
  expect(flips).toBeGreaterThan(10);
  // ME's address as the other tests expect it (the index entities follow through the worker).
  if (flips % 2 === 1)
    await as(await ADMIN(), 'mutation($input: UpdateEmployeeInput!) { updateEmployee(input: $input) { employee { id } } }', {
      input: { departmentId: 'ENGINEERING', id: ME.id, email: ME.email },
    });
}, 120_000);

describe('the compiler', () => {
  const directives = { name: 'schema/directives.graphql', body: readFileSync(DIRECTIVES_FILE, 'utf8') };
  const compile = (body: string) => () => compileSchema([directives, { name: 'auth.graphql', body }]);
  const BASE = `
type Thing @entity(table: "Things", partitionKey: "{owner}", rowKey: "thing_{id}") AUTH { owner: ID! id: ID! secret: String }
type Other @entity(table: "Others", partitionKey: "{id}", rowKey: "other") { id: ID! }
type Query { thing(owner: ID!, id: ID!): Thing @point other(id: ID!): Other @point }`;

  test('@sas only on a String field of an entity type, for 60 s to 7 days', () => {
    expect(compile(BASE.replace('AUTH', '').replace('secret: String }', 'secret: String sas: Int @sas }'))).toThrow(/Thing.sas.*@sas goes on a String field/);
    expect(compile(BASE.replace('AUTH', '').replace('secret: String }', 'secret: String sas: String @sas(expiresInSeconds: 10) }'))).toThrow(
      /between 60 and 604800/,
    );
    expect(compile(BASE.replace('AUTH', '').replace('secret: String }', 'secret: String sas: String @sas }'))).not.toThrow();
  });

  test('once @auth is used, every entity type must say who may read it', () => {
    expect(compile(BASE.replace('AUTH', '@auth(rules: [{ roles: ["admin"] }])'))).toThrow(/Other .*every entity type says who may read it/);
  });

  test('a scope field that is not a stored field, and an index that does not project a scope field, are refused', () => {
    const other = (sdl: string) =>
      sdl.replace(
        'type Other @entity(table: "Others", partitionKey: "{id}", rowKey: "other")',
        'type Other @entity(table: "Others", partitionKey: "{id}", rowKey: "other") @auth(rules: [{ roles: ["admin"] }])',
      );
    expect(compile(other(BASE.replace('AUTH', '@auth(rules: [{ scope: [{ field: "tenant", claim: "tid" }] }])')))).toThrow(
      /scope field "tenant" is not a stored field of Thing/,
    );
    const index = '@index(name: "byId", table: "ById", partitionKey: "{id}", rowKey: "t_{owner}")';
    expect(compile(other(BASE.replace('AUTH', `${index} @auth(rules: [{ scope: [{ field: "secret", claim: "s" }] }])`)))).toThrow(
      /Thing@index\(byId\).*projects no "secret"/,
    );
    // Key fields are always projected: a scope on one needs nothing more.
    expect(compile(other(BASE.replace('AUTH', `${index} @auth(rules: [{ scope: [{ field: "owner", claim: "sub" }] }])`)))).not.toThrow();
  });
});

describe('a shared access signature for a department partition (@sas)', () => {
  test('read-only, that partition, 15 minutes: a Table client reads the department with it; it writes nothing', async () => {
    const r = await as(await READER('ENGINEERING'), '{ department(id: "ENGINEERING") { directorySas } }');
    // The department's point query; signing costs no call (counted for a caller no scope decides for: a scoped
    // reader is shown the estimate alone).
    expect(r.extensions?.cost.withheld).toBe('ScopedRead');
    expect((await as(await ADMIN(), '{ department(id: "ENGINEERING") { directorySas } }')).extensions?.cost.roundTrips).toBe(1);
    const url = new URL(r.data.department.directorySas);
    const table = `${server.config.tablePrefix}Directory`;
    expect(url.pathname.endsWith(`/${table}`)).toBe(true);
    const sas = url.searchParams;
    expect([sas.get('sp'), sas.get('spk'), sas.get('epk'), sas.get('tn')]).toEqual(['r', 'ENGINEERING', 'ENGINEERING', table]);
    const expiresIn = new Date(sas.get('se')!).getTime() - Date.now();
    expect(expiresIn).toBeGreaterThan(14 * 60_000);
    expect(expiresIn).toBeLessThanOrEqual(15 * 60_000);

    const endpoint = `${url.origin}${url.pathname.slice(0, -table.length - 1)}`;
    const client = new TableClient(endpoint, table, new AzureSASCredential(url.search.slice(1)), { allowInsecureConnection: true });
    const rows: string[] = [];
    for await (const e of client.listEntities({ queryOptions: { filter: odata`PartitionKey eq ${'ENGINEERING'}` } })) rows.push(e.rowKey!);
    expect(rows).toContain('department');
    expect(rows.filter((k) => k.startsWith('empid_'))).toHaveLength(250);
    await expect(client.createEntity({ partitionKey: 'ENGINEERING', rowKey: 'intruder' })).rejects.toMatchObject({ statusCode: 403 });
    // Azure refuses the signature for any other partition (spk = epk above); Azurite 3.37 does not check the range
    // (Azure/Azurite#726), so that refusal cannot be shown here.
  });

  test('only for a caller who may read the department', async () => {
    const r = await as(await READER('FINANCE'), '{ department(id: "ENGINEERING") { directorySas } }');
    expect(r.errors?.[0].extensions.code).toBe('FORBIDDEN');
  });
});
