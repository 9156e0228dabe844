/**
 * The guide's "Wide entities pattern" as the HR schema declares it: `DailyMessages.daily: [Int!]! @series(length: 366)`
 * is more than one entity's 252 properties, so each employee's year is stored as two entities in the department's
 * partition — read with two point queries in one wave, created and deleted in one EGT, and recorded by a merge of the
 * one entity holding the day, under that entity's ETag; with concurrent writers in one server and in two.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ErrorCode } from '../src/errors';
import { compileHr, startTestServer, type TestServer } from './support/harness';
import { runConcurrentIncrements } from './support/concurrent-increments';
import { verifyDerived, formatVerifyReport } from '../src/maintenance/verify-derived';
import { partOperations } from '../src/model/wide-entities';
import { checkStepOrder } from '../src/load/load-entities';
import type { TransactionOperation } from '../src/storage/storage-types';

let server: TestServer;
let directory: string;
beforeAll(async () => {
  server = await startTestServer();
  directory = `${server.config.tablePrefix}Directory`;
});
afterAll(async () => server?.close());

const RECORD = `mutation ($input: IncrementDailyMessagesInput!) { recordDailyMessages(input: $input) { dailyMessages { year daily etag } } }`;
const DELETE = `mutation ($input: DeleteDailyMessagesInput!) { deleteDailyMessages(input: $input) { dailyMessages { year } } }`;
const YEAR = `query ($d: ID!, $id: ID!, $year: Int!) { employee(departmentId: $d, id: $id) { dailyMessages(year: $year) { year daily etag } } }`;
const record = (s: TestServer, employeeId: string, year: number, at: number, by: number) =>
  s.query(RECORD, { input: { departmentId: 'Sales', employeeId, year, daily: { at, by } } });
const rowKey = (employeeId: string, year: number) => `dailymessages_${employeeId.padStart(8, '0')}_${year}`;
const part = (employeeId: string, year: number, n: 1 | 2) =>
  server.store.getEntity({ table: directory, partitionKey: 'Sales', rowKey: n === 1 ? rowKey(employeeId, year) : `${rowKey(employeeId, year)}_part2` });
const dailyOf = (properties: Record<string, unknown>) =>
  Object.keys(properties)
    .filter((p) => p.startsWith('daily'))
    .sort();

/** The EGTs a server sends while `run` runs: each one's operations, by kind and RowKey. */
async function egtsDuring(s: TestServer, run: () => Promise<unknown>): Promise<Array<Array<{ kind: string; rowKey: string; ifMatch: boolean }>>> {
  const sent: Array<Array<{ kind: string; rowKey: string; ifMatch: boolean }>> = [];
  const submit = s.store.submitTransaction.bind(s.store);
  const spy = jest.spyOn(s.store, 'submitTransaction').mockImplementation(async (table, operations, options) => {
    if (table === directory) {
      sent.push(
        operations.map((op) => ({
          kind: op.kind === 'update' ? `${op.mode}` : op.kind,
          rowKey: op.kind === 'delete' ? op.rowKey : op.entity.rowKey,
          ifMatch: 'ifMatch' in op && op.ifMatch !== undefined,
        })),
      );
    }
    return submit(table, operations, options);
  });
  try {
    await run();
  } finally {
    spy.mockRestore();
  }
  return sent;
}

/** Continuous backup's change entity, with the entity's image (every part), last in each write's EGT. */
const CHANGE_ENTITY = { kind: 'create', rowKey: expect.stringMatching(/^~change_/), ifMatch: false };

test('the compiler spreads 366 counts over two entities: the keys in each, 246 counts in the first and 120 in the second', () => {
  const entity = compileHr('').model.entities.get('DailyMessages')!;
  expect(entity.wide!.parts.map((p) => p.size)).toEqual([246, 120]);
  expect([...entity.wide!.parts[0]].slice(0, 2)).toEqual(['daily000', 'daily001']);
  expect([...entity.wide!.parts[1]][0]).toBe('daily246');
  expect([...entity.wide!.parts[1]].at(-1)).toBe('daily365');
});

test('load refuses a wide type with BAD_USER_INPUT (it writes one entity per row)', () => {
  expect(() => checkStepOrder(compileHr('').model, ['DailyMessages'])).toThrow(
    expect.objectContaining({ code: ErrorCode.BAD_USER_INPUT, message: expect.stringMatching(/wide entity/) }),
  );
});

test('two entities as the guide draws them: created together in one EGT, a later day merged alone into the entity holding it', async () => {
  const first = await egtsDuring(server, () => record(server, '10', 2026, 0, 5));
  expect(first).toEqual([
    [{ kind: 'create', rowKey: rowKey('10', 2026), ifMatch: false }, { kind: 'create', rowKey: `${rowKey('10', 2026)}_part2`, ifMatch: false }, CHANGE_ENTITY],
  ]);
  const [one, two] = [await part('10', 2026, 1), await part('10', 2026, 2)];
  expect(one?.properties).toMatchObject({ EntityType: 'DailyMessages', departmentId: 'Sales', employeeId: '10', year: 2026, daily000: 5 });
  expect(two?.properties).toMatchObject({ EntityType: 'DailyMessages', departmentId: 'Sales', employeeId: '10', year: 2026 });
  expect(dailyOf(one!.properties)).toEqual(['daily000']); // a 0 is not stored
  expect(dailyOf(two!.properties)).toEqual([]);

  // Day 300 is in the second entity: one merge of it, under its own ETag; the first is not written.
  const later = await egtsDuring(server, () => record(server, '10', 2026, 300, 7));
  expect(later).toEqual([[{ kind: 'merge', rowKey: `${rowKey('10', 2026)}_part2`, ifMatch: true }, CHANGE_ENTITY]]);
  expect((await part('10', 2026, 1))!.etag).toBe(one!.etag);
  expect((await part('10', 2026, 2))!.properties.daily300).toBe(7);
  // Day 245 is the first entity's last property, day 246 the second's first.
  expect((await egtsDuring(server, () => record(server, '10', 2026, 245, 1)))[0][0].rowKey).toBe(rowKey('10', 2026));
  expect((await egtsDuring(server, () => record(server, '10', 2026, 246, 1)))[0][0].rowKey).toBe(`${rowKey('10', 2026)}_part2`);
});

test('an INCREMENT adding to no day merges part 1 alone (its WriteId) and answers the year as it is', async () => {
  const before = (await server.query(YEAR, { d: 'Sales', id: '10', year: 2026 })).data.employee.dailyMessages;
  const sent = await egtsDuring(server, async () => {
    const r = await server.query(RECORD, { input: { departmentId: 'Sales', employeeId: '10', year: 2026 } });
    expect(r.errors).toBeUndefined();
    expect(r.data.recordDailyMessages.dailyMessages.daily).toEqual(before.daily);
  });
  expect(sent).toEqual([[{ kind: 'merge', rowKey: rowKey('10', 2026), ifMatch: true }, CHANGE_ENTITY]]);
});

test('read as one value: two point queries in one wave, 366 counts, the ETag of both entities', async () => {
  const r = await server.query(YEAR, { d: 'Sales', id: '10', year: 2026 });
  expect(r.errors).toBeUndefined();
  const expected = Array.from({ length: 366 }, (_, d) => ({ 0: 5, 300: 7, 245: 1, 246: 1 })[d] ?? 0);
  expect(r.data.employee.dailyMessages).toMatchObject({ year: 2026, daily: expected });
  const [one, two] = [await part('10', 2026, 1), await part('10', 2026, 2)];
  expect(r.data.employee.dailyMessages.etag).toBe(`${one!.etag} ${two!.etag}`);
  // The employee (1 point query), then its year's two entities side by side.
  expect(r.extensions.cost).toMatchObject({
    pointQueries: 3,
    rangeQueries: 0,
    roundTrips: 3,
    entitiesRead: 3,
    waves: 2,
    estimate: { storageCalls: 3, entitiesRead: 3 },
  });
  console.log(`wide entity: Employee.dailyMessages(year) costs ${JSON.stringify(r.extensions.cost)}`);

  const none = await server.query(YEAR, { d: 'Sales', id: '10', year: 2025 });
  expect(none.data.employee.dailyMessages).toBeNull();
  expect(none.extensions.cost).toMatchObject({ pointQueries: 3, waves: 2 });
});

test('bad input is refused with a code before anything is written', async () => {
  const cases: Array<[Record<string, unknown>, string]> = [
    [{ departmentId: 'Sales', employeeId: '10', year: 2030, daily: { at: 366, by: 1 } }, ErrorCode.BAD_USER_INPUT], // no day 366
    [{ departmentId: 'Sales', employeeId: '10', year: 2030, daily: { at: -1, by: 1 } }, ErrorCode.BAD_USER_INPUT],
    [{ departmentId: 'Sales', employeeId: '10', year: 2030, daily: { at: 300, by: -1 } }, ErrorCode.BAD_USER_INPUT], // below @constraint(min: 0)
    [{ departmentId: 'Sales', employeeId: '10', year: 0, daily: { at: 3, by: 1 } }, ErrorCode.BAD_USER_INPUT], // below @constraint(min: 1)
    [{ departmentId: 'Sales', employeeId: '404', year: 2030, daily: { at: 3, by: 1 } }, ErrorCode.NOT_FOUND], // no such employee
  ];
  for (const [input, code] of cases) {
    const r = await server.query(RECORD, { input });
    expect(r.errors?.[0].extensions.code).toBe(code);
  }
  for (const [id, year] of [
    ['10', 2030],
    ['10', 0],
    ['404', 2030],
  ] as const) {
    for (const n of [1, 2] as const) expect(await part(id, year, n)).toBeNull();
  }
});

test('delete: both entities in one EGT, each under its ETag; a stale ifMatch deletes nothing; the year can be recorded again', async () => {
  await record(server, '10', 2027, 10, 1);
  await record(server, '10', 2027, 310, 2);
  const { etag } = (await server.query(YEAR, { d: 'Sales', id: '10', year: 2027 })).data.employee.dailyMessages;
  await record(server, '10', 2027, 311, 1); // changes the second entity's ETag only
  const stale = await server.query(DELETE, { input: { departmentId: 'Sales', employeeId: '10', year: 2027, ifMatch: etag } });
  expect(stale.errors?.[0].extensions).toMatchObject({ code: ErrorCode.CONFLICT, reason: 'ETagMismatch' });
  expect(await part('10', 2027, 1)).not.toBeNull();

  const deleted = await egtsDuring(server, () => server.query(DELETE, { input: { departmentId: 'Sales', employeeId: '10', year: 2027 } }));
  expect(deleted).toEqual([
    [{ kind: 'delete', rowKey: rowKey('10', 2027), ifMatch: true }, { kind: 'delete', rowKey: `${rowKey('10', 2027)}_part2`, ifMatch: true }, CHANGE_ENTITY],
  ]);
  for (const n of [1, 2] as const) expect(await part('10', 2027, n)).toBeNull();
  expect((await server.query(YEAR, { d: 'Sales', id: '10', year: 2027 })).data.employee.dailyMessages).toBeNull();

  // Re-created from nothing: both entities again, holding only the new day.
  expect((await record(server, '10', 2027, 320, 4)).errors).toBeUndefined();
  const again = (await server.query(YEAR, { d: 'Sales', id: '10', year: 2027 })).data.employee.dailyMessages.daily as number[];
  expect(again.reduce((a, b) => a + b, 0)).toBe(4);
  expect(again[320]).toBe(4);
  expect(await part('10', 2027, 1)).not.toBeNull();
});

test('a part missing beside a stored one (a type that grew a part) reads as absent properties, and the next write creates it', async () => {
  await record(server, '10', 2028, 5, 2);
  await server.store.deleteEntity({ table: directory, partitionKey: 'Sales', rowKey: `${rowKey('10', 2028)}_part2` });
  const r = await server.query(YEAR, { d: 'Sales', id: '10', year: 2028 });
  expect(r.data.employee.dailyMessages.daily[5]).toBe(2);
  expect(r.data.employee.dailyMessages.etag).toMatch(/ -$/);
  const written = await egtsDuring(server, () => record(server, '10', 2028, 200 + 146, 3));
  expect(written).toEqual([[{ kind: 'create', rowKey: `${rowKey('10', 2028)}_part2`, ifMatch: false }, CHANGE_ENTITY]]);
  const after = (await server.query(YEAR, { d: 'Sales', id: '10', year: 2028 })).data.employee.dailyMessages.daily as number[];
  expect([after[5], after[346]]).toEqual([2, 3]);
});

test('a replace writes every part under its ETag and creates a part not stored (planned operations)', () => {
  const entity = compileHr('').model.entities.get('DailyMessages')!;
  const properties = {
    EntityType: { type: 'String' as const, value: 'DailyMessages' },
    year: { type: 'Int32' as const, value: 2026 },
    daily001: { type: 'Int32' as const, value: 1 },
    daily300: { type: 'Int32' as const, value: 2 },
  };
  const op: TransactionOperation = { kind: 'update', mode: 'replace', entity: { partitionKey: 'P', rowKey: 'R', properties }, ifMatch: 'e1 -' };
  const current = {
    partitionKey: 'P',
    rowKey: 'R',
    etag: 'e1 -',
    properties: {},
    parts: [{ partitionKey: 'P', rowKey: 'R', etag: 'e1', properties: {} }, null],
  };
  const { operations, parts } = partOperations(entity, op, op.entity, current);
  expect(parts).toEqual([0, 1]);
  expect(operations).toEqual([
    {
      kind: 'update',
      mode: 'replace',
      ifMatch: 'e1',
      entity: { partitionKey: 'P', rowKey: 'R', properties: { EntityType: properties.EntityType, year: properties.year, daily001: properties.daily001 } },
    },
    {
      kind: 'create',
      entity: { partitionKey: 'P', rowKey: 'R_part2', properties: { EntityType: properties.EntityType, year: properties.year, daily300: properties.daily300 } },
    },
  ]);
});

test('32 concurrent writers on one year, days in both entities, through one server and through two: every acknowledged message counted once', async () => {
  const other = await startTestServer({ TABLEGRAPH_TABLE_PREFIX: server.config.tablePrefix, TABLEGRAPH_WORKER: 'off' });
  try {
    const year = 2031;
    // Days in the first entity (0, 100) and in the second (250, 365): the year does not exist when they start, so
    // the first ones race to create both entities.
    const days = [0, 100, 250, 365];
    const writers = Array.from({ length: 32 }, (_, i) => ({ via: i % 2 === 0 ? server : other, at: days[i % 4], by: (i % 3) + 1 }));
    // EGTs that failed on what the other server wrote: the entity created first there, or its ETag changed.
    const { expected, acknowledged, refusals, lost } = await runConcurrentIncrements([server, other], writers, 366, (w) =>
      record(w.via, '10', year, w.at, w.by),
    );
    expect(refusals.every((c) => c === ErrorCode.CONFLICT)).toBe(true);
    expect(acknowledged).toBeGreaterThanOrEqual(16);
    const r = await server.query(YEAR, { d: 'Sales', id: '10', year });
    expect(r.data.employee.dailyMessages.daily).toEqual(expected);
    console.log(
      `wide entity: 32 concurrent increments of one year over 2 servers, ${acknowledged} acknowledged, ${refusals.length} refused (CONFLICT), sum ${expected.reduce((a, b) => a + b, 0)} stored exactly; EGTs lost to the other server: ${JSON.stringify(lost)}`,
    );
    expect((lost.ETagMismatch ?? 0) + (lost.EntityAlreadyExists ?? 0)).toBeGreaterThan(0);

    // One server alone, days in both entities: none refused, and each write planned on what the one before it wrote,
    // though they change different entities — the totals each answers are 1 … 32, the last one's ETag is current.
    const solo = await Promise.all(Array.from({ length: 32 }, (_, i) => record(server, '10', 2032, i % 2 === 0 ? 12 : 312, 1)));
    expect(solo.filter((x) => x.errors)).toEqual([]);
    const answered = solo.map((x) => x.data.recordDailyMessages.dailyMessages as { daily: number[]; etag: string });
    expect(answered.map((a) => a.daily[12] + a.daily[312]).sort((a, b) => a - b)).toEqual(Array.from({ length: 32 }, (_, i) => i + 1));
    const now = (await server.query(YEAR, { d: 'Sales', id: '10', year: 2032 })).data.employee.dailyMessages as { daily: number[]; etag: string };
    expect([now.daily[12], now.daily[312]]).toEqual([16, 16]);
    expect(answered.find((a) => a.daily[12] + a.daily[312] === 32)!.etag).toBe(now.etag);
  } finally {
    await other.close();
  }
  const report = await verifyDerived({ store: server.store, model: compileHr(server.config.tablePrefix).model });
  if (report.problems) console.log(formatVerifyReport(report));
  expect(report.problems).toBe(0);
});

describe('a schema of its own: 300 fields of one type, stored as two entities', () => {
  const FIELDS = Array.from({ length: 300 }, (_, i) => `f${String(i).padStart(3, '0')}`);
  let wide: TestServer;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'tablegraph-wide-'));
    writeFileSync(
      path.join(dir, 'wide.graphql'),
      `type Survey @entity(table: "Surveys", partitionKey: "{group}", rowKey: "survey_{id}") {\n  etag: String!\n  group: ID!\n  id: ID!\n${FIELDS.map((f) => `  ${f}: String`).join('\n')}\n}\n` +
        `type Query { survey(group: ID!, id: ID!): Survey @point }\n` +
        `type Mutation {\n  createSurvey(input: CreateSurveyInput!): SurveyPayload! @write(entity: "Survey", action: CREATE)\n  updateSurvey(input: UpdateSurveyInput!): SurveyPayload! @write(entity: "Survey", action: UPDATE)\n  deleteSurvey(input: DeleteSurveyInput!): SurveyPayload! @write(entity: "Survey", action: DELETE)\n}\n`,
    );
    wide = await startTestServer({ TABLEGRAPH_SCHEMA_DIR: dir });
  });
  afterAll(async () => {
    await wide?.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const SELECT = `survey { etag ${FIELDS.join(' ')} }`;
  const read = async (id: string) => (await wide.query(`query { survey(group: "g", id: "${id}") { etag ${FIELDS.join(' ')} } }`)).data.survey;

  test("a create of all 300 fields (over one entity's 252) is accepted, stored as 2 entities, and read back whole", async () => {
    const input = { group: 'g', id: '1', ...Object.fromEntries(FIELDS.map((f, i) => [f, `v${i}`])) };
    const r = await wide.query(`mutation ($input: CreateSurveyInput!) { createSurvey(input: $input) { ${SELECT} } }`, { input });
    expect(r.errors).toBeUndefined();
    const table = `${wide.config.tablePrefix}Surveys`;
    const [one, two] = await Promise.all(['survey_1', 'survey_1_part2'].map((rowKey) => wide.store.getEntity({ table, partitionKey: 'g', rowKey })));
    // 249 properties each at most besides the system ones: the keys, then 247 fields in the first, 53 in the second.
    expect([Object.keys(one!.properties).filter((p) => /^f\d+$/.test(p)).length, Object.keys(two!.properties).filter((p) => /^f\d+$/.test(p)).length]).toEqual([
      247, 53,
    ]);
    const back = await read('1');
    expect(FIELDS.every((f, i) => back[f] === `v${i}`)).toBe(true);
    expect(back.etag).toBe(`${one!.etag} ${two!.etag}`);
  });

  test('an update replaces both entities under their ETags; a stale ifMatch changes nothing', async () => {
    const before = await read('1');
    const r = await wide.query(`mutation ($input: UpdateSurveyInput!) { updateSurvey(input: $input) { ${SELECT} } }`, {
      input: { group: 'g', id: '1', ifMatch: before.etag, f000: 'first', f299: 'last' },
    });
    expect(r.errors).toBeUndefined();
    const after = await read('1');
    expect([after.f000, after.f150, after.f299]).toEqual(['first', 'v150', 'last']);
    expect(r.data.updateSurvey.survey.etag).toBe(after.etag);
    const stale = await wide.query(`mutation ($input: UpdateSurveyInput!) { updateSurvey(input: $input) { survey { etag } } }`, {
      input: { group: 'g', id: '1', ifMatch: before.etag, f001: 'lost' },
    });
    expect(stale.errors?.[0].extensions).toMatchObject({ code: ErrorCode.CONFLICT, reason: 'ETagMismatch' });
    expect((await read('1')).f001).toBe('v1');
  });

  test('a value over 64 KiB in the second entity is refused before anything is sent, naming the field', async () => {
    const r = await wide.query(`mutation ($input: CreateSurveyInput!) { createSurvey(input: $input) { survey { etag } } }`, {
      input: { group: 'g', id: '2', f299: 'x'.repeat(40_000) },
    });
    expect(r.errors?.[0].extensions).toMatchObject({ code: ErrorCode.LIMIT_EXCEEDED, property: 'f299' });
    expect(await read('2')).toBeNull();
  });
});
