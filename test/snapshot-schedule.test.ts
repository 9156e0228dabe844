/**
 * Scheduled snapshots (src/backup/snapshot-schedule.ts) on a schema written for the test: none is due before capture
 * has run for the interval; then one is taken — by one of two workers asking at once, under the lease — and none is
 * due again until the interval has passed since it finished. The schedule is asked with a clock moved on (`now`).
 */
import { listSnapshots } from '../src/backup/backup-blobs';
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

test('due after the interval since capture began, then since the newest snapshot; two workers asking at once take one', async () => {
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
  // No capture pass yet: nothing says when backup began.
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
  expect(await a.runOnce(Date.now())).toBeUndefined(); // capture began just now
  // An hour on, both workers ask at once: one takes it, the other finds it taken (the lease, then the check again).
  const later = Date.now() + HOUR + 1000;
  const taken = (await Promise.all([a.runOnce(later), b.runOnce(later)])).filter((m) => m !== undefined);
  expect(taken).toHaveLength(1);
  expect(taken[0]).toMatchObject({ rows: 12, schemaHash });
  expect((await listSnapshots(blobs, container)).map((m) => m.id)).toEqual([taken[0]!.id]);
  // Not due again until an hour after it finished.
  expect(await a.runOnce(Date.parse(taken[0]!.finishedAt) + HOUR - 1000)).toBeUndefined();
  expect((await listSnapshots(blobs, container)).length).toBe(1);
  expect(snapshotDue(taken[0], pass.latest, HOUR, Date.parse(taken[0]!.finishedAt) + HOUR)).toBe(true);
  expect(snapshotDue(taken[0], pass.latest, HOUR, Date.parse(taken[0]!.finishedAt) + HOUR - 1)).toBe(false);
}, 60_000);
