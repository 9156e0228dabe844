/**
 * The guide's "Compound key pattern" and "Log tail pattern", as the HR schema declares them: yearly reviews of an
 * employee (RowKey `review_{employeeId:08}_{year:desc04}`: one point query per year, the years newest first in a range
 * query) and expense claims (RowKey `claim_{employeeId:08}_{submittedAt:invertedTicks}`: newest first, a closed date
 * window as one range query) — both in the department's partition of the Directory table, beside the employee.
 */
import { ErrorCode } from '../src/errors';
import { startTestServer, type TestServer } from './support/harness';

let server: TestServer;
let directory: string;
beforeAll(async () => {
  server = await startTestServer();
  directory = `${server.config.tablePrefix}Directory`;
});
afterAll(async () => server?.close());

const CREATE_REVIEW = `mutation ($input: CreateEmployeeReviewInput!) { createEmployeeReview(input: $input) { employeeReview { year rating etag } } }`;
const UPDATE_REVIEW = `mutation ($input: UpdateEmployeeReviewInput!) { updateEmployeeReview(input: $input) { employeeReview { year rating summary } } }`;
const SUBMIT_CLAIM = `mutation ($input: CreateExpenseClaimInput!) { submitExpenseClaim(input: $input) { expenseClaim { submittedAt amount } } }`;

/** The guide's RowKey suffix of a date: `string.Format("{0:D19}", DateTime.MaxValue.Ticks - date.Ticks)`, computed here from .NET's constants. */
function dotNetInvertedTicks(iso: string): string {
  const maxValueTicks = 3155378975999999999n; // DateTime.MaxValue.Ticks
  const unixEpochTicks = 621355968000000000n; // new DateTime(1970, 1, 1).Ticks
  const ticks = unixEpochTicks + BigInt(Date.parse(iso)) * 10000n;
  return (maxValueTicks - ticks).toString().padStart(19, '0');
}

describe('Compound key pattern: Employee.reviews and Employee.review(year)', () => {
  beforeAll(async () => {
    for (const [year, rating] of [
      [2022, 3],
      [2024, 5],
      [2023, 4],
    ]) {
      const r = await server.query(CREATE_REVIEW, { input: { departmentId: 'Sales', employeeId: '10', year, rating, summary: `review ${year}` } });
      expect(r.errors).toBeUndefined();
    }
  });

  test('stored beside the employee, RowKey review_<id:08>_<9999 - year>, with its EntityType', async () => {
    const stored = await server.store.getEntity({ table: directory, partitionKey: 'Sales', rowKey: 'review_00000010_7975' });
    expect(stored).toMatchObject({
      partitionKey: 'Sales',
      rowKey: 'review_00000010_7975',
      properties: expect.objectContaining({ EntityType: 'EmployeeReview', year: 2024, rating: 5, employeeId: '10' }),
    });
  });

  test('reviews: newest year first, one point query and one range query; pages continue with the cursor', async () => {
    const q = `query ($after: String) { employee(departmentId: "Sales", id: "10") { reviews(first: 2, after: $after) { edges { node { year rating } } pageInfo { hasNextPage endCursor } } } }`;
    const first = await server.query(q);
    expect(first.errors).toBeUndefined();
    expect(first.data.employee.reviews.edges.map((e: any) => e.node)).toEqual([
      { year: 2024, rating: 5 },
      { year: 2023, rating: 4 },
    ]);
    expect(first.extensions.cost).toMatchObject({ pointQueries: 1, rangeQueries: 1, roundTrips: 2, entitiesRead: 3 });
    const next = await server.query(q, { after: first.data.employee.reviews.pageInfo.endCursor });
    expect(next.data.employee.reviews).toMatchObject({ edges: [{ node: { year: 2022, rating: 3 } }], pageInfo: { hasNextPage: false } });
  });

  test('review(year): a point query; a year without a review is null', async () => {
    const r = await server.query(
      `{ employee(departmentId: "Sales", id: "10") { review(year: 2023) { year summary employee { firstName } } none: review(year: 2019) { year } } }`,
    );
    expect(r.errors).toBeUndefined();
    expect(r.data.employee).toEqual({ review: { year: 2023, summary: 'review 2023', employee: { firstName: 'Ken' } }, none: null });
    // employee, its two reviews (one missing), and the review's employee (the DataLoader's cache: no second read)
    expect(r.extensions.cost).toMatchObject({ pointQueries: 3, rangeQueries: 0, roundTrips: 3 });
  });

  test("the department's employees range reads no review: each type has its own RowKey literal", async () => {
    const r = await server.query(`{ department(id: "Sales") { employees { edges { node { id } } } } }`);
    expect(r.data.department.employees.edges.map((e: any) => e.node.id)).toEqual(['10']);
    expect(r.extensions.cost.entitiesRead).toBe(2);
  });

  test('updateEmployeeReview merges: the fields given change, the others stay', async () => {
    const r = await server.query(UPDATE_REVIEW, { input: { departmentId: 'Sales', employeeId: '10', year: 2022, rating: 4 } });
    expect(r.errors).toBeUndefined();
    expect(r.data.updateEmployeeReview.employeeReview).toEqual({ year: 2022, rating: 4, summary: 'review 2022' });
  });

  test('bad input is refused with a code and nothing is written', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ departmentId: 'Sales', employeeId: '10', year: 1800, rating: 3 }, ErrorCode.BAD_USER_INPUT], // @constraint(min: 1900)
      [{ departmentId: 'Sales', employeeId: '10', year: 2021, rating: 9 }, ErrorCode.BAD_USER_INPUT], // @constraint(max: 5)
      [{ departmentId: 'Sales', employeeId: '999', year: 2021, rating: 3 }, ErrorCode.NOT_FOUND], // the employee is not there
      [{ departmentId: 'Sales', employeeId: '10', year: 2024, rating: 3 }, ErrorCode.CONFLICT], // 2024 exists
    ];
    for (const [input, code] of cases) {
      const r = await server.query(CREATE_REVIEW, { input });
      expect(r.errors?.[0].extensions.code).toBe(code);
    }
    for (const rowKey of ['review_00000010_8199', 'review_00000010_7978', 'review_00000999_7978']) {
      expect(await server.store.getEntity({ table: directory, partitionKey: 'Sales', rowKey })).toBeNull();
    }
    const kept = await server.store.getEntity({ table: directory, partitionKey: 'Sales', rowKey: 'review_00000010_7975' });
    expect(kept?.properties.rating).toBe(5);
  });
});

describe('Log tail pattern: Employee.expenseClaims(from, to)', () => {
  const dates = ['2026-01-31T23:59:59.999Z', '2026-02-01T00:00:00.000Z', '2026-02-14T12:30:00.000Z', '2026-02-28T23:59:59.999Z', '2026-03-01T00:00:00.000Z'];
  beforeAll(async () => {
    for (const [i, submittedAt] of dates.entries()) {
      const r = await server.query(SUBMIT_CLAIM, {
        input: { departmentId: 'Marketing', employeeId: '1', submittedAt, amount: `${i + 1}0.50`, description: `claim ${i}` },
      });
      expect(r.errors).toBeUndefined();
    }
  });

  test('the RowKey is the one .NET computes: DateTime.MaxValue.Ticks - ticks, 19 digits', async () => {
    // The same figure from Python's datetime: (datetime(2026,2,14,12,30) - datetime(1,1,1)) in 100 ns ticks.
    expect(dotNetInvertedTicks('2026-02-14T12:30:00.000Z')).toBe('2516312285999999999');
    const rowKey = `claim_00000001_${dotNetInvertedTicks('2026-02-14T12:30:00.000Z')}`;
    const stored = await server.store.getEntity({ table: directory, partitionKey: 'Marketing', rowKey });
    expect(stored?.properties).toMatchObject({ EntityType: 'ExpenseClaim', amount: '30.5', description: 'claim 2' });
  });

  test('newest first within the closed window [from, to], both ends included: one range query', async () => {
    const r = await server.query(
      `{ employee(departmentId: "Marketing", id: "1") { expenseClaims(from: "2026-02-01T00:00:00Z", to: "2026-02-28T23:59:59.999Z") { edges { node { submittedAt amount } } } } }`,
    );
    expect(r.errors).toBeUndefined();
    expect(r.data.employee.expenseClaims.edges.map((e: any) => e.node)).toEqual([
      { submittedAt: '2026-02-28T23:59:59.999Z', amount: '40.5' },
      { submittedAt: '2026-02-14T12:30:00.000Z', amount: '30.5' },
      { submittedAt: '2026-02-01T00:00:00.000Z', amount: '20.5' },
    ]);
    expect(r.extensions.cost).toMatchObject({ pointQueries: 1, rangeQueries: 1, roundTrips: 2, entitiesRead: 4 });
  });

  test('pages of the window follow the cursor, newest first', async () => {
    const q = `query ($after: String) { employee(departmentId: "Marketing", id: "1") { expenseClaims(from: "2026-01-01", to: "2026-12-31", first: 2, after: $after) { edges { node { description } } pageInfo { hasNextPage endCursor } } } }`;
    const seen: string[] = [];
    let after: string | undefined;
    for (let page = 0; page < 5; page++) {
      const r = await server.query(q, { after });
      const c = r.data.employee.expenseClaims;
      seen.push(...c.edges.map((e: any) => e.node.description));
      if (!c.pageInfo.hasNextPage) break;
      after = c.pageInfo.endCursor;
    }
    expect(seen).toEqual(['claim 4', 'claim 3', 'claim 2', 'claim 1', 'claim 0']);
  });

  test('a window that ends before it starts is empty; a date that is no date is refused before any read', async () => {
    const empty = await server.query(
      `{ employee(departmentId: "Marketing", id: "1") { expenseClaims(from: "2026-03-01", to: "2026-01-01") { edges { node { description } } } } }`,
    );
    expect(empty.errors).toBeUndefined();
    expect(empty.data.employee.expenseClaims.edges).toEqual([]);
    const bad = await server.query(
      `{ employee(departmentId: "Marketing", id: "1") { expenseClaims(from: "yesterday", to: "2026-01-01") { edges { node { description } } } } }`,
    );
    expect(bad.errors?.[0].extensions.code).toBe('GRAPHQL_VALIDATION_FAILED');
    const q = `query ($from: DateTime!) { employee(departmentId: "Marketing", id: "1") { expenseClaims(from: $from, to: "2026-01-01") { edges { node { description } } } } }`;
    const badVariable = await server.query(q, { from: '2026-02-30' });
    expect(badVariable.errors?.[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(badVariable.extensions?.cost?.roundTrips ?? 0).toBe(0);
  });

  test('a claim refused (negative amount, no such employee) writes nothing', async () => {
    for (const input of [
      { departmentId: 'Marketing', employeeId: '1', submittedAt: '2026-04-01T00:00:00Z', amount: '-1', description: 'x' },
      { departmentId: 'Marketing', employeeId: '77', submittedAt: '2026-04-01T00:00:00Z', amount: '1', description: 'x' },
    ]) {
      const r = await server.query(SUBMIT_CLAIM, { input });
      expect([ErrorCode.BAD_USER_INPUT, ErrorCode.NOT_FOUND]).toContain(r.errors?.[0].extensions.code);
      const rowKey = `claim_${input.employeeId.padStart(8, '0')}_${dotNetInvertedTicks('2026-04-01T00:00:00.000Z')}`;
      expect(await server.store.getEntity({ table: directory, partitionKey: 'Marketing', rowKey })).toBeNull();
    }
  });
});
