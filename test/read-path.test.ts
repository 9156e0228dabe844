/**
 * The read path end to end against the test run's Azurite: what the per-request DataLoaders send (counted by
 * `extensions.cost`), the projection each query carries, and how bad arguments are refused before any call.
 */
import { parse, Kind, type FragmentDefinitionNode, type OperationDefinitionNode } from 'graphql';
import { catalogueTable } from '../src/evolution/catalogue';
import type { Model } from '../src/model/types';
import { collectProjection, entitySelect, indexCovers, indexSelect } from '../src/read/projection';
import type { StoredEntity } from '../src/storage/storage-types';
import { compileHr, startTestServer, type TestServer } from './support/harness';
import { ENGINEERING, expectCost, FINANCE, payrollOf, SLASHED, withLastName, writeFixtures } from './support/read-fixtures';

let server: TestServer;
let model: Model;

beforeAll(async () => {
  server = await startTestServer();
  model = compileHr(server.config.tablePrefix).model;
  await writeFixtures(server.store, model);
}, 60_000);

afterAll(async () => {
  await server?.close();
});

afterEach(() => jest.restoreAllMocks());

const ids = (edges: Array<{ node: { id: string } }>) => edges.map((e) => Number(e.node.id));

describe('loaders: batching and de-duplication', () => {
  test('100 employees with their department cost one point query for the department, not 100', async () => {
    const r = await server.query(`{ department(id: "ENGINEERING") {
      employees(first: 100) { edges { node { id department { id name employeeCount } } } } } }`);
    expect(r.errors).toBeUndefined();
    const edges = r.data.department.employees.edges;
    expect(edges).toHaveLength(100);
    for (const e of edges) expect(e.node.department).toEqual({ id: 'ENGINEERING', name: 'ENGINEERING', employeeCount: 250 });
    // Wave 1: the root `department` point query, through the request's point loader (with the operation-wide
    // $select). Wave 2: the employees range query. The 100 `Employee.department` loads all ask for the key the
    // root already loaded, so the point loader answers them from its cache: no third wave, no extra point query.
    expectCost(r, { pointQueries: 1, rangeQueries: 1, entitiesRead: 101, waves: 2 });
  });

  test('point queries of one wave are batched and de-duplicated across roots', async () => {
    const r = await server.query(`{
      a: employee(departmentId: "ENGINEERING", id: "9") { id department { name } }
      b: employee(departmentId: "ENGINEERING", id: "10") { id department { name } }
      c: employee(departmentId: "FINANCE", id: "1001") { id department { name } } }`);
    expect(r.data).toEqual({
      a: { id: '9', department: { name: 'ENGINEERING' } },
      b: { id: '10', department: { name: 'ENGINEERING' } },
      c: { id: '1001', department: { name: 'FINANCE' } },
    });
    // Wave 1: three employees in one batch; wave 2: ENGINEERING (asked twice, read once) and FINANCE.
    expectCost(r, { pointQueries: 5, rangeQueries: 0, entitiesRead: 5, waves: 2 });
  });

  test('entities a range query returns prime the point loader', async () => {
    const r = await server.query(`{ department(id: "ENGINEERING") {
      employees(first: 100) { edges { node { id } } }
      employeesByLastName(lastName: "WILLIAMS") { edges { node { id annualSalary } } } } }`);
    const williams = withLastName(ENGINEERING, 'WILLIAMS');
    expect(r.data.department.employeesByLastName.edges.map((e: any) => e.node)).toEqual(
      williams.map((w) => ({ id: w.id, annualSalary: w.annualSalary ?? null })),
    );
    // Both ranges run in wave 2. The index entities lack annualSalary, so each WILLIAMS needs its entity: ids 35,
    // 70 and 105 came back in the first 100 employees (ids 9..108) and are cached; 140, 175, 210, 245 are read.
    const missing = williams.filter((w) => Number(w.id) > 108).length;
    expect(missing).toBe(4);
    expectCost(r, { pointQueries: 1 + missing, rangeQueries: 2, entitiesRead: 1 + 100 + williams.length + missing, waves: 3 });
  });

  test('identical ranges in one request run once', async () => {
    const r = await server.query(`{
      a: department(id: "ENGINEERING") { employees(first: 3) { edges { node { id } } } }
      b: department(id: "ENGINEERING") { employees(first: 3) { edges { node { id } } } } }`);
    expect(ids(r.data.a.employees.edges)).toEqual([9, 10, 11]);
    expect(r.data.b).toEqual(r.data.a);
    expectCost(r, { pointQueries: 1, rangeQueries: 1, entitiesRead: 4, waves: 2 });

    const other = await server.query(`{
      a: department(id: "ENGINEERING") { employees(first: 3) { edges { node { id } } } }
      b: department(id: "ENGINEERING") { employees(first: 4) { edges { node { id } } } } }`);
    expect(ids(other.data.b.employees.edges)).toEqual([9, 10, 11, 12]);
    expectCost(other, { pointQueries: 1, rangeQueries: 2, entitiesRead: 8, waves: 2 });
  });
});

describe('departments: one range query on the Departments index', () => {
  // The store holds the fixture departments plus the seed rows the server wrote on its empty store.
  const expected = [
    { id: SLASHED.id, employeeCount: 3, payroll: payrollOf(SLASHED) },
    { id: 'ENGINEERING', employeeCount: 250, payroll: payrollOf(ENGINEERING) },
    { id: 'FINANCE', employeeCount: 40, payroll: payrollOf(FINANCE) },
    { id: 'Marketing', employeeCount: 2, payroll: '0' },
    { id: 'Sales', employeeCount: 1, payroll: '0' },
  ];

  test('id and name are covered by the index entities: one wave, no point query', async () => {
    const r = await server.query('{ departments { edges { node { id name } } pageInfo { hasNextPage } } }');
    expect(r.data.departments.edges.map((e: any) => e.node)).toEqual(expected.map((d) => ({ id: d.id, name: d.id })));
    expect(r.data.departments.pageInfo.hasNextPage).toBe(false);
    expectCost(r, { pointQueries: 0, rangeQueries: 1, entitiesRead: 5, waves: 1 });
  });

  test('summary values need each department entity: one point query per department, in one second wave', async () => {
    const r = await server.query('{ departments { edges { node { id employeeCount payroll } } } }');
    expect(r.data.departments.edges.map((e: any) => e.node)).toEqual(expected);
    expectCost(r, { pointQueries: 5, rangeQueries: 1, entitiesRead: 10, waves: 2 });
  });
});

describe('employeesByLastName: the intra-partition index', () => {
  test("returns exactly the department's WILLIAMS (not WILLIAMSON, not another department's) from index entities", async () => {
    const spy = jest.spyOn(server.store, 'queryRange');
    const r = await server.query(`{ department(id: "ENGINEERING") {
      employeesByLastName(lastName: "WILLIAMS") { edges { node { id firstName lastName title } } } } }`);
    const williams = withLastName(ENGINEERING, 'WILLIAMS');
    expect(williams).toHaveLength(7);
    expect(ENGINEERING.employees.some((e) => e.lastName === 'WILLIAMSON')).toBe(true);
    expect(r.data.department.employeesByLastName.edges.map((e: any) => e.node)).toEqual(
      williams.map((w) => ({ id: w.id, firstName: w.firstName, lastName: 'WILLIAMS', title: w.title })),
    );
    // The server's own reads of its paths' states (request-reads.ts) are left out.
    const catalogue = catalogueTable(server.config.tablePrefix);
    const reads = spy.mock.calls.flatMap(([read], i) => (read.table === catalogue ? [] : [i]));
    expect(reads).toHaveLength(1);
    expect(spy.mock.calls[reads[0]][0]).toMatchObject({ partitionKey: 'ENGINEERING', rowKeyFrom: 'lastname_WILLIAMS_', rowKeyTo: 'lastname_WILLIAMS`' });
    const { entities } = await (spy.mock.results[reads[0]].value as Promise<{ entities: StoredEntity[] }>);
    expect(new Set(entities.map((e) => e.properties.EntityType))).toEqual(new Set(['Employee.byLastNameInDepartment']));
    expectCost(r, { pointQueries: 1, rangeQueries: 1, entitiesRead: 1 + 7, waves: 2 });
  });

  test('a field the index does not hold is read from the entities in one more wave', async () => {
    const r = await server.query(`{ department(id: "ENGINEERING") {
      employeesByLastName(lastName: "WILLIAMS") { edges { node { id lastName annualSalary hourlyRate } } } } }`);
    const williams = withLastName(ENGINEERING, 'WILLIAMS');
    expect(r.data.department.employeesByLastName.edges.map((e: any) => e.node)).toEqual(
      williams.map((w) => ({ id: w.id, lastName: 'WILLIAMS', annualSalary: w.annualSalary ?? null, hourlyRate: w.hourlyRate ?? null })),
    );
    // department, then the index range, then the 7 entities in one batch.
    expectCost(r, { pointQueries: 1 + 7, rangeQueries: 1, entitiesRead: 1 + 7 + 7, waves: 3 });
  });

  test('another partition has its own WILLIAMS', async () => {
    const r = await server.query('{ department(id: "FINANCE") { employeesByLastName(lastName: "WILLIAMS") { edges { node { id } } } } }');
    expect(ids(r.data.department.employeesByLastName.edges)).toEqual([1015]);
    expectCost(r, { pointQueries: 1, rangeQueries: 1, entitiesRead: 2, waves: 2 });
  });
});

describe('projection: each query selects what the operation reads', () => {
  test('a range query selects the selected fields and the keys, and receives nothing else', async () => {
    const spy = jest.spyOn(server.store, 'queryRange');
    const point = jest.spyOn(server.store, 'getEntity');
    const r = await server.query('{ department(id: "ENGINEERING") { employees(first: 5) { edges { node { id firstName } } } } }');
    expect(ids(r.data.department.employees.edges)).toEqual([9, 10, 11, 12, 13]);
    // The request's calls: the server's own refresh of its paths' states reads the catalogue whatever requests come.
    const catalogue = catalogueTable(server.config.tablePrefix);
    const pointCall = point.mock.calls.findIndex(([read]) => read.table !== catalogue);
    const rangeCall = spy.mock.calls.findIndex(([read]) => read.table !== catalogue);
    expect(point.mock.calls[pointCall][1]?.select).toEqual(['EntityType', 'id']);
    // The keys, what is selected, and what the type's @auth decides on (the e-mail: an employee reads its own).
    expect(spy.mock.calls[rangeCall][0].select).toEqual(['EntityType', 'departmentId', 'email', 'firstName', 'id']);
    const { entities } = await (spy.mock.results[rangeCall].value as Promise<{ entities: StoredEntity[] }>);
    // What came over the wire: no title, no salary, no rate — only the $select.
    for (const e of entities) expect(Object.keys(e.properties).sort()).toEqual(['EntityType', 'departmentId', 'email', 'firstName', 'id']);
  });

  test("reads through an index select the index projection, then the entity's missing fields", async () => {
    const range = jest.spyOn(server.store, 'queryRange');
    const point = jest.spyOn(server.store, 'getEntity');
    await server.query('{ department(id: "ENGINEERING") { employeesByLastName(lastName: "WILLIAMS") { edges { node { id annualSalary } } } } }');
    const catalogue = catalogueTable(server.config.tablePrefix);
    expect(range.mock.calls.find(([read]) => read.table !== catalogue)?.[0].select).toEqual(['EntityType', 'departmentId', 'email', 'id']);
    const employeeReads = point.mock.calls.filter(([addr]) => addr.rowKey.startsWith('empid_'));
    expect(employeeReads).toHaveLength(7);
    for (const [, opts] of employeeReads) expect(opts?.select).toEqual(['EntityType', 'annualSalary', 'departmentId', 'email', 'id']);
    // Employee 70 is salaried: what came back is the $select, without title, names or rates.
    const at = point.mock.calls.findIndex(([addr]) => addr.rowKey === 'empid_00000070');
    const read = await (point.mock.results[at].value as Promise<StoredEntity>);
    expect(Object.keys(read.properties).sort()).toEqual(['EntityType', 'annualSalary', 'departmentId', 'email', 'id']);
  });

  test('collectProjection follows fragments, inline fragments and the fields access paths bind', () => {
    const { schema, model: m } = compileHr('');
    const doc = parse(`
      query Q { department(id: "X") { ...D employees { edges { node { ... on Employee { title } ...E ...E } } } } }
      fragment D on Department { name }
      fragment E on Employee { annualSalary department { payroll } }`);
    const operation = doc.definitions.find((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION)!;
    const fragments = Object.fromEntries(
      doc.definitions.filter((d): d is FragmentDefinitionNode => d.kind === Kind.FRAGMENT_DEFINITION).map((f) => [f.name.value, f]),
    );
    const projection = collectProjection(schema, m, operation, fragments);
    expect([...projection.keys()].sort()).toEqual(['Department', 'Employee']);
    // Department: its key field, the fragment's name and payroll (from E); never employeeCount.
    expect([...projection.get('Department')!].sort()).toEqual(['id', 'name', 'payroll']);
    // Employee: keys, title (inline fragment), annualSalary (named fragment), departmentId (bound by `department`),
    // email (what @auth decides on).
    expect([...projection.get('Employee')!].sort()).toEqual(['annualSalary', 'departmentId', 'email', 'id', 'title']);

    const employee = m.entities.get('Employee')!;
    const byLastName = employee.indexes.get('byLastNameInDepartment')!;
    expect(entitySelect(projection, employee)).toEqual(['EntityType', 'annualSalary', 'departmentId', 'email', 'id', 'title']);
    expect(indexSelect(projection, byLastName)).toEqual(['EntityType', 'departmentId', 'email', 'id', 'title']);
    expect(indexCovers(projection, byLastName)).toBe(false);
    const covered = collectProjection(
      schema,
      m,
      parse('{ department(id: "X") { employeesByLastName(lastName: "A") { edges { node { firstName title } } } } }').definitions[0] as OperationDefinitionNode,
      {},
    );
    expect(indexCovers(covered, byLastName)).toBe(true);
  });
});

describe('keys and arguments', () => {
  test('an employee that does not exist is null, after one point query', async () => {
    const r = await server.query('{ employee(departmentId: "ENGINEERING", id: "99999") { id } }');
    expect(r).toMatchObject({ data: { employee: null } });
    expect(r.errors).toBeUndefined();
    expectCost(r, { pointQueries: 1, rangeQueries: 0, entitiesRead: 0, waves: 1 });
  });

  test('an id that cannot form a key is BAD_USER_INPUT and sends nothing', async () => {
    const r = await server.query('query($id: ID!) { employee(departmentId: "ENGINEERING", id: $id) { id } }', { id: 'abc' });
    expect(r.data).toEqual({ employee: null });
    expect(r.errors).toHaveLength(1);
    expect(r.errors![0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'id' });
    expect(r.errors![0].path).toEqual(['employee']);
    expectCost(r, { pointQueries: 0, rangeQueries: 0, entitiesRead: 0, waves: 0 });
  });

  test('a department id holding `/` and `#` is escaped in its keys and reads back unchanged', async () => {
    const r = await server.query(
      `query($d: ID!) {
      department(id: $d) { id name employeeCount employees { edges { node { id departmentId } } } }
      employee(departmentId: $d, id: "2002") { id departmentId department { id } } }`,
      { d: 'A/B #1' },
    );
    expect(r.errors).toBeUndefined();
    expect(r.data.department).toMatchObject({ id: 'A/B #1', name: 'A/B #1', employeeCount: 3 });
    expect(r.data.department.employees.edges.map((e: any) => e.node)).toEqual(SLASHED.employees.map((e) => ({ id: e.id, departmentId: 'A/B #1' })));
    expect(r.data.employee).toEqual({ id: '2002', departmentId: 'A/B #1', department: { id: 'A/B #1' } });
    // department + employee in wave 1; the employees range in wave 2; employee.department is the cached read.
    expectCost(r, { pointQueries: 2, rangeQueries: 1, entitiesRead: 5, waves: 2 });
    const table = model.entities.get('Department')!.layout.table;
    const stored = await server.store.getEntity({ table, partitionKey: 'A%2FB %231', rowKey: 'department' });
    expect(stored?.properties.id).toBe('A/B #1');
  });
});
