/**
 * The guide's "High volume delete pattern", as the HR schema declares it: login attempts in a table per UTC day
 * (`@entity(table: "LoginAttempts{at:yyyyMMdd}")`), made by the day's first attempt, read by one range query in the
 * day's table, and dropped a day at a time by `npm run expire` — one storage operation per table.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ErrorCode } from '../src/errors';
import { expireTables } from '../src/maintenance/expire-tables';
import { compileHr, connectionString, startTestServer, type TestServer } from './support/harness';
import { killCommandProcesses, runCommand } from './support/processes';

let server: TestServer;
let family: string;
let dataDir: string;
beforeAll(async () => {
  server = await startTestServer();
  family = `${server.config.tablePrefix}LoginAttempts`;
  dataDir = mkdtempSync(path.join(os.tmpdir(), 'tablegraph-expire-'));
});
afterAll(async () => {
  killCommandProcesses();
  await server?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const RECORD = `mutation ($input: CreateLoginAttemptInput!) { recordLoginAttempt(input: $input) { loginAttempt { email at succeeded } } }`;
const EMPLOYEE_ATTEMPTS = `query ($day: DateTime!) { employee(departmentId: "Sales", id: "10") { loginAttempts(day: $day) { edges { node { at succeeded ipAddress } } } } }`;
const ADDRESS_ATTEMPTS = `query ($email: String!, $day: DateTime!) { loginAttempts(email: $email, day: $day, first: 10) { edges { node { email at } } } }`;
const KEN = 'kenk@contoso.com'; // an employee of the seed (Sales, id 10)

/** The UTC day `daysAgo` days before now: its ISO date and the table that holds it (known once the server is up). */
function day(daysAgo: number): { iso: string; table: string } {
  const iso = new Date(Date.now() - daysAgo * 86_400_000).toISOString().slice(0, 10);
  return {
    iso,
    get table() {
      return `${family}${iso.replace(/-/g, '')}`;
    },
  };
}

async function record(email: string, at: string, succeeded = false, ipAddress = '10.0.0.1', on: TestServer = server) {
  return on.query(RECORD, { input: { email, at, succeeded, ipAddress } });
}

/** The guide's RowKey suffix of a date: `string.Format("{0:D19}", DateTime.MaxValue.Ticks - date.Ticks)`, from .NET's constants. */
function dotNetInvertedTicks(iso: string): string {
  const ticks = 621355968000000000n + BigInt(Date.parse(iso)) * 10000n;
  return (3155378975999999999n - ticks).toString().padStart(19, '0');
}

describe('a table per day', () => {
  const d = day(2);
  beforeAll(async () => {
    for (const [at, ok] of [
      [`${d.iso}T08:00:00.000Z`, false],
      [`${d.iso}T08:00:05.000Z`, true],
      [`${d.iso}T23:59:59.999Z`, false],
    ] as const) {
      const r = await record(KEN, at, ok);
      expect(r.errors).toBeUndefined();
    }
    expect((await record(KEN, `${day(1).iso}T00:00:00.000Z`)).errors).toBeUndefined(); // the next day, its own table
  });

  test("made by the day's first attempt; PartitionKey the address, RowKey attempt_ and the guide's inverted ticks", async () => {
    const tables = await server.store.listTables(family);
    expect(tables).toEqual(expect.arrayContaining([d.table, day(1).table]));
    const at = `${d.iso}T08:00:05.000Z`;
    const stored = await server.store.getEntity({ table: d.table, partitionKey: KEN, rowKey: `attempt_${dotNetInvertedTicks(at)}` });
    expect(stored?.properties).toMatchObject({ EntityType: 'LoginAttempt', email: KEN, succeeded: true, ipAddress: '10.0.0.1' });
    expect((stored?.properties.at as Date).toISOString()).toBe(at);
  });

  test("Employee.loginAttempts(day): that day's attempts newest first — one point query and one range query in the day's table", async () => {
    const r = await server.query(EMPLOYEE_ATTEMPTS, { day: d.iso });
    expect(r.errors).toBeUndefined();
    expect(r.data.employee.loginAttempts.edges.map((e: any) => e.node)).toEqual([
      { at: `${d.iso}T23:59:59.999Z`, succeeded: false, ipAddress: '10.0.0.1' },
      { at: `${d.iso}T08:00:05.000Z`, succeeded: true, ipAddress: '10.0.0.1' },
      { at: `${d.iso}T08:00:00.000Z`, succeeded: false, ipAddress: '10.0.0.1' },
    ]);
    expect(r.extensions.cost).toMatchObject({ pointQueries: 1, rangeQueries: 1, roundTrips: 2, entitiesRead: 4 });
  });

  test('a day without a table reads as empty, for the one range query it cost', async () => {
    const r = await server.query(EMPLOYEE_ATTEMPTS, { day: day(40).iso });
    expect(r.errors).toBeUndefined();
    expect(r.data.employee.loginAttempts.edges).toEqual([]);
    expect(r.extensions.cost).toMatchObject({ pointQueries: 1, rangeQueries: 1, entitiesRead: 1 });
    expect(await server.store.listTables(day(40).table)).toEqual([]); // reading made no table
  });

  test('Query.loginAttempts: an address no employee holds is recorded and read too', async () => {
    expect((await record('mallory@example.test', `${d.iso}T03:00:00.000Z`)).errors).toBeUndefined();
    const r = await server.query(ADDRESS_ATTEMPTS, { email: 'mallory@example.test', day: d.iso });
    expect(r.data.loginAttempts.edges.map((e: any) => e.node)).toEqual([{ email: 'mallory@example.test', at: `${d.iso}T03:00:00.000Z` }]);
    expect(r.extensions.cost).toMatchObject({ pointQueries: 0, rangeQueries: 1, roundTrips: 1 });
  });

  test('bad input is refused with a code, nothing written and no table made', async () => {
    const fresh = day(9);
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ email: KEN, at: '2026-02-30T10:00:00Z', succeeded: true }, ErrorCode.BAD_USER_INPUT], // not a calendar day
      [{ email: KEN, at: `${fresh.iso}T10:00:00Z`, succeeded: true, ipAddress: 'not an address' }, ErrorCode.BAD_USER_INPUT], // @constraint(pattern)
      [{ email: '', at: `${fresh.iso}T10:00:00Z`, succeeded: true }, ErrorCode.BAD_USER_INPUT], // @constraint(minLength: 1)
      [{ email: KEN, at: '0000-12-31T10:00:00Z', succeeded: true }, ErrorCode.BAD_USER_INPUT], // before year 1: no table name, no ticks
    ];
    for (const [input, code] of cases) {
      const r = await server.query(RECORD, { input });
      expect({ input, code: r.errors?.[0]?.extensions?.code }).toEqual({ input, code });
    }
    expect(await server.store.listTables(fresh.table)).toEqual([]);
    const again = await record(KEN, `${d.iso}T08:00:05.000Z`, true); // the same address and millisecond
    expect(again.errors?.[0]).toMatchObject({ extensions: { code: ErrorCode.CONFLICT } });
  });

  test('start-up made no table of the template itself: each is a day', async () => {
    expect((await server.store.listTables(family)).every((t) => /^\d{8}$/.test(t.slice(family.length)))).toBe(true);
  });
});

test("a new day's first attempts, 40 at once from two servers: every one recorded, the table made once", async () => {
  const other = await startTestServer({ TABLEGRAPH_TABLE_PREFIX: server.config.tablePrefix, TABLEGRAPH_WORKER: 'off' });
  try {
    const d = day(3);
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        record(`user${i % 8}@example.test`, `${d.iso}T12:00:00.${String(i).padStart(3, '0')}Z`, i % 2 === 0, '10.0.0.1', i % 2 ? other : server),
      ),
    );
    expect(results.filter((r) => r.errors).map((r) => r.errors)).toEqual([]);
    let total = 0;
    for (let u = 0; u < 8; u++) {
      const r = await server.query(ADDRESS_ATTEMPTS, { email: `user${u}@example.test`, day: d.iso });
      const ats = r.data.loginAttempts.edges.map((e: any) => e.node.at);
      expect(ats).toEqual([...ats].sort().reverse()); // newest first
      total += ats.length;
    }
    expect(total).toBe(40);
    expect(await server.store.listTables(d.table)).toEqual([d.table]);
  } finally {
    await other.close();
  }
});

describe('expire: a day dropped in one storage operation', () => {
  const [old, older, recent, yesterday] = [day(61), day(70), day(59), day(1)];
  beforeAll(async () => {
    for (const d of [old, older, recent, yesterday]) {
      for (const s of ['01', '02', '03']) expect((await record(KEN, `${d.iso}T06:00:${s}.000Z`)).errors).toBeUndefined();
    }
  });

  test('a dry run lists the days older than 60 days, one listing and no delete', async () => {
    const deletes = jest.spyOn(server.store, 'deleteTable');
    const listings = jest.spyOn(server.store, 'listTables');
    try {
      const report = await expireTables({
        store: server.store,
        entity: compileHr(server.config.tablePrefix).model.entities.get('LoginAttempt')!,
        cutoff: new Date(Date.now() - 60 * 86_400_000),
        dryRun: true,
      });
      expect(report.expired).toEqual([older.table, old.table]);
      expect(report.kept).toEqual(expect.arrayContaining([recent.table, yesterday.table]));
      expect(deletes).not.toHaveBeenCalled();
      expect(listings).toHaveBeenCalledTimes(1);
    } finally {
      jest.restoreAllMocks();
    }
  });

  test('npm run expire -- --type LoginAttempt --older-than 60d deletes those tables and keeps the rest', async () => {
    const env = { AZURE_STORAGE_CONNECTION_STRING: connectionString(), TABLEGRAPH_TABLE_PREFIX: server.config.tablePrefix, LOG_LEVEL: 'info' };
    const run = runCommand('expire', ['--type', 'LoginAttempt', '--older-than', '60d'], dataDir, env);
    expect(await run.exited).toEqual({ code: 0, signal: null });
    expect(run.output()).toContain(`deleted 2 table(s) of LoginAttempt`);
    expect(run.output()).toContain(older.table);
    const left = await server.store.listTables(family);
    expect(left).not.toContain(old.table);
    expect(left).not.toContain(older.table);
    expect(left).toEqual(expect.arrayContaining([recent.table, yesterday.table]));
    const gone = await server.query(EMPLOYEE_ATTEMPTS, { day: old.iso });
    expect(gone.data.employee.loginAttempts.edges).toEqual([]);
    const kept = await server.query(EMPLOYEE_ATTEMPTS, { day: recent.iso });
    expect(kept.data.employee.loginAttempts.edges).toHaveLength(3);
  });

  test('a write to a dropped day in a server that made its table: the table is made again, the write kept', async () => {
    const forgotten = jest.spyOn(server.store, 'forgetTable');
    const r = await record(KEN, `${old.iso}T07:00:00.000Z`);
    expect(r.errors).toBeUndefined();
    expect(forgotten).toHaveBeenCalledWith(old.table); // it met the table missing, as it was told it existed
    forgotten.mockRestore();
    const back = await server.query(EMPLOYEE_ATTEMPTS, { day: old.iso });
    expect(back.data.employee.loginAttempts.edges).toEqual([{ node: { at: `${old.iso}T07:00:00.000Z`, succeeded: false, ipAddress: '10.0.0.1' } }]);
  });

  test('a type in one table is refused with its code; a bad duration by the command line', async () => {
    const env = { AZURE_STORAGE_CONNECTION_STRING: connectionString(), TABLEGRAPH_TABLE_PREFIX: server.config.tablePrefix };
    const employee = runCommand('expire', ['--type', 'Employee', '--older-than', '60d'], dataDir, env);
    expect((await employee.exited).code).toBe(1);
    expect(employee.output()).toMatch(/BAD_USER_INPUT[\s\S]*Employee lives in one table/);
    const duration = runCommand('expire', ['--type', 'LoginAttempt', '--older-than', 'soon'], dataDir, env);
    expect((await duration.exited).code).toBe(1);
    expect(duration.output()).toContain('a duration of at least an hour');
  });
});
