/**
 * Continuous backup's pieces without storage: a change entity's image (src/model/change-log.ts) comes back as
 * written and is refused past its limit; one EGT's changes share one time; a change segment (src/backup/
 * change-format.ts) round-trips and refuses what differs; a bulk write overlaps a restore's window exactly when it
 * wrote in it (src/backup/bulk-writes.ts); a write its image pushes past one EGT is refused, not deferred for ever;
 * capture with nowhere to copy to is refused at start-up.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { compileSchema } from '../../src/compiler/compile';
import { planGroup } from '../../src/write/group-plan';
import { assertBackupReachable } from '../../src/runtime/capture';
import { loadConfig } from '../../src/runtime/config';
import { BlobStore } from '../../src/storage/blob-store';
import { DIRECTIVES_FILE } from '../support/harness';
import { changeEntity, changeImage, changeTime, stampChanges } from '../../src/model/change-log';
import { bulkWriteBetween, type BulkWrite } from '../../src/backup/bulk-writes';
import { decodeChangeSegment, encodeChangeSegment, parsePassManifest, type CapturedChange } from '../../src/backup/change-format';
import type { EntityToWrite, StoredEntity } from '../../src/storage/storage-types';

const PART: EntityToWrite = {
  partitionKey: 'shelf 1',
  rowKey: 'book_7',
  properties: {
    EntityType: { type: 'String', value: 'Book' },
    pages: { type: 'Int32', value: 300 },
    sealed: { type: 'Binary', value: new Uint8Array([1, 2, 3]) },
    big: { type: 'Int64', value: 12345678901234567n },
  },
};

/** A change entity as storage gives it back: typed values as plain ones. */
function stored(e: EntityToWrite): StoredEntity {
  const properties: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(e.properties)) if (v) properties[k] = v.value;
  return { partitionKey: e.partitionKey, rowKey: e.rowKey, properties, etag: 'W/"1"', timestamp: '2026-11-28T04:00:00.000Z' };
}

test("a change entity's image (two parts) comes back as the rows written; none for a change without one", () => {
  const part2 = { ...PART, rowKey: 'book_7_part2' };
  const address = { table: 'Shelves', partitionKey: PART.partitionKey, rowKey: PART.rowKey };
  const e = changeEntity(address, { entityType: 'Book', kind: 'UPDATED', writeId: 'w1', at: Date.now(), image: [PART, part2] });
  expect(changeImage(stored(e))).toEqual([PART, part2]);
  expect(changeImage(stored(changeEntity(address, { entityType: 'Book', kind: 'DELETED', writeId: 'w2', at: Date.now() })))).toBeUndefined();
});

test('an image over 15 properties of 64,000 bytes compressed is refused: LIMIT_EXCEEDED, reason ChangeImageTooLarge', () => {
  // Random bytes do not compress: 1,400,000 of them as base64 text are some 1.4 MB compressed.
  const huge = { ...PART, properties: { ...PART.properties, blob: { type: 'String' as const, value: randomBytes(1_400_000).toString('base64') } } };
  const address = { table: 'Shelves', partitionKey: PART.partitionKey, rowKey: PART.rowKey };
  expect(() => changeEntity(address, { entityType: 'Book', kind: 'CREATED', writeId: 'w', at: 1, image: [huge] })).toThrow(
    expect.objectContaining({ code: 'LIMIT_EXCEEDED', details: expect.objectContaining({ reason: 'ChangeImageTooLarge' }) }),
  );
});

test("an EGT's change entities are stamped with one time: a restore takes all of it or none", () => {
  const address = { table: 'Shelves', partitionKey: 'p', rowKey: 'r' };
  const ops = ['a', 'b', 'c'].map((w) => ({
    kind: 'create' as const,
    entity: changeEntity({ ...address, rowKey: w }, { entityType: 'Book', kind: 'CREATED', writeId: w, at: 1 }),
  }));
  const stamped = stampChanges(ops).map((op) => (op.kind === 'create' ? op.entity.rowKey : ''));
  expect(new Set(stamped.map(changeTime)).size).toBe(1);
  expect(new Set(stamped).size).toBe(3);
  expect(changeTime(stamped[0])).toBeGreaterThan(1);
});

const CHANGE: CapturedChange = {
  table: 'Shelves',
  partitionKey: 's1',
  rowKey: 'book_1',
  changeKey: '~change_2516064625771919999_w',
  at: 1_764_300_000_000,
  committed: '2026-11-28T04:00:00.1234567Z',
  kind: 'CREATED',
  of: 'Book',
  image: [{ table: 'Shelves', entity: PART }],
  movedFrom: { table: 'Shelves', partitionKey: 's0', rowKey: 'book_1' },
};

test('a change segment round-trips (a delete without an image too); a changed byte or count is refused, naming it', () => {
  const deleted: CapturedChange = { ...CHANGE, kind: 'DELETED', image: null, movedFrom: undefined };
  const { bytes, sha256 } = encodeChangeSegment([CHANGE, deleted]);
  const record = { name: 'changes/p/00000.ndjson.gz', table: 'Shelves', rows: 2, bytes: bytes.length, sha256 };
  const { movedFrom: _none, ...withoutMove } = deleted;
  expect(decodeChangeSegment(bytes, record)).toEqual([CHANGE, withoutMove]);
  expect(() => decodeChangeSegment(bytes, { ...record, rows: 3 })).toThrow(/holds 2 changes, the manifest says 3/);
  const bad = Buffer.from(bytes);
  bad[bad.length - 1] ^= 1;
  expect(() => decodeChangeSegment(bad, record)).toThrow(
    expect.objectContaining({ code: 'DATA_INTEGRITY', details: expect.objectContaining({ reason: 'BackupCorrupt' }) }),
  );
  expect(() => parsePassManifest('{"format":1,"kind":"snapshot"}', 'changes/p/manifest.json')).toThrow(/not a format 1 pass/);
});

test('a bulk write overlaps a window exactly when it wrote in it; one never finished overlaps every later window', () => {
  const at = (s: string) => Date.parse(`2026-11-28T${s}Z`);
  const done: BulkWrite = { id: 'a', command: 'npm run load', startedAt: '2026-11-28T04:00:00Z', finishedAt: '2026-11-28T04:10:00Z' };
  const killed: BulkWrite = { id: 'b', command: 'npm run import', startedAt: '2026-11-28T05:00:00Z' };
  expect(bulkWriteBetween([done], at('04:11:00'), at('04:30:00'))).toBeUndefined(); // a snapshot after it
  expect(bulkWriteBetween([done], at('03:00:00'), at('03:59:59'))).toBeUndefined(); // a time before it
  expect(bulkWriteBetween([done], at('03:00:00'), at('04:05:00'))).toBe(done);
  expect(bulkWriteBetween([done], at('04:05:00'), at('06:00:00'))).toBe(done);
  expect(bulkWriteBetween([killed], at('07:00:00'), at('08:00:00'))).toBe(killed);
});

test('a write that fits one EGT alone but not with its image is refused (ChangeImageTooLarge), never deferred for ever', () => {
  // A wide type of 500 text fields (three entities), on the Cosmos DB Table API's 2 MiB EGTs.
  const fields = Array.from({ length: 500 }, (_, i) => `  f${String(i).padStart(3, '0')}: String`).join('\n');
  const sdl = `type Page @entity(table: "Pages", partitionKey: "{book}", rowKey: "page_{id}") {\n  book: ID!\n  id: ID!\n${fields}\n}
type Query { page(book: ID!, id: ID!): Page @point }
type Mutation { createPage(input: CreatePageInput!): PagePayload! @write(entity: "Page", action: CREATE) }`;
  const { model } = compileSchema([{ name: 'schema.graphql', body: `${fs.readFileSync(DIRECTIVES_FILE, 'utf8')}\n${sdl}` }], {});
  const write = model.writes.get('Mutation.createPage')!;
  const plan = (length: number, seal?: (e: EntityToWrite) => EntityToWrite) => {
    const input: Record<string, unknown> = { book: 'b', id: '1' };
    for (let i = 0; i < 500; i++) input[`f${String(i).padStart(3, '0')}`] = 'a'.repeat(length);
    const state = { entities: new Map(), holders: new Map(), references: new Map() };
    return planGroup(model, [{ write, input, writeId: 'w' }], state, { target: 'cosmos', table: 'Pages', ...(seal && { seal }) });
  };
  // The longest values that fit without an image (found by halving): with the image, the write is over the limit.
  let [fits, over] = [1, 6000];
  while (over - fits > 1) {
    const mid = Math.floor((fits + over) / 2);
    if (plan(mid).planned.length === 1) fits = mid;
    else over = mid;
  }
  expect(plan(fits).planned).toHaveLength(1);
  const sealed = plan(fits, (e) => e);
  expect([sealed.planned.length, sealed.deferred.length]).toEqual([0, 0]);
  expect(sealed.refused[0].error).toMatchObject({ code: 'LIMIT_EXCEEDED', details: { reason: 'ChangeImageTooLarge' } });
});

test('capture on and no Blob endpoint to copy to: CONFIG_INVALID at start-up, naming what to set; off, or with one, it starts', () => {
  const key = Buffer.alloc(32, 1).toString('base64');
  const tableOnly = `DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=${key};TableEndpoint=https://acct.table.cosmos.azure.com:443/;`;
  const blobs = new BlobStore({ connectionString: tableOnly });
  expect(() => assertBackupReachable(loadConfig({ AZURE_STORAGE_CONNECTION_STRING: tableOnly }), blobs)).toThrow(
    expect.objectContaining({ code: 'CONFIG_INVALID', details: { errors: { TABLEGRAPH_BACKUP_CAPTURE: 'needs a Blob endpoint' } } }),
  );
  expect(() => assertBackupReachable(loadConfig({ AZURE_STORAGE_CONNECTION_STRING: tableOnly, TABLEGRAPH_BACKUP_CAPTURE: 'false' }), blobs)).not.toThrow();
  const withBackup = loadConfig({ AZURE_STORAGE_CONNECTION_STRING: tableOnly, TABLEGRAPH_BACKUP_CONNECTION_STRING: 'UseDevelopmentStorage=true' });
  expect(() => assertBackupReachable(withBackup, blobs)).not.toThrow();
});
