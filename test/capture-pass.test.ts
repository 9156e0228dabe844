/**
 * A capture pass (src/backup/capture-pass.ts) reads each table from the last complete pass's start on — and a table
 * that pass did not read (a type a newer schema adds, met by a worker of the older one first) from its beginning, so
 * that changes committed there before are not skipped.
 */
import fs from 'node:fs';
import { runCapturePass } from '../src/backup/capture-pass';
import { compileSchema } from '../src/compiler/compile';
import { changeEntity } from '../src/model/change-log';
import { DIRECTIVES_FILE, testBlobs, testStore, uniquePrefix } from './support/harness';
import { pause } from './support/wait';

const HIVE = `type Hive @entity(table: "Hives", partitionKey: "{apiary}", rowKey: "hive_{id}") { apiary: ID! id: ID! }`;
const QUEEN = `type Queen @entity(table: "Queens", partitionKey: "{apiary}", rowKey: "queen_{id}") { apiary: ID! id: ID! }`;
const QUERY = 'type Query { hive(apiary: ID!, id: ID!): Hive @point }';

test('a table the last pass did not read is read whole: a change committed there before that pass is captured', async () => {
  const prefix = uniquePrefix();
  const compile = (sdl: string) =>
    compileSchema([{ name: 'schema.graphql', body: `${fs.readFileSync(DIRECTIVES_FILE, 'utf8')}\n${sdl}\n${QUERY}` }], { tablePrefix: prefix }).model;
  const older = compile(HIVE);
  const newer = compile(`${HIVE}\n${QUEEN}`);
  const store = testStore();
  const blobs = testBlobs();
  const container = `${prefix.toLowerCase()}-backup`;
  for (const t of newer.tables) await store.ensureTable(t);
  // A write of the newer schema's type, committed before any pass.
  const address = { table: `${prefix}Queens`, partitionKey: 'a1', rowKey: 'queen_1' };
  const image = [{ partitionKey: 'a1', rowKey: 'queen_1', properties: { EntityType: { type: 'String' as const, value: 'Queen' } } }];
  await store.createEntity(address.table, changeEntity(address, { entityType: 'Queen', kind: 'CREATED', writeId: 'w1', at: Date.now(), image }));
  const pass = (model: typeof older) =>
    runCapturePass({ store, blobs, container, model, tablePrefix: prefix, schemaHash: 'h', subscriptionRetentionMs: 3_600_000 });
  // Passes of a worker of the older schema: they read Hives only. The second starts more than the clock margin (5 s)
  // and the service clock's grain (Last-Modified: whole seconds) after the write, so that reading Queens from its
  // start on would skip the write.
  expect((await pass(older)).latest).toMatchObject({ changes: 0, tables: [`${prefix}Hives`] });
  await pause(7_500, 'clock');
  expect((await pass(older)).latest.changes).toBe(0);
  // A worker of the newer schema: Queens is new to the passes, read whole.
  const newest = await pass(newer);
  expect(newest.latest).toMatchObject({ changes: 1, tables: [`${prefix}Hives`, `${prefix}Queens`] });
  // Known now: read from the last pass's start on.
  expect((await pass(newer)).latest.changes).toBe(0);
}, 60_000);
