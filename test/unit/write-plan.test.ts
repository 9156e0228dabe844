/**
 * The write planner, pure (no storage): for each mutation of Employee and Department, the exact EGT it plans
 * (operation kinds, RowKeys, If-Match ETags, summary values), the fan-out message it announces and the unique
 * keys it reserves ("Entity Group Transactions", "Intra-partition secondary index pattern", "Inter-partition
 * secondary index pattern", "Eventually consistent transactions pattern", "Merge or replace"). Each write is
 * planned as a group of one (group-plan.ts), which adds the summary holders' merges after its own operations.
 */
import { ErrorCode, isTablegraphError, type TablegraphError } from '../../src/errors';
import type { Model, WriteModel } from '../../src/model/types';
import type { EntityAddress, StoredEntity, TransactionOperation } from '../../src/storage/storage-types';
import { addressKey } from '../../src/storage/address-key';
import { planGroup } from '../../src/write/group-plan';
import { CHANGE_ENTITY_TYPE, CHANGE_ROW_KEY_PREFIX, changeTime } from '../../src/model/change-log';
import type { ReadState, Values, WritePlan } from '../../src/write/plan-types';
import { renderKey } from '../../src/model/key-template';
import { compileHr } from '../support/harness';
import { employeeInput, indexAddress, storedEntity } from '../support/write-fixtures';

const PREFIX = 'wp';
const DIRECTORY = `${PREFIX}Directory`;
const { model }: { model: Model } = compileHr(PREFIX);

const DEPT_ETAG = 'W/"datetime\'dept-1\'"';
const EMP_ETAG = 'W/"datetime\'emp-1\'"';
const EMAIL = 'e12.eng@example.test';

const write = (field: string): WriteModel => model.writes.get(`Mutation.${field}`)!;
const departmentAddress = (id = 'ENG'): EntityAddress => ({ table: DIRECTORY, partitionKey: id, rowKey: 'department' });

const WRITE_ID = '00000000-0000-4000-8000-000000000001';

/** The ENG department as read: `count` employees, `payroll` USD. */
function department(count: number, payroll: number, etag = DEPT_ETAG): StoredEntity {
  return storedEntity(model, 'Department', { id: 'ENG', name: 'Engineering', employeeCount: count, payroll }, etag, 'dept-write');
}

/** Employee 12 of ENG as read, written by `writeId`. */
function employee(overrides: Record<string, unknown> = {}, writeId = 'earlier-write'): StoredEntity {
  return storedEntity(model, 'Employee', employeeInput('ENG', 12, overrides), EMP_ETAG, writeId);
}

/**
 * Plans one write as a group of one: its plan, with `operations` the whole EGT (its own, then summary merges) but
 * the change entity the HR schema's `employeeChanged` adds to employee writes (tested on its own below).
 * @throws the TablegraphError that refused it
 */
function planWrite(_model: Model, w: WriteModel, input: Values, read: ReadState): WritePlan {
  const { operations, ...plan } = planWithChanges(w, input, read);
  return { ...plan, operations: operations.filter((op) => op.kind === 'delete' || !op.entity.rowKey.startsWith(CHANGE_ROW_KEY_PREFIX)) };
}

function planWithChanges(w: WriteModel, input: Values, read: ReadState): WritePlan {
  const entities = new Map<string, StoredEntity | null>();
  try {
    const { layout } = w.entity;
    entities.set(
      addressKey({ table: layout.table, partitionKey: renderKey(layout.partitionKey, input), rowKey: renderKey(layout.rowKey, input) }),
      read.current,
    );
  } catch {
    // a key that cannot be rendered: the planner refuses the write with BAD_USER_INPUT
  }
  const group = planGroup(
    model,
    [{ write: w, input, writeId: WRITE_ID }],
    { entities, holders: read.holders, references: new Map(read.references ?? []) },
    { target: 'azurite', table: DIRECTORY },
  );
  if (group.refused.length > 0) throw group.refused[0].error;
  return { ...group.planned[0].plan, operations: group.operations };
}

function state(current: StoredEntity | null, holder: StoredEntity | null = department(5, 300000)): ReadState {
  return { current, holders: new Map([[addressKey(departmentAddress()), holder]]) };
}

/** `kind rowKey` of each operation, e.g. `create empid_00000012`. */
const shape = (ops: TransactionOperation[]) =>
  ops.map((op) => `${op.kind}${op.kind === 'update' ? `-${op.mode}` : ''} ${op.kind === 'delete' ? op.rowKey : op.entity.rowKey}`);
const ifMatches = (ops: TransactionOperation[]) => ops.map((op) => ('ifMatch' in op ? op.ifMatch : undefined));
const show = (a: EntityAddress) => `${a.table.slice(PREFIX.length)} ${a.partitionKey} ${a.rowKey}`;
const candidates = (plan: WritePlan) => (plan.fanout?.candidates ?? []).map(show).sort();
/** The index entity key of an Employee index for these values (rendered by the model's key templates), shown. */
const at = (index: string, values: Record<string, unknown>) => show(indexAddress(model, 'Employee', index, { departmentId: 'ENG', id: '12', ...values }));
const EMAIL_KEY = at('byEmail', { email: EMAIL });
const SMITH_KEY = at('byLastName', { lastName: 'SMITH' });
const ENGINEER_KEY = at('byTitle', { title: 'ENGINEER' });
const summaryOf = (op: TransactionOperation) => (op.kind === 'update' && op.mode === 'merge' ? op.entity.properties : undefined);

function plannedError(run: () => unknown): TablegraphError {
  try {
    run();
  } catch (e) {
    if (isTablegraphError(e)) return e;
    throw e;
  }
  throw new Error('expected the planner to refuse');
}

describe('Employee', () => {
  test('a type a subscription follows: each write adds its change entity to the EGT, after its own operations', () => {
    const at = Date.now();
    const created = planWithChanges(write('createEmployee'), employeeInput('ENG', 12), state(null));
    expect(shape(created.operations).map((s) => s.replace(/_\d{19}_.*/, '_…'))).toEqual([
      'create empid_00000012',
      'upsertReplace lastname_SMITH_00000012',
      'create ~change_…',
      'update-merge department',
    ]);
    const change = created.operations[2].kind === 'create' ? created.operations[2].entity : undefined;
    expect(change?.partitionKey).toBe('ENG');
    expect(change?.rowKey.endsWith(`_${WRITE_ID}`)).toBe(true);
    expect(change?.properties).toMatchObject({
      EntityType: { value: CHANGE_ENTITY_TYPE },
      Kind: { value: 'CREATED' },
      Of: { value: 'Employee' },
      OfRowKey: { value: 'empid_00000012' },
    });
    expect(changeTime(change!.rowKey)).toBeGreaterThanOrEqual(at);
    const deleted = planWithChanges(write('deleteEmployee'), { departmentId: 'ENG', id: '12' }, state(employee()));
    const kinds = deleted.operations.flatMap((op) =>
      op.kind === 'create' && op.entity.rowKey.startsWith(CHANGE_ROW_KEY_PREFIX) ? [op.entity.properties.Kind] : [],
    );
    expect(kinds).toEqual([{ type: 'String', value: 'DELETED' }]);
    // A delete keeps the values its `@auth` scopes decide on (HR: the department, the e-mail); nothing else.
    const kept = deleted.operations.flatMap((op) =>
      op.kind === 'create' && op.entity.rowKey.startsWith(CHANGE_ROW_KEY_PREFIX) ? [op.entity.properties] : [],
    )[0];
    expect(
      Object.keys(kept)
        .filter((k) => k.startsWith('Scope_'))
        .sort(),
    ).toEqual(['Scope_departmentId', 'Scope_email']);
    expect(kept.Scope_email).toEqual({ type: 'String', value: employeeInput('ENG', 12).email });
    // A create keeps none: its entity is there to decide on.
    expect(Object.keys(change!.properties).some((k) => k.startsWith('Scope_'))).toBe(false);
    // Later changes sort first (inverted ticks), even within one millisecond.
    const again = planWithChanges(write('createEmployee'), employeeInput('ENG', 13), state(null));
    const key = (p: WritePlan) =>
      p.operations.flatMap((op) => (op.kind === 'create' && op.entity.rowKey.startsWith(CHANGE_ROW_KEY_PREFIX) ? [op.entity.rowKey] : []))[0];
    expect(key(again) < key(created)).toBe(true);
  });

  test('create: the entity, its intra-partition index entity and the department summary in one EGT', () => {
    const plan = planWrite(model, write('createEmployee'), employeeInput('ENG', 12), state(null));
    expect(plan.address).toEqual({ table: DIRECTORY, partitionKey: 'ENG', rowKey: 'empid_00000012' });
    expect(shape(plan.operations)).toEqual(['create empid_00000012', 'upsertReplace lastname_SMITH_00000012', 'update-merge department']);
    expect(ifMatches(plan.operations)).toEqual([undefined, undefined, DEPT_ETAG]);
    expect(summaryOf(plan.operations[2])).toEqual({ employeeCount: { type: 'Int32', value: 6 }, payroll: { type: 'String', value: '350000' } });
    const created = plan.operations[0].kind === 'create' ? plan.operations[0].entity.properties : {};
    expect(created).toMatchObject({
      EntityType: { type: 'String', value: 'Employee' },
      WriteId: { type: 'String', value: WRITE_ID },
      annualSalary: { type: 'String', value: '50000' },
    });
    expect(plan.writeId).toBe(WRITE_ID);
    expect(plan.previous).toBeNull();
    // A create is based on the entity's absence.
    expect(plan.fanout).toMatchObject({
      entity: 'Employee',
      writeId: WRITE_ID,
      basedOn: null,
      deleted: false,
      primary: { table: DIRECTORY, partitionKey: 'ENG', rowKey: 'empid_00000012' },
    });
    expect(candidates(plan)).toEqual([EMAIL_KEY, SMITH_KEY, ENGINEER_KEY].sort());
    expect(plan.fanout!.candidates.map((c) => c.table).sort()).toEqual(['EmployeesByEmail', 'EmployeesByLastName', 'EmployeesByTitle'].map((t) => PREFIX + t));
    expect(plan.reservations.map((r) => [r.index.name, show({ table: r.table, ...r.entity })])).toEqual([['byEmail', EMAIL_KEY]]);
  });

  test('create of an hourly employee adds rate × weekly hours × 52 to the payroll', () => {
    const input = employeeInput('ENG', 12, { salaryOrHourly: 'HOURLY', annualSalary: null, hourlyRate: '20.51', typicalHours: 20.5 });
    const plan = planWrite(model, write('createEmployee'), input, state(null));
    // 300000 + 20.51 × 20.5 × 52, exactly (a double would give 321863.66000000003).
    expect(summaryOf(plan.operations[2])).toEqual({ employeeCount: { type: 'Int32', value: 6 }, payroll: { type: 'String', value: '321863.66' } });
  });

  test('a sparse index: no title, no byTitle index entity and no byTitle candidate', () => {
    const plan = planWrite(model, write('createEmployee'), employeeInput('ENG', 12, { title: null }), state(null));
    expect(candidates(plan)).toEqual([EMAIL_KEY, SMITH_KEY].sort());
  });

  test('create of an existing employee: CONFLICT (EntityAlreadyExists)', () => {
    const e = plannedError(() => planWrite(model, write('createEmployee'), employeeInput('ENG', 12), state(employee())));
    expect([e.code, e.details.reason]).toEqual([ErrorCode.CONFLICT, 'EntityAlreadyExists']);
  });

  test('create in a missing department: NOT_FOUND (SummaryHolderMissing)', () => {
    const e = plannedError(() => planWrite(model, write('createEmployee'), employeeInput('ENG', 12), state(null, null)));
    expect([e.code, e.details.reason]).toEqual([ErrorCode.NOT_FOUND, 'SummaryHolderMissing']);
  });

  test('an id that is not a non-negative integer, or a null in a non-null field: BAD_USER_INPUT', () => {
    const badId = plannedError(() => planWrite(model, write('createEmployee'), employeeInput('ENG', 'abc'), state(null)));
    expect(badId.code).toBe(ErrorCode.BAD_USER_INPUT);
    const noFirstName = plannedError(() => planWrite(model, write('updateEmployee'), { departmentId: 'ENG', id: '12', firstName: null }, state(employee())));
    expect([noFirstName.code, noFirstName.details.field]).toEqual([ErrorCode.BAD_USER_INPUT, 'firstName']);
    const noLastName = plannedError(() => planWrite(model, write('replaceEmployee'), employeeInput('ENG', 12, { lastName: null }), state(employee())));
    expect([noLastName.code, noLastName.details.field]).toEqual([ErrorCode.BAD_USER_INPUT, 'lastName']);
  });

  test('update changing lastName: the new intra-partition index entity upserted, the old deleted, in the same EGT', () => {
    const plan = planWrite(model, write('updateEmployee'), { departmentId: 'ENG', id: '12', lastName: 'JONES' }, state(employee({}, 'write-4')));
    // No summary operation: neither the count nor the payroll changes.
    expect(shape(plan.operations)).toEqual(['update-replace empid_00000012', 'upsertReplace lastname_JONES_00000012', 'delete lastname_SMITH_00000012']);
    expect(ifMatches(plan.operations)).toEqual([EMP_ETAG, undefined, undefined]);
    expect(plan.writeId).toBe(WRITE_ID);
    expect(plan.values).toMatchObject({ lastName: 'JONES', firstName: 'ANA', annualSalary: '50000' });
    // Based on the state it read: the WriteId of the write that produced it.
    expect(plan.fanout).toMatchObject({ writeId: WRITE_ID, basedOn: 'write-4', deleted: false });
    expect(candidates(plan)).toEqual([EMAIL_KEY, at('byLastName', { lastName: 'JONES' }), SMITH_KEY, ENGINEER_KEY].sort());
    expect(plan.reservations).toEqual([]);
  });

  test('update changing only annualSalary: a payroll delta, no fan-out message', () => {
    const plan = planWrite(model, write('updateEmployee'), { departmentId: 'ENG', id: '12', annualSalary: 62000.25 }, state(employee()));
    expect(shape(plan.operations)).toEqual(['update-replace empid_00000012', 'upsertReplace lastname_SMITH_00000012', 'update-merge department']);
    expect(ifMatches(plan.operations)).toEqual([EMP_ETAG, undefined, DEPT_ETAG]);
    // The count does not change, so only the payroll is merged.
    expect(summaryOf(plan.operations[2])).toEqual({ payroll: { type: 'String', value: '312000.25' } });
    expect(plan.fanout).toBeUndefined();
    expect(plan.reservations).toEqual([]);
  });

  test('update changing email: old and new byEmail keys among the candidates, only the new one reserved', () => {
    const plan = planWrite(model, write('updateEmployee'), { departmentId: 'ENG', id: '12', email: 'new@example.test' }, state(employee()));
    expect(shape(plan.operations)).toEqual(['update-replace empid_00000012', 'upsertReplace lastname_SMITH_00000012']);
    expect(candidates(plan)).toEqual([EMAIL_KEY, at('byEmail', { email: 'new@example.test' }), SMITH_KEY, ENGINEER_KEY].sort());
    expect(plan.reservations.map((r) => show({ table: r.table, ...r.entity }))).toEqual([at('byEmail', { email: 'new@example.test' })]);
    // The reservation is the whole index entity: it points back at the employee through its key fields.
    expect(plan.reservations[0].entity.properties).toMatchObject({ departmentId: { value: 'ENG' }, id: { value: '12' }, email: { value: 'new@example.test' } });
  });

  test('update with the current ETag passes; with a stale one: CONFLICT (ETagMismatch) naming the current ETag', () => {
    const ok = planWrite(model, write('updateEmployee'), { departmentId: 'ENG', id: '12', ifMatch: EMP_ETAG, firstName: 'BO' }, state(employee()));
    expect(ifMatches(ok.operations)[0]).toBe(EMP_ETAG);
    const e = plannedError(() =>
      planWrite(model, write('updateEmployee'), { departmentId: 'ENG', id: '12', ifMatch: 'W/"stale"', firstName: 'BO' }, state(employee())),
    );
    expect([e.code, e.details.reason, e.details.currentEtag]).toEqual([ErrorCode.CONFLICT, 'ETagMismatch', EMP_ETAG]);
  });

  test('update or delete of a missing employee: NOT_FOUND; with an ifMatch (it existed when read): CONFLICT', () => {
    for (const field of ['updateEmployee', 'replaceEmployee', 'deleteEmployee']) {
      const input = field === 'deleteEmployee' ? { departmentId: 'ENG', id: '12' } : employeeInput('ENG', 12);
      const e = plannedError(() => planWrite(model, write(field), input, state(null)));
      expect(e.code).toBe(ErrorCode.NOT_FOUND);
      const stale = plannedError(() => planWrite(model, write(field), { ...input, ifMatch: EMP_ETAG }, state(null)));
      expect([stale.code, stale.details.reason]).toEqual([ErrorCode.CONFLICT, 'ETagMismatch']);
    }
  });

  test('a negative salary or more than 168 hours a week: BAD_USER_INPUT naming the field and the @constraint', () => {
    const salary = plannedError(() => planWrite(model, write('createEmployee'), employeeInput('ENG', 12, { annualSalary: '-0.01' }), state(null)));
    expect([salary.code, salary.details.field, salary.details.constraint]).toEqual([ErrorCode.BAD_USER_INPUT, 'annualSalary', 'min']);
    const hours = plannedError(() => planWrite(model, write('updateEmployee'), { departmentId: 'ENG', id: '12', typicalHours: 169 }, state(employee())));
    expect([hours.code, hours.details.field, hours.details.constraint]).toEqual([ErrorCode.BAD_USER_INPUT, 'typicalHours', 'max']);
  });

  test('replace: fields not given become null (the sparse byTitle entity goes away), the summary follows', () => {
    const input = employeeInput('ENG', 12, { title: undefined, annualSalary: undefined, fullOrPartTime: undefined, salaryOrHourly: undefined });
    const plan = planWrite(model, write('replaceEmployee'), input, state(employee()));
    expect(shape(plan.operations)).toEqual(['update-replace empid_00000012', 'upsertReplace lastname_SMITH_00000012', 'update-merge department']);
    expect(plan.values).toMatchObject({ title: null, annualSalary: null, lastName: 'SMITH' });
    expect(summaryOf(plan.operations[2])).toEqual({ payroll: { type: 'String', value: '250000' } });
    // The old byTitle key is a candidate (the worker deletes it); the new version derives none.
    expect(candidates(plan)).toContain(ENGINEER_KEY);
    expect(plan.reservations).toEqual([]);
  });

  test('delete: the entity and its index entity deleted, the summary decremented, a fan-out message deleted:true', () => {
    const plan = planWrite(model, write('deleteEmployee'), { departmentId: 'ENG', id: '12', ifMatch: EMP_ETAG }, state(employee({}, 'write-7')));
    expect(shape(plan.operations)).toEqual(['delete empid_00000012', 'delete lastname_SMITH_00000012', 'update-merge department']);
    expect(ifMatches(plan.operations)).toEqual([EMP_ETAG, undefined, DEPT_ETAG]);
    expect(summaryOf(plan.operations[2])).toEqual({ employeeCount: { type: 'Int32', value: 4 }, payroll: { type: 'String', value: '250000' } });
    expect(plan.values).toBeNull();
    expect(plan.previous).toMatchObject({ id: '12', lastName: 'SMITH' });
    expect(plan.fanout).toMatchObject({ deleted: true, writeId: WRITE_ID, basedOn: 'write-7' });
    expect(candidates(plan)).toEqual([EMAIL_KEY, SMITH_KEY, ENGINEER_KEY].sort());
    expect(plan.reservations).toEqual([]);
  });
});

describe('Department', () => {
  const deptWrite = (action: string, input: Record<string, unknown>, current: StoredEntity | null) =>
    planWrite(model, write(`${action}Department`), input, { current, holders: new Map() });

  test('create: the department with zero summaries, its `all` index entity announced', () => {
    const plan = deptWrite('create', { id: 'ENG', name: 'Engineering' }, null);
    expect(shape(plan.operations)).toEqual(['create department']);
    const props = plan.operations[0].kind === 'create' ? plan.operations[0].entity.properties : {};
    expect(props).toMatchObject({ employeeCount: { type: 'Int32', value: 0 }, payroll: { type: 'String', value: '0' }, name: { value: 'Engineering' } });
    expect(candidates(plan)).toEqual(['Departments departments ENG']);
    expect(plan.reservations).toEqual([]);
  });

  test('update and replace keep the summary values the clients never write', () => {
    for (const action of ['update', 'replace']) {
      const plan = deptWrite(action, { id: 'ENG', name: 'ENGINEERING', ifMatch: DEPT_ETAG }, department(5, 300000));
      expect(shape(plan.operations)).toEqual(['update-replace department']);
      expect(ifMatches(plan.operations)).toEqual([DEPT_ETAG]);
      expect(plan.values).toMatchObject({ name: 'ENGINEERING', employeeCount: 5, payroll: '300000' });
      expect(candidates(plan)).toEqual(['Departments departments ENG']); // the name is projected onto `all`
    }
  });

  test('delete with employees: CONFLICT (HasDependents); an empty one is deleted with its ETag', () => {
    const e = plannedError(() => deptWrite('delete', { id: 'ENG' }, department(5, 300000)));
    expect([e.code, e.details.reason]).toEqual([ErrorCode.CONFLICT, 'HasDependents']);
    const plan = deptWrite('delete', { id: 'ENG' }, department(0, 0));
    expect(shape(plan.operations)).toEqual(['delete department']);
    expect(ifMatches(plan.operations)).toEqual([DEPT_ETAG]);
    expect(plan.fanout).toMatchObject({ deleted: true, basedOn: 'dept-write' });
  });

  test('a department id with forbidden key characters is escaped in every key', () => {
    const plan = deptWrite('create', { id: 'R&D/#1?', name: 'x' }, null);
    expect(plan.address.partitionKey).toBe('R&D%2F%231%3F');
    expect(candidates(plan)).toEqual(['Departments departments R&D%2F%231%3F']);
  });
});
