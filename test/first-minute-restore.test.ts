/**
 * A deployment is restorable from its first capture pass on (docs/backup.md, "Snapshots"), without any snapshot
 * taken by hand: on a schema written for the test — lamps in rooms, a count kept in the room's EGT, a unique index by
 * serial — a server started on empty tables, with its inline worker, takes writes from its first seconds; the worker's
 * first pass is followed at once by a snapshot, and `npm run restore -- --at T`, T in those first seconds, gives the
 * state then: every write acknowledged by T, none begun after it. Then `npm run load` writes lamps without change
 * entities (a bulk write): the worker's next check takes a snapshot after it, and a restore to a time after that holds
 * the loaded lamps and the writes since.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { restorableWindow } from '../src/backup/restorable-window';
import { listBulkWrites } from '../src/backup/bulk-writes';
import { connectionString, DIRECTIVES_FILE, startTestServer, testBlobs, uniquePrefix, type TestServer } from './support/harness';
import { exitedOk, runCommand } from './support/processes';
import { seededRng } from './support/fanout-fixtures';
import { testSeed } from './support/seed';
import { statesAt } from './support/states-at';
import { pause, until } from './support/wait';

const SDL = `
type Room @entity(table: "Rooms", partitionKey: "{room}", rowKey: "room") {
  room: ID!
  lamps: Int! @summary(of: "Lamp", via: "home", count: true)
}
type Lamp @entity(table: "Rooms", partitionKey: "{room}", rowKey: "lamp_{id}")
  @index(name: "bySerial", table: "LampsBySerial", partitionKey: "{serial}", rowKey: "lamp", unique: true) {
  room: ID!
  id: ID!
  serial: String!
  watts: Int!
  home: Room! @point(partitionKey: "{room}", rowKey: "room")
}
type Query {
  room(room: ID!): Room @point
  lamp(room: ID!, id: ID!): Lamp @point
  lampBySerial(serial: String!): Lamp @point(index: "bySerial")
}
type Mutation {
  createRoom(input: CreateRoomInput!): RoomPayload! @write(entity: "Room", action: CREATE)
  createLamp(input: CreateLampInput!): LampPayload! @write(entity: "Lamp", action: CREATE)
  updateLamp(input: UpdateLampInput!): LampPayload! @write(entity: "Lamp", action: UPDATE)
  deleteLamp(input: DeleteLampInput!): LampPayload! @write(entity: "Lamp", action: DELETE)
}`;

const ROOMS = ['r0', 'r1', 'r2'];
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-first-minute-'));
const source = uniquePrefix();
const ENV = {
  AZURE_STORAGE_CONNECTION_STRING: connectionString(),
  TABLEGRAPH_SCHEMA_DIR: dir,
  TABLEGRAPH_TABLE_PREFIX: source,
  TABLEGRAPH_BACKUP_CAPTURE_SECONDS: '1',
  TABLEGRAPH_BUILD_ENTITIES_PER_SECOND: '0',
  TABLEGRAPH_BUILD_POLL_MS: '300',
};
let server: TestServer;

/** A lamp as the test knows it; null: none at its address. */
type LampState = { serial: string; watts: number } | null;
/** One acknowledged write: its key, when it began and was acknowledged (ms, this clock), and its key's state after. */
type Write = { key: string; start: number; ack: number; after: LampState };
const writes: Write[] = [];
/** Each key's state from the start of the test, before any write. */
const initial = new Map<string, LampState>();

async function must(s: TestServer, query: string, variables?: Record<string, unknown>): Promise<any> {
  const r = await s.query(query, variables);
  expect(r.errors).toBeUndefined();
  return r.data;
}

/** One lane: four lamps of one room, created, updated and deleted one write at a time, each recorded. */
async function lane(index: number, ops: number, rng: ReturnType<typeof seededRng>, tag: string): Promise<void> {
  const room = ROOMS[index % ROOMS.length];
  const state = new Map<string, LampState>();
  for (let i = 0; i < ops; i++) {
    const id = `${tag}l${index}-${rng.int(4)}`;
    const key = `${room}/${id}`;
    const current = state.get(key) ?? initial.get(key) ?? null;
    const start = Date.now();
    let after: LampState;
    if (!current) {
      after = { serial: `${key}#${i}`, watts: i };
      await must(server, 'mutation($i: CreateLampInput!) { createLamp(input: $i) { __typename } }', { i: { room, id, ...after } });
    } else if (rng.chance(0.3)) {
      await must(server, 'mutation($i: DeleteLampInput!) { deleteLamp(input: $i) { __typename } }', { i: { room, id } });
      after = null;
    } else {
      after = { ...current, watts: 1000 + i };
      await must(server, 'mutation($i: UpdateLampInput!) { updateLamp(input: $i) { __typename } }', { i: { room, id, watts: after.watts } });
    }
    state.set(key, after);
    writes.push({ key, start, ack: Date.now(), after });
    await pause(10 + rng.int(30), 'pace');
  }
}

/** The states a key may have at `t`: after its last write acknowledged by then, or after the one in flight at `t`. */
function allowedAt(key: string, t: number): LampState[] {
  return statesAt(
    writes.filter((w) => w.key === key),
    initial.get(key) ?? null,
    t,
  );
}

/** Restores the deployment to `t` under a new prefix, and checks every key and each room's count there. */
async function expectRestoredAt(t: number): Promise<void> {
  const target = uniquePrefix();
  const report = await exitedOk(runCommand('restore', ['--at', new Date(t).toISOString(), '--table-prefix', target], dir, ENV));
  expect(report).toMatch(/^verify: ok/m);
  const restored = await startTestServer({ TABLEGRAPH_SCHEMA_DIR: dir, TABLEGRAPH_TABLE_PREFIX: target, TABLEGRAPH_WORKER: 'off' });
  try {
    const keys = [...new Set([...initial.keys(), ...writes.map((w) => w.key)])];
    for (const key of keys) {
      const [room, id] = key.split('/');
      const got = (await must(restored, `{ l: lamp(room: "${room}", id: "${id}") { serial watts } }`)).l;
      expect({ key, allowed: allowedAt(key, t) }).toEqual({ key, allowed: expect.arrayContaining([got]) });
      if (got) expect((await must(restored, `{ l: lampBySerial(serial: "${got.serial}") { id } }`)).l).toEqual({ id });
    }
    for (const room of ROOMS) {
      const lamps = keys.filter((k) => k.startsWith(`${room}/`));
      let present = 0;
      for (const key of lamps) if ((await must(restored, `{ l: lamp(room: "${room}", id: "${key.split('/')[1]}") { id } }`)).l) present++;
      expect([room, (await must(restored, `{ r: room(room: "${room}") { lamps } }`)).r.lamps]).toEqual([room, present]);
    }
  } finally {
    await restored.close();
  }
}

/** Writes in four lanes; returns T, when half of them were acknowledged (ms, this clock). */
async function storm(seed: number, tag: string, ops: number): Promise<number> {
  let t = 0;
  const from = writes.length;
  const lanes = Array.from({ length: 4 }, (_, l) => lane(l, ops, seededRng(seed + l), tag));
  const half = until('half the writes acknowledged', () => writes.length - from >= (4 * ops) / 2, { everyMs: 5 }).then(() => (t = Date.now()));
  await Promise.all([...lanes, half]);
  return t;
}

/** Waits until the backup can restore `t` and holds every write acknowledged by then (its latest time after them). */
async function restorable(t: number, after: number): Promise<void> {
  const blobs = testBlobs();
  await until(
    `a restorable window from before ${new Date(t).toISOString()} to after ${new Date(after).toISOString()}`,
    async () => {
      const w = await restorableWindow(blobs, server.config.backup.container);
      return w.earliestRestorableTime !== undefined && Date.parse(w.earliestRestorableTime) <= t && Date.parse(w.latestRestorableTime ?? '0') > after;
    },
    { timeoutMs: 120_000, everyMs: 250 },
  );
}

beforeAll(async () => {
  fs.copyFileSync(DIRECTIVES_FILE, path.join(dir, 'directives.graphql'));
  fs.writeFileSync(path.join(dir, 'schema.graphql'), SDL);
}, 60_000);

afterAll(async () => {
  await server?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('started empty, written to at once, restored to a time in its first seconds without a snapshot taken by hand; the same after a load', async () => {
  const seed = testSeed();
  const started = Date.now();
  server = await startTestServer({ ...ENV, TABLEGRAPH_RATE_LIMIT: '1000000' });
  for (const room of ROOMS) await must(server, 'mutation($i: CreateRoomInput!) { createRoom(input: $i) { __typename } }', { i: { room } });
  const t = await storm(seed, 'a', 20);
  await restorable(t, writes.at(-1)!.ack);
  const window = await restorableWindow(testBlobs(), server.config.backup.container);
  console.log(
    `first minute (seed ${seed}): T ${t - started} ms after the server was asked to start, the earliest restorable time ${Date.parse(window.earliestRestorableTime!) - started} ms after; ${writes.length} writes`,
  );
  await expectRestoredAt(t);

  // A load: lamps written without change entities, then more writes; restorable once a snapshot after it is taken.
  const file = path.join(dir, 'lamps.csv');
  const loaded = Array.from({ length: 30 }, (_, i) => ({ room: ROOMS[i % ROOMS.length], id: `loaded${i}`, serial: `loaded#${i}`, watts: i }));
  fs.writeFileSync(file, `room,id,serial,watts\n${loaded.map((l) => `${l.room},${l.id},${l.serial},${l.watts}`).join('\n')}\n`);
  await exitedOk(runCommand('load', ['--type', 'Lamp', '--file', file], dir, ENV));
  const bulk = (await listBulkWrites(testBlobs(), server.config.backup.container)).at(-1)!;
  expect(bulk.finishedAt).toBeDefined();
  for (const l of loaded) initial.set(`${l.room}/${l.id}`, { serial: l.serial, watts: l.watts });
  await until(
    'a snapshot after the load',
    async () => {
      const w = await restorableWindow(testBlobs(), server.config.backup.container);
      return w.snapshots.some((s) => s.startedAt > bulk.finishedAt!);
    },
    { timeoutMs: 150_000, everyMs: 500 },
  );
  const t2 = await storm(seed + 100, 'b', 10);
  await restorable(t2, writes.at(-1)!.ack);
  await expectRestoredAt(t2);
}, 420_000);
