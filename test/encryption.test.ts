/**
 * The guide's "Encrypting Table Data" as `@encrypted` gives it to the HR schema's `Employee.homeAddress`: sealed with
 * AES-256-GCM before it is sent and stored as Edm.Binary, opened when read; a value changed in storage, copied from
 * another entity or written around tablegraph is refused with DATA_INTEGRITY, never shown; keys rotate.
 */
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../src/runtime/config';
import { ErrorCode, TablegraphError } from '../src/errors';
import { createLogger } from '../src/log';
import { attachCipher } from '../src/runtime/encryption';
import { TableStore } from '../src/storage/table-store';
import { compileHr, ROOT, startTestServer, testStore, type TestServer } from './support/harness';
import { until } from './support/wait';

const CREATE = `mutation ($input: CreateEmployeeInput!) { createEmployee(input: $input) { employee { id homeAddress } } }`;
const READ = `query ($d: ID!, $id: ID!) { employee(departmentId: $d, id: $id) { id firstName homeAddress } }`;
const ADDRESS = '221B Baker Street, London NW1 6XE';
const key = () => randomBytes(32).toString('base64');

let server: TestServer;
let directory: string;
const raw = testStore(); // no cipher: what anyone reading the table around tablegraph sees
beforeAll(async () => {
  server = await startTestServer();
  directory = `${server.config.tablePrefix}Directory`;
});
afterAll(async () => server?.close());

async function createEmployee(s: TestServer, id: string, homeAddress: string): Promise<void> {
  const r = await s.query(CREATE, {
    input: { departmentId: 'Sales', id, email: `e${id}.${Date.now()}@contoso.com`, firstName: `F${id}`, lastName: 'Enc', homeAddress },
  });
  expect(r.errors).toBeUndefined();
}
const rowKey = (id: string) => `empid_${id.padStart(8, '0')}`;
const sealedOf = async (id: string) =>
  (await raw.getEntity({ table: directory, partitionKey: 'Sales', rowKey: rowKey(id) }))!.properties.homeAddress as Uint8Array;

test('stored sealed, as Edm.Binary without the text; read back as the text; not read at all when not asked for', async () => {
  await createEmployee(server, '501', ADDRESS);
  const sealed = await sealedOf('501');
  expect(sealed).toBeInstanceOf(Uint8Array);
  expect(Buffer.from(sealed).subarray(0, 4).toString('ascii')).toBe('TGE1');
  expect(Buffer.from(sealed).includes(Buffer.from('Baker'))).toBe(false);
  // Two values of the same text differ (a fresh IV each time).
  await createEmployee(server, '502', ADDRESS);
  expect(Buffer.from(await sealedOf('502')).equals(Buffer.from(sealed))).toBe(false);

  const r = await server.query(READ, { d: 'Sales', id: '501' });
  expect(r.errors).toBeUndefined();
  expect(r.data.employee).toEqual({ id: '501', firstName: 'F501', homeAddress: ADDRESS });
  expect(r.extensions.cost).toMatchObject({ pointQueries: 1, roundTrips: 1 });
  // An update of another field keeps the address (read, opened, sealed again with the entity).
  const u = await server.query(
    `mutation { updateEmployee(input: { departmentId: "Sales", id: "501", phone: "+1 312 555 0100" }) { employee { phone homeAddress } } }`,
  );
  expect(u.data.updateEmployee.employee).toEqual({ phone: '+1 312 555 0100', homeAddress: ADDRESS });
});

test('a changed byte, a value copied from another employee, text written around tablegraph: DATA_INTEGRITY, never a value', async () => {
  await createEmployee(server, '511', 'One Microsoft Way, Redmond');
  await createEmployee(server, '512', '1600 Amphitheatre Parkway');
  const tamper = async (id: string, homeAddress: unknown) =>
    raw.upsertEntity(
      directory,
      {
        partitionKey: 'Sales',
        rowKey: rowKey(id),
        properties: {
          homeAddress: homeAddress instanceof Uint8Array ? { type: 'Binary', value: homeAddress } : { type: 'String', value: String(homeAddress) },
        },
      },
      'merge',
    );
  const flipped = Buffer.from(await sealedOf('511'));
  flipped[flipped.length - 1] ^= 1;
  const cases: Array<[string, () => Promise<unknown>, string]> = [
    ['511', () => tamper('511', new Uint8Array(flipped)), 'TagMismatch'],
    ['512', async () => tamper('512', await sealedOf('501')), 'TagMismatch'], // another employee's sealed address
    ['502', () => tamper('502', 'Somewhere in plain text'), 'NotSealed'],
  ];
  for (const [id, change, reason] of cases) {
    await change();
    const r = await server.query(READ, { d: 'Sales', id });
    expect(r.errors?.[0].extensions).toMatchObject({ code: ErrorCode.DATA_INTEGRITY, reason, property: 'homeAddress' });
    expect(JSON.stringify(r.data ?? null)).not.toMatch(/Microsoft|Baker|plain text/);
    // The rest of the employee still reads when the address is not asked for.
    expect((await server.query(`{ employee(departmentId: "Sales", id: "${id}") { firstName } }`)).data.employee.firstName).toBe(`F${id}`);
  }
});

test('keys rotate: the first key seals, older keys still open; a key no longer held is DATA_INTEGRITY (UnknownKey)', async () => {
  const [k1, k2] = [key(), key()];
  const prefix = server.config.tablePrefix.replace(/^t/, 'r');
  const old = await startTestServer({ TABLEGRAPH_TABLE_PREFIX: prefix, TABLEGRAPH_ENCRYPTION_KEYS: `k1:${k1}` });
  const rotated = await startTestServer({ TABLEGRAPH_TABLE_PREFIX: prefix, TABLEGRAPH_ENCRYPTION_KEYS: `k2:${k2},k1:${k1}` });
  const onlyNew = await startTestServer({ TABLEGRAPH_TABLE_PREFIX: prefix, TABLEGRAPH_ENCRYPTION_KEYS: `k2:${k2}` });
  try {
    await createEmployee(old, '601', 'Sealed with k1');
    expect((await rotated.query(READ, { d: 'Sales', id: '601' })).data.employee.homeAddress).toBe('Sealed with k1');
    await createEmployee(rotated, '602', 'Sealed with k2');
    const sealed = (await raw.getEntity({ table: `${prefix}Directory`, partitionKey: 'Sales', rowKey: rowKey('602') }))!.properties.homeAddress as Uint8Array;
    expect(Buffer.from(sealed).subarray(5, 7).toString('ascii')).toBe('k2'); // TGE1, the id's length, the id
    expect((await onlyNew.query(READ, { d: 'Sales', id: '602' })).data.employee.homeAddress).toBe('Sealed with k2');
    expect((await onlyNew.query(READ, { d: 'Sales', id: '601' })).errors?.[0].extensions).toMatchObject({
      code: ErrorCode.DATA_INTEGRITY,
      reason: 'UnknownKey',
    });
    // The server with the development key (the test Azurite's) cannot open either.
    expect((await old.query(READ, { d: 'Sales', id: '602' })).errors?.[0].extensions.code).toBe(ErrorCode.DATA_INTEGRITY);
  } finally {
    await Promise.all([old.close(), rotated.close(), onlyNew.close()]);
  }
});

test('a move re-seals the address for the entity at its new keys', async () => {
  await createEmployee(server, '701', 'Moving Lane 1');
  const before = Buffer.from(await sealedOf('701'));
  const m = await server.query(`mutation { moveEmployee(input: { departmentId: "Sales", id: "701", toDepartmentId: "Marketing" }) { employee { id } } }`);
  expect(m.errors).toBeUndefined();
  const moved = await until('the move carried out', async () => {
    const employee = (await server.query(READ, { d: 'Marketing', id: '701' })).data?.employee;
    return employee?.homeAddress ? employee : undefined;
  });
  expect(moved).toMatchObject({ id: '701', homeAddress: 'Moving Lane 1' });
  const after = (await raw.getEntity({ table: directory, partitionKey: 'Marketing', rowKey: rowKey('701') }))!.properties.homeAddress as Uint8Array;
  expect(Buffer.from(after).equals(before)).toBe(false);
});

test('configuration: a key that is not 32 bytes is refused by name; storage other than the development account needs keys', () => {
  expect(() => loadConfig({ TABLEGRAPH_ENCRYPTION_KEYS: 'k1:c2hvcnQ=' }, ROOT)).toThrow(/TABLEGRAPH_ENCRYPTION_KEYS: key k1 is 5 bytes, not 32/);
  expect(() => loadConfig({ TABLEGRAPH_ENCRYPTION_KEYS: `k1:${key()},k1:${key()}` }, ROOT)).toThrow(/key id k1 appears twice/);
  const azure = 'DefaultEndpointsProtocol=https;AccountName=contoso;AccountKey=' + key() + ';EndpointSuffix=core.windows.net';
  const store = new TableStore({ connectionString: azure, target: 'azure' });
  const log = createLogger({ level: 'silent' });
  const { model } = compileHr('tx');
  let refused: unknown;
  try {
    attachCipher(store, model, loadConfig({}, ROOT), { kind: 'connection-string', connectionString: azure }, log);
  } catch (e) {
    refused = e;
  }
  expect(refused).toBeInstanceOf(TablegraphError);
  expect((refused as TablegraphError).code).toBe(ErrorCode.CONFIG_INVALID);
  expect((refused as TablegraphError).message).toMatch(
    /encrypts Employee.homeAddress, ArchivedEmployee.homeAddress, and TABLEGRAPH_ENCRYPTION_KEYS is not set/,
  );
  expect(() =>
    attachCipher(store, model, loadConfig({ TABLEGRAPH_ENCRYPTION_KEYS: `k1:${key()}` }, ROOT), { kind: 'connection-string', connectionString: azure }, log),
  ).not.toThrow();
});
