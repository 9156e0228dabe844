/**
 * `npm run explain`: the design of the shipped schema as structured data (`--json`: fields, summaries, references,
 * mutations — values a program can use, not display strings) and as text.
 */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { explainModel, formatExplanation, type Explanation } from '../../src/compiler/explanation';
import { readFileSync } from 'node:fs';
import { compileSchema } from '../../src/compiler/compile';
import { compileHr, DIRECTIVES_FILE, ROOT } from '../support/harness';

const explanation = explainModel(compileHr('').model);

test('--json prints the explanation as structured data on a clean stdout', () => {
  const stdout = execFileSync(process.execPath, [path.join(ROOT, 'node_modules/tsx/dist/cli.mjs'), 'src/cli/explain.ts', '--json'], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  const printed = JSON.parse(stdout) as Explanation;
  // Continuous backup is on by default: every mutation's EGT holds a change entity.
  expect(printed).toEqual(JSON.parse(JSON.stringify(explainModel(compileHr('').model, { capture: true }))));
  expect(printed.mutations.every((m) => m.egt.change)).toBe(true);
  expect(explanation.mutations.find((m) => m.coordinate === 'Mutation.createEmployeeReview')?.egt.change).toBe(false);
}, 60_000);

test('a field: its keys as templates with where each placeholder comes from', () => {
  const byLastName = explanation.fields.find((f) => f.coordinate === 'Department.employeesByLastName')!;
  expect(byLastName).toEqual({
    coordinate: 'Department.employeesByLastName',
    kind: 'range',
    table: 'Directory',
    tableTemplate: null,
    partitionKey: { template: '{id}', bindings: [{ placeholder: 'id', source: 'parent', name: 'id', optional: false }] },
    rowKey: {
      kind: 'prefix',
      template: 'lastname_{lastName}_',
      bindings: [{ placeholder: 'lastName', source: 'argument', name: 'lastName', optional: false }],
    },
    index: { name: 'byLastNameInDepartment', scope: 'intraPartition', projection: expect.arrayContaining(['firstName', 'email']) },
    through: null,
    waves: 1,
    maxWaves: 2,
    pageSize: { default: 20, max: 100 },
    consistency: 'strong',
    parts: null,
  });
  expect(explanation.fields.find((f) => f.coordinate === 'Query.employeeByEmail')!.consistency).toBe('eventual');
  expect(explanation.fields[0].coordinate.startsWith('Query.')).toBe(true);
});

test('a field reading a table per period: the template naming its table, and where its date comes from', () => {
  const attempts = explanation.fields.find((f) => f.coordinate === 'Employee.loginAttempts')!;
  expect(attempts).toMatchObject({
    table: 'LoginAttempts{at:yyyyMMdd}',
    tableTemplate: { template: 'LoginAttempts{day:yyyyMMdd}', bindings: [{ placeholder: 'day', source: 'argument', name: 'day', optional: false }] },
    partitionKey: { template: '{email}', bindings: [{ placeholder: 'email', source: 'parent', name: 'email', optional: false }] },
  });
  expect(formatExplanation(explanation)).toContain('range query on table per period "LoginAttempts{day:yyyyMMdd}" (day ← $day)');
});

test('summaries, references and mutations', () => {
  expect(explanation.summaries).toEqual([
    { coordinate: 'Department.employeeCount', of: 'Employee', via: 'Employee.department', kind: 'count', terms: [], keptIn: 'egt' },
    {
      coordinate: 'Department.payroll',
      of: 'Employee',
      via: 'Employee.department',
      kind: 'sum',
      terms: ['annualSalary', 'hourlyRate * typicalHours * 52'],
      keptIn: 'egt',
    },
  ]);
  expect(explanation.references).toEqual([
    { coordinate: 'DailyMessages.employee', target: 'Employee', fields: ['departmentId', 'employeeId'], optional: false, checkOnWrite: true },
    { coordinate: 'Department.head', target: 'Employee', fields: ['id', 'headEmployeeId'], optional: true, checkOnWrite: true },
    { coordinate: 'Employee.department', target: 'Department', fields: ['departmentId'], optional: false, checkOnWrite: true },
    { coordinate: 'EmployeeReview.employee', target: 'Employee', fields: ['departmentId', 'employeeId'], optional: false, checkOnWrite: true },
    { coordinate: 'ExpenseClaim.employee', target: 'Employee', fields: ['departmentId', 'employeeId'], optional: false, checkOnWrite: true },
    { coordinate: 'MessageStats.employee', target: 'Employee', fields: ['departmentId', 'employeeId'], optional: false, checkOnWrite: true },
  ]);
  const create = explanation.mutations.find((m) => m.coordinate === 'Mutation.createEmployee')!;
  expect(create).toMatchObject({
    entity: 'Employee',
    action: 'CREATE',
    egt: { indexes: ['byLastNameInDepartment'], summaries: ['Department.employeeCount', 'Department.payroll'], change: true },
    eventual: { indexes: ['byEmail', 'byLastName', 'byTitle'], summaries: [] },
    checksReferences: ['Employee.department'],
  });
  expect(create.inputFields).not.toContain('employeeCount');
  expect(explanation.mutations.find((m) => m.coordinate === 'Mutation.deleteEmployee')!.checksReferences).toEqual([]);
});

test('a wide entity (the guide\'s "Wide entities pattern"): its entities, read in one wave and written in one EGT', () => {
  expect(explanation.fields.find((f) => f.coordinate === 'Employee.dailyMessages')).toMatchObject({ kind: 'point', waves: 1, parts: 2 });
  expect(explanation.fields.find((f) => f.coordinate === 'Employee.messageStats')!.parts).toBeNull();
  expect(explanation.mutations.find((m) => m.coordinate === 'Mutation.recordDailyMessages')).toMatchObject({ action: 'INCREMENT', parts: 2 });
  const text = formatExplanation(explanation);
  expect(text).toContain('wide entity: 2 entities (RowKey, then RowKey + "_part2" …), one point query each, in one wave');
  expect(text).toContain('Mutation.recordDailyMessages: INCREMENT DailyMessages; EGT: DailyMessages (2 entities)');
});

test('the text rendering names every part', () => {
  const text = formatExplanation(explanation);
  expect(text).toContain('Query.employeeByEmail\n  point query on table EmployeesByEmail (eventually consistent)');
  expect(text).toContain('RowKey       "empid_{headEmployeeId:08}" (headEmployeeId ← parent.headEmployeeId (optional))');
  expect(text).toContain(
    'Department.payroll = sum over Employee of annualSalary + hourlyRate * typicalHours * 52, reached through Employee.department, kept in the EGT of every write',
  );
  expect(text).toContain('Employee.department → Department by departmentId, checked on write');
  expect(text).toContain('Mutation.deleteDepartment: DELETE Department; EGT: Department; eventually: index all');
  // A type a subscription follows: its writes' EGTs hold a change entity; the subscription, what servers read.
  expect(text).toContain('EGT: Employee, index byLastNameInDepartment, change entity, Department.employeeCount');
  expect(explanation.subscriptions).toEqual([
    { coordinate: 'Subscription.employeeChanged', entity: 'Employee', follows: 'partition', partitionKey: '{departmentId}', after: 'after' },
  ]);
  expect(text).toContain('Subscription.employeeChanged: the Employee entities of one partition, PartitionKey "{departmentId}"');
});

test('a @blob field (the guide\'s "Large entities pattern"): its container, and the mutations that upload it', () => {
  expect(explanation.blobs).toEqual([
    { coordinate: 'Employee.photoUrl', container: 'photos', maxBytes: 131072, contentTypes: ['image/jpeg', 'image/png', 'image/webp'], expiresInSeconds: 900 },
  ]);
  expect(explanation.mutations.find((m) => m.coordinate === 'Mutation.setEmployeePhoto')!.blobs).toEqual(['photoUrl']);
  expect(explanation.mutations.find((m) => m.coordinate === 'Mutation.deleteEmployee')!.blobs).toEqual([]);
  const text = formatExplanation(explanation);
  expect(text).toContain('Employee.photoUrl in container photos: uploads of at most 131072 bytes (image/jpeg, image/png, image/webp); read URLs valid 900 s');
  expect(text).toContain('before the EGT: a cleanup message (delayed), then the upload of photoUrl (one Put Blob each)');
});

test('hot partitions: an entity or index entity whose PartitionKey has no placeholder', () => {
  // The HR schema's list of departments is one partition; employees, by department, are not.
  expect(explanation.hotPartitions).toEqual([
    {
      coordinate: 'Department@index(all)',
      table: 'Departments',
      partitionKey: 'departments',
      why: 'every Department has its index entity here: each create, delete and change of its index keys writes it',
    },
  ]);
  expect(formatExplanation(explanation)).toMatch(
    /^Hot partitions .*2,000 entities\/s.*\n {2}Department@index\(all\): table Departments, PartitionKey "departments"/,
  );
});

test("a summary of a summary is listed as kept eventually by every mutation that changes it: the charges' too", () => {
  const sdl = `
type Account @entity(table: "Ledger", partitionKey: "acct_{account}", rowKey: "account") {
  account: ID!
  balance: Decimal! @summary(of: "Bill", via: "payer", sum: ["due"])
}
type Bill @entity(table: "Ledger", partitionKey: "acct_{account}", rowKey: "bill_{id}") {
  account: ID! id: ID!
  payer: Account! @point(partitionKey: "acct_{account}", rowKey: "account")
  due: Decimal! @summary(of: "Charge", via: "bill", sum: ["amount"])
}
type Charge @entity(table: "Ledger", partitionKey: "acct_{account}", rowKey: "charge_{billId}_{n}") {
  account: ID! billId: ID! n: ID! amount: Decimal
  bill: Bill! @point(partitionKey: "acct_{account}", rowKey: "bill_{billId}")
}
type Query { account(account: ID!): Account @point }
type Mutation {
  createBill(input: CreateBillInput!): BillPayload! @write(entity: "Bill", action: CREATE)
  createCharge(input: CreateChargeInput!): ChargePayload! @write(entity: "Charge", action: CREATE)
  updateCharge(input: UpdateChargeInput!): ChargePayload! @write(entity: "Charge", action: UPDATE)
}`;
  const directives = { name: 'schema/directives.graphql', body: readFileSync(DIRECTIVES_FILE, 'utf8') };
  const shop = explainModel(compileSchema([directives, { name: 'shop.graphql', body: sdl }]).model);
  const plan = (coordinate: string) => shop.mutations.find((m) => m.coordinate === coordinate)!;
  expect(plan('Mutation.createBill').eventual.summaries).toEqual(['Account.balance']);
  for (const charge of ['Mutation.createCharge', 'Mutation.updateCharge']) {
    expect(plan(charge).egt.summaries).toEqual(['Bill.due']);
    expect(plan(charge).eventual.summaries).toEqual(['Account.balance']);
  }
  expect(formatExplanation(shop)).toContain('Mutation.updateCharge: UPDATE Charge; EGT: Charge, Bill.due; eventually: Account.balance');
});
