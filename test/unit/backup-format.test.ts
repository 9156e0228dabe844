/**
 * The backup format (src/backup/backup-format.ts): every EDM type comes back as it went in, and whatever differs from
 * what was written — a byte of a segment, its row count, a line, a manifest's shape — is refused with DATA_INTEGRITY
 * (reason BackupCorrupt), naming where.
 */
import { gzipSync } from 'node:zlib';
import { createHash } from 'node:crypto';
import { decodeRow, decodeSegment, encodeRow, encodeSegment, parseManifest, type BackupRow, type SegmentRecord } from '../../src/backup/backup-format';

const ROW: BackupRow = {
  table: 'Plots',
  entity: {
    partitionKey: 'p/1 ü',
    rowKey: 'plant_\u00e9\u4e2d',
    properties: {
      EntityType: { type: 'String', value: 'Plant' },
      litres: { type: 'Int32', value: -7 },
      ratio: { type: 'Double', value: 0.1 + 0.2 },
      big: { type: 'Int64', value: 9007199254740993n },
      flag: { type: 'Boolean', value: false },
      at: { type: 'DateTime', value: new Date('2026-11-28T01:02:03.456Z') },
      id: { type: 'Guid', value: '0f8fad5b-d9cb-469f-a165-70867728950e' },
      sealed: { type: 'Binary', value: new Uint8Array([0, 255, 1, 128]) },
      gone: null,
    },
  },
};

function record(bytes: Buffer, rows: number): SegmentRecord {
  return {
    name: 'snapshots/x/000001-Plant.ndjson.gz',
    entityType: 'Plant',
    rows,
    bytes: bytes.length,
    sha256: createHash('sha256').update(bytes).digest('hex'),
  };
}

test('a row of every EDM type comes back as written; a null property is left out', () => {
  const { gone: _gone, ...stored } = ROW.entity.properties;
  expect(decodeRow(encodeRow(ROW), 'here')).toEqual({ ...ROW, entity: { ...ROW.entity, properties: stored } });
  const { bytes, sha256 } = encodeSegment([ROW, ROW]);
  expect(decodeSegment(bytes, { ...record(bytes, 2), sha256 })).toHaveLength(2);
});

test('a changed byte, a wrong row count, a malformed line or property are refused with where', () => {
  const { bytes } = encodeSegment([ROW]);
  const changed = Buffer.from(bytes);
  changed[changed.length - 1] ^= 1;
  expect(() => decodeSegment(changed, record(bytes, 1))).toThrow(/000001-Plant\.ndjson\.gz: its SHA-256 differs/);
  expect(() => decodeSegment(bytes, record(bytes, 2))).toThrow(/holds 1 rows, the manifest says 2/);
  const notJson = gzipSync('{"t":"Plots"\n');
  expect(() => decodeSegment(notJson, record(notJson, 1))).toThrow(/000001-Plant\.ndjson\.gz:1: a line is not JSON/);
  expect(() => decodeRow('{"t":"T","pk":"a","rk":"b","p":[["x","Int128","1"]]}', 'seg:3')).toThrow(
    expect.objectContaining({ code: 'DATA_INTEGRITY', details: expect.objectContaining({ reason: 'BackupCorrupt', where: 'seg:3' }) }),
  );
  expect(() => decodeRow('{"t":"T","pk":"a"}', 'seg:4')).toThrow(/seg:4: a line is not a row/);
});

test('a manifest is checked before it is used', () => {
  const good = {
    format: 1,
    kind: 'snapshot',
    id: '20261128T010203Z-abcd',
    tablePrefix: 't1',
    schemaHash: 'h',
    sdl: 'type Q',
    startedAt: 'a',
    finishedAt: 'b',
    latestEntityTimestamp: '',
    rows: 0,
    blobs: 0,
    segments: [],
  };
  expect(parseManifest(JSON.stringify(good), 'm').id).toBe(good.id);
  expect(() => parseManifest('{', 'm.json')).toThrow(/m\.json: the manifest is not JSON/);
  expect(() => parseManifest(JSON.stringify({ ...good, format: 2 }), 'm')).toThrow(/not a format 1 snapshot/);
  expect(() => parseManifest(JSON.stringify({ ...good, sdl: undefined }), 'm')).toThrow(/misses a field/);
  expect(() => parseManifest(JSON.stringify({ ...good, segments: [{ name: 'x' }] }), 'm')).toThrow(/segment record is malformed/);
});
