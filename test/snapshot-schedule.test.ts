/**
 * Scheduled snapshots (src/backup/snapshot-schedule.ts) on a schema written for the test: none is due before capture
 * has run; then one at once — taken by one of two workers asking at once, under the lease — and none again until a
 * bulk write has finished or the interval has passed since it finished. The schedule is asked with a clock moved on
 * (`now`).
 */
import { listSnapshots, NEWEST_SNAPSHOT, readJsonBlob } from '../src/backup/backup-blobs';
import { LAST_BULK_WRITE, recordBulkWrite } from '../src/backup/bulk-writes';
import { LATEST_PASS } from '../src/backup/change-format';
import { runCapturePass } from '../src/backup/capture-pass';
import { SnapshotSchedule, snapshotDue } from '../src/backup/snapshot-schedule';
import { schemaLayout } from '../src/evolution/deployment';
import { compileSchema } from '../src/compiler/compile';
import { loadSchemaSources } from '../src/compiler/load-schema';
import { startSdlServer, testBlobs } from './support/harness';

const SDL = `
type Hive @entity(table: "Hives", partitionKey: "{apiary}", rowKey: "hive_{id}") {
  apiary: ID!
  id: ID!
  frames: Int!
}
type Query { hive(apiary: ID!, id: ID!): Hive @point }
type Mutation { createHive(input: CreateHiveInput!): HivePayload! @write(entity: "Hive", action: CREATE) }`;

const HOUR = 3_600_000;
let ctx: Awaited<ReturnType<typeof startSdlServer>>;

beforeAll(async () => {
  // The server's own schedule off: the test asks its schedules itself.
  ctx = await startSdlServer(SDL, { TABLEGRAPH_BACKUP_SNAPSHOT_HOURS: '0' });
  for (let i = 0; i < 12; i++) {
    const r = await ctx.server.query('mutation($input: CreateHiveInput!) { createHive(input: $input) { __typename } }', {
      input: { apiary: `a${i % 3}`, id: `${i}`, frames: i },
    });
    expect(r.errors).toBeUndefined();
  }
}, 60_000);
afterAll(() => ctx?.close());

test('due at once once capture has begun and none is usable, after a bulk write, then after the interval; two workers asking at once take one; a check reads three documents', async () => {
  const { server, dir } = ctx;
  const prefix = server.config.tablePrefix;
  const container = `${prefix.toLowerCase()}-backup-schedule`;
  const compiled = compileSchema(loadSchemaSources(dir), { tablePrefix: prefix });
  const schemaHash = schemaLayout(compiled.model, compiled.schema).hash;
  const blobs = testBlobs();
  const schedule = () =>
    new SnapshotSchedule({
      ...{ store: server.store, blobs, entityBlobs: blobs, container, model: compiled.model, tablePrefix: prefix },
      ...{ schemaHash, sdl: compiled.sdl, entitiesPerSecond: 0, everyMs: HOUR, retentionDays: 7 },
    });
  const a = schedule();
  const b = schedule();
  // No capture pass yet: a snapshot now would not be usable (nothing says what was written before capture began).
  expect(await a.runOnce(Date.now() + 2 * HOUR)).toBeUndefined();
  await blobs.ensureContainer(container);
  const pass = await runCapturePass({
    store: server.store,
    blobs,
    container,
    model: compiled.model,
    tablePrefix: prefix,
    schemaHash,
    subscriptionRetentionMs: HOUR,
  });
  expect(pass.latest.changes).toBe(12);
  // Capture began just now and no snapshot is usable: due at once. Both workers ask: one takes it, the other finds
  // it taken (the lease, then the check again).
  const taken = (await Promise.all([a.runOnce(Date.now()), b.runOnce(Date.now())])).filter((m) => m !== undefined);
  expect(taken).toHaveLength(1);
  expect(taken[0]).toMatchObject({ rows: 12, schemaHash });
  expect((await listSnapshots(blobs, container)).map((m) => m.id)).toEqual([taken[0]!.id]);
  expect(await readJsonBlob(blobs, container, NEWEST_SNAPSHOT)).toEqual({ id: taken[0]!.id, startedAt: taken[0]!.startedAt, finishedAt: taken[0]!.finishedAt });
  // Not due again until an hour after it finished; a check that finds none due reads three documents and lists nothing.
  const downloads = jest.spyOn(blobs, 'download');
  const lists = jest.spyOn(blobs, 'list');
  expect(await a.runOnce(Date.parse(taken[0]!.finishedAt) + HOUR - 1000)).toBeUndefined();
  expect(downloads.mock.calls.map(([, name]) => name).sort()).toEqual([LAST_BULK_WRITE, LATEST_PASS, NEWEST_SNAPSHOT].sort());
  expect(lists).not.toHaveBeenCalled();
  jest.restoreAllMocks();
  // A bulk write (npm run load) finished after the newest snapshot began: due at once, so what it wrote is restorable.
  await (await recordBulkWrite(blobs, container, 'npm run load')).finish();
  const afterLoad = await a.runOnce(Date.now());
  expect(afterLoad).toMatchObject({ rows: 12 });
  expect(await a.runOnce(Date.now())).toBeUndefined();
  const newest = { startedAt: afterLoad!.startedAt, finishedAt: afterLoad!.finishedAt };
  expect(snapshotDue({ newest, latest: pass.latest }, HOUR, Date.parse(newest.finishedAt) + HOUR)).toBe(true);
  expect(snapshotDue({ newest, latest: pass.latest }, HOUR, Date.parse(newest.finishedAt) + HOUR - 1)).toBe(false);
  // A snapshot that began before capture did is not usable: one is due at once; with capture off, none is taken first.
  const early = { startedAt: new Date(Date.parse(pass.latest.firstPassAt) - 1000).toISOString(), finishedAt: pass.latest.firstPassAt };
  expect(snapshotDue({ newest: early, latest: pass.latest }, HOUR, Date.now())).toBe(true);
  expect(snapshotDue({}, HOUR, Date.now() + 100 * HOUR)).toBe(false);
}, 60_000);
