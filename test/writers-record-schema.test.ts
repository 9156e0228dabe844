/**
 * Every writer of entities tells the catalogue which schema it wrote with, so no path is ever assumed built: `npm run
 * load` records its schema before its first row, so a server whose schema adds a unique index builds it from the
 * loaded entities (and refuses reads through it until then) rather than answering from an empty index; entities no
 * recorded schema wrote make a first deployment build every derived path; and a load with a schema older than the
 * deployed one is refused, since its writes would not keep the newer paths.
 */
import fs from 'node:fs';
import path from 'node:path';
import { ErrorCode, isTablegraphError } from '../src/errors';
import { createLogger } from '../src/log';
import { loadEntities } from '../src/load/load-entities';
import { listBulkWrites } from '../src/backup/bulk-writes';
import { loadConfig } from '../src/runtime/config';
import { deployForWriting } from '../src/runtime/schema-deployment';
import { compileSchema } from '../src/compiler/compile';
import { loadSchemaSources } from '../src/compiler/load-schema';
import { connectionString, ROOT, testBlobs, testStore } from './support/harness';
import { Deployment } from './support/schema-evolution';
import { killCommandProcesses } from './support/processes';
import { until } from './support/wait';

const TRACK = (indexes: string) => `
type Track @entity(table: "Tracks", partitionKey: "{albumId}", rowKey: "t_{id:06}")${indexes} {
  albumId: ID!
  id: Int!
  title: String!
}`;
const V1 = `${TRACK('')}
type Query {
  track(albumId: ID!, id: Int!): Track @point
  tracks(albumId: ID!, first: Int, after: String): TrackConnection! @range(rowKeyPrefix: "t_")
}`;
const V2 = `${TRACK('\n  @index(name: "byTitle", table: "TracksByTitle", partitionKey: "t_{title:hash16}", rowKey: "{title}", unique: true)')}
type Query {
  track(albumId: ID!, id: Int!): Track @point
  trackByTitle(title: String!): Track @point(index: "byTitle")
}`;

const TRACKS = Array.from({ length: 60 }, (_, i) => ({ albumId: `a${i % 4}`, id: i, title: `Song ${String(i).padStart(3, '0')}` }));

async function* rows() {
  for (const [i, t] of TRACKS.entries()) yield { line: i + 1, values: t };
}

/**
 * Waits until the server answers through path `id` (its build done, and the server's states read again), every
 * answer meanwhile ACCESS_PATH_BUILDING or exact — never null for a stored title.
 */
async function readsUntilServed(server: Awaited<ReturnType<Deployment['start']>>): Promise<void> {
  const bothServed = async () => {
    let served = 0;
    for (const t of [TRACKS[0], TRACKS[37]]) {
      const r = await server.query(`{ trackByTitle(title: "${t.title}") { albumId id } }`);
      if (r.errors) expect(r.errors[0].extensions.code).toBe(ErrorCode.ACCESS_PATH_BUILDING);
      else {
        expect(r.data.trackByTitle).toEqual({ albumId: t.albumId, id: t.id });
        served++;
      }
    }
    return served === 2;
  };
  await until('reads served through the index', bothServed, { timeoutMs: 120_000, everyMs: 100 });
}

afterAll(killCommandProcesses);

test('npm run load records its schema; a server adding a unique index builds it from the loaded entities, never serving it empty', async () => {
  const d = new Deployment();
  try {
    d.write(V1);
    const file = path.join(d.dir, 'tracks.ndjson');
    fs.writeFileSync(file, TRACKS.map((t) => JSON.stringify(t)).join('\n'));
    const load = d.command('load', ['--type', 'Track', '--file', file]);
    expect((await load.exited).code).toBe(0);
    const recorded = await d.catalogue().deployment();
    expect(recorded?.version).toBe(1);
    // Its rows are not captured by continuous backup: the load is recorded as a bulk write, finished.
    expect(await listBulkWrites(testBlobs(), `${d.prefix.toLowerCase()}-backup`)).toEqual([
      expect.objectContaining({ command: 'npm run load', startedAt: expect.any(String), finishedAt: expect.any(String) }),
    ]);

    const server = await d.start(V2);
    try {
      const row = (await d.paths()).get('index:Track.byTitle');
      expect(row?.version).toBe(2); // a change of the loaded version: built, not assumed
      await readsUntilServed(server);
      for (const t of TRACKS) {
        const r = await server.query(`{ trackByTitle(title: "${t.title}") { albumId id } }`);
        expect(r.data.trackByTitle).toEqual({ albumId: t.albumId, id: t.id });
      }
    } finally {
      await server.close();
    }
  } finally {
    d.remove();
  }
}, 120_000);

test('entities no recorded schema wrote: the first deployment builds every derived path from them', async () => {
  const d = new Deployment();
  try {
    // Written by the loader's library alone, with no catalogue at all (an old writer, or one writing around it).
    const v1 = d.model(V1);
    await loadEntities({ store: testStore(), model: v1, steps: [{ type: 'Track', rows: rows() }] });
    expect(
      await d
        .catalogue()
        .deployment()
        .catch(() => null),
    ).toBeNull();

    const server = await d.start(V2);
    try {
      const row = (await d.paths()).get('index:Track.byTitle');
      expect(row?.version).toBe(1);
      expect(['building', 'ready']).toContain(row?.state);
      expect(row?.state === 'ready' && row.read === 0).toBe(false); // never ready without reading the stored entities
      await readsUntilServed(server);
      const built = (await d.paths()).get('index:Track.byTitle')!;
      expect(built.read).toBeGreaterThanOrEqual(TRACKS.length);
    } finally {
      await server.close();
    }
  } finally {
    d.remove();
  }
}, 120_000);

test('a load with a schema older than the deployed one is refused before it writes', async () => {
  const d = new Deployment();
  try {
    await (await d.start(V1)).close();
    await (await d.start(V2)).close();
    d.write(V1);
    const config = loadConfig({ AZURE_STORAGE_CONNECTION_STRING: connectionString(), TABLEGRAPH_SCHEMA_DIR: d.dir, TABLEGRAPH_TABLE_PREFIX: d.prefix }, ROOT);
    const { model, schema, sdl } = compileSchema(loadSchemaSources(d.dir), { tablePrefix: d.prefix });
    let refused: unknown;
    await deployForWriting({
      config,
      store: testStore(),
      model,
      schema,
      sdl,
      log: createLogger({ level: 'silent' }),
      types: ['Track'],
      command: 'npm run load',
    }).catch((e) => (refused = e));
    expect(isTablegraphError(refused, ErrorCode.SCHEMA_INVALID)).toBe(true);
    expect((refused as { details: { reason: string } }).details.reason).toBe('SchemaOlder');
    expect((await d.catalogue().deployment())?.version).toBe(2);
  } finally {
    d.remove();
  }
});
