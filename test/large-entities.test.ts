/**
 * The guide's "Large entities pattern" as the HR schema declares it: `Employee.photoUrl` is a `@blob` — the photo in
 * Blob storage, the entity holding its name, the field a read-only SAS URL. `setEmployeePhoto` uploads base64 bytes
 * or hands out an upload URL; replaced photos, deleted employees, failed writes, concurrent writers and a
 * delete-and-recreate of one key leave no orphan blob once the delayed cleanup messages drained, and `verify` reports
 * a blob no entity names. The cleanup handler is also run twice on one message, and killed in the middle.
 */
import { readFileSync } from 'node:fs';
import { compileSchema } from '../src/compiler/compile';
import { blobPrefix } from '../src/model/blob-fields';
import { ErrorCode, isTablegraphError, type TablegraphError } from '../src/errors';
import { verifyDerived, formatVerifyReport } from '../src/maintenance/verify-derived';
import { cleanUpBlobs } from '../src/worker/blob-cleanup';
import { blobCleanupMessage, decodeMessage } from '../src/queue/messages';
import { WriteExecutor } from '../src/write/write-executor';
import { BlobStore } from '../src/storage/blob-store';
import { compileHr, connectionString, DIRECTIVES_FILE, startTestServer, testBlobs, uniquePrefix, type TestServer } from './support/harness';
import type { EntityAddress } from '../src/storage/storage-types';
import { until } from './support/wait';

/** Short enough to wait for in a test: uploads URLs last 12 s, EGTs are sent within 16 s, cleanups take blobs older than 24 s. */
const DELAY_S = 48;
const blobs = testBlobs();

let server: TestServer;
let container: string;
let directory: string;
const { model } = compileHr('');

beforeAll(async () => {
  server = await startTestServer({ TABLEGRAPH_STORAGE_TIMEOUT_MS: '8000', TABLEGRAPH_BLOB_CLEANUP_DELAY_SECONDS: String(DELAY_S) });
  container = `${server.config.tablePrefix.toLowerCase()}photos`;
  directory = `${server.config.tablePrefix}Directory`;
});
afterAll(async () => server?.close());

const SET = `mutation ($input: SetEmployeePhotoInput!) { setEmployeePhoto(input: $input) { employee { id photoUrl etag } photoUploadUrl } }`;
const READ = `query ($d: ID!, $id: ID!) { employee(departmentId: $d, id: $id) { photoUrl } }`;
const png = (n: number) => Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47]), Buffer.from(`photo ${n} `.repeat(50))]);
const setPhoto = (d: string, id: string, photo: Buffer | null, extra: Record<string, unknown> = {}) =>
  server.query(SET, { input: { departmentId: d, id, photoUrl: photo && { contentType: 'image/png', base64: photo.toString('base64') }, ...extra } });
const address = (d: string, id: string): EntityAddress => ({ table: directory, partitionKey: d, rowKey: `empid_${id.padStart(8, '0')}` });
const listed = async (d: string, id: string) => (await blobs.list(container, blobPrefix({}, address(d, id), 'photoUrl'))).map((b) => b.name).sort();
const stored = async (d: string, id: string) => (await server.store.getEntity(address(d, id)))?.properties.photoUrl ?? null;
const bytesAt = async (url: string) => Buffer.from(await (await fetch(url)).arrayBuffer());
const createEmployee = (d: string, id: string, photo?: Buffer) =>
  server.query(`mutation ($input: CreateEmployeeInput!) { createEmployee(input: $input) { employee { id photoUrl } } }`, {
    input: {
      departmentId: d,
      id,
      email: `blob${d}${id}@contoso.com`,
      firstName: 'B',
      lastName: 'Lob',
      ...(photo && { photoUrl: { contentType: 'image/png', base64: photo.toString('base64') } }),
    },
  });
const deleteEmployee = (d: string, id: string) =>
  server.query(`mutation ($input: DeleteEmployeeInput!) { deleteEmployee(input: $input) { employee { id } } }`, { input: { departmentId: d, id } });

describe('the compiler', () => {
  const directives = { name: 'directives.graphql', body: readFileSync(DIRECTIVES_FILE, 'utf8') };
  const base = (field: string, extra = '') => `
type Doc @entity(table: "Docs", partitionKey: "{group}", rowKey: "doc_{id}") { group: ID! id: ID! ${field} }
type Query { doc(group: ID!, id: ID!): Doc @point }
${extra}`;
  function refusal(sdl: string): TablegraphError {
    try {
      compileSchema([directives, { name: 'docs.graphql', body: sdl }]);
    } catch (e) {
      if (isTablegraphError(e, ErrorCode.SCHEMA_INVALID)) return e;
      throw e;
    }
    throw new Error('compiled, but should have been refused');
  }

  test.each([
    ['a non-null field', 'scan: String! @blob(container: "scans")', /nullable String field/],
    ['an Int field', 'scan: Int @blob(container: "scans")', /nullable String field/],
    ['a container name that is none', 'scan: String @blob(container: "Scans_1")', /is not a container name/],
    ['maxBytes of 0', 'scan: String @blob(container: "scans", maxBytes: 0)', /maxBytes: 0/],
    ['a read URL of 10 s', 'scan: String @blob(container: "scans", expiresInSeconds: 10)', /expiresInSeconds: 10/],
    ['an encrypted blob', 'scan: String @blob(container: "scans") @encrypted', /@blob and @encrypted/],
  ])('refuses @blob on %s, with its location', (_name, field, message) => {
    const e = refusal(base(field));
    expect(e.message).toMatch(message);
    expect(e.message).toMatch(/docs\.graphql:2:\d+/);
  });

  test('refuses a @blob in a key template, a blob input that is not BlobInput and a @blobUpload naming no @blob', () => {
    expect(refusal(base('scan: String @blob(container: "scans")').replace('rowKey: "doc_{id}"', 'rowKey: "doc_{id}_{scan}"')).message).toMatch(
      /names \{scan\}, a @blob/,
    );
    const mutation = (input: string, payload: string) =>
      base(
        'scan: String @blob(container: "scans")',
        `input SetScan { group: ID! id: ID! ${input} }\ntype SetScanPayload { doc: Doc! ${payload} }\ntype Mutation { setScan(input: SetScan!): SetScanPayload! @write(entity: "Doc", action: UPDATE) }`,
      );
    expect(refusal(mutation('scan: String', '')).message).toMatch(/SetScan\.scan must be a nullable BlobInput/);
    expect(refusal(mutation('scan: BlobInput', 'url: String @blobUpload(field: "id")')).message).toMatch(
      /@blobUpload\(field: "id"\) must name a @blob field of Doc/,
    );
    const ok = compileSchema([directives, { name: 'docs.graphql', body: mutation('scan: BlobInput', 'url: String @blobUpload(field: "scan")') }]);
    expect(ok.model.writes.get('Mutation.setScan')!.uploadFields).toEqual(new Map([['url', 'scan']]));
  });

  test('the HR schema: Employee.photoUrl in the photos container, setEmployeePhoto with its upload URL field', () => {
    expect(model.entities.get('Employee')!.fields.get('photoUrl')!.blob).toEqual({
      container: 'photos',
      maxBytes: 131072,
      contentTypes: ['image/jpeg', 'image/png', 'image/webp'],
      expiresInSeconds: 900,
    });
    expect(model.writes.get('Mutation.setEmployeePhoto')!.uploadFields).toEqual(new Map([['photoUploadUrl', 'photoUrl']]));
  });
});

describe('setEmployeePhoto and Employee.photoUrl against Azurite', () => {
  test("base64 bytes: uploaded under the entity's prefix, the entity holds the name, photoUrl reads them back (no storage call)", async () => {
    const photo = png(1);
    const r = await setPhoto('Marketing', '1', photo);
    expect(r.errors).toBeUndefined();
    expect(r.data.setEmployeePhoto.photoUploadUrl).toBeNull();
    // Table calls only: the cleanup message and the Put Blob are not in extensions.cost.
    expect(r.extensions.cost).toMatchObject({ writes: 1 });
    process.stdout.write(`setEmployeePhoto (base64, ${photo.length} bytes): extensions.cost ${JSON.stringify(r.extensions.cost)}\n`);
    const name = await stored('Marketing', '1');
    expect(name).toMatch(new RegExp(`^${directory}/[0-9a-f]{40}/photoUrl/[0-9a-f-]{36}$`));
    expect(await listed('Marketing', '1')).toEqual([name]);
    const read = await server.query(READ, { d: 'Marketing', id: '1' });
    expect(read.extensions.cost).toMatchObject({ pointQueries: 1, roundTrips: 1 }); // the employee's; the URL is signed locally
    const response = await fetch(read.data.employee.photoUrl);
    expect(response.headers.get('content-type')).toBe('image/png');
    expect(Buffer.from(await response.arrayBuffer())).toEqual(photo);
    // The read URL is read-only.
    expect((await fetch(read.data.employee.photoUrl, { method: 'PUT', headers: { 'x-ms-blob-type': 'BlockBlob' }, body: 'x' })).status).toBe(403);
  });

  test('no bytes: an upload URL the client PUTs the photo to', async () => {
    const r = await server.query(SET, { input: { departmentId: 'Marketing', id: '2', photoUrl: { contentType: 'image/jpeg' } } });
    expect(r.errors).toBeUndefined();
    const { photoUploadUrl, employee } = r.data.setEmployeePhoto;
    expect(photoUploadUrl).toMatch(/sp=cw/);
    expect((await fetch(employee.photoUrl)).status).toBe(404); // not uploaded yet
    const put = await fetch(photoUploadUrl, { method: 'PUT', headers: { 'x-ms-blob-type': 'BlockBlob', 'content-type': 'image/jpeg' }, body: png(2) });
    expect(put.status).toBe(201);
    expect(await bytesAt(employee.photoUrl)).toEqual(png(2));
  });

  test('bad input is refused with a code before anything is sent: no blob, no change', async () => {
    const before = { name: await stored('Sales', '10'), blobs: await listed('Sales', '10') };
    const cases: Array<[Record<string, unknown>, string, unknown]> = [
      [{ contentType: 'text/html', base64: 'aGk=' }, ErrorCode.BAD_USER_INPUT, 'ContentTypeNotAllowed'],
      [{ contentType: 'image/png\r\nx-ms-meta: 1', base64: 'aGk=' }, ErrorCode.BAD_USER_INPUT, 'ContentTypeInvalid'],
      [{ contentType: 'image/png', base64: 'not base64!' }, ErrorCode.BAD_USER_INPUT, 'NotBase64'],
      [{ contentType: 'image/png', base64: '' }, ErrorCode.BAD_USER_INPUT, 'Empty'],
      [{ contentType: 'image/png', base64: Buffer.alloc(131073).toString('base64') }, ErrorCode.LIMIT_EXCEEDED, undefined],
    ];
    for (const [photoUrl, code, reason] of cases) {
      const r = await server.query(SET, { input: { departmentId: 'Sales', id: '10', photoUrl } });
      expect(r.errors?.[0].extensions).toMatchObject({ code, field: 'photoUrl', ...(reason !== undefined && { reason }) });
    }
    const missing = await setPhoto('Sales', '999999', png(3));
    expect(missing.errors?.[0].extensions.code).toBe(ErrorCode.NOT_FOUND);
    expect({ name: await stored('Sales', '10'), blobs: await listed('Sales', '10') }).toEqual(before);
  });

  test(
    'replaced, cleared, deleted, failed, concurrent, recreated and moved: no orphan once the cleanups drained; verify reports one',
    async () => {
      // Replaced three times, the last through an upload URL never used; and concurrently, eight writers of one employee.
      for (const n of [10, 11, 12]) expect((await setPhoto('Sales', '10', png(n))).errors).toBeUndefined();
      const concurrent = await Promise.all([20, 21, 22, 23, 24, 25, 26, 27].map((n) => setPhoto('Marketing', '1', png(n))));
      expect(concurrent.map((r) => r.errors)).toEqual(concurrent.map(() => undefined));
      // Writers under one ETag: one wins, the others fail with CONFLICT after their upload — a failed write's blob.
      const etag = (await setPhoto('Marketing', '2', png(30))).data.setEmployeePhoto.employee.etag;
      const raced = await Promise.all([31, 32, 33].map((n) => setPhoto('Marketing', '2', png(n), { ifMatch: etag })));
      expect(raced.filter((r) => r.errors?.[0].extensions.code === ErrorCode.CONFLICT)).toHaveLength(2);
      const winner = raced.findIndex((r) => !r.errors);
      // Cleared; deleted; deleted and created again under the same key with another photo.
      expect((await createEmployee('Sales', '801', png(40))).errors).toBeUndefined();
      expect((await setPhoto('Sales', '801', null)).errors).toBeUndefined();
      expect((await createEmployee('Sales', '802', png(41))).errors).toBeUndefined();
      expect((await deleteEmployee('Sales', '802')).errors).toBeUndefined();
      expect((await createEmployee('Sales', '803', png(42))).errors).toBeUndefined();
      expect((await deleteEmployee('Sales', '803')).errors).toBeUndefined();
      expect((await createEmployee('Sales', '803', png(43))).errors).toBeUndefined();
      // Moved to another department: the photo is copied to a name of the new address.
      expect((await createEmployee('Sales', '804', png(44))).errors).toBeUndefined();
      const moved = await server.query(`mutation ($input: MoveEmployeeInput!) { moveEmployee(input: $input) { employee { id } } }`, {
        input: { departmentId: 'Sales', id: '804', toDepartmentId: 'Marketing' },
      });
      expect(moved.errors).toBeUndefined();
      // A blob no write made, under the prefix of an employee nobody writes: no message will ever come for it.
      const stray = `${blobPrefix({}, address('Sales', '805'), 'photoUrl')}stray`;
      await blobs.upload(container, stray, png(50), 'image/png');
      const sentAt = Date.now();

      expect(await listed('Sales', '10')).toHaveLength(3);
      const expected = {
        'Sales/10': 1,
        'Marketing/1': 1,
        'Marketing/2': 1,
        'Sales/801': 0,
        'Sales/802': 0,
        'Sales/803': 1,
        'Sales/804': 0,
        'Marketing/804': 1,
      };
      const counts = async () =>
        Object.fromEntries(await Promise.all(Object.keys(expected).map(async (k) => [k, (await listed(...(k.split('/') as [string, string]))).length])));
      // The cleanups run DELAY_S after their writes: a poll every second until then, and a deadline a minute after.
      const polled = Date.now();
      await until('the blob cleanups', async () => JSON.stringify(await counts()) === JSON.stringify(expected), {
        timeoutMs: (DELAY_S + 60) * 1000,
        everyMs: 1000,
      }).catch(() => undefined); // the assertion below names the difference
      const waited = Date.now() - polled;
      expect(await counts()).toEqual(expected);
      process.stdout.write(
        `blob cleanup converged ${((Date.now() - sentAt) / 1000).toFixed(1)} s after the last write (delay ${DELAY_S} s; polled ${(waited / 1000).toFixed(1)} s)\n`,
      );

      // What is left is what the entities name, and it reads back.
      for (const [d, id, photo] of [
        ['Sales', '10', null],
        ['Marketing', '1', null],
        ['Marketing', '2', png(31 + winner)],
        ['Sales', '803', png(43)],
        ['Marketing', '804', png(44)],
      ] as const) {
        const name = await stored(d, id);
        expect(await listed(d, id)).toEqual([name]);
        const url = (await server.query(READ, { d, id })).data.employee.photoUrl;
        if (photo) expect(await bytesAt(url)).toEqual(photo);
      }
      expect(await bytesAt((await server.query(READ, { d: 'Sales', id: '10' })).data.employee.photoUrl)).toEqual(png(12));
      const last = await bytesAt((await server.query(READ, { d: 'Marketing', id: '1' })).data.employee.photoUrl);
      expect([20, 21, 22, 23, 24, 25, 26, 27].map(png).some((p) => p.equals(last))).toBe(true);
      expect(await stored('Sales', '801')).toBeNull();

      // verify: the stray blob is an orphan (older than the delay by now); removed, everything is clean.
      const check = () =>
        verifyDerived({
          store: server.store,
          model: compileHr(server.config.tablePrefix).model,
          types: ['Employee'],
          blobs: { store: blobs, cleanupDelaySeconds: DELAY_S },
        });
      const report = await check();
      expect(report.blobs).toEqual([expect.objectContaining({ field: 'Employee.photoUrl', container, orphaned: [expect.objectContaining({ name: stray })] })]);
      expect(report.ok).toBe(false);
      expect(formatVerifyReport(report)).toMatch(/FAIL Employee\.photoUrl \(@blob, container .*\): .* 1 orphaned/);
      await blobs.delete(container, stray);
      const clean = await check();
      expect(clean.blobs[0].orphaned).toEqual([]);
      expect(clean.ok).toBe(true);
    },
    (DELAY_S + 150) * 1000,
  );
});

describe('cleanup messages', () => {
  test('only for a write that makes a blob or drops one its entity named: none for failed writes, nor for entities without a blob', async () => {
    const prefix = uniquePrefix();
    const sdl = `
type Doc @entity(table: "Docs", partitionKey: "{group}", rowKey: "doc_{id}") { group: ID! id: ID! title: String scan: String @blob(container: "scans") }
type Query { doc(group: ID!, id: ID!): Doc @point }
type Mutation {
  createDoc(input: CreateDocInput!): DocPayload! @write(entity: "Doc", action: CREATE)
  updateDoc(input: UpdateDocInput!): DocPayload! @write(entity: "Doc", action: UPDATE)
  replaceDoc(input: ReplaceDocInput!): DocPayload! @write(entity: "Doc", action: REPLACE)
  deleteDoc(input: DeleteDocInput!): DocPayload! @write(entity: "Doc", action: DELETE)
}`;
    const directives = { name: 'directives.graphql', body: readFileSync(DIRECTIVES_FILE, 'utf8') };
    const { model: docs } = compileSchema([directives, { name: 'docs.graphql', body: sdl }], { tablePrefix: prefix });
    const sent: string[] = [];
    const writer = new WriteExecutor({
      model: docs,
      store: server.store,
      workQueue: { send: async (text) => void sent.push(text) },
      blobs: { store: blobs, cleanupDelaySeconds: DELAY_S },
    });
    for (const t of docs.tables) await server.store.ensureTable(t);
    const cleanups = () => sent.filter((t) => decodeMessage(t).kind === 'blobCleanup').length;
    const write = async (mutation: string, input: Record<string, unknown>): Promise<string> => {
      const before = cleanups();
      const outcome = await writer.execute(docs.writes.get(`Mutation.${mutation}`)!, input).then(
        () => 'OK',
        (e: TablegraphError) => e.code,
      );
      return `${outcome}, ${cleanups() - before} cleanup`;
    };
    const scan = { contentType: 'image/png', base64: png(7).toString('base64') };
    const steps: Array<[string, Record<string, unknown>, string]> = [
      ['createDoc', { group: 'g', id: '1', title: 'plain' }, 'OK, 0 cleanup'],
      ['createDoc', { group: 'g', id: '2', scan }, 'OK, 1 cleanup'], // it uploads
      ['deleteDoc', { group: 'g', id: '9' }, 'NOT_FOUND, 0 cleanup'],
      ['replaceDoc', { group: 'g', id: '1', title: 'still plain' }, 'OK, 0 cleanup'],
      ['updateDoc', { group: 'g', id: '2', scan: null, ifMatch: 'W/"stale"' }, 'CONFLICT, 0 cleanup'],
      ['updateDoc', { group: 'g', id: '2', title: 'titled' }, 'OK, 0 cleanup'], // keeps its blob
      ['deleteDoc', { group: 'g', id: '1' }, 'OK, 0 cleanup'],
      ['replaceDoc', { group: 'g', id: '2', title: 'no scan now' }, 'OK, 1 cleanup'], // drops its blob
      ['createDoc', { group: 'g', id: '3', scan }, 'OK, 1 cleanup'],
      ['deleteDoc', { group: 'g', id: '3' }, 'OK, 1 cleanup'],
    ];
    const outcomes = [];
    for (const [mutation, input] of steps) outcomes.push(`${mutation} ${input.id}: ${await write(mutation, input)}`);
    expect(outcomes).toEqual(steps.map(([mutation, input, expected]) => `${mutation} ${input.id}: ${expected}`));
    await Promise.all(docs.tables.map((t) => server.store.deleteTable(t)));
  });
});

describe('the cleanup handler, redelivered and killed midway', () => {
  test('run twice on one message, and once more after a worker died between deletes: the same end', async () => {
    const hr = compileHr(server.config.tablePrefix).model;
    expect((await createEmployee('Sales', '900', png(60))).errors).toBeUndefined();
    for (const n of [61, 62, 63]) expect((await setPhoto('Sales', '900', png(n))).errors).toBeUndefined();
    const named = await stored('Sales', '900');
    expect(await listed('Sales', '900')).toHaveLength(4);
    const message = blobCleanupMessage('Employee', address('Sales', '900'), DELAY_S);
    // Run as if the delay had passed (its blobs are then older than half of it).
    const later = () => Date.now() + DELAY_S * 1000;
    let deletes = 0;
    const dying = new BlobStore({ connectionString: connectionString() });
    const del = dying.delete.bind(dying);
    dying.delete = async (c, n) => {
      if (++deletes > 1) throw new Error('worker killed');
      return del(c, n);
    };
    await expect(cleanUpBlobs(message, { model: hr, store: server.store, blobs: dying, now: later })).rejects.toThrow('worker killed');
    expect(await listed('Sales', '900')).toHaveLength(3);
    expect(await cleanUpBlobs(message, { model: hr, store: server.store, blobs, now: later })).toEqual({ deleted: 2, kept: 1, rejected: 0 });
    expect(await cleanUpBlobs(message, { model: hr, store: server.store, blobs, now: later })).toEqual({ deleted: 0, kept: 1, rejected: 0 });
    expect(await listed('Sales', '900')).toEqual([named]);
    // Before the delay, nothing is old enough to judge: a write in flight keeps its blob.
    expect((await setPhoto('Sales', '900', png(64))).errors).toBeUndefined();
    expect(await cleanUpBlobs(message, { model: hr, store: server.store, blobs })).toEqual({ deleted: 0, kept: 2, rejected: 0 });
  });

  test('an upload URL cannot limit size or type: the cleanup deletes a named blob that breaks the declaration once its URL has expired', async () => {
    const hr = compileHr(server.config.tablePrefix).model;
    expect((await createEmployee('Sales', '901')).errors).toBeUndefined();
    const html = Buffer.from(`<html>${'x'.repeat(300_000)}</html>`);
    for (const [id, body, type] of [
      ['901', html, 'text/html'],
      ['902', png(5), 'image/png'],
    ] as const) {
      if (id === '902') expect((await createEmployee('Sales', id)).errors).toBeUndefined();
      const r = await server.query(SET, { input: { departmentId: 'Sales', id, photoUrl: { contentType: 'image/png' } } });
      const put = await fetch(r.data.setEmployeePhoto.photoUploadUrl, {
        method: 'PUT',
        headers: { 'x-ms-blob-type': 'BlockBlob', 'content-type': type },
        body,
      });
      expect(put.status).toBe(201); // accepted: Blob storage checks neither
    }
    const later = () => Date.now() + DELAY_S * 1000;
    const clean = (id: string) =>
      cleanUpBlobs(blobCleanupMessage('Employee', address('Sales', id), DELAY_S), { model: hr, store: server.store, blobs, now: later });
    expect(await clean('901')).toEqual({ deleted: 1, kept: 0, rejected: 1 });
    expect(await listed('Sales', '901')).toEqual([]);
    expect((await fetch((await server.query(READ, { d: 'Sales', id: '901' })).data.employee.photoUrl)).status).toBe(404);
    expect(await clean('902')).toEqual({ deleted: 0, kept: 1, rejected: 0 }); // a PNG within maxBytes stays
    // Before its upload URL has expired, it is not judged: the client may still be uploading.
    const r = await server.query(SET, { input: { departmentId: 'Sales', id: '901', photoUrl: { contentType: 'image/png' } } });
    await fetch(r.data.setEmployeePhoto.photoUploadUrl, { method: 'PUT', headers: { 'x-ms-blob-type': 'BlockBlob', 'content-type': 'text/html' }, body: html });
    expect(await cleanUpBlobs(blobCleanupMessage('Employee', address('Sales', '901'), DELAY_S), { model: hr, store: server.store, blobs })).toEqual({
      deleted: 0,
      kept: 1,
      rejected: 0,
    });
  });
});
