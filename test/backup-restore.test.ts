/**
 * Backup and restore (docs/backup.md) on a schema written for the test — plots and their plants: a count and a sum
 * kept in the EGT, a copy of the plot's name, an inter-partition unique index and an intra-partition one, an
 * `@encrypted` note. `npm run backup -- snapshot` copies the primaries (killed once, it resumes the same snapshot);
 * `npm run restore` writes them under a new table prefix (killed after a segment, then at a named point of a build,
 * it resumes), records the schema there, builds every derived path and verifies; a server on the new prefix then
 * answers every field as the source did when the snapshot was taken — not as it did after. A restore never writes
 * into its source, refuses a changed segment before writing anything, and `--partition` restores one plot alone.
 * Snapshots past the retention expire, an unfinished one too; the newest complete one is always kept.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { listSnapshots, readSnapshot } from '../src/backup/backup-blobs';
import { expireSnapshots } from '../src/backup/retention';
import { restoreProgress, restoreRows } from '../src/backup/restore';
import { decodeSegment } from '../src/backup/backup-format';
import { TableStore } from '../src/storage/table-store';
import { startStorageProxy } from './support/storage-proxy';
import { takeSnapshot } from '../src/backup/snapshot';
import { schemaLayout } from '../src/evolution/deployment';
import { BlobStore } from '../src/storage/blob-store';
import { formatVerifyReport, verifyDerived } from '../src/maintenance/verify-derived';
import { compileSchema } from '../src/compiler/compile';
import { loadSchemaSources } from '../src/compiler/load-schema';
import { connectionString, DIRECTIVES_FILE, startTestServer, testBlobs, testStore, uniquePrefix, type TestServer } from './support/harness';
import { exitedOk, killedAt, runCommand, type CommandProcess } from './support/processes';
import { seededRng } from './support/fanout-fixtures';
import { testSeed } from './support/seed';
import { until } from './support/wait';

const SDL = `
type Plot @entity(table: "Plots", partitionKey: "{plot}", rowKey: "plot") {
  plot: ID!
  name: String!
  map: String @blob(container: "maps", maxBytes: 4096, contentTypes: ["image/png"])
  plants: Int! @summary(of: "Plant", via: "home", count: true)
  water: Int! @summary(of: "Plant", via: "home", sum: ["litres"])
  plantList(first: Int, after: String): PlantConnection! @range(partitionKey: "{plot}", rowKeyPrefix: "plant_")
}
type Plant @entity(table: "Plots", partitionKey: "{plot}", rowKey: "plant_{id}")
  @index(name: "byTag", table: "PlantsByTag", partitionKey: "{tag}", rowKey: "plant", unique: true)
  @index(name: "bySpecies", rowKey: "species_{species}_{id}") {
  etag: String!
  plot: ID!
  id: ID!
  tag: String!
  species: String!
  litres: Int!
  note: String @encrypted
  home: Plot! @point(partitionKey: "{plot}", rowKey: "plot")
  plotName: String @copy(from: "home", field: "name")
}
type Query {
  plot(plot: ID!): Plot @point
  plant(plot: ID!, id: ID!): Plant @point
  plantByTag(tag: String!): Plant @point(index: "byTag")
  plantsOfSpecies(plot: ID!, species: String!, first: Int, after: String): PlantConnection! @range(index: "bySpecies", rowKeyPrefix: "species_{species}_")
}
type Mutation {
  createPlot(input: CreatePlotInput!): PlotPayload! @write(entity: "Plot", action: CREATE)
  updatePlot(input: UpdatePlotInput!): PlotPayload! @write(entity: "Plot", action: UPDATE)
  createPlant(input: CreatePlantInput!): PlantPayload! @write(entity: "Plant", action: CREATE)
  updatePlant(input: UpdatePlantInput!): PlantPayload! @write(entity: "Plant", action: UPDATE)
  deletePlant(input: DeletePlantInput!): PlantPayload! @write(entity: "Plant", action: DELETE)
}`;

const PLOTS = ['p0', 'p1', 'p2', 'p3'];
const SPECIES = ['fern', 'moss', 'ivy'];
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-backup-'));
const source = uniquePrefix();
const KEYS = `k1:${randomBytes(32).toString('base64')}`;
/** Small pages: several segments and build steps, so that kills land between them. */
const ENV = {
  AZURE_STORAGE_CONNECTION_STRING: connectionString(),
  TABLEGRAPH_SCHEMA_DIR: dir,
  TABLEGRAPH_TABLE_PREFIX: source,
  TABLEGRAPH_ENCRYPTION_KEYS: KEYS,
  TABLEGRAPH_BUILD_PAGE_SIZE: '25',
  TABLEGRAPH_BUILD_LEASE_MS: '2000',
  TABLEGRAPH_BUILD_POLL_MS: '300',
  TABLEGRAPH_BUILD_ENTITIES_PER_SECOND: '0',
};
let server: TestServer;

/** `npm run <command>` on the test's schema folder and source prefix, with `env` added. */
function command(name: string, args: string[], env: Record<string, string> = {}): CommandProcess {
  return runCommand(name, args, dir, { ...ENV, ...env });
}

const PLANT = 'id plot tag species litres note plotName';
/** One query per 25 aliases (the server allows 30), their data merged; no error in any. */
async function aliased(s: TestServer, fields: string[]): Promise<Record<string, unknown>> {
  const data: Record<string, unknown> = {};
  for (let i = 0; i < fields.length; i += 25) {
    const r = await s.query(`{ ${fields.slice(i, i + 25).join(' ')} }`);
    expect(r.errors).toBeUndefined();
    Object.assign(data, r.data);
  }
  return data;
}

/** What a server answers for every plot and plant the test knows of, through every path. */
async function answers(s: TestServer, plants: string[]): Promise<unknown> {
  const key = (k: string) => `plot: "${k.split('/')[0]}", id: "${k.split('/')[1]}"`;
  return {
    plots: await aliased(
      s,
      PLOTS.map((p) => `${p}: plot(plot: "${p}") { name plants water }`),
    ),
    byKey: await aliased(
      s,
      plants.map((k, i) => `a${i}: plant(${key(k)}) { ${PLANT} }`),
    ),
    tags: await aliased(
      s,
      plants.map((k, i) => `a${i}: plantByTag(tag: "tag-${k}") { id plot }`),
    ),
    species: await aliased(
      s,
      PLOTS.flatMap((p) => SPECIES.map((sp) => `${p}_${sp}: plantsOfSpecies(plot: "${p}", species: "${sp}", first: 40) { edges { node { id litres } } }`)),
    ),
  };
}

async function mutate(name: string, input: Record<string, unknown>): Promise<void> {
  const type = `${name[0].toUpperCase()}${name.slice(1)}Input`;
  const r = await server.query(`mutation($input: ${type}!) { ${name}(input: $input) { __typename } }`, { input });
  expect(r.errors).toBeUndefined();
}

/**
 * Waits until the source's derived paths caught up with its writes (verify clean): the work queue also holds the
 * maps' blob cleanups, delayed an hour, so its depth never reaches 0.
 */
async function caughtUp(): Promise<void> {
  const { model } = compileSchema(loadSchemaSources(dir), { tablePrefix: source });
  await until('verify clean on the source', async () => (await verifyDerived({ store: testStore(), model })).ok, { everyMs: 500 });
}

/** A server on `prefix`; its worker takes no scheduled snapshot (the test takes each one it restores). */
function serverOn(prefix: string): Promise<TestServer> {
  return startTestServer({
    ...{ TABLEGRAPH_SCHEMA_DIR: dir, TABLEGRAPH_TABLE_PREFIX: prefix, TABLEGRAPH_ENCRYPTION_KEYS: KEYS },
    ...{ TABLEGRAPH_RATE_LIMIT: '1000000', TABLEGRAPH_BACKUP_SNAPSHOT_HOURS: '0' },
  });
}

const plants: string[] = []; // plot/id of every plant created
/** A plot's map: bytes of its own. */
const mapOf = (plot: string, version = 1) => Buffer.from(`PNG map of ${plot}, version ${version}`);

/** Each plot's map as a server's read URL gives it: its Content-Type and bytes. */
async function maps(s: TestServer): Promise<Record<string, [string | null, string]>> {
  const r = await s.query(`{ ${PLOTS.map((p) => `${p}: plot(plot: "${p}") { map }`).join(' ')} }`);
  expect(r.errors).toBeUndefined();
  const out: Record<string, [string | null, string]> = {};
  for (const p of PLOTS) {
    const res = await fetch(r.data[p].map);
    out[p] = [res.headers.get('content-type'), Buffer.from(await res.arrayBuffer()).toString()];
  }
  return out;
}
let snapshotId = '';
let atSnapshot: unknown;

beforeAll(async () => {
  fs.copyFileSync(DIRECTIVES_FILE, path.join(dir, 'directives.graphql'));
  fs.writeFileSync(path.join(dir, 'schema.graphql'), SDL);
  server = await serverOn(source);
  const rng = seededRng(testSeed());
  for (const plot of PLOTS)
    await mutate('createPlot', { plot, name: `Plot ${plot}`, map: { contentType: 'image/png', base64: mapOf(plot).toString('base64') } });
  await Promise.all(
    Array.from({ length: 120 }, async (_, i) => {
      const plot = PLOTS[i % 4];
      await mutate('createPlant', {
        plot,
        id: `${i}`,
        tag: `tag-${plot}/${i}`,
        species: SPECIES[rng.int(3)],
        litres: 1 + rng.int(9),
        note: `secret note ${i}`,
      });
      plants.push(`${plot}/${i}`);
    }),
  );
  for (let i = 0; i < 120; i += 7) await mutate('updatePlant', { plot: PLOTS[i % 4], id: `${i}`, litres: 20 + rng.int(9), species: SPECIES[rng.int(3)] });
  for (let i = 3; i < 120; i += 11) await mutate('deletePlant', { plot: PLOTS[i % 4], id: `${i}` });
  await mutate('updatePlot', { plot: 'p1', name: 'Renamed plot' });
  await caughtUp();
}, 120_000);

afterAll(async () => {
  await server?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('a snapshot, killed once, resumes; restored under a new prefix (killed twice) it answers as the source did then, verify clean', async () => {
  atSnapshot = await answers(server, plants);
  const mapsAtSnapshot = await maps(server);
  expect(mapsAtSnapshot.p2).toEqual(['image/png', mapOf('p2').toString()]);
  // The snapshot, killed once it wrote its second segment (a named hold), then run again: the same snapshot goes on.
  const first = command('backup', ['snapshot'], { TABLEGRAPH_TEST_BUILD_HOLD: 'snapshot@2' });
  await killedAt(first, 'test hook: snapshot held');
  const id = /snapshot (\d{8}T\d{6}Z-[0-9a-f]{4})/.exec(first.output())![1];
  const resumed = await exitedOk(command('backup', ['snapshot']));
  expect(resumed).toContain(`snapshot ${id}: complete`);
  expect(resumed).toMatch(/no entity changed while it was read/);
  snapshotId = id;
  const listed = await exitedOk(command('backup', ['list', '--json']));
  const [manifest] = JSON.parse(listed.slice(listed.indexOf('['))) as Array<{ id: string; rows: number; segments: number }>;
  expect(manifest).toMatchObject({ id, rows: 4 + 120 - 11, blobs: 4 }); // 4 plots and their maps, 109 plants: no index entity
  // The segments hold the notes sealed: no note's text is in them.
  const blobs = new BlobStore({ connectionString: connectionString() });
  const container = `${source}-backup`;
  const names = (await blobs.list(container, `snapshots/${id}/`)).map((b) => b.name).filter((n) => n.endsWith('.ndjson.gz'));
  expect(names.length).toBe(manifest.segments);
  for (const name of names) expect(gunzipSync((await blobs.download(container, name))!.bytes).toString('utf8')).not.toContain('secret note');

  // The source changes after the snapshot: the restore does not see it.
  await mutate('deletePlant', { plot: 'p0', id: '0' });
  await mutate('updatePlot', { plot: 'p2', name: 'After the snapshot', map: { contentType: 'image/png', base64: mapOf('p2', 2).toString('base64') } });
  await mutate('updatePlant', { plot: 'p1', id: '1', note: 'after the snapshot' });

  // The restore, killed after its second segment, then after a build's second step (named holds), then run to the end.
  const target = uniquePrefix();
  const args = ['--snapshot', id, '--table-prefix', target];
  await killedAt(command('restore', args, { TABLEGRAPH_TEST_BUILD_HOLD: 'restore@2' }), 'test hook: restore held');
  await killedAt(command('restore', args, { TABLEGRAPH_TEST_BUILD_HOLD: 'index:Plant.byTag@2' }), 'test hook: schema build held');
  const report = await exitedOk(command('restore', args));
  expect(report).toMatch(new RegExp(`restore of snapshot ${id} into table prefix "${target}": 113 entities written`));
  expect(report).toMatch(/^verify: ok/m);
  expect(report).not.toMatch(/failed/);
  console.log(`snapshot ${id}, restored (seed ${testSeed()}): ${report.split('\n').find((l) => l.startsWith('restore of snapshot'))}`);

  const restored = await serverOn(target);
  try {
    expect(await answers(restored, plants)).toEqual(atSnapshot);
    // The maps as they were, in the restored prefix's container, named for its table.
    expect(await maps(restored)).toEqual(mapsAtSnapshot);
    const plot = await restored.store.getEntity({ table: `${target}Plots`, partitionKey: 'p2', rowKey: 'plot' });
    expect(plot?.properties.map).toMatch(new RegExp(`^${target}Plots/[0-9a-f]{40}/map/`));
    expect((await testBlobs().list(`${target}maps`, `${target}Plots/`)).length).toBe(4);
    expect((await restored.query('{ plant(plot: "p1", id: "1") { note } }')).data.plant.note).toBe('secret note 1');
  } finally {
    await restored.close();
  }
  const { model } = compileSchema(loadSchemaSources(dir), { tablePrefix: target });
  expect(formatVerifyReport(await verifyDerived({ store: testStore(), model }))).toMatch(/^verify: ok/m);
  // The source is as the writes after the snapshot left it.
  expect((await server.query('{ plot(plot: "p2") { name } plant(plot: "p0", id: "0") { id } }')).data).toEqual({
    plot: { name: 'After the snapshot' },
    plant: null,
  });
}, 240_000);

test("a restore's EGTs that storage did not answer — held past the timeout, applied with the answer lost — are sent again: row for row the snapshot, none given up on", async () => {
  expect(snapshotId).not.toBe('');
  const seed = testSeed();
  // Every EGT may meet a fault; a held one is applied after the store gave up on it (its answer lost).
  const proxy = await startStorageProxy(connectionString(), {
    seed,
    faults: { timedOutAfterApply: 0.2, resetAfterApply: 0.15, slow: 0.2, busy: 0.1 },
    slowMs: 2500,
    passAbandoned: true,
    faultable: (method, p) => method === 'POST' && p.includes('$batch'),
  });
  try {
    const blobs = testBlobs();
    const container = `${source}-backup`;
    const manifest = await readSnapshot(blobs, container, snapshotId);
    const target = uniquePrefix();
    const { model } = compileSchema(loadSchemaSources(dir), { tablePrefix: target });
    const store = new TableStore({ connectionString: proxy.connectionString, target: 'azurite', timeoutMs: 1500 });
    const progress = await restoreProgress({ blobs, container, manifest, targetPrefix: target });
    await restoreRows({ target: store, model, blobs, entityBlobs: blobs, container, manifest, targetPrefix: target }, progress);
    const injected = proxy.injected();
    console.log(`restore under faults (seed ${seed}): injected ${JSON.stringify(injected)}`);
    expect(injected.slow + injected.timedOutAfterApply + injected.resetAfterApply).toBeGreaterThan(0);

    // Row for row: every row of the snapshot's segments, with its values (a @blob field's name is renamed: left out).
    const want = new Map<string, Record<string, unknown>>();
    for (const segment of manifest.segments) {
      for (const r of decodeSegment((await blobs.download(container, segment.name))!.bytes, segment)) {
        const values = Object.fromEntries(Object.entries(r.entity.properties).flatMap(([k, v]) => (k === 'map' || v === null ? [] : [[k, v.value]])));
        want.set(`${target}${r.table}\u0000${r.entity.partitionKey}\u0000${r.entity.rowKey}`, values);
      }
    }
    const got = new Map<string, Record<string, unknown>>();
    for (const table of new Set([...want.keys()].map((k) => k.split('\u0000')[0])))
      for await (const page of testStore().scan(table))
        for (const e of page) {
          const { map: _renamed, ...values } = e.properties;
          got.set(`${table}\u0000${e.partitionKey}\u0000${e.rowKey}`, values);
        }
    expect(got.size).toBe(manifest.rows);
    expect(got).toEqual(want);
  } finally {
    await proxy.close();
  }
}, 120_000);

test('--partition restores one plot alone, its summaries recounted; refused before any write: its source, a prefix in use, no such snapshot, a changed segment', async () => {
  expect(snapshotId).not.toBe('');
  const one = uniquePrefix();
  const report = await exitedOk(command('restore', ['--snapshot', snapshotId, '--table-prefix', one, '--partition', 'p3']));
  expect(report).toMatch(/^verify: ok/m);
  const restored = await serverOn(one);
  try {
    const r = await restored.query('{ p3: plot(plot: "p3") { name plants water } p0: plot(plot: "p0") { name } }');
    expect(r.data).toEqual({ p3: (atSnapshot as { plots: Record<string, unknown> }).plots.p3, p0: null });
  } finally {
    await restored.close();
  }

  // Refusals, each before anything is written: the snapshot's own prefix, a prefix holding the schema's tables, no
  // such snapshot, a segment changed by one byte.
  const blobs = new BlobStore({ connectionString: connectionString() });
  const container = `${source}-backup`;
  const manifest = await readSnapshot(blobs, container, snapshotId);
  await expect(restoreProgress({ blobs, container, manifest, targetPrefix: source })).rejects.toMatchObject({
    code: 'CONFLICT',
    details: { reason: 'RestoreTargetInUse' },
    message: expect.stringMatching(/never writes into the tables it comes from/),
  });
  const used = uniquePrefix();
  await testStore().ensureTable(`${used}Plots`);
  const inUse = command('restore', ['--snapshot', snapshotId, '--table-prefix', used]);
  expect((await inUse.exited).code).toBe(1);
  expect(inUse.output()).toMatch(new RegExp(`is in use \\(${used}Plots\\): a restore writes into new tables only`));
  await expect(readSnapshot(blobs, container, '20200101T000000Z-0000')).rejects.toMatchObject({
    code: 'NOT_FOUND',
    details: { reason: 'SnapshotNotFound' },
  });
  const [name] = (await blobs.list(container, `snapshots/${snapshotId}/`)).map((b) => b.name).filter((n) => n.endsWith('.ndjson.gz'));
  const bytes = (await blobs.download(container, name))!.bytes;
  bytes[bytes.length - 1] ^= 0xff;
  await blobs.upload(container, name, bytes, 'application/gzip');
  const bad = uniquePrefix();
  const { model } = compileSchema(loadSchemaSources(dir), { tablePrefix: bad });
  const progress = await restoreProgress({ blobs, container, manifest, targetPrefix: bad });
  const rows = { target: testStore(), model, blobs, entityBlobs: blobs, container, manifest, targetPrefix: bad };
  await expect(restoreRows(rows, progress)).rejects.toMatchObject({
    code: 'DATA_INTEGRITY',
    details: { reason: 'BackupCorrupt' },
    message: expect.stringMatching(/SHA-256 differs/),
  });
  expect(await testStore().listTables(bad)).toEqual([]);
}, 180_000);

test('expire deletes the snapshots older than the retention, an unfinished one too, and always keeps the newest complete one', async () => {
  expect(snapshotId).not.toBe('');
  const blobs = new BlobStore({ connectionString: connectionString() });
  const container = `${source}-backup`;
  // A second complete snapshot, and an unfinished one (killed after its first segment).
  const second = /snapshot (\S+): complete/.exec(await exitedOk(command('backup', ['snapshot'])))![1];
  const killed = command('backup', ['snapshot'], { TABLEGRAPH_TEST_BUILD_HOLD: 'snapshot@1' });
  await killedAt(killed, 'test hook: snapshot held');
  const unfinished = /snapshot (\d{8}T\d{6}Z-[0-9a-f]{4})/.exec(killed.output())![1];
  const ids = async () => [...new Set((await blobs.list(container, 'snapshots/')).map((b) => b.name.split('/')[1]))].filter((n) => n !== 'latest.json').sort();
  expect(await ids()).toEqual([snapshotId, second, unfinished].sort());

  // Within the retention: nothing goes.
  expect(await expireSnapshots({ blobs, container, retentionDays: 7 })).toEqual({ complete: [], unfinished: [], passes: 0, blobs: 0 });
  // Eight days on: the older complete one and the unfinished one go, the newest complete one stays and restores.
  const later = await expireSnapshots({ blobs, container, retentionDays: 7, now: Date.now() + 8 * 24 * 3600_000 });
  expect(later).toMatchObject({ complete: [snapshotId], unfinished: [unfinished] });
  expect(await ids()).toEqual([second]);
  expect((await listSnapshots(blobs, container)).map((m) => m.id)).toEqual([second]);
  expect(await exitedOk(command('backup', ['expire']))).toMatch(/no snapshot is older than 7 days/);

  // A prefix nothing was written under (no table, no catalogue): an empty snapshot, not an error.
  const empty = await exitedOk(command('backup', ['snapshot'], { TABLEGRAPH_TABLE_PREFIX: uniquePrefix() }));
  expect(empty).toMatch(/complete in [\d.]+ s\n\S+ .* 0 entities, 0 blobs, 0 segments/);
}, 120_000);

test('a snapshot reads each table once for all the types stored in it: plots and plants share one table, one query a page', async () => {
  const compiled = compileSchema(loadSchemaSources(dir), { tablePrefix: source });
  const calls: Array<{ table: string; kind: string; entities: number }> = [];
  const manifest = await takeSnapshot({
    ...{ store: server.store, blobs: testBlobs(), entityBlobs: testBlobs(), container: `${source}-backup`, model: compiled.model, tablePrefix: source },
    ...{ schemaHash: schemaLayout(compiled.model, compiled.schema).hash, sdl: compiled.sdl, entitiesPerSecond: 0, pageSize: 1000 },
    observer: { onCall: (r) => calls.push(r) },
  });
  const plots = calls.filter((c) => c.table === `${source}Plots`);
  // Both types' entities (under 1,000) come back in one page of one query of their table.
  expect(plots).toEqual([expect.objectContaining({ kind: 'tableScan', entities: manifest.rows })]);
  expect(new Set(manifest.segments.map((s) => s.entityType))).toEqual(new Set(['Plot', 'Plant']));
}, 60_000);
