/**
 * Relay pagination over range queries: pages in RowKey order (`empid_00000009` < `empid_00000010` <
 * `empid_00000100`, so string order is number order), `first` limits, and opaque, tamper-evident cursors that
 * only resume the list they came from.
 */
import type { Model } from '../src/model/types';
import { compileHr, startTestServer, type TestServer } from './support/harness';
import { ENGINEERING, expectCost, withLastName, writeFixtures } from './support/read-fixtures';

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

const EMPLOYEES = `query($d: ID!, $first: Int, $after: String) {
  department(id: $d) { employees(first: $first, after: $after) {
    edges { cursor node { id } } pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } } }`;
const BY_LAST_NAME = `query($d: ID!, $name: String!, $first: Int, $after: String) {
  department(id: $d) { employeesByLastName(lastName: $name, first: $first, after: $after) {
    edges { cursor node { id lastName } } pageInfo { hasNextPage endCursor } } } }`;

async function employeesPage(vars: { d?: string; first?: number; after?: string }) {
  const r = await server.query(EMPLOYEES, { d: 'ENGINEERING', ...vars });
  return { r, conn: r.data?.department?.employees };
}

/** Asserts a BAD_USER_INPUT on `after`: the department was read, no range query was sent. */
function expectBadCursor(r: { data?: any; errors?: any[]; extensions?: any }) {
  expect(r.errors).toHaveLength(1);
  expect(r.errors![0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', argument: 'after' });
  expect(r.data.department).toBeNull();
  expectCost(r, { pointQueries: 1, rangeQueries: 0, entitiesRead: 1, waves: 1 });
}

describe('paging through a partition', () => {
  test('250 employees in pages of 100: 100, 100, 50, in id order, no duplicates', async () => {
    const sizes: number[] = [];
    const more: boolean[] = [];
    const seen: number[] = [];
    let after: string | undefined;
    for (let page = 0; page < 4; page++) {
      const { r, conn } = await employeesPage({ first: 100, after });
      expect(r.errors).toBeUndefined();
      sizes.push(conn.edges.length);
      more.push(conn.pageInfo.hasNextPage);
      seen.push(...conn.edges.map((e: any) => Number(e.node.id)));
      expect(conn.pageInfo.hasPreviousPage).toBe(false);
      expect(conn.pageInfo.startCursor).toBe(conn.edges[0].cursor);
      expect(conn.pageInfo.endCursor).toBe(conn.edges.at(-1).cursor);
      // The range query asks for one entity more than the page, so hasNextPage costs nothing extra.
      expectCost(r, { pointQueries: 1, rangeQueries: 1, entitiesRead: 1 + conn.edges.length, waves: 2 });
      if (!conn.pageInfo.hasNextPage) break;
      after = conn.pageInfo.endCursor;
    }
    expect(sizes).toEqual([100, 100, 50]);
    expect(more).toEqual([true, true, false]);
    expect(seen).toEqual(ENGINEERING.employees.map((e) => Number(e.id)));
    expect(new Set(seen).size).toBe(250);
    expect(seen.slice(0, 3)).toEqual([9, 10, 11]);
    expect(seen.indexOf(100)).toBe(91);
  });

  test('an edge cursor resumes right after that edge', async () => {
    const { conn } = await employeesPage({ first: 10 });
    const { conn: next } = await employeesPage({ first: 3, after: conn.edges[4].cursor });
    expect(next.edges.map((e: any) => Number(e.node.id))).toEqual([14, 15, 16]);
  });

  test('first defaults to 20, accepts 100 and 0, refuses 101 and -1 before reading the range', async () => {
    const { r, conn } = await employeesPage({});
    expect(conn.edges).toHaveLength(20);
    expect(conn.pageInfo.hasNextPage).toBe(true);
    expectCost(r, { pointQueries: 1, rangeQueries: 1, entitiesRead: 21, waves: 2 });

    expect((await employeesPage({ first: 100 })).conn.edges).toHaveLength(100);
    const zero = await employeesPage({ first: 0 });
    expect(zero.conn.edges).toEqual([]);
    expect(zero.conn.pageInfo).toMatchObject({ hasNextPage: true, endCursor: null });

    for (const first of [101, -1]) {
      const { r: bad } = await employeesPage({ first });
      expect(bad.errors).toHaveLength(1);
      expect(bad.errors![0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', argument: 'first', max: 100 });
      expect(bad.errors![0].message).toContain(String(first));
      expectCost(bad, { pointQueries: 1, rangeQueries: 0, entitiesRead: 1, waves: 1 });
    }
  });

  test('WILLIAMS through the index, in pages of 2', async () => {
    const williams = withLastName(ENGINEERING, 'WILLIAMS').map((e) => Number(e.id));
    const pages: number[][] = [];
    const more: boolean[] = [];
    let after: string | undefined;
    do {
      const r = await server.query(BY_LAST_NAME, { d: 'ENGINEERING', name: 'WILLIAMS', first: 2, after });
      const conn = r.data.department.employeesByLastName;
      pages.push(conn.edges.map((e: any) => Number(e.node.id)));
      more.push(conn.pageInfo.hasNextPage);
      for (const e of conn.edges) expect(e.node.lastName).toBe('WILLIAMS');
      expectCost(r, { pointQueries: 1, rangeQueries: 1, entitiesRead: 1 + conn.edges.length, waves: 2 });
      after = conn.pageInfo.endCursor;
      if (!conn.pageInfo.hasNextPage) break;
    } while (pages.length < 10);
    expect(pages).toEqual([williams.slice(0, 2), williams.slice(2, 4), williams.slice(4, 6), williams.slice(6)]);
    expect(more).toEqual([true, true, true, false]);
  });
});

describe('cursors', () => {
  let cursor: string;
  let lastId: string; // the id of the entity the cursor points after
  beforeAll(async () => {
    const { conn } = await employeesPage({ first: 100 });
    cursor = conn.pageInfo.endCursor;
    lastId = String(conn.edges[conn.edges.length - 1].node.id);
  });

  test('are opaque: nothing of the RowKey can be read, encoded or not', () => {
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    const bytes = Buffer.from(cursor, 'base64url');
    const rowKey = `empid_${lastId.padStart(8, '0')}`;
    for (const text of [cursor, bytes.toString('utf8'), bytes.toString('latin1')]) {
      expect(text).not.toContain('empid');
      expect(text).not.toContain(rowKey.slice(6));
    }
    // Decoded, not even its id (the base64 text itself holds any three given digits once in some thousands cursors).
    for (const text of [bytes.toString('utf8'), bytes.toString('latin1')]) expect(text).not.toContain(lastId);
    // Nor the RowKey base64-encoded at any of the three byte alignments (the stable middle of each encoding).
    for (const pad of ['', 'x', 'xx']) {
      const encoded = Buffer.from(pad + rowKey).toString('base64url');
      expect(cursor).not.toContain(encoded.slice(4, -4));
    }
    expect(() => JSON.parse(bytes.toString('utf8'))).toThrow();
  });

  test('the same position gives the same cursor (answers stay the same while the data does)', async () => {
    expect((await employeesPage({ first: 100 })).conn.pageInfo.endCursor).toBe(cursor);
  });

  test('a changed character anywhere is refused, nothing read', async () => {
    const dot = Math.floor(cursor.length / 2);
    const swap = (s: string, i: number, c: string) => s.slice(0, i) + c + s.slice(i + 1);
    const other = (c: string) => (c === 'A' ? 'B' : 'A');
    // The last signature char's low bits would be lost by a base64 decode: flip one of those bits.
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const lowBitTwin = alphabet[alphabet.indexOf(cursor.at(-1)!) ^ 1];
    const tampered = [
      swap(cursor, 2, other(cursor[2])),
      swap(cursor, dot - 1, other(cursor[dot - 1])),
      swap(cursor, dot + 1, other(cursor[dot + 1])),
      cursor.slice(0, -1) + lowBitTwin,
      cursor.slice(0, dot),
      `${cursor.slice(0, dot)}.${cursor.slice(dot)}`,
      `${cursor}x`,
      'garbage',
      '',
    ];
    for (const after of tampered) {
      expect(after).not.toBe(cursor);
      expectBadCursor((await employeesPage({ first: 100, after })).r);
    }
    // The untouched cursor still works.
    expect((await employeesPage({ first: 100, after: cursor })).conn.edges).toHaveLength(100);
  });

  test('a cursor from another list is refused, nothing read', async () => {
    // The same RowKey range in another partition.
    expectBadCursor((await employeesPage({ d: 'FINANCE', first: 10, after: cursor })).r);
    // The index's list of WILLIAMS, used on employees, and the reverse.
    const r = await server.query(BY_LAST_NAME, { d: 'ENGINEERING', name: 'WILLIAMS', first: 2 });
    const williamsCursor = r.data.department.employeesByLastName.pageInfo.endCursor;
    expectBadCursor((await employeesPage({ first: 10, after: williamsCursor })).r);
    expectBadCursor(await server.query(BY_LAST_NAME, { d: 'ENGINEERING', name: 'WILLIAMS', first: 2, after: cursor }));
    // Another last name is another range.
    expectBadCursor(await server.query(BY_LAST_NAME, { d: 'ENGINEERING', name: 'SMITH', first: 2, after: williamsCursor }));
    // The departments list (another table).
    const departments = await server.query('{ departments(first: 1) { pageInfo { endCursor } } }');
    expectBadCursor((await employeesPage({ first: 10, after: departments.data.departments.pageInfo.endCursor })).r);
  });
});
