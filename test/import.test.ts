/**
 * The Chicago import: the row parser (names, enums, malformed rows and their line numbers, a quote never closed),
 * importEmployees on a small file (re-imported after a rename, with verify clean; EGTs that time out sent again,
 * or given up on and reported), and the whole real file against the test run's Azurite, imported twice.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { TableClient } from '@azure/data-tables';
import { parse } from 'csv-parse/sync';
import { Decimal } from 'decimal.js';
import { parseChicagoFields, readChicagoCsv, splitName, type ChicagoRow } from '../examples/hr/import/chicago-csv';
import { importEmployees } from '../examples/hr/import/import-employees';
import { prefixUpperBound, renderKey, renderKeyPrefix } from '../src/model/key-template';
import type { EntityModel, Model } from '../src/model/types';
import type { StoredEntity } from '../src/storage/storage-types';
import { ErrorCode, TablegraphError } from '../src/errors';
import { handleMessage } from './support/handle-message';
import { expectConverged, hookedStore, hrWorld, run } from './support/fanout-fixtures';
import { CHICAGO_CSV, chicagoCsvText, compileHr, connectionString, testStore, uniquePrefix } from './support/harness';
import { employeeInput } from './support/write-fixtures';

const store = testStore();
const tmp = mkdtempSync(path.join(tmpdir(), 'tablegraph-import-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function hr(model: Model): { employee: EntityModel; department: EntityModel } {
  return { employee: model.entities.get('Employee')!, department: model.entities.get('Department')! };
}

async function scanAll(table: string): Promise<StoredEntity[]> {
  const all: StoredEntity[] = [];
  for await (const page of store.scan(table)) all.push(...page);
  return all;
}

/** Keys and properties (no ETag, no WriteId — each write has its own): what "the same entity" means across two imports. */
function content(e: StoredEntity | null): unknown {
  if (!e) return e;
  const { WriteId: _w, ...properties } = e.properties;
  return { partitionKey: e.partitionKey, rowKey: e.rowKey, properties };
}

async function collect(file: string): Promise<ChicagoRow[]> {
  const rows: ChicagoRow[] = [];
  for await (const r of readChicagoCsv(file)) rows.push(r);
  return rows;
}

describe('splitName', () => {
  it.each([
    ['AARON,  JEFFERY M', 'AARON', 'JEFFERY', 'M'],
    ['AARON,  KARINA', 'AARON', 'KARINA', null],
    ['ABAD JR,  VICENTE M', 'ABAD JR', 'VICENTE', 'M'],
    ['COLEMAN,  D NIQUEA L', 'COLEMAN', 'D NIQUEA', 'L'],
    ['ACOSTA,  MARIA DE LOS ANGELES', 'ACOSTA', 'MARIA DE LOS ANGELES', null],
    ['TSANG,  KA LING (PEGGY)', 'TSANG', 'KA LING (PEGGY)', null],
    ['WOMBLES,  J', 'WOMBLES', 'J', null],
    ['  SMITH ,JOHN   Q  ', 'SMITH', 'JOHN', 'Q'],
  ])('%j → %s / %s / %s', (name, lastName, firstName, middleInitial) => {
    expect(splitName(name)).toEqual({ lastName, firstName, middleInitial });
  });

  it.each([
    ['NO COMMA HERE', /no comma/],
    [',  JOHN', /no last name/],
    ['SMITH,   ', /no first name/],
  ])('%j is malformed', (name, reason) => {
    const r = splitName(name);
    expect('reason' in r && r.reason).toMatch(reason);
  });
});

describe('parseChicagoFields', () => {
  const row = (fp: string, sh: string, hours: string, salary: string, rate: string) =>
    parseChicagoFields(['DOE,  JANE Q', 'PARAMEDIC I/C', 'FIRE', fp, sh, hours, salary, rate], 7);

  it('maps F/P and Salary/Hourly case-insensitively and numbers to numbers or null', () => {
    expect(row('f', 'SALARY', '', '111444.00', '')).toEqual({
      employee: {
        id: 7,
        departmentId: 'FIRE',
        lastName: 'DOE',
        firstName: 'JANE',
        middleInitial: 'Q',
        title: 'PARAMEDIC I/C',
        fullOrPartTime: 'FULL_TIME',
        salaryOrHourly: 'SALARY',
        typicalHours: null,
        annualSalary: 111444,
        hourlyRate: null,
      },
    });
    expect(row(' P ', 'hourly', '20', '', '35.5')).toMatchObject({
      employee: { fullOrPartTime: 'PART_TIME', salaryOrHourly: 'HOURLY', typicalHours: 20, annualSalary: null, hourlyRate: 35.5 },
    });
  });

  it.each([
    [['X', 'Salary', '', '1', ''], /Full or Part-Time is "X"/],
    [['', 'Salary', '', '1', ''], /Full or Part-Time/],
    [['F', 'Weekly', '', '1', ''], /Salary or Hourly is "Weekly"/],
    [['F', 'Salary', '', '12abc', ''], /Annual Salary is "12abc"/],
    [['F', 'Salary', '', '-5', ''], /Annual Salary/],
    [['F', 'Hourly', '40', '', '1e3'], /Hourly Rate is "1e3"/],
    [['F', 'Salary', '', '', ''], /Salary row without Annual Salary/],
    [['P', 'Hourly', '', '', '12.5'], /Hourly row without/],
  ])('%j is malformed', (fields, reason) => {
    const r = row(...(fields as [string, string, string, string, string]));
    expect('reason' in r && r.reason).toMatch(reason);
  });

  it('rejects a wrong column count and an empty department', () => {
    expect(parseChicagoFields(['A,  B', 'T', 'FIRE', 'F', 'Salary', '', '1'], 1)).toEqual({ reason: 'expected 8 columns, got 7' });
    expect(parseChicagoFields(['A,  B', 'T', ' ', 'F', 'Salary', '', '1', ''], 1)).toEqual({ reason: 'Department is empty' });
  });
});

// Line numbers are physical lines (header = 1); ids are positions among the data rows, malformed ones included.
const SMALL_LINES = [
  'Name,Job Titles,Department,Full or Part-Time,Salary or Hourly,Typical Hours,Annual Salary,Hourly Rate', // 1
  '"AARON,  JEFFERY M",SERGEANT,POLICE,F,Salary,,111444.00,', // 2: id 1
  '"DOE,  JANE",FIREFIGHTER/PARAMEDIC,FIRE,p,hourly,20,,35.50', // 3: id 2
  '"NOCOMMA JOHN",CLERK,POLICE,F,Salary,,50000,', // 4: id 3, no comma
  '"SMITH,  ANN",CLERK,POLICE,F,Salary,,50000', // 5: id 4, 7 columns
  '', // 6: blank, not a row
  '"BROWN,  BOB",CLERK,,F,Salary,,1,', // 7: id 5, no department
  '"GREEN,  AL",CLERK,POLICE,X,Salary,,1,', // 8: id 6, unknown F/P
  '"MULTI,  LINE Q","TITLE', // 9: id 7, a quoted field over two lines
  'SECOND",POLICE,F,Salary,,60000.50,', // 10
  '"WHITE,  AL",CLERK,POLICE,F,Salary,,12abc,', // 11: id 8, unparsable number
  '"WOMBLES,  J",CLERK,POLICE,F,Salary,,1000,', // 12: id 9
  '"LAST,  ROW",CLERK,STREETS & SAN,F,Hourly,40,,10', // 13: id 10, no final line break
];
const SMALL_SKIPPED = [
  { line: 4, reason: expect.stringMatching(/no comma/) },
  { line: 5, reason: 'expected 8 columns, got 7' },
  { line: 7, reason: 'Department is empty' },
  { line: 8, reason: expect.stringMatching(/Full or Part-Time is "X"/) },
  { line: 11, reason: expect.stringMatching(/Annual Salary is "12abc"/) },
];

describe('readChicagoCsv', () => {
  it.each([
    ['LF', '\n'],
    ['CRLF', '\r\n'],
  ])('reports malformed rows with their physical line (%s)', async (_name, eol) => {
    const file = path.join(tmp, `small-${_name}.csv`);
    writeFileSync(file, SMALL_LINES.join(eol));
    const rows = await collect(file);
    expect(rows.map((r) => [r.id, r.line, r.employee ? 'ok' : 'bad'])).toEqual([
      [1, 2, 'ok'],
      [2, 3, 'ok'],
      [3, 4, 'bad'],
      [4, 5, 'bad'],
      [5, 7, 'bad'],
      [6, 8, 'bad'],
      [7, 9, 'ok'],
      [8, 11, 'bad'],
      [9, 12, 'ok'],
      [10, 13, 'ok'],
    ]);
    expect(rows[6].employee?.title).toBe(`TITLE${eol}SECOND`);
  });

  it('a quote opened and never closed costs its own row, reported at its line; the next row is read as it is', async () => {
    const file = path.join(tmp, 'stray-quote.csv');
    writeFileSync(
      file,
      [
        SMALL_LINES[0],
        '"AARON,  JEFFERY M",SERGEANT,POLICE,F,Salary,,111444.00,', // 2
        '"DOE,  JANE",CLERK,FIRE,F,Salary,,1,', // 3
        '"SMITH,  JOHN,CLERK,POLICE,F,Salary,,50000,', // 4: the quote before SMITH is never closed
        '"BROWN,  BOB",CLERK,POLICE,F,Salary,,2,', // 5: must not vanish
        '"LAST,  ONE",CLERK,POLICE,F,"Salary,,3,', // 6: never closed, at the end of the file
      ].join('\n'),
    );
    const rows = await collect(file);
    expect(rows.map((r) => [r.id, r.line, r.employee ? r.employee.lastName : r.reason])).toEqual([
      [1, 2, 'AARON'],
      [2, 3, 'DOE'],
      [3, 4, 'a quote opened on this line is never closed'],
      [4, 5, 'BROWN'],
      [5, 6, 'a quote opened on this line is never closed'],
    ]);
  });

  it('refuses a file whose header is not the Chicago one, naming line 1', async () => {
    const file = path.join(tmp, 'bad-header.csv');
    writeFileSync(file, 'Name,Title,Department\n"A,  B",T,D\n');
    await expect(collect(file)).rejects.toMatchObject({ code: 'BAD_USER_INPUT', details: { line: 1 } }); // the loader's own code for a bad header
  });

  it('refuses a missing file with BAD_USER_INPUT', async () => {
    await expect(collect(path.join(tmp, 'missing.csv'))).rejects.toMatchObject({ code: 'BAD_USER_INPUT' });
  });
});

describe('importEmployees on a small file', () => {
  const { model } = compileHr(uniquePrefix());
  const { employee, department } = hr(model);
  const file = path.join(tmp, 'small.csv');
  const departmentsTable = department.indexes.get('all')!.layout.table;

  it('loads the valid rows under their positional ids, skips the others with their lines, and is idempotent', async () => {
    writeFileSync(file, SMALL_LINES.join('\n'));
    const progress: number[] = [];
    const summary = await importEmployees({ store, model, file, concurrency: 2, onProgress: (p) => progress.push(p.entitiesWritten) });
    // Per employee: the entity, its index entity in the department, and by e-mail, last name and title across the
    // organisation (every row here has a title); per department: the entity and its departments-index entity, then
    // the merge of its summaries once its employees are written.
    expect(summary).toMatchObject({ rows: 10, imported: 5, skipped: SMALL_SKIPPED, departments: 3, entities: 5 * 5 + 3 * 2 + 3 });
    expect(progress[progress.length - 1]).toBe(34);

    const directory = await scanAll(employee.layout.table);
    const employeeKeys = directory.filter((e) => e.properties.EntityType === 'Employee').map((e) => `${e.partitionKey}/${e.rowKey}`);
    expect(employeeKeys.sort()).toEqual([
      'FIRE/empid_00000002',
      'POLICE/empid_00000001',
      'POLICE/empid_00000007',
      'POLICE/empid_00000009',
      'STREETS & SAN/empid_00000010',
    ]);
    const jane = directory.find((e) => e.rowKey === 'empid_00000002')!;
    expect(jane.properties).toMatchObject({
      EntityType: 'Employee',
      id: '2',
      departmentId: 'FIRE',
      lastName: 'DOE',
      firstName: 'JANE',
      title: 'FIREFIGHTER/PARAMEDIC',
      fullOrPartTime: 'PART_TIME',
      salaryOrHourly: 'HOURLY',
      typicalHours: 20,
      hourlyRate: '35.5',
    });
    // Empty cells are null fields: no property at all.
    expect(jane.properties).not.toHaveProperty('annualSalary');
    expect(jane.properties).not.toHaveProperty('middleInitial');
    const police = directory.find((e) => e.partitionKey === 'POLICE' && e.rowKey === 'department')!;
    expect(police.properties).toMatchObject({ employeeCount: 3, payroll: '172444.5' });
    const fire = directory.find((e) => e.partitionKey === 'FIRE' && e.rowKey === 'department')!;
    expect(fire.properties).toMatchObject({ employeeCount: 1, payroll: '36920' });
    expect((await scanAll(departmentsTable)).map((e) => e.rowKey).sort()).toEqual(['FIRE', 'POLICE', 'STREETS & SAN']);

    const again = await importEmployees({ store, model, file });
    // Everything is stored as the file gives it: nothing is written again, not even the departments' summaries.
    expect(again).toMatchObject({ rows: 10, imported: 5, entities: 0, transactions: 0, failed: [], staleDeleted: 0 });
    const directoryAgain = await scanAll(employee.layout.table);
    expect(directoryAgain.map(content)).toEqual(directory.map(content));
    expect(directoryAgain.find((e) => e.rowKey === 'empid_00000002')!.etag).toBe(jane.etag);
  });
});

describe('re-import after writes through the API', () => {
  const world = hrWorld(uniquePrefix());
  const file = path.join(tmp, 'reimport.csv');
  beforeAll(() => world.ensureTables());
  afterAll(() => world.dropTables());

  it('an employee renamed by a mutation and re-imported leaves no stale index entity; summaries count everyone', async () => {
    const { model, store: s, sender } = world;
    writeFileSync(file, SMALL_LINES.join('\n'));
    await importEmployees({ store: s, model, file });
    // AARON (POLICE, id 1) renamed by a mutation, reconciled; one more POLICE employee created through the API.
    await run(world, 'updateEmployee', { departmentId: 'POLICE', id: '1', lastName: 'AARON-SMITH' });
    await run(world, 'createEmployee', employeeInput('POLICE', 99, { annualSalary: '0.5' }));
    for (const m of sender.messages) await handleMessage(m, { model, store: s, settleMs: 0, holdMs: 0 });
    await expectConverged(s, model);

    const again = await importEmployees({ store: s, model, file });
    // The file's AARON again: his AARON-SMITH index entities (in the department, and across the organisation) go.
    expect(again.staleDeleted).toBe(2);
    const report = await expectConverged(s, model);
    expect(report.summaries.map((d) => [d.summary, d.holders, d.different.length])).toEqual([
      ['Department.employeeCount', 3, 0],
      ['Department.payroll', 3, 0],
    ]);
    const police = await s.getEntity({ table: `${world.prefix}Directory`, partitionKey: 'POLICE', rowKey: 'department' });
    expect(police?.properties).toMatchObject({ employeeCount: 4, payroll: '172445' });
  });
});

describe('EGTs that fail for want of an answer', () => {
  const { model } = compileHr(uniquePrefix());
  const file = path.join(tmp, 'retry.csv');
  const unavailable = () => new TablegraphError(ErrorCode.STORAGE_UNAVAILABLE, 'submitTransaction timed out (simulated)');
  beforeAll(async () => {
    writeFileSync(file, SMALL_LINES.join('\n'));
    for (const t of model.tables) await store.ensureTable(t);
  });

  it('are sent again with back-off, and the import completes', async () => {
    let failures = 0;
    const flaky = hookedStore(store, { before: { submitTransaction: () => void (failures++ < 2 && fail(unavailable())) } });
    const summary = await importEmployees({ store: flaky, model, file, backoffMs: 10 });
    expect(summary).toMatchObject({ imported: 5, failed: [], retries: 2, entities: 34 });
  });

  it('are given up on after their attempts: their rows are reported, the others imported, the summaries recounted', async () => {
    const directory = `${model.entities.get('Employee')!.layout.table}`;
    const down = hookedStore(store, {
      before: {
        submitTransaction: (args) => {
          const [table, ops] = args as [string, Array<{ entity?: { partitionKey: string } }>];
          if (table === directory && ops[0].entity?.partitionKey === 'FIRE') fail(unavailable());
        },
      },
    });
    await store.deleteEntity({ table: directory, partitionKey: 'FIRE', rowKey: 'empid_00000002' }).catch(() => undefined);
    const summary = await importEmployees({ store: down, model, file, attempts: 3, backoffMs: 5 });
    expect(summary.failed).toEqual([{ lines: [3], table: directory, partitionKey: 'FIRE', error: expect.stringMatching(/timed out/) }]);
    expect(summary.retries).toBe(2);
    expect(await store.getEntity({ table: directory, partitionKey: 'FIRE', rowKey: 'empid_00000002' })).toBeNull();
    expect((await store.getEntity({ table: directory, partitionKey: 'POLICE', rowKey: 'empid_00000001' }))?.properties.lastName).toBe('AARON');
    // FIRE's employee never arrived: its department counts what is stored, not what the file held.
    expect((await store.getEntity({ table: directory, partitionKey: 'FIRE', rowKey: 'department' }))?.properties).toMatchObject({
      employeeCount: 0,
      payroll: '0',
    });
  });
});

function fail(e: Error): never {
  throw e;
}

/** What the test expects of the real file, computed here without the importer's code. */
function chicagoFacts() {
  const rows = parse(chicagoCsvText(), { from_line: 2 }) as string[][];
  const police = rows.filter((r) => r[2] === 'POLICE');
  // Exact, in decimal.js directly (not the importer's arithmetic): rate × hours × 52 for hourly staff.
  const pay = (r: string[]) => (r[4] === 'Salary' ? new Decimal(r[6]) : new Decimal(r[7]).times(r[5]).times(52));
  const slashAt = rows.findIndex((r) => r[1].includes('/'));
  return {
    rows: rows.length,
    departments: new Set(rows.map((r) => r[2])).size,
    policeCount: police.length,
    policePayroll: police.reduce((s, r) => s.plus(pay(r)), new Decimal(0)).toFixed(),
    williamsInPolice: police.filter((r) => r[0].startsWith('WILLIAMS,')).length,
    slash: { id: slashAt + 1, department: rows[slashAt][2], title: rows[slashAt][1] },
    /** The department of employee id, at index id - 1. */
    departmentOf: rows.map((r) => r[2]),
  };
}

describe('importEmployees on the whole Chicago file', () => {
  const { model } = compileHr(uniquePrefix());
  const { employee, department } = hr(model);
  const byLastName = employee.indexes.get('byLastNameInDepartment')!;
  const departmentsTable = department.indexes.get('all')!.layout.table;
  const facts = chicagoFacts();
  const employeeAddress = (departmentId: string, id: number) => ({
    table: employee.layout.table,
    partitionKey: departmentId,
    rowKey: renderKey(employee.layout.rowKey, { id }),
  });
  const williamsRange = () => {
    const prefix = renderKeyPrefix(byLastName.layout.rowKey, { lastName: 'WILLIAMS' });
    const q = { table: byLastName.layout.table, partitionKey: 'POLICE', rowKeyFrom: prefix, rowKeyTo: prefixUpperBound(prefix), limit: 1000 };
    return store.queryRange(q);
  };

  it('imports every row, typed, indexed and summarised; a second import changes no entity', async () => {
    const started = Date.now();
    const summary = await importEmployees({ store, model, file: CHICAGO_CSV, concurrency: 8 });
    expect(facts.rows).toBe(32928);
    expect(summary).toMatchObject({ rows: 32928, imported: 32928, skipped: [], departments: facts.departments });
    // Every Chicago employee has a title, so every one has all five entities (see the small-file test).
    expect(summary.entities).toBe(32928 * 5 + facts.departments * 3);

    const first = await store.getEntity(employeeAddress('POLICE', 1));
    expect(first?.properties).toMatchObject({
      lastName: 'AARON',
      firstName: 'JEFFERY',
      middleInitial: 'M',
      departmentId: 'POLICE',
      annualSalary: '111444',
      email: 'jeffery.aaron@cityofchicago.example',
    });
    // Money is a Decimal: exact decimal text (Edm.String), never a Double that cannot hold 0.1.
    let body = '';
    const raw = TableClient.fromConnectionString(connectionString(), employee.layout.table, { allowInsecureConnection: true });
    await raw.getEntity('POLICE', 'empid_00000001', { disableTypeConversion: true, onResponse: (r) => void (body = r.bodyAsText ?? '') });
    expect(body).toContain('"annualSalary":"111444"');

    const slash = await store.getEntity(employeeAddress(facts.slash.department, facts.slash.id));
    expect(slash?.properties.title).toBe(facts.slash.title);
    expect(facts.slash.title).toContain('/');

    const policeAddress = { table: department.layout.table, partitionKey: 'POLICE', rowKey: 'department' };
    const police = await store.getEntity(policeAddress);
    expect(police?.properties).toMatchObject({ name: 'POLICE', employeeCount: 13590, payroll: facts.policePayroll });
    expect(facts.policeCount).toBe(13590);

    const williams = await williamsRange();
    expect(williams.entities).toHaveLength(facts.williamsInPolice);
    expect(facts.williamsInPolice).toBeGreaterThan(0);
    expect(williams.entities[0].properties).toMatchObject({ lastName: 'WILLIAMS', departmentId: 'POLICE', EntityType: 'Employee.byLastNameInDepartment' });

    // The sample compared across the two imports: every 97th employee, the WILLIAMS index entities, all departments.
    const sample = async () => {
      const picked: unknown[] = [];
      for (let id = 1; id <= 32928; id += 97) {
        picked.push(content(await store.getEntity(employeeAddress(facts.departmentOf[id - 1], id))));
      }
      picked.push((await williamsRange()).entities.map(content));
      const departments = await scanAll(departmentsTable);
      for (const d of departments) picked.push(content(await store.getEntity({ ...policeAddress, partitionKey: String(d.properties.id) })));
      picked.push(departments.map(content));
      return picked;
    };
    const counts = async () => Promise.all(model.tables.map(async (t) => (await scanAll(t)).length));
    const before = await sample();
    const countsBefore = await counts();
    expect(countsBefore).toEqual(
      // The Directory: every employee, its intra-partition index entity and the departments; each organisation-wide
      // index table: one per employee; the archive: nothing (the import archives no one).
      model.tables.map((t) =>
        t === departmentsTable
          ? facts.departments
          : t === employee.layout.table
            ? 32928 * 2 + facts.departments
            : t === model.entities.get('ArchivedEmployee')!.layout.table
              ? 0
              : 32928,
      ),
    );
    // One e-mail index entity per employee: the derived addresses are unique across the file.
    const emails = await scanAll(employee.indexes.get('byEmail')!.layout.table);
    expect(new Set(emails.map((e) => e.properties.email)).size).toBe(32928);
    const firstSeconds = (Date.now() - started) / 1000;

    const again = await importEmployees({ store, model, file: CHICAGO_CSV, concurrency: 8 });
    expect(again).toMatchObject({ rows: 32928, imported: 32928, entities: 0, transactions: 0 });
    expect(await sample()).toEqual(before);
    expect(await counts()).toEqual(countsBefore);
    expect((await store.getEntity(policeAddress))?.etag).toBe(police?.etag);
    // For the report: how long each import took (not asserted).
    console.log(
      `whole-file import: ${summary.seconds.toFixed(1)} s, re-import ${again.seconds.toFixed(1)} s, test ${(Date.now() - started) / 1000} s (first part ${firstSeconds} s)`,
    );
  }, 600_000);
});
