/**
 * Helpers for the write-path tests (mutations, write plans, unique e-mail): GraphQL documents of the HR
 * mutations, input builders, StoredEntity values built the way the store returns them, raw snapshots of a
 * partition, bounded polling, and a hand-driven message worker (receive → reconcile → delete), for servers
 * started with `TABLEGRAPH_WORKER: 'off'` ("Eventually consistent transactions pattern").
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { entityWrites, type TableWrite } from '../../src/model/entity-codec';
import { renderKey } from '../../src/model/key-template';
import { BASED_ON_PROPERTY, ENTITY_TYPE_PROPERTY, RESERVED_UNTIL_PROPERTY, WRITE_ID_PROPERTY, type Model } from '../../src/model/types';
import type { QueueStore } from '../../src/storage/queue-store';
import type { TableStore } from '../../src/storage/table-store';
import type { EntityAddress, StoredEntity, TypedValue } from '../../src/storage/storage-types';
import { workQueueNames } from '../../src/queue/sender';
import { handleMessage } from './handle-message';
import type { ReconcileResult } from '../../src/worker/reconciler';
import { decodeEntityMessages, type EntityMessage } from '../../src/queue/messages';
import { DIRECTIVES_FILE, startTestServer, type TestServer } from './harness';
import { until } from './wait';

/** Every stored field of Employee, plus its ETag. */
export const EMPLOYEE_FIELDS =
  'etag id departmentId email lastName firstName middleInitial title fullOrPartTime salaryOrHourly typicalHours annualSalary hourlyRate';

const mutation = (name: string, input: string, payload: string, fields: string) =>
  `mutation($input: ${input}!) { ${name}(input: $input) { ${payload} { ${fields} } } }`;

export const CREATE_EMPLOYEE = mutation('createEmployee', 'CreateEmployeeInput', 'employee', EMPLOYEE_FIELDS);
export const UPDATE_EMPLOYEE = mutation('updateEmployee', 'UpdateEmployeeInput', 'employee', EMPLOYEE_FIELDS);
export const REPLACE_EMPLOYEE = mutation('replaceEmployee', 'ReplaceEmployeeInput', 'employee', EMPLOYEE_FIELDS);
export const DELETE_EMPLOYEE = mutation('deleteEmployee', 'DeleteEmployeeInput', 'employee', EMPLOYEE_FIELDS);
export const CREATE_DEPARTMENT = mutation('createDepartment', 'CreateDepartmentInput', 'department', 'etag id name employeeCount payroll');
export const UPDATE_DEPARTMENT = mutation('updateDepartment', 'UpdateDepartmentInput', 'department', 'etag id name employeeCount payroll');
export const DELETE_DEPARTMENT = mutation('deleteDepartment', 'DeleteDepartmentInput', 'department', 'etag id name employeeCount payroll');

/** The department's summary values and ETag, read with one point query. */
export const DEPARTMENT_SUMMARY = 'query($id: ID!) { department(id: $id) { etag id name employeeCount payroll } }';

/** A CreateEmployeeInput: salaried (annualSalary), title ENGINEER, e-mail unique per department and id. */
export function employeeInput(departmentId: string, id: number | string, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    departmentId,
    id: String(id),
    email: `e${id}.${departmentId.toLowerCase().replace(/[^a-z0-9]/g, '')}@example.test`,
    lastName: 'SMITH',
    firstName: 'ANA',
    title: 'ENGINEER',
    fullOrPartTime: 'FULL_TIME',
    salaryOrHourly: 'SALARY',
    annualSalary: 50000,
    ...overrides,
  };
}

/** What the store's decoder returns for a typed value (Int64 → bigint, DateTime → Date, others as they are). */
function decoded(v: TypedValue): unknown {
  return v.value;
}

/** A TableWrite as the store would return it after writing it, with `etag`. */
export function storedFrom(write: TableWrite, etag: string): StoredEntity {
  const properties: Record<string, unknown> = {};
  for (const [name, v] of Object.entries(write.entity.properties)) if (v !== null) properties[name] = decoded(v);
  return { partitionKey: write.entity.partitionKey, rowKey: write.entity.rowKey, etag, properties };
}

/** An entity of type `entityName` with `values` (and `WriteId` = writeId) as the store would return it. */
export function storedEntity(model: Model, entityName: string, values: Record<string, unknown>, etag: string, writeId = 'write-1'): StoredEntity {
  const entity = model.entities.get(entityName);
  if (!entity) throw new Error(`no entity ${entityName}`);
  return storedFrom(entityWrites(entity, values, writeId).primary, etag);
}

/**
 * Where the index entity of `indexName` of `entityName` lives for `values`, keys rendered by the model (so the
 * tests follow the schema's key templates, hash buckets included).
 */
export function indexAddress(model: Model, entityName: string, indexName: string, values: Record<string, unknown>): EntityAddress {
  const index = model.entities.get(entityName)?.indexes.get(indexName);
  if (!index) throw new Error(`no index ${entityName}.${indexName}`);
  const { table, partitionKey, rowKey } = index.layout;
  return { table, partitionKey: renderKey(partitionKey, values), rowKey: renderKey(rowKey, values) };
}

/** The address of the unique byEmail index entity (the reservation) of `email`. */
export function emailAddress(model: Model, email: string): EntityAddress {
  return indexAddress(model, 'Employee', 'byEmail', { email });
}

/** A raw entity as stored now (null when missing), through one point query. */
export function rawEntity(store: TableStore, address: EntityAddress): Promise<StoredEntity | null> {
  return store.getEntity(address);
}

/**
 * Every entity of one partition, by RowKey (a partition scan: test-only, to compare the whole partition before
 * and after a failed write).
 */
export async function partitionSnapshot(store: TableStore, table: string, partitionKey: string): Promise<Map<string, StoredEntity>> {
  const out = new Map<string, StoredEntity>();
  for await (const page of store.scan(table, { partitionKey })) for (const e of page) out.set(e.rowKey, e);
  return out;
}

/** Every entity of a table (a table scan: test-only). */
export async function tableSnapshot(store: TableStore, table: string): Promise<StoredEntity[]> {
  const out: StoredEntity[] = [];
  for await (const page of store.scan(table)) out.push(...page);
  return out;
}

/**
 * Calls `probe` every `intervalMs` until it returns something other than undefined, at most `timeoutMs` (ms).
 * @throws Error naming `what` when the time is up
 */
export async function pollUntil<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 15_000, intervalMs = 50): Promise<T> {
  let value: T | undefined;
  await until(what, async () => (value = await probe()) !== undefined, { timeoutMs, everyMs: intervalMs });
  return value as T;
}

/**
 * The fan-out messages now visible on the queue of `tablePrefix`, received (hidden `hiddenSeconds`, 30 s unless
 * given) but not deleted: each write's message, those of one batch (a group commit's) with the same queue message's
 * `ref`.
 */
export async function receiveFanout(
  queues: QueueStore,
  tablePrefix: string,
  hiddenSeconds = 30,
): Promise<Array<{ message: EntityMessage; ref: { id: string; popReceipt: string } }>> {
  const { queue } = workQueueNames(tablePrefix);
  const out: Array<{ message: EntityMessage; ref: { id: string; popReceipt: string } }> = [];
  for (;;) {
    const batch = await queues.receive(queue, { max: 32, visibilityTimeoutSeconds: hiddenSeconds });
    if (batch.length === 0) return out;
    for (const m of batch) for (const message of decodeEntityMessages(m.text)) out.push({ message, ref: { id: m.id, popReceipt: m.popReceipt } });
  }
}

/**
 * The message worker by hand: receives every visible message of `tablePrefix`'s queue, reconciles each
 * (settleMs as given, default 0 so that a message whose write never happened is reconciled at once) and deletes
 * the ones reconciled. @returns the messages handled, with their results
 */
export async function drainFanout(opts: {
  queues: QueueStore;
  store: TableStore;
  model: Model;
  tablePrefix: string;
  settleMs?: number;
}): Promise<Array<{ message: EntityMessage; result: ReconcileResult }>> {
  const { queue } = workQueueNames(opts.tablePrefix);
  const handled: Array<{ message: EntityMessage; result: ReconcileResult }> = [];
  // A queue message is deleted once every write's message it carries is reconciled.
  const notDone = new Map<string, number>();
  const received = await receiveFanout(opts.queues, opts.tablePrefix);
  for (const { message, ref } of received) {
    const result = await handleMessage(message, { model: opts.model, store: opts.store, settleMs: opts.settleMs ?? 0, holdMs: 0 });
    notDone.set(ref.id, (notDone.get(ref.id) ?? 0) + (result.kind === 'done' ? 0 : 1));
    handled.push({ message, result });
  }
  const refs = new Map(received.map(({ ref }) => [ref.id, ref]));
  for (const [id, ref] of refs) if (notDone.get(id) === 0) await opts.queues.delete(queue, ref);
  return handled;
}

/** The GraphQL error of a response (the first), with its code and details. */
export function firstError(res: { errors?: any[] }): { message: string; code?: string; extensions: Record<string, unknown> } {
  const e = res.errors?.[0];
  if (!e) throw new Error(`expected an error, got ${JSON.stringify(res)}`);
  return { message: e.message, code: e.extensions?.code, extensions: e.extensions ?? {} };
}

/** Properties of a stored entity without the bookkeeping ones (EntityType, WriteId, BasedOn, ReservedUntil). */
export function userProperties(e: StoredEntity | null): Record<string, unknown> | null {
  if (!e) return null;
  const { [ENTITY_TYPE_PROPERTY]: _t, [WRITE_ID_PROPERTY]: _w, [BASED_ON_PROPERTY]: _b, [RESERVED_UNTIL_PROPERTY]: _r, ...rest } = e.properties;
  return rest;
}

/** Number of String fields of the `Note` test type: 17 × 64,000 bytes is over 1 MiB, each within 64 KiB. */
export const NOTE_FIELDS = 17;

/**
 * A server over a schema of one `Note` entity with NOTE_FIELDS nullable String fields `p01`…, and a
 * `createNote` mutation: the only way to send an entity over 1 MiB whose every value is within 64 KiB (the HR
 * schema's strings cannot add up to 1 MiB). The schema folder is a temporary copy with the shipped directives.
 */
export async function startNoteServer(): Promise<TestServer> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-notes-'));
  fs.copyFileSync(DIRECTIVES_FILE, path.join(dir, 'directives.graphql'));
  const fields = Array.from({ length: NOTE_FIELDS }, (_, i) => `p${String(i + 1).padStart(2, '0')}: String`).join('\n  ');
  fs.writeFileSync(
    path.join(dir, 'notes.graphql'),
    `type Note @entity(table: "Notes", partitionKey: "{id}", rowKey: "note") {
  etag: String!
  id: ID!
  ${fields}
}
type Query { note(id: ID!): Note @point }
input CreateNoteInput { id: ID! ${fields} }
type NotePayload { note: Note! }
type Mutation { createNote(input: CreateNoteInput!): NotePayload! @write(entity: "Note", action: CREATE) }
`,
  );
  // A body large enough to carry an entity over 1 MiB: the storage limit is what is under test.
  const server = await startTestServer({ TABLEGRAPH_SCHEMA_DIR: dir, TABLEGRAPH_WORKER: 'off', TABLEGRAPH_MAX_BODY_BYTES: String(2 * 1024 * 1024) });
  const close = server.close;
  return {
    ...server,
    async close(graceMs?: number) {
      await close(graceMs);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
