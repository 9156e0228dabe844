/**
 * The guide's "Data series pattern" as the HR schema declares it: `MessageStats.hourly: [Int!]! @series(length: 24)`,
 * one entity per employee and day holding 24 properties `hourly00` … `hourly23`, read as one point query and
 * written by `recordMessages` (`@write(action: INCREMENT)`): a merge of one hour's property under the entity's ETag,
 * with concurrent writers in one server and in two (whose write paths know nothing of each other).
 */
import { ErrorCode } from '../src/errors';
import { compileHr, startTestServer, type TestServer } from './support/harness';
import { runConcurrentIncrements } from './support/concurrent-increments';
import { verifyDerived, formatVerifyReport } from '../src/maintenance/verify-derived';

let server: TestServer;
let directory: string;
beforeAll(async () => {
  server = await startTestServer();
  directory = `${server.config.tablePrefix}Directory`;
});
afterAll(async () => server?.close());

const RECORD = `mutation ($input: IncrementMessageStatsInput!) { recordMessages(input: $input) { messageStats { day hourly } } }`;
const STATS = `query ($d: ID!, $id: ID!, $day: String!) { employee(departmentId: $d, id: $id) { messageStats(day: $day) { day hourly etag } } }`;
const record = (s: TestServer, employeeId: string, day: string, at: number, by: number) =>
  s.query(RECORD, { input: { departmentId: 'Sales', employeeId, day, hourly: { at, by } } });
const rowKey = (employeeId: string, day: string) => `messages_${employeeId.padStart(8, '0')}_${day}`;

test('one entity per day: 24 properties hourly00..hourly23, a recorded hour merged alone; the day is one point query', async () => {
  expect((await record(server, '10', '2026-11-22', 14, 3)).errors).toBeUndefined();
  const created = await server.store.getEntity({ table: directory, partitionKey: 'Sales', rowKey: rowKey('10', '2026-11-22') });
  expect(created?.properties).toMatchObject({ EntityType: 'MessageStats', employeeId: '10', day: '2026-11-22', hourly14: 3 });
  expect(Object.keys(created!.properties).filter((p) => p.startsWith('hourly'))).toEqual(['hourly14']); // a 0 is not stored

  const second = await record(server, '10', '2026-11-22', 9, 2);
  expect(second.errors).toBeUndefined();
  expect(second.data.recordMessages.messageStats.hourly).toEqual(Array.from({ length: 24 }, (_, h) => (h === 14 ? 3 : h === 9 ? 2 : 0)));

  const r = await server.query(STATS, { d: 'Sales', id: '10', day: '2026-11-22' });
  expect(r.errors).toBeUndefined();
  expect(r.data.employee.messageStats.hourly).toEqual(Array.from({ length: 24 }, (_, h) => (h === 14 ? 3 : h === 9 ? 2 : 0)));
  expect(r.extensions.cost).toMatchObject({ pointQueries: 2, rangeQueries: 0, roundTrips: 2, entitiesRead: 2 });
  const none = await server.query(STATS, { d: 'Sales', id: '10', day: '2026-11-21' });
  expect(none.data.employee.messageStats).toBeNull();
});

test('a negative amount takes back, and a 0 left by it is written (a merge would otherwise keep the old value)', async () => {
  await record(server, '10', '2026-11-23', 5, 4);
  const back = await record(server, '10', '2026-11-23', 5, -4);
  expect(back.errors).toBeUndefined();
  const stored = await server.store.getEntity({ table: directory, partitionKey: 'Sales', rowKey: rowKey('10', '2026-11-23') });
  expect(stored?.properties.hourly05).toBe(0);
});

test('bad input is refused with a code before anything is written', async () => {
  const day = '2026-12-01';
  const cases: Array<[Record<string, unknown>, string]> = [
    [{ departmentId: 'Sales', employeeId: '10', day, hourly: { at: 24, by: 1 } }, ErrorCode.BAD_USER_INPUT], // no hour 24
    [{ departmentId: 'Sales', employeeId: '10', day, hourly: { at: -1, by: 1 } }, ErrorCode.BAD_USER_INPUT],
    [{ departmentId: 'Sales', employeeId: '10', day, hourly: { at: 3, by: -1 } }, ErrorCode.BAD_USER_INPUT], // below @constraint(min: 0)
    [{ departmentId: 'Sales', employeeId: '10', day: '2026-13-01', hourly: { at: 3, by: 1 } }, ErrorCode.BAD_USER_INPUT], // no month 13
    [{ departmentId: 'Sales', employeeId: '404', day, hourly: { at: 3, by: 1 } }, ErrorCode.NOT_FOUND], // no such employee
  ];
  for (const [input, code] of cases) {
    const r = await server.query(RECORD, { input });
    expect(r.errors?.[0].extensions.code).toBe(code);
  }
  const overflow = await server.query(RECORD, { input: { departmentId: 'Sales', employeeId: '10', day, hourly: { at: 3, by: 2 ** 31 } } });
  expect(overflow.errors?.[0].extensions.code).toMatch(/BAD_USER_INPUT|GRAPHQL_VALIDATION_FAILED/); // not an Int at all
  for (const key of [rowKey('10', day), rowKey('10', '2026-13-01'), rowKey('404', day)]) {
    expect(await server.store.getEntity({ table: directory, partitionKey: 'Sales', rowKey: key })).toBeNull();
  }
});

test('32 concurrent writers on one entity, through one server and through two: every acknowledged message counted once', async () => {
  const other = await startTestServer({ TABLEGRAPH_TABLE_PREFIX: server.config.tablePrefix, TABLEGRAPH_WORKER: 'off' });
  try {
    const day = '2026-11-24';
    // Hours 0..7, amounts 1..4: the entity does not exist when they start, so the first ones race to create it.
    const writers = Array.from({ length: 32 }, (_, i) => ({ via: i % 2 === 0 ? server : other, at: i % 8, by: (i % 4) + 1 }));
    // EGTs that failed on what the other server wrote: the entity created first there, or its ETag changed.
    const { expected, acknowledged, refusals, lost } = await runConcurrentIncrements([server, other], writers, 24, (w) => record(w.via, '10', day, w.at, w.by));
    // Only contention may refuse one (a write whose every attempt met a newer ETag), and then with CONFLICT.
    expect(refusals.every((c) => c === ErrorCode.CONFLICT)).toBe(true);
    expect(acknowledged).toBeGreaterThanOrEqual(16);
    const r = await server.query(STATS, { d: 'Sales', id: '10', day });
    expect(r.data.employee.messageStats.hourly).toEqual(expected);
    console.log(
      `data series: 32 concurrent increments over 2 servers, ${acknowledged} acknowledged, ${refusals.length} refused (CONFLICT), sum ${expected.reduce((a, b) => a + b, 0)} stored exactly; EGTs lost to the other server: ${JSON.stringify(lost)}`,
    );
    // Not a race in name only: the two write paths met, and the losers were read again and retried.
    expect(lost.ETagMismatch ?? 0).toBeGreaterThan(0);

    // One server alone: its committer takes the writes of one entity one EGT after another; none is refused.
    const solo = await Promise.all(Array.from({ length: 32 }, () => record(server, '10', '2026-11-25', 12, 1)));
    expect(solo.filter((x) => x.errors)).toEqual([]);
    expect((await server.query(STATS, { d: 'Sales', id: '10', day: '2026-11-25' })).data.employee.messageStats.hourly[12]).toBe(32);
  } finally {
    await other.close();
  }
  const report = await verifyDerived({ store: server.store, model: compileHr(server.config.tablePrefix).model });
  if (report.problems) console.log(formatVerifyReport(report));
  expect(report.problems).toBe(0);
});
