/**
 * Many-to-many benchmark: `npx tsx test/bench/join-bench.ts [--runs 30]` (not part of `npm test`).
 *
 * A page of 100 nodes read through join entities whose reference goes through a unique index of the target (the
 * guide's "Modelling relationships": a playlist's tracks through its entries, each entry holding a track's ISRC) costs
 * one range query for the entries, then a point query per node for the index entity and one for the track: 201 calls
 * in three waves. The same page read from entries whose join holds copies of the fields it shows (`@copy`, the
 * guide's "Denormalization pattern") is one range query. On its own in-memory Azurite, with a schema written for
 * it, this prints each page's storage calls, waves and latency (median and p90 of interleaved runs, ms) and their
 * ratio — and the same join holding copies of what the page shows, which the server reads as the page (covered) —
 * with the server's storage admission at its default (`TABLEGRAPH_MAX_STORAGE_INFLIGHT` 8) and wider (32, the
 * request's own `TABLEGRAPH_READ_CONCURRENCY` with it): the width both point-query waves are read at.
 */
import { startAzurite } from '../../src/storage/azurite';
import { startSdlServer, type TestServer } from '../support/harness';
import { median, percentile } from './bench-process';

const runsArg = process.argv.indexOf('--runs');
const RUNS = runsArg > 0 ? Number(process.argv[runsArg + 1]) : 30;
const NODES = 100;

const SDL = `
type Track
  @entity(table: "Tracks", partitionKey: "{album}", rowKey: "track_{id}")
  @index(name: "byIsrc", table: "TracksByIsrc", partitionKey: "{isrc}", rowKey: "isrc", unique: true) {
  album: ID!
  id: ID!
  isrc: ID!
  title: String
  durationMs: Int
  """Where the worker finds the join entities and the copies of its fields (when it is deleted, moved or changed)."""
  entries(first: Int, after: String): PlaylistEntryConnection! @range(index: "byIsrc", partitionKey: "{isrc}", rowKeyPrefix: "entry_")
  copies(first: Int, after: String): PlaylistCopyConnection! @range(index: "byIsrc", partitionKey: "{isrc}", rowKeyPrefix: "copy_")
}

type Playlist @entity(table: "Playlists", partitionKey: "{id}", rowKey: "playlist") {
  id: ID!
  name: String
  """Through join entities that hold the ISRC only: an index entity and a track per node."""
  tracks(first: Int, after: String): TrackConnection! @range(partitionKey: "{id}", rowKeyPrefix: "entry_", through: "PlaylistEntry.track")
  """Through join entities that also hold copies of the fields a page shows: covered, no target read."""
  coveredTracks(first: Int, after: String): TrackConnection! @range(partitionKey: "{id}", rowKeyPrefix: "copy_", through: "PlaylistCopy.track")
  """The join entities with copies themselves."""
  copies(first: Int, after: String): PlaylistCopyConnection! @range(partitionKey: "{id}", rowKeyPrefix: "copy_")
}

type PlaylistEntry
  @entity(table: "Playlists", partitionKey: "{playlistId}", rowKey: "entry_{position}")
  @index(name: "byIsrc", table: "EntriesByIsrc", partitionKey: "{isrc}", rowKey: "entry_{playlistId}_{position}") {
  playlistId: ID!
  position: ID!
  isrc: ID!
  track: Track! @point(index: "byIsrc", partitionKey: "{isrc}", rowKey: "isrc")
}

type PlaylistCopy
  @entity(table: "Playlists", partitionKey: "{playlistId}", rowKey: "copy_{position}")
  @index(name: "byIsrc", table: "CopiesByIsrc", partitionKey: "{isrc}", rowKey: "copy_{playlistId}_{position}") {
  playlistId: ID!
  position: ID!
  isrc: ID!
  title: String @copy(from: "track", field: "title")
  durationMs: Int @copy(from: "track", field: "durationMs")
  track: Track! @point(index: "byIsrc", partitionKey: "{isrc}", rowKey: "isrc")
}

type Query {
  playlist(id: ID!): Playlist @point(rowKey: "playlist")
}

type Mutation {
  createTrack(input: CreateTrackInput!): TrackPayload! @write(entity: "Track", action: CREATE)
  createPlaylist(input: CreatePlaylistInput!): PlaylistPayload! @write(entity: "Playlist", action: CREATE)
  addEntry(input: CreatePlaylistEntryInput!): PlaylistEntryPayload! @write(entity: "PlaylistEntry", action: CREATE)
  addCopy(input: CreatePlaylistCopyInput!): PlaylistCopyPayload! @write(entity: "PlaylistCopy", action: CREATE)
}
`;

const PAGES = {
  join: `{ playlist(id: "p1") { page: tracks(first: ${NODES}) { edges { node { title durationMs } } } } }`,
  covered: `{ playlist(id: "p1") { page: coveredTracks(first: ${NODES}) { edges { node { title durationMs } } } } }`,
  copies: `{ playlist(id: "p1") { page: copies(first: ${NODES}) { edges { node { title durationMs } } } } }`,
};
const NAMES: Record<keyof typeof PAGES, string> = {
  join: 'through the join (unique index)',
  covered: 'through the join, covered by its copies',
  copies: 'the join entities with copies',
};

/** Asks `query`, failing on any error; its latency (ms) and its storage cost. */
async function timed(server: TestServer, query: string): Promise<{ ms: number; calls: number; waves: number; titles: Array<string | null> }> {
  const started = performance.now();
  const r = await server.query(query);
  const ms = performance.now() - started;
  if (r.errors) throw new Error(`${query}: ${JSON.stringify(r.errors)}`);
  const page = r.data.playlist.page;
  const cost = r.extensions.cost;
  return {
    ms,
    calls: cost.pointQueries + cost.rangeQueries,
    waves: cost.waves,
    titles: page.edges.map((e: { node: { title: string | null } }) => e.node.title),
  };
}

async function ok(server: TestServer, query: string, variables: Record<string, unknown>): Promise<void> {
  const r = await server.query(query, variables);
  if (r.errors) throw new Error(`${query}: ${JSON.stringify(r.errors)}`);
}

/** 100 tracks and one playlist of them; waits until the worker has put every copy on the entries. */
async function seed(server: TestServer): Promise<void> {
  const position = (i: number) => String(i).padStart(3, '0');
  await ok(server, 'mutation($input: CreatePlaylistInput!) { createPlaylist(input: $input) { playlist { id } } }', { input: { id: 'p1', name: 'bench' } });
  for (let i = 0; i < NODES; i++) {
    const track = { album: `album${i % 10}`, id: String(i), isrc: `ISRC${position(i)}`, title: `Track ${i}`, durationMs: 180000 + i };
    await ok(server, 'mutation($input: CreateTrackInput!) { createTrack(input: $input) { track { id } } }', { input: track });
    const entry = { playlistId: 'p1', position: position(i), isrc: track.isrc };
    await ok(server, 'mutation($input: CreatePlaylistEntryInput!) { addEntry(input: $input) { playlistEntry { position } } }', { input: entry });
    await ok(server, 'mutation($input: CreatePlaylistCopyInput!) { addCopy(input: $input) { playlistCopy { position } } }', { input: entry });
  }
  for (const started = Date.now(); ;) {
    const { titles } = await timed(server, PAGES.copies);
    if (titles.length === NODES && titles.every((t) => t !== null)) return;
    if (Date.now() - started > 120_000) throw new Error(`the copies were not all written in 2 min (${titles.filter((t) => t !== null).length} of ${NODES})`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

interface Row {
  page: string;
  inFlight: number;
  calls: number;
  waves: number;
  ms: number[];
}

async function measure(server: TestServer, inFlight: number): Promise<Row[]> {
  const rows = Object.fromEntries(
    Object.keys(PAGES).map((k) => [k, { page: NAMES[k as keyof typeof PAGES], inFlight, calls: 0, waves: 0, ms: [] as number[] }]),
  );
  for (let i = 0; i < 3; i++) for (const query of Object.values(PAGES)) await timed(server, query); // warm-up
  for (let run = 0; run < RUNS; run++) {
    // Interleaved, one at a time: each page alone on the machine.
    for (const [key, query] of Object.entries(PAGES)) {
      const t = await timed(server, query);
      if (t.titles.length !== NODES || t.titles.some((title) => title === null)) throw new Error(`${key}: ${t.titles.length} nodes, some without a title`);
      rows[key].ms.push(t.ms);
      rows[key].calls = t.calls;
      rows[key].waves = t.waves;
    }
  }
  return Object.values(rows);
}

async function main(): Promise<void> {
  const azurite = await startAzurite({ inMemory: true });
  process.env.AZURE_STORAGE_CONNECTION_STRING = azurite.connectionString;
  const rows: Row[] = [];
  let prefix: string | undefined;
  try {
    for (const inFlight of [8, 32]) {
      // The request's own width (TABLEGRAPH_READ_CONCURRENCY, default 16) no narrower than the server's.
      const width = String(Math.max(16, inFlight));
      const env: Record<string, string> = {
        TABLEGRAPH_MAX_STORAGE_INFLIGHT: String(inFlight),
        TABLEGRAPH_READ_CONCURRENCY: width,
        ...(prefix && { TABLEGRAPH_TABLE_PREFIX: prefix }),
      };
      const started = await startSdlServer(SDL, env);
      try {
        if (!prefix) {
          prefix = started.server.config.tablePrefix;
          await seed(started.server);
        }
        rows.push(...(await measure(started.server, inFlight)));
      } finally {
        await started.close();
      }
    }
  } finally {
    await azurite.stop();
  }
  console.log(`\n${NODES} nodes a page, ${RUNS} interleaved runs each; latency in ms`);
  console.log('| page | storage in flight | storage calls | waves | p50 | p90 | p50 vs copies |');
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const row of rows) {
    const copies = rows.find((r) => r.inFlight === row.inFlight && r.page === NAMES.copies)!;
    const ratio = row === copies ? 1 : median(row.ms) / median(copies.ms);
    console.log(
      `| ${row.page} | ${row.inFlight} | ${row.calls} | ${row.waves} | ${median(row.ms).toFixed(1)} | ${percentile(row.ms, 90).toFixed(1)} | ${ratio.toFixed(2)}× |`,
    );
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
