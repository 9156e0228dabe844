/**
 * A newcomer's next step after the example, as real processes on the embedded default with nothing configured but
 * the schema folder: the example serves, stops; a schema of one's own starts in the same working folder and serves
 * (its data in a folder of its own, said in the log); the example starts again with its data as it left it.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT } from './support/harness';
import { exitedOk, freePort, killCommandProcesses, queryPort, startServerProcess, type CommandProcess } from './support/processes';

jest.setTimeout(180_000);

/** A schema written for this test: no type of the example's. */
const NOTES_SDL = `
type Note @entity(table: "Notes", partitionKey: "{notebook}", rowKey: "note_{id:08}") {
  notebook: ID!
  id: ID!
  text: String!
}
type Query {
  notes(notebook: ID!, first: Int, after: String): NoteConnection! @range(rowKeyPrefix: "note_")
}
type Mutation {
  createNote(input: CreateNoteInput!): NotePayload! @write(entity: "Note", action: CREATE)
}
`;

const EXAMPLE_QUERY = '{ department(id: "Marketing") { employeeCount employees { edges { node { id lastName } } } } }';

let cwd: string;

beforeAll(() => {
  cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-apart-'));
  const notes = path.join(cwd, 'notes');
  fs.mkdirSync(notes);
  fs.copyFileSync(path.join(ROOT, 'schema/directives.graphql'), path.join(notes, 'directives.graphql'));
  fs.writeFileSync(path.join(notes, 'notes.graphql'), NOTES_SDL);
});

afterAll(() => {
  killCommandProcesses();
  fs.rmSync(cwd, { recursive: true, force: true });
});

async function stop(server: CommandProcess): Promise<string> {
  server.child.kill('SIGTERM');
  return exitedOk(server);
}

test("the example, then a schema of one's own with no other setting, then the example again: each serves its own data", async () => {
  const example = { TABLEGRAPH_SCHEMA_DIR: path.join(ROOT, 'examples/hr') };
  const examplePort = await freePort();
  const first = await startServerProcess(undefined, examplePort, example, { cwd });
  const before = await queryPort(examplePort, EXAMPLE_QUERY);
  expect(before.data.department.employeeCount).toBeGreaterThan(0); // the example's seed
  const exampleLog = await stop(first);
  expect(exampleLog).toContain(`the data of schema folder hr is kept in ${path.join('.data', 'hr')}`);

  // The schema of one's own: only TABLEGRAPH_SCHEMA_DIR differs. It serves, beside the example's data, not over it.
  const notesPort = await freePort();
  const notes = await startServerProcess(undefined, notesPort, { TABLEGRAPH_SCHEMA_DIR: 'notes' }, { cwd });
  for (const id of ['1', '10', '2']) {
    const created = await queryPort(notesPort, `mutation { createNote(input: { notebook: "n", id: "${id}", text: "t${id}" }) { note { id } } }`);
    expect([created.errors, created.data]).toEqual([undefined, { createNote: { note: { id } } }]);
  }
  // Zero-padded RowKeys: the range lists notes in number order.
  expect((await queryPort(notesPort, '{ notes(notebook: "n") { edges { node { id } } } }')).data).toEqual({
    notes: { edges: [{ node: { id: '1' } }, { node: { id: '2' } }, { node: { id: '10' } }] },
  });
  expect(await stop(notes)).toContain(`the data of schema folder notes is kept in ${path.join('.data', 'notes')}`);
  expect(fs.readdirSync(path.join(cwd, '.data')).sort()).toEqual(['hr', 'notes']);

  const againPort = await freePort();
  const again = await startServerProcess(undefined, againPort, example, { cwd });
  expect((await queryPort(againPort, EXAMPLE_QUERY)).data).toEqual(before.data);
  await stop(again);
});
