/**
 * An @index keyed by a list field keeps one index entity per element (the guide's "Index Entities Pattern"), on a
 * schema written for the test: tracks tagged with hostile strings (quotes, commas, the characters a key may not hold,
 * emoji, a tag twice), read back by each tag after creates, updates that add and drop tags, deletes and a delete and
 * re-create of one key — with four writers changing one track at once, every message delivered twice, late and in
 * reverse by workers that die mid-message, and storage that throttles or applies a write and loses its answer. After
 * each: every tag answers exactly the tracks holding it, each with its whole list, and `verify` is clean. A write whose
 * fan-out could not be queued is refused with LIMIT_EXCEEDED naming the list before anything is written; a rebuild puts
 * back every element's index entity.
 */
import { formatVerifyReport, verifyDerived } from '../src/maintenance/verify-derived';
import { rebuildIndex } from '../src/maintenance/index-rebuild';
import { testQueues, testStore, uniquePrefix } from './support/harness';
import { drainWithRedelivery, queueWriter, seededRng, useSdlWorld } from './support/fanout-fixtures';
import { startProxiedServer } from './support/proxied-server';
import { testSeed } from './support/seed';
import { compileSchema } from '../src/compiler/compile';
import { loadSchemaSources } from '../src/compiler/load-schema';
import { BuildRunner } from '../src/evolution/build-runner';
import { Catalogue } from '../src/evolution/catalogue';
import { deploySchema, schemaLayout } from '../src/evolution/deployment';
import { CatalogueRowsBoard } from '../src/evolution/presence';
import { loadEntities } from '../src/load/load-entities';
import { Deployment } from './support/schema-evolution';

const SDL = `
type Track @entity(table: "Tracks", partitionKey: "{albumId}", rowKey: "track_{id}")
  @index(name: "byTag", table: "TracksByTag", partitionKey: "tag_{tags}", rowKey: "{albumId}_{id}", include: ["title"]) {
  albumId: ID!
  id: ID!
  title: String!
  tags: [String!]
}
type Query {
  track(albumId: ID!, id: ID!): Track @point
  tracksByTag(tag: String!, first: Int, after: String): TrackConnection! @range(index: "byTag", partitionKey: "tag_{tag}")
}
type Mutation {
  createTrack(input: CreateTrackInput!): TrackPayload! @write(entity: "Track", action: CREATE)
  updateTrack(input: UpdateTrackInput!): TrackPayload! @write(entity: "Track", action: UPDATE)
  deleteTrack(input: DeleteTrackInput!): TrackPayload! @write(entity: "Track", action: DELETE)
}`;

const HOSTILE = ['rock', 'a "quoted", comma', "it's", 'sl/ash#hash?q\\back', '💿 ünïcödé', '[not, json]', 'tab\tnew\nline', '%25 percent'];

const world = useSdlWorld(SDL);

type Server = { query(q: string, v?: Record<string, unknown>): Promise<any> };

async function write(server: Server, mutation: string, input: Record<string, unknown>): Promise<string | undefined> {
  const type = `${mutation[0].toUpperCase()}${mutation.slice(1)}Input`;
  const r = await server.query(`mutation($input: ${type}!) { ${mutation}(input: $input) { __typename } }`, { input });
  return r.errors?.[0]?.extensions?.code as string | undefined;
}

/** Every tag of `tags` read through the index: each one's tracks (album/id, sorted) with the lists they hold. */
async function byTag(server: Server, tags: Iterable<string>): Promise<Map<string, string[]>> {
  const answers = new Map<string, string[]>();
  for (const tag of tags) {
    const r = await server.query('query($tag: String!) { tracksByTag(tag: $tag, first: 100) { edges { node { albumId id title tags } } } }', { tag });
    expect(r.errors).toBeUndefined();
    answers.set(tag, r.data.tracksByTag.edges.map((e: any) => `${e.node.albumId}/${e.node.id} ${JSON.stringify(e.node.tags)}`).sort());
  }
  return answers;
}

/** What the index must answer for each tag: the tracks whose stored list holds it, read by their keys. */
async function expectedByTag(server: Server, keys: Array<[string, string]>, tags: Iterable<string>): Promise<Map<string, string[]>> {
  const stored: Array<{ at: string; tags: string[] }> = [];
  for (const [albumId, id] of keys) {
    const r = await server.query('query($a: ID!, $i: ID!) { track(albumId: $a, id: $i) { tags } }', { a: albumId, i: id });
    expect(r.errors).toBeUndefined();
    if (r.data.track) stored.push({ at: `${albumId}/${id}`, tags: r.data.track.tags ?? [] });
  }
  const want = new Map<string, string[]>();
  for (const tag of tags)
    want.set(
      tag,
      stored
        .filter((s) => s.tags.includes(tag))
        .map((s) => `${s.at} ${JSON.stringify(s.tags)}`)
        .sort(),
    );
  return want;
}

async function expectVerified(store: Parameters<typeof verifyDerived>[0]['store'], model: Parameters<typeof verifyDerived>[0]['model']) {
  const report = await verifyDerived({ store, model });
  if (!report.ok) console.log(formatVerifyReport(report));
  expect(report.problems).toBe(0);
}

test('one index entity per element: created, changed by four writers at once, deleted and re-created, under redelivery and kills', async () => {
  const seed = testSeed();
  const rng = seededRng(seed);
  const random = () => rng.int(0x7fffffff) / 0x7fffffff;
  const { server } = world;
  const keys: Array<[string, string]> = [];
  for (let i = 0; i < 6; i++) {
    const tags = HOSTILE.filter((_, j) => (i + j) % 3 !== 0);
    expect(await write(server, 'createTrack', { albumId: `al${i % 2}`, id: `t${i}`, title: `Track ${i}`, tags: [...tags, tags[0]] })).toBeUndefined();
    keys.push([`al${i % 2}`, `t${i}`]);
  }
  expect(await write(server, 'createTrack', { albumId: 'al0', id: 'none', title: 'No tags', tags: [] })).toBeUndefined();
  expect(await write(server, 'createTrack', { albumId: 'al0', id: 'null', title: 'Null tags' })).toBeUndefined();
  keys.push(['al0', 'none'], ['al0', 'null']);
  await world.drain(random);
  const first = await byTag(server, HOSTILE);
  expect(first).toEqual(await expectedByTag(server, keys, HOSTILE));
  expect(first.get('rock')!.length).toBe(4);

  // Four writers give one track four different lists at once; another track is deleted and created again with new
  // tags before the worker runs; a third loses every tag.
  const lists = [['rock', 'new one'], ["it's"], ['💿 ünïcödé', 'new two', 'rock'], []];
  const answers = await Promise.all(lists.map((tags) => write(server, 'updateTrack', { albumId: 'al0', id: 't0', tags })));
  for (const a of answers) if (a) expect(a).toMatch(/^(CONFLICT|STORAGE_UNAVAILABLE)$/);
  expect(answers.filter((a) => a === undefined).length).toBeGreaterThan(0);
  expect(await write(server, 'deleteTrack', { albumId: 'al1', id: 't1' })).toBeUndefined();
  expect(await write(server, 'createTrack', { albumId: 'al1', id: 't1', title: 'Again', tags: ['reborn', 'rock'] })).toBeUndefined();
  expect(await write(server, 'updateTrack', { albumId: 'al0', id: 't2', tags: null })).toBeUndefined();
  expect(await write(server, 'deleteTrack', { albumId: 'al1', id: 't3' })).toBeUndefined();
  const { messages, killed, seen } = await world.drain(random);
  const all = [...HOSTILE, 'new one', 'new two', 'reborn'];
  const after = await byTag(server, all);
  expect(after).toEqual(await expectedByTag(server, keys, all));
  expect(after.get('reborn')).toEqual([`al1/t1 ${JSON.stringify(['reborn', 'rock'])}`]);
  // Every message once more, late: nothing changes.
  const reconcileOpts = { model: world.model, store: server.store, writer: world.writer, queues: testQueues(), tablePrefix: server.config.tablePrefix };
  await drainWithRedelivery(reconcileOpts, random);
  expect(await byTag(server, all)).toEqual(after);
  await expectVerified(server.store, world.model);
  console.log(`list index seed ${seed}: ${messages} messages (${seen.length} seen) delivered twice and late, ${killed} deliveries killed mid-message`);
}, 120_000);

test('a rebuild puts back every element; a fan-out too large to queue is refused naming the list, nothing written', async () => {
  const { server, model } = world;
  expect(await write(server, 'createTrack', { albumId: 'rb', id: 'r1', title: 'R', tags: ['x1', 'x2', 'x3'] })).toBeUndefined();
  await world.drain(() => 0.5);
  const table = `${server.config.tablePrefix}TracksByTag`;
  const store = testStore();
  for (const tag of ['x1', 'x3']) expect(await store.deleteEntity({ table, partitionKey: `tag_${tag}`, rowKey: 'rb_r1' })).toBe(true);
  expect((await verifyDerived({ store, model })).problems).toBe(2);
  const rebuilt = await rebuildIndex({ store, model, type: 'Track', index: 'byTag' });
  expect(rebuilt.upserted).toBe(2);
  expect((await byTag(server, ['x1', 'x2', 'x3'])).get('x3')).toEqual([`rb/r1 ${JSON.stringify(['x1', 'x2', 'x3'])}`]);
  await expectVerified(store, model);

  // 600 tags of 44 characters: the property (56 KiB) fits, the worker's message naming 600 index entities does not.
  const many = Array.from({ length: 600 }, (_, i) => `${String(i).padStart(4, '0')}${'t'.repeat(40)}`);
  const r = await server.query('mutation($input: CreateTrackInput!) { createTrack(input: $input) { __typename } }', {
    input: { albumId: 'big', id: 'b1', title: 'Big', tags: many },
  });
  expect(r.errors?.[0]?.extensions).toMatchObject({ code: 'LIMIT_EXCEEDED', field: 'tags', limit: 65536 });
  expect(r.errors![0].message).toMatch(/derives 600 index entities .*fewer elements in tags/);
  expect((await server.query('{ track(albumId: "big", id: "b1") { id } }')).data.track).toBeNull();
  expect((await byTag(server, [many[0]])).get(many[0])).toEqual([]);
});

test('under storage faults: acknowledged if and only if stored, every element indexed after the worker, verify clean', async () => {
  const seed = testSeed();
  const proxied = await startProxiedServer(SDL, { seed, prefix: uniquePrefix(), env: { TABLEGRAPH_WORKER: 'off' } });
  const { proxy, ctx } = proxied;
  try {
    const keys: Array<[string, string]> = Array.from({ length: 12 }, (_, i) => ['f', `t${i}`]);
    proxy.setFaults({ busy: 0.1, throttled: 0.1, timedOutAfterApply: 0.1, resetAfterApply: 0.1 });
    const created = await Promise.all(
      keys.map(([albumId, id], i) => write(ctx.server, 'createTrack', { albumId, id, title: id, tags: HOSTILE.slice(i % 4, (i % 4) + 3) })),
    );
    const updated = await Promise.all(
      keys.map(([albumId, id], i) =>
        created[i] ? Promise.resolve('skipped') : write(ctx.server, 'updateTrack', { albumId, id, tags: [HOSTILE[i % 8], 'faulted'] }),
      ),
    );
    proxy.setFaults({});
    for (const code of [...created, ...updated]) if (code && code !== 'skipped') expect(code).toMatch(/^(STORAGE_BUSY|STORAGE_UNAVAILABLE|CONFLICT)$/);
    // Acknowledged if and only if stored: a refused create left nothing, a refused update left the created list.
    for (const [i, [albumId, id]] of keys.entries()) {
      const r = await ctx.server.query('query($a: ID!, $i: ID!) { track(albumId: $a, id: $i) { tags } }', { a: albumId, i: id });
      if (created[i]) expect([id, r.data.track]).toEqual([id, null]);
      else if (updated[i]) expect([id, r.data.track.tags]).toEqual([id, HOSTILE.slice(i % 4, (i % 4) + 3)]);
      else expect([id, r.data.track.tags]).toEqual([id, [HOSTILE[i % 8], 'faulted']]);
    }
    const writer = queueWriter(ctx.model, ctx.server);
    await drainWithRedelivery(
      { model: ctx.model, store: ctx.server.store, writer, queues: testQueues(), tablePrefix: ctx.server.config.tablePrefix },
      () => 0.5,
    );
    const all = [...HOSTILE, 'faulted'];
    expect(await byTag(ctx.server, all)).toEqual(await expectedByTag(ctx.server, keys, all));
    await expectVerified(ctx.server.store, ctx.model);
    console.log(
      `list index under faults (seed ${seed}): ${JSON.stringify([...created, ...updated].map((a) => a ?? 'ok'))}; injected ${JSON.stringify(proxy.injected())}`,
    );
  } finally {
    await proxied.close();
  }
}, 120_000);

test('an index over a list added to a type with data: its online build writes one index entity per element; a load again replaces them', async () => {
  const d = new Deployment();
  const store = testStore();
  const catalogue = new Catalogue(store, d.prefix);
  const compiled = (sdl: string) => {
    d.write(sdl);
    return compileSchema(loadSchemaSources(d.dir), { tablePrefix: d.prefix });
  };
  try {
    const v1 = compiled(SDL.replace(/\n {2}@index\(name: "byTag"[^\n]*\{/, ' {').replace(/\n {2}tracksByTag[^\n]*/, ''));
    expect(v1.model.entities.get('Track')!.indexes.size).toBe(0);
    await deploySchema({ catalogue, schema: schemaLayout(v1.model, v1.schema), sdl: v1.sdl });
    const tagsOf = (i: number) => HOSTILE.filter((_, j) => (i * 7 + j) % 4 === 0);
    async function* rows() {
      for (let i = 0; i < 60; i++) yield { line: i + 1, values: { albumId: `b${i % 5}`, id: `t${i}`, title: `T${i}`, tags: i % 10 === 9 ? null : tagsOf(i) } };
    }
    await loadEntities({ store, model: v1.model, steps: [{ type: 'Track', rows: rows() }] });
    const v2 = compiled(SDL);
    await deploySchema({ catalogue, schema: schemaLayout(v2.model, v2.schema), sdl: v2.sdl });
    const runner = new BuildRunner({
      catalogue,
      store,
      model: v2.model,
      layout: schemaLayout(v2.model, v2.schema).layout,
      instance: 'test',
      entitiesPerSecond: 0,
      pageSize: 1000,
      presence: new CatalogueRowsBoard(catalogue),
    });
    for (let i = 0; i < 50 && (await catalogue.path('index:Track.byTag'))!.state === 'building'; i++) await runner.runOnce();
    const elements = Array.from({ length: 60 }, (_, i) => (i % 10 === 9 ? 0 : tagsOf(i).length)).reduce((a, b) => a + b, 0);
    expect(await catalogue.path('index:Track.byTag')).toMatchObject({ state: 'ready', read: 60, written: elements });
    let stored = 0;
    for await (const page of store.scan(`${d.prefix}TracksByTag`)) stored += page.length;
    expect(stored).toBe(elements);
    // Loaded again with other lists: each row's dropped elements' index entities go, its new ones come.
    async function* changed() {
      for (let i = 0; i < 10; i++) yield { line: i + 1, values: { albumId: `b${i % 5}`, id: `t${i}`, title: `T${i}`, tags: i % 2 ? ['reloaded'] : [] } };
    }
    await loadEntities({ store, model: v2.model, steps: [{ type: 'Track', rows: changed() }] });
    const reloaded = elements - Array.from({ length: 10 }, (_, i) => (i % 10 === 9 ? 0 : tagsOf(i).length)).reduce((a, b) => a + b, 0) + 5;
    let after = 0;
    for await (const page of store.scan(`${d.prefix}TracksByTag`)) after += page.length;
    expect(after).toBe(reloaded);
    const report = await verifyDerived({ store, model: v2.model });
    if (!report.ok) console.log(formatVerifyReport(report));
    expect(report.problems).toBe(0);
  } finally {
    d.remove();
  }
}, 120_000);
