/**
 * The IDE's first query comes from the schema folder (`ide-query.gql`), not from the library: the HR example shows
 * its own, and a folder without one gets a query any schema answers. The page's start script carries it.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { GENERIC_IDE_QUERY, ideQueryOf } from '../src/server/ide';
import { SCHEMA_DIR, startSdlServer } from './support/harness';

test("a schema folder's ide-query.gql, or a query any schema answers", () => {
  expect(ideQueryOf(SCHEMA_DIR)).toContain('department(id: "Marketing")');
  const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-ide-'));
  try {
    expect(ideQueryOf(empty)).toBe(GENERIC_IDE_QUERY);
  } finally {
    fs.rmSync(empty, { recursive: true, force: true });
  }
});

test("the IDE page of a schema of one's own starts with the generic query", async () => {
  const { server, close } = await startSdlServer(
    'type Thing @entity(table: "Things", partitionKey: "t", rowKey: "{id}") { id: ID! }\ntype Query { thing(id: ID!): Thing @point(partitionKey: "t") }',
  );
  try {
    const script = await (await fetch(server.url.replace(/\/graphql$/, '/ide/start.js'))).text();
    expect(script).toContain(JSON.stringify(GENERIC_IDE_QUERY));
    expect(script).not.toContain('Marketing');
  } finally {
    await close();
  }
}, 60_000);
