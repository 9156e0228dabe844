/**
 * References through a unique index (`@point(index:)`, src/model/references.ts), on a schema written for the test:
 * notes tagged with tags, many-to-many through NoteTag join entities that hold only the tag's id, while tags are
 * partitioned by their group — which the join does not hold. The join follows its reference in `@range(through)`
 * (the index entity, then the tag: one more batched wave, none when the join's own fields and copies cover the
 * selection) and in `@copy`; moving a tag to another group changes nothing on its join entities; deleting one has
 * the worker delete them. Under concurrent writers, redelivered and reordered messages, two workers, workers
 * killed mid-message, and a delete and re-create of one id; `verify` clean after.
 */
import fs from 'node:fs';
import { formatVerifyReport, verifyDerived } from '../src/maintenance/verify-derived';
import { compileSchema } from '../src/compiler/compile';
import { handleMessage } from './support/handle-message';
import { DIRECTIVES_FILE, testQueues } from './support/harness';
import { seededRng, useSdlWorld } from './support/fanout-fixtures';
import { receiveFanout } from './support/write-fixtures';
import { testSeed } from './support/seed';

const SDL = `
type Tag @entity(table: "Tags", partitionKey: "{group}", rowKey: "tag_{name}")
  @index(name: "byId", table: "TagsById", partitionKey: "tags", rowKey: "{id}", unique: true) {
  etag: String! group: ID! name: String! id: ID! color: String
  notes(first: Int, after: String): NoteConnection! @range(index: "byTag", partitionKey: "tag_{id}", through: "NoteTag.note")
}
type Note @entity(table: "Notes", partitionKey: "{notebook}", rowKey: "note_{id}") {
  notebook: ID! id: ID! text: String!
  tags(first: Int, after: String): TagConnection! @range(partitionKey: "{notebook}", rowKeyPrefix: "notetag_{id}_", through: "NoteTag.tag")
}
type NoteTag @entity(table: "Notes", partitionKey: "{notebook}", rowKey: "notetag_{noteId}_{tagId}")
  @index(name: "byTag", table: "NotesByTag", partitionKey: "tag_{tagId}", rowKey: "{notebook}_{noteId}") {
  notebook: ID! noteId: ID! tagId: ID!
  tagColor: String @copy(from: "tag", field: "color")
  note: Note! @point(partitionKey: "{notebook}", rowKey: "note_{noteId}")
  tag: Tag! @point(index: "byId", partitionKey: "tags", rowKey: "{tagId}")
}
type Query {
  note(notebook: ID!, id: ID!): Note @point
  tag(id: ID!): Tag @point(index: "byId", partitionKey: "tags")
}
type Mutation {
  createTag(input: CreateTagInput!): TagPayload! @write(entity: "Tag", action: CREATE)
  updateTag(input: UpdateTagInput!): TagPayload! @write(entity: "Tag", action: UPDATE)
  deleteTag(input: DeleteTagInput!): TagPayload! @write(entity: "Tag", action: DELETE)
  moveTag(input: MoveTagInput!): TagPayload! @write(entity: "Tag", action: MOVE)
  createNote(input: CreateNoteInput!): NotePayload! @write(entity: "Note", action: CREATE)
  tagNote(input: CreateNoteTagInput!): NoteTagPayload! @write(entity: "NoteTag", action: CREATE)
}`;

const world = useSdlWorld(SDL);
const { ok, drain } = world;

async function query(q: string, variables: Record<string, unknown>): Promise<any> {
  const r = await world.server.query(q, variables);
  expect(r.errors).toBeUndefined();
  return r;
}
/** A note's tags as `id:group:name:color`, read through the index (the selection needs the tag itself). */
async function tagsOf(note: string): Promise<string[]> {
  const r = await query('query($id: ID!) { note(notebook: "N", id: $id) { tags(first: 50) { edges { node { id group name color } } } } }', { id: note });
  return r.data.note.tags.edges.map((e: any) => `${e.node.id}:${e.node.group}:${e.node.name}:${e.node.color}`);
}
/** A note's tags as `id:color`, served from the join entities alone: the id they hold, the color they copy. */
async function coveredTagsOf(note: string): Promise<{ tags: string[]; cost: any }> {
  const r = await query('query($id: ID!) { note(notebook: "N", id: $id) { tags(first: 50) { edges { node { id color } } } } }', { id: note });
  return { tags: r.data.note.tags.edges.map((e: any) => `${e.node.id}:${e.node.color}`), cost: r.extensions.cost };
}
async function notesTagged(tag: string): Promise<string[]> {
  const r = await query('query($id: ID!) { tag(id: $id) { notes(first: 100) { edges { node { id } } } } }', { id: tag });
  return r.data.tag ? r.data.tag.notes.edges.map((e: any) => e.node.id).sort() : [];
}

test("a join holding only the far side's id: read through the index, copies kept, moves need nothing, deletes followed, verify clean", async () => {
  const seed = testSeed();
  const rng = seededRng(seed);
  const random = () => rng.int(0x7fffffff) / 0x7fffffff;
  for (const [group, name, id, color] of [
    ['work', 'urgent', 't1', 'red'],
    ['home', 'later', 't2', 'blue'],
    ['home', 'maybe', 't3', 'grey'],
  ]) {
    await ok('createTag', 'CreateTagInput', { group, name, id, color });
  }
  for (const id of ['n1', 'n2']) await ok('createNote', 'CreateNoteInput', { notebook: 'N', id, text: id });
  // The join holds the tag's id alone; a tag that does not exist is refused (the index entity is the reference's address).
  const missing = await world.server.query('mutation { tagNote(input: { notebook: "N", noteId: "n1", tagId: "t404" }) { __typename } }');
  expect(missing.errors?.[0].extensions).toMatchObject({ code: 'NOT_FOUND', reason: 'ReferenceMissing', field: 'tag' });

  // Concurrent writers: tags put on notes while t1's color changes twice.
  await Promise.all([
    ...[
      ['n1', 't1'],
      ['n1', 't2'],
      ['n1', 't3'],
      ['n2', 't1'],
    ].map(([noteId, tagId]) => ok('tagNote', 'CreateNoteTagInput', { notebook: 'N', noteId, tagId })),
    ok('updateTag', 'UpdateTagInput', { group: 'work', name: 'urgent', color: 'crimson' }).then(() =>
      ok('updateTag', 'UpdateTagInput', { group: 'work', name: 'urgent', color: 'orange' }),
    ),
  ]);
  // Before the worker: the page reads each tag through its index entity — two batched waves after the range: the
  // note, the range, 3 index entities, 3 tags (a point query is a round trip of its own).
  const read = await query('query { note(notebook: "N", id: "n1") { tags { edges { node { id name color } } } } }', {});
  expect(read.data.note.tags.edges.map((e: any) => `${e.node.id}:${e.node.name}:${e.node.color}`)).toEqual([
    't1:urgent:orange',
    't2:later:blue',
    't3:maybe:grey',
  ]);
  expect(read.extensions.cost).toMatchObject({ rangeQueries: 1, pointQueries: 1 + 3 + 3, roundTrips: 8 });
  await drain(random);
  expect(await tagsOf('n1')).toEqual(['t1:work:urgent:orange', 't2:home:later:blue', 't3:home:maybe:grey']);
  // Ids and copies only: the join entities alone, one range query.
  const covered = await coveredTagsOf('n1');
  expect(covered.tags).toEqual(['t1:orange', 't2:blue', 't3:grey']);
  expect(covered.cost).toMatchObject({ rangeQueries: 1, pointQueries: 1, roundTrips: 2 });
  expect(await notesTagged('t1')).toEqual(['n1', 'n2']);

  // t1 moved to another group and renamed: its join entities name it by id and are not written at all.
  const joinEtags = async () =>
    (
      await world.server.store.queryRange({
        table: world.model.entities.get('NoteTag')!.layout.table,
        partitionKey: 'N',
        rowKeyFrom: 'notetag_',
        rowKeyTo: 'notetag`',
        limit: 100,
      })
    ).entities.map((e) => e.etag);
  const before = await joinEtags();
  await ok('moveTag', 'MoveTagInput', { group: 'work', name: 'urgent', toGroup: 'archive', toName: 'old-urgent' });
  // t2 deleted: its join entity goes once the worker has seen it. t3 deleted and created again (a new color) before
  // the worker: its join entity points at the new t3 and stays. (Its id stays taken until the worker has released
  // the old index entity, so it is re-created at the same address.)
  await ok('deleteTag', 'DeleteTagInput', { group: 'home', name: 'later' });
  await ok('deleteTag', 'DeleteTagInput', { group: 'home', name: 'maybe' });
  await ok('createTag', 'CreateTagInput', { group: 'home', name: 'maybe', id: 't3', color: 'green' });
  const { messages, killed } = await drain(random);
  expect(await tagsOf('n1')).toEqual(['t1:archive:old-urgent:orange', 't3:home:maybe:green']);
  expect((await coveredTagsOf('n1')).tags).toEqual(['t1:orange', 't3:green']);
  expect(await tagsOf('n2')).toEqual(['t1:archive:old-urgent:orange']);
  expect(await notesTagged('t1')).toEqual(['n1', 'n2']);
  expect(await notesTagged('t2')).toEqual([]);
  const after = await joinEtags();
  expect(after).toHaveLength(3);
  expect(after.filter((e) => before.includes(e))).toHaveLength(2); // t1's two, untouched by its move; t3's copy rewritten
  const report = await verifyDerived({ store: world.server.store, model: world.model });
  if (!report.ok) console.log(formatVerifyReport(report));
  expect(report.problems).toBe(0);
  expect(report.references.find((r) => r.reference === 'NoteTag.tag')).toMatchObject({ checked: 3, dangling: [] });
  console.log(`index references seed ${seed}: ${messages} messages delivered twice and late, ${killed} deliveries killed mid-message`);
}, 120_000);

test('verify reports a join entity whose id names no tag', async () => {
  await ok('createTag', 'CreateTagInput', { group: 'g', name: 'solo', id: 't9', color: 'black' });
  await ok('createNote', 'CreateNoteInput', { notebook: 'N', id: 'n9', text: 'n9' });
  await ok('tagNote', 'CreateNoteTagInput', { notebook: 'N', noteId: 'n9', tagId: 't9' });
  await drain(() => 0.5);
  await ok('deleteTag', 'DeleteTagInput', { group: 'g', name: 'solo' });
  // A worker without a write path cleans the index but cannot delete the join entity: verify names it.
  for (const { message } of await receiveFanout(testQueues(), world.server.config.tablePrefix))
    await handleMessage(message, { model: world.model, store: world.server.store, settleMs: 0, holdMs: 0 });
  expect(await tagsOf('n9')).toEqual([]);
  const report = await verifyDerived({ store: world.server.store, model: world.model });
  expect(report.references.find((r) => r.reference === 'NoteTag.tag')!.dangling.map((d) => d.rowKey)).toEqual(['notetag_n9_t9']);
});

test('the compiler: a reference through an index must be through a unique one', () => {
  const directives = { name: 'directives.graphql', body: fs.readFileSync(DIRECTIVES_FILE, 'utf8') };
  const compile = (sdl: string) => () => compileSchema([directives, { name: 'notes.graphql', body: sdl }]);
  expect(compile(SDL.replace(', unique: true)', ')'))).toThrow(
    /NoteTag\.tag reads Tag@index\(byId\), which is not unique: a reference through an index needs unique: true/,
  );
});
