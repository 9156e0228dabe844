/**
 * The Chicago import: the row parser (names, enums, malformed rows and their line numbers, a quote never closed),
 * importEmployees on a small file (re-imported after a rename, with verify clean; EGTs that time out sent again,
 * or given up on and reported). The whole real file is test/chicago-import.test.ts.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseChicagoFields, readChicagoCsv, splitName, type ChicagoRow } from '../examples/hr/import/chicago-csv';
import { importEmployees } from '../examples/hr/import/import-employees';
import type { EntityModel, Model } from '../src/model/types';
import type { StoredEntity } from '../src/storage/storage-types';
import { ErrorCode, TablegraphError } from '../src/errors';
import { handleMessage } from './support/handle-message';
import { expectConverged, hookedStore, hrWorld, run } from './support/fanout-fixtures';
import { compileHr, testStore, uniquePrefix } from './support/harness';
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
