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
import { writeJsonBlob } from '../src/backup/backup-blobs';
import { LATEST_PASS, type LatestPass } from '../src/backup/change-format';

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
  await blobs.ensureContainer(container);
  // A write of the newer schema's type, committed before any pass.
  const address = { table: `${prefix}Queens`, partitionKey: 'a1', rowKey: 'queen_1' };
  const image = [{ partitionKey: 'a1', rowKey: 'queen_1', properties: { EntityType: { type: 'String' as const, value: 'Queen' } } }];
  await store.createEntity(address.table, changeEntity(address, { entityType: 'Queen', kind: 'CREATED', writeId: 'w1', at: Date.now(), image }));
  const pass = (model: typeof older) =>
    runCapturePass({ store, blobs, container, model, tablePrefix: prefix, schemaHash: 'h', subscriptionRetentionMs: 3_600_000 });
  // A complete pass of a worker of the older schema (it read Hives only), recorded as started 10 s after the write by
  // the service's clock: read from its start on, Queens would skip the write.
  const recorded = (tables: string[]): LatestPass => {
    const at = new Date(Date.now() + 10_000).toISOString();
    return {
      ...{ startedAt: at, serviceStartedAt: at, finishedAt: at, firstPassAt: at },
      ...{ changes: 0, lagMaxMs: 0, lagP99Ms: 0, schemaHash: 'h', tables },
    };
  };
  await writeJsonBlob(blobs, container, LATEST_PASS, recorded([`${prefix}Hives`]));
  // A worker of the newer schema: Queens is new to the passes, read whole.
  expect((await pass(newer)).latest).toMatchObject({ changes: 1, tables: [`${prefix}Hives`, `${prefix}Queens`] });
  // Had that pass read Queens, the next one would read it from its start on: the write is not read again.
  await writeJsonBlob(blobs, container, LATEST_PASS, recorded([`${prefix}Hives`, `${prefix}Queens`]));
  expect((await pass(newer)).latest.changes).toBe(0);
  expect((await pass(older)).latest).toMatchObject({ changes: 0, tables: [`${prefix}Hives`] });
}, 60_000);
