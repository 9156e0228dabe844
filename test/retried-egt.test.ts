/**
 * An EGT the SDK sent again (its first attempt throttled, not applied) that meets a delete without If-Match of an
 * index entity that is not there — one a schema change's build has not reached yet: the write is tried again, and its
 * next EGT leaves that delete out, as a first attempt does (src/write/partition-committer.ts). The client is not told
 * NOT_FOUND for an index entity it never named. On a schema written for the test.
 */
import fs from 'node:fs';
import { compileSchema } from '../src/compiler/compile';
import { TableStore } from '../src/storage/table-store';
import { WriteExecutor } from '../src/write/write-executor';
import { RecordingSender } from './support/fanout-fixtures';
import { DIRECTIVES_FILE, testStore, uniquePrefix } from './support/harness';
import { startStorageProxy } from './support/storage-proxy';

const SDL = `
type Crate @entity(table: "Crates", partitionKey: "{yard}", rowKey: "crate_{id}")
  @index(name: "byLabel", rowKey: "label_{label}_{id}") {
  yard: ID!
  id: ID!
  label: String!
}
type Query {
  crate(yard: ID!, id: ID!): Crate @point
}
type Mutation {
  createCrate(input: CreateCrateInput!): CratePayload! @write(entity: "Crate", action: CREATE)
  updateCrate(input: UpdateCrateInput!): CratePayload! @write(entity: "Crate", action: UPDATE)
}
`;

test('a retried EGT meeting an absent index entity it deletes: the write is tried again and stored', async () => {
  const prefix = uniquePrefix();
  const { model } = compileSchema([{ name: 'crates.graphql', body: `${fs.readFileSync(DIRECTIVES_FILE, 'utf8')}\n${SDL}` }], { tablePrefix: prefix });
  const store = testStore();
  for (const t of model.tables) await store.ensureTable(t);
  const table = `${prefix}Crates`;
  const write = (writer: WriteExecutor, name: string, input: Record<string, unknown>) => writer.execute(model.writes.get(`Mutation.${name}`)!, input);
  await write(new WriteExecutor({ model, store, workQueue: new RecordingSender() }), 'createCrate', { yard: 'y', id: '1', label: 'old' });
  // The index entity of the label as it is, gone: as when a build of that index has not reached it yet.
  expect(await store.deleteEntity({ table, partitionKey: 'y', rowKey: 'label_old_1' })).toBe(true);

  // The next EGT's first attempt is answered 503 ServerBusy (not applied); the SDK sends it again.
  let armed = 0;
  const proxy = await startStorageProxy(process.env.AZURE_STORAGE_CONNECTION_STRING!, {
    faults: { busy: 1 },
    faultable: (method, path) => method === 'POST' && path.includes('$batch') && armed-- > 0,
  });
  try {
    const viaProxy = new TableStore({ connectionString: proxy.connectionString, target: 'azurite' });
    const writer = new WriteExecutor({ model, store: viaProxy, workQueue: new RecordingSender() });
    armed = 1;
    await expect(write(writer, 'updateCrate', { yard: 'y', id: '1', label: 'new' })).resolves.toMatchObject({ values: { label: 'new' } });
    expect(proxy.injected().busy).toBe(1);
  } finally {
    await proxy.close();
  }
  expect((await store.getEntity({ table, partitionKey: 'y', rowKey: 'crate_1' }))?.properties.label).toBe('new');
  expect(await store.getEntity({ table, partitionKey: 'y', rowKey: 'label_new_1' })).not.toBeNull();
  expect(await store.getEntity({ table, partitionKey: 'y', rowKey: 'label_old_1' })).toBeNull();
});
