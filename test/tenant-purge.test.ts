/**
 * A deleted tenant's changes and rows taken out of the backup (src/backup/tenant-purge.ts, docs/tenancy.md "Deleting
 * a tenant"), on a backup written for the test in Azurite's Blob storage, on a schema written for it: a capture pass
 * and a snapshot hold two tenants' notes, and a global type whose PartitionKey looks like a tenant's. The purge takes
 * out the deleted tenant's lines and its blob copies, and nothing else; the backup still reads back whole; run again
 * it does nothing; a purge cut short is finished by the next; with no capture pass after the delete it waits, then
 * refuses with CaptureBehind.
 */
import { readFileSync } from 'node:fs';
import { compileSchema } from '../src/compiler/compile';
import { purgeTenantFromBackup, type TenantPurgeOptions } from '../src/backup/tenant-purge';
import { listManifests, listSnapshots, snapshotId, SNAPSHOTS, writeJsonBlob } from '../src/backup/backup-blobs';
import { BACKUP_FORMAT, decodeSegment, encodeSegment, type BackupRow, type SnapshotManifest } from '../src/backup/backup-format';
import {
  CHANGES,
  LATEST_PASS,
  decodeChangeSegment,
  encodeChangeSegment,
  parsePassManifest,
  type CapturedChange,
  type PassManifest,
} from '../src/backup/change-format';
import { backupBlobName } from '../src/backup/blob-copies';
import { TablegraphError } from '../src/errors';
import { DIRECTIVES_FILE, testBlobs, uniquePrefix } from './support/harness';

const SDL = `
extend schema @tenancy(claim: "tid")
type Note @entity(table: "Notes", partitionKey: "{board}", rowKey: "note_{id}") {
  board: ID!
  id: ID!
  text: String
  file: String @blob(container: "files")
}
type Flag @entity(table: "Flags", partitionKey: "{id}", rowKey: "flag") @global { id: ID! }
type Query { note(board: ID!, id: ID!): Note @point flag(id: ID!): Flag @point }
`;
const { model } = compileSchema([
  { name: 'schema/directives.graphql', body: readFileSync(DIRECTIVES_FILE, 'utf8') },
  { name: 'purge.graphql', body: SDL },
]);
const NOTE = model.entities.get('Note')!.entityType;
const FLAG = model.entities.get('Flag')!.entityType;
const blobs = testBlobs();

/** A note of `tenant` (its PartitionKey `<tenant>_<board>`), naming a file blob. */
const note = (tenant: string, i: number): BackupRow => ({
  table: 'Notes',
  entity: {
    partitionKey: `${tenant}_b${i % 2}`,
    rowKey: `note_${i}`,
    properties: { text: { type: 'String', value: `${tenant} ${i}` }, file: { type: 'String', value: `tenant=${tenant}/Notes/h${i}/file/f${i}` } },
  },
});
/** The global flag whose PartitionKey starts as the deleted tenant's: it is kept. */
const flag: BackupRow = { table: 'Flags', entity: { partitionKey: 'gone_1', rowKey: 'flag', properties: {} } };
const change = (row: BackupRow, of: string, i: number): CapturedChange => ({
  table: row.table,
  partitionKey: row.entity.partitionKey,
  rowKey: row.entity.rowKey,
  changeKey: `~change_${i}`,
  at: Date.parse('2026-11-28T10:00:00Z') + i,
  committed: '2026-11-28T10:00:01.000Z',
  kind: 'CREATED',
  of,
  image: [row],
});

let container: string;
const passId = '20261128T100000Z-0001';
let snapshot: string;

/** A backup: one capture pass (a segment per table) and one snapshot (a segment per type, and its notes' file copies). */
async function writeBackup(): Promise<void> {
  container = `${uniquePrefix().toLowerCase()}-backup`;
  await blobs.ensureContainer(container);
  const notes = [...[0, 1, 2].map((i) => note('gone', i)), ...[3, 4].map((i) => note('kept', i))];
  const byTable = { Notes: notes.map((n, i) => change(n, NOTE, i)), Flags: [change(flag, FLAG, 9)] };
  const pass: PassManifest = {
    format: BACKUP_FORMAT,
    kind: 'changes',
    id: passId,
    tablePrefix: 'tp',
    schemaHash: 'h',
    startedAt: '2026-11-28T10:00:00.000Z',
    finishedAt: '2026-11-28T10:00:02.000Z',
    changes: 6,
    firstAt: 0,
    lastAt: 0,
    segments: [],
  };
  for (const [table, changes] of Object.entries(byTable)) {
    const { bytes, sha256 } = encodeChangeSegment(changes);
    const name = `${CHANGES}/${passId}/${table}.ndjson.gz`;
    await blobs.upload(container, name, bytes, 'application/gzip');
    pass.segments.push({ name, table, rows: changes.length, bytes: bytes.length, sha256 });
  }
  await writeJsonBlob(blobs, container, `${CHANGES}/${passId}/manifest.json`, pass);
  snapshot = snapshotId(new Date());
  const manifest: SnapshotManifest = {
    ...{ format: BACKUP_FORMAT, kind: 'snapshot', id: snapshot, tablePrefix: 'tp', schemaHash: 'h', sdl: SDL },
    ...{ startedAt: pass.startedAt, finishedAt: pass.finishedAt, latestEntityTimestamp: pass.startedAt, rows: 6, blobs: 5, segments: [] },
  };
  for (const [entityType, rows] of [
    [NOTE, notes],
    [FLAG, [flag]],
  ] as const) {
    const { bytes, sha256 } = encodeSegment([...rows]);
    const name = `${SNAPSHOTS}/${snapshot}/00000${manifest.segments.length + 1}-${entityType}.ndjson.gz`;
    await blobs.upload(container, name, bytes, 'application/gzip');
    manifest.segments.push({ name, entityType, rows: rows.length, bytes: bytes.length, sha256 });
  }
  for (const n of notes) {
    await blobs.upload(container, backupBlobName(snapshot, NOTE, 'file', String(n.entity.properties.file!.value)), Buffer.from('x'), 'text/plain');
  }
  await writeJsonBlob(blobs, container, `${SNAPSHOTS}/${snapshot}/manifest.json`, manifest);
}

/** What the backup holds, read as a restore reads it (every segment checked against its manifest). */
async function readBack(): Promise<{ changes: string[]; rows: string[]; copies: string[]; files: string[] }> {
  const changes: string[] = [];
  for (const pass of await listManifests(blobs, container, CHANGES, parsePassManifest)) {
    for (const s of pass.segments) changes.push(...decodeChangeSegment((await blobs.download(container, s.name))!.bytes, s).map((c) => c.partitionKey));
  }
  const rows: string[] = [];
  for (const m of await listSnapshots(blobs, container)) {
    for (const s of m.segments) rows.push(...decodeSegment((await blobs.download(container, s.name))!.bytes, s).map((r) => r.entity.partitionKey));
  }
  const copies = (await blobs.list(container, `${SNAPSHOTS}/${snapshot}/blobs/`)).map((b) => b.name.split('/').slice(-1)[0]);
  const files = (await blobs.list(container, '')).map((b) => b.name).filter((n) => n.endsWith('.ndjson.gz'));
  return { changes: changes.sort(), rows: rows.sort(), copies: copies.sort(), files };
}

const purge = (extra: Partial<TenantPurgeOptions> = {}) =>
  purgeTenantFromBackup({ blobs, container, model, tenant: 'gone', deletedAt: Date.now() - 60_000, captureWaitMs: 0, ...extra });

beforeEach(writeBackup);

test("takes out the tenant's changes, rows and blob copies, and nothing else; the backup reads back whole; run again, it does nothing", async () => {
  const result = await purge();
  expect(result).toEqual({ passes: 1, snapshots: 1, changes: 3, rows: 3, blobs: 3, abandoned: 0, incompleteSnapshots: [] });
  const after = await readBack();
  expect(after).toEqual({
    changes: ['gone_1', 'kept_b0', 'kept_b1'],
    rows: ['gone_1', 'kept_b0', 'kept_b1'],
    copies: ['f3', 'f4'],
    files: expect.any(Array),
  });
  // The old segments are gone: the manifests name every segment left, and no other.
  const snap = (await listSnapshots(blobs, container))[0];
  expect(snap).toMatchObject({ rows: 3, blobs: 2 });
  const pass = (await listManifests(blobs, container, CHANGES, parsePassManifest))[0];
  expect(pass.changes).toBe(3);
  expect(after.files.sort()).toEqual([...pass.segments, ...snap.segments].map((s) => s.name).sort());
  expect(await purge()).toEqual({ passes: 0, snapshots: 0, changes: 0, rows: 0, blobs: 0, abandoned: 0, incompleteSnapshots: [] });
  expect(await readBack()).toEqual(after);
});

test('a purge cut short is finished by the next; a capture pass cut short is deleted; a snapshot not complete is named', async () => {
  // What a purge killed between the upload of a segment and the manifest leaves: a segment the manifest does not name.
  const stray = `${CHANGES}/${passId}/Notes.purged-0badcafe.ndjson.gz`;
  await blobs.upload(container, stray, encodeChangeSegment([]).bytes, 'application/gzip');
  // A capture pass killed before its manifest: its segment holds the tenant's changes, and no restore reads it.
  const cutShort = `${CHANGES}/20261128T110000Z-0002/00000.ndjson.gz`;
  await blobs.upload(container, cutShort, encodeChangeSegment([change(note('gone', 7), NOTE, 7)]).bytes, 'application/gzip');
  // A snapshot under way: its progress, and a segment of the tenant's rows; left as it is.
  const underWay = snapshotId(new Date(Date.now() + 1000));
  const unfinished = `${SNAPSHOTS}/${underWay}/000001-${NOTE}.ndjson.gz`;
  await blobs.upload(container, unfinished, encodeSegment([note('gone', 8)]).bytes, 'application/gzip');
  await writeJsonBlob(blobs, container, `${SNAPSHOTS}/${underWay}/progress.json`, { id: underWay });
  expect((await readBack()).files).toEqual(expect.arrayContaining([stray, cutShort]));
  const result = await purge();
  expect([result.abandoned, result.incompleteSnapshots]).toEqual([1, [underWay]]);
  const after = await readBack();
  expect(after.files).not.toContain(stray);
  expect(after.files).not.toContain(cutShort);
  expect(after.files).toContain(unfinished);
  expect(after.changes).toEqual(['gone_1', 'kept_b0', 'kept_b1']);
});

test('with no capture pass after the delete, it waits for one, then refuses with CaptureBehind and changes nothing', async () => {
  const before = await readBack();
  await writeJsonBlob(blobs, container, LATEST_PASS, { startedAt: new Date(Date.now() - 120_000).toISOString() });
  const started = Date.now();
  const error = await purge({ deletedAt: Date.now(), captureWaitMs: 1500 }).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(TablegraphError);
  expect([(error as TablegraphError).code, (error as TablegraphError).details.reason]).toEqual(['STORAGE_UNAVAILABLE', 'CaptureBehind']);
  expect(Date.now() - started).toBeGreaterThanOrEqual(1500);
  expect(await readBack()).toEqual(before);
  // A pass that started after the delete: the purge goes on.
  await writeJsonBlob(blobs, container, LATEST_PASS, { startedAt: new Date(Date.now() + 60_000).toISOString() });
  expect((await purge({ deletedAt: Date.now(), captureWaitMs: 1500 })).changes).toBe(3);
});

test('a container without a backup: nothing to take out', async () => {
  container = `${uniquePrefix().toLowerCase()}-empty`;
  expect(await purge({ captureWaitMs: 60_000 })).toEqual({ passes: 0, snapshots: 0, changes: 0, rows: 0, blobs: 0, abandoned: 0, incompleteSnapshots: [] });
});
