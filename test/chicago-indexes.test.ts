/**
 * The write path at Chicago scale (acceptance): the whole City of Chicago file imported into a real server's
 * tables, then the organisation-wide indexes the message worker keeps read and changed through GraphQL.
 * - `employeesByLastName` pages through all 283 WILLIAMS, each once, one range query per page, and says it is
 *   eventually consistent ("Inter-partition secondary index pattern", "Index Entities Pattern");
 * - renaming one WILLIAMS changes the department-local index at once (same EGT: "Intra-partition secondary
 *   index pattern") and the organisation-wide ones once the inline worker has run ("Eventually consistent
 *   transactions pattern");
 * - `employeeByEmail` finds imported employees by the e-mail the import derives.
 * The expected sets are computed here from the CSV itself, not from the importer.
 */
import { parse } from 'csv-parse/sync';
import { importEmployees, type ImportSummary } from '../examples/hr/import/import-employees';
import { CHICAGO_CSV, chicagoCsvText, compileHr, startTestServer, type TestServer } from './support/harness';

const TIMEOUT_MS = 300_000;
const RENAMED = 'WILLIAMS-RENAMED';

/** An employee as the file names it: id = position among the data rows (from 1), department as spelled. */
interface FileEmployee {
  id: string;
  departmentId: string;
}

/** The file's employees whose last name — the text before the comma, trimmed — is `lastName`. */
function fromFile(lastName: string): FileEmployee[] {
  const rows = parse(chicagoCsvText(), { from_line: 2 }) as string[][];
  return rows.flatMap((r, i) => (r[0].slice(0, r[0].indexOf(',')).trim() === lastName ? [{ id: String(i + 1), departmentId: r[2] }] : []));
}

const key = (e: FileEmployee) => `${e.departmentId}/${e.id}`;

const ORG_WIDE = `query($name: String!, $after: String) {
  employeesByLastName(lastName: $name, first: 100, after: $after) {
    edges { node { id departmentId lastName firstName } }
    pageInfo { hasNextPage endCursor }
  }
}`;

const IN_DEPARTMENT = `query($d: ID!, $name: String!, $after: String) {
  department(id: $d) {
    employeesByLastName(lastName: $name, first: 100, after: $after) {
      edges { node { id departmentId lastName } }
      pageInfo { hasNextPage endCursor }
    }
  }
}`;

const BY_EMAIL = 'query($email: String!) { employeeByEmail(email: $email) { id departmentId lastName firstName email } }';

let server: TestServer;
let imported: ImportSummary;

beforeAll(async () => {
  server = await startTestServer(); // the message worker runs inline (the default)
  imported = await importEmployees({ store: server.store, model: compileHr(server.config.tablePrefix).model, file: CHICAGO_CSV });
}, TIMEOUT_MS);
afterAll(() => server?.close());

interface Page {
  nodes: Array<{ id: string; departmentId: string; lastName: string }>;
  cost: Record<string, number>;
  eventual: boolean;
}

/** Every page of a connection, following endCursor; `pick` finds the connection in `data`. */
async function allPages(query: string, variables: Record<string, unknown>, pick: (data: any) => any): Promise<Page[]> {
  const pages: Page[] = [];
  let after: string | undefined;
  for (;;) {
    const res = await server.query(query, { ...variables, after });
    expect(res.errors).toBeUndefined();
    const connection = pick(res.data);
    pages.push({
      nodes: connection.edges.map((e: any) => e.node),
      cost: res.extensions?.cost,
      eventual: res.extensions?.consistency?.eventual,
    });
    if (!connection.pageInfo.hasNextPage) return pages;
    after = connection.pageInfo.endCursor;
    expect(pages.length).toBeLessThan(20); // a cursor that never ends must fail the test, not hang it
  }
}

const orgWide = (name: string) => allPages(ORG_WIDE, { name }, (d) => d.employeesByLastName);
const inDepartment = (d: string, name: string) => allPages(IN_DEPARTMENT, { d, name }, (data) => data.department.employeesByLastName);
const keysOf = (pages: Page[]) => pages.flatMap((p) => p.nodes.map(key));

test('the whole file is imported', () => {
  expect(imported).toMatchObject({ rows: 32_928, imported: 32_928, skipped: [] });
});

test('employeesByLastName pages through all 283 WILLIAMS of the city, each once, one range query per page', async () => {
  const expected = fromFile('WILLIAMS');
  expect(expected).toHaveLength(283); // the data set's README says so: the file and this parser agree

  const pages = await orgWide('WILLIAMS');
  expect(pages.map((p) => p.nodes.length)).toEqual([100, 100, 83]);
  const served = keysOf(pages);
  expect(new Set(served).size).toBe(served.length); // each once
  expect(new Set(served)).toEqual(new Set(expected.map(key)));
  for (const p of pages) {
    expect(p.eventual).toBe(true);
    // The projection covers the selection: no second wave of point queries, and never a scan.
    expect(p.cost).toMatchObject({ rangeQueries: 1, pointQueries: 0, partitionScans: 0, tableScans: 0, waves: 1 });
    expect(p.nodes.every((n) => n.lastName === 'WILLIAMS')).toBe(true);
  }
});

test('renaming a WILLIAMS: the department index changes at once, the city-wide ones after the worker ran', async () => {
  const williams = fromFile('WILLIAMS');
  const target = williams[0];
  const colleagues = williams.filter((e) => e.departmentId === target.departmentId);

  // Before: the department-local index lists the target among its department's WILLIAMS.
  expect(new Set(keysOf(await inDepartment(target.departmentId, 'WILLIAMS')))).toEqual(new Set(colleagues.map(key)));
  const { email } = (
    await server.query('query($d: ID!, $id: ID!) { employee(departmentId: $d, id: $id) { email } }', { d: target.departmentId, id: target.id })
  ).data.employee;

  const res = await server.query('mutation($input: UpdateEmployeeInput!) { updateEmployee(input: $input) { employee { id lastName } } }', {
    input: { departmentId: target.departmentId, id: target.id, lastName: RENAMED },
  });
  expect(res.errors).toBeUndefined();
  expect(res.data.updateEmployee.employee).toEqual({ id: target.id, lastName: RENAMED });

  // At once, with no wait for the worker: the intra-partition index was changed in the employee's EGT.
  const remaining = new Set(colleagues.filter((e) => e !== target).map(key));
  expect(new Set(keysOf(await inDepartment(target.departmentId, 'WILLIAMS')))).toEqual(remaining);
  expect(keysOf(await inDepartment(target.departmentId, RENAMED))).toEqual([key(target)]);

  // The organisation-wide indexes follow once the worker has reconciled the fan-out message.
  // The import enqueues nothing (it writes index entities itself), so the rename's message is the only one.
  await server.worker!.drain({ timeoutMs: 60_000 });
  expect(server.worker!.stats()).toMatchObject({ handled: 1, poisoned: 0 });

  const after = keysOf(await orgWide('WILLIAMS'));
  expect(after).toHaveLength(282);
  expect(new Set(after)).toEqual(new Set(williams.filter((e) => e !== target).map(key)));
  const renamed = await orgWide(RENAMED);
  expect(renamed.flatMap((p) => p.nodes)).toEqual([expect.objectContaining({ id: target.id, departmentId: target.departmentId, lastName: RENAMED })]);

  const byEmail = await server.query(BY_EMAIL, { email });
  expect(byEmail.errors).toBeUndefined();
  expect(byEmail.data.employeeByEmail).toMatchObject({ id: target.id, departmentId: target.departmentId, lastName: RENAMED, email });
  expect(byEmail.extensions.consistency.eventual).toBe(true);
});

test('employeeByEmail finds employee 1, AARON, JEFFERY of POLICE, by the e-mail the import derived', async () => {
  const res = await server.query(BY_EMAIL, { email: 'jeffery.aaron@cityofchicago.example' });
  expect(res.errors).toBeUndefined();
  expect(res.data.employeeByEmail).toEqual({
    id: '1',
    departmentId: 'POLICE',
    lastName: 'AARON',
    firstName: 'JEFFERY',
    email: 'jeffery.aaron@cityofchicago.example',
  });
});
