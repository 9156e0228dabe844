/**
 * Which servers and workers run (src/evolution/presence.ts): each holds a lease on a blob of its own, renewed every few
 * seconds, so that a process killed without a word is gone when its lease lapses (15 s, by the Blob service's clock)
 * — from the builds' count of older servers and from `npm run migrate -- status` — and a process that stops says so
 * at once. No table row is written to say it.
 */
import fs from 'node:fs';
import { BlobPresenceBoard, Presence, presenceContainer } from '../src/evolution/presence';
import { connectionString, testBlobs, testStore, uniquePrefix } from './support/harness';
import { killCommandProcesses, runCommand } from './support/processes';
import { catalogueTable } from '../src/evolution/catalogue';
import { until } from './support/wait';

afterAll(killCommandProcesses);

/** `npm run migrate -- status --json` on the prefix: the instances it lists as running. */
async function statusServers(prefix: string, dir: string): Promise<string[]> {
  const p = runCommand('migrate', ['status', '--json'], dir, { AZURE_STORAGE_CONNECTION_STRING: connectionString(), TABLEGRAPH_TABLE_PREFIX: prefix });
  const { code } = await p.exited;
  expect(code).toBe(0);
  const json = JSON.parse(p.output().slice(p.output().indexOf('{'))) as { servers: Array<{ instance: string }> };
  return json.servers.map((s) => s.instance);
}

test('a process that stops is gone at once; one killed is gone once its lease lapses; nothing written to the tables', async () => {
  const prefix = uniquePrefix();
  const dir = fs.mkdtempSync('/tmp/tablegraph-presence-');
  const board = new BlobPresenceBoard(testBlobs(), presenceContainer(prefix));
  const stopping = new Presence(board, { instance: 'stops', version: 1, hash: 'h' });
  await stopping.start();
  // One that is killed: it said it runs, and never says it again.
  const killed = new BlobPresenceBoard(testBlobs(), presenceContainer(prefix));
  await killed.join({ instance: 'killed', version: 1, hash: 'h' });
  expect((await board.servers()).map((s) => s.instance).sort()).toEqual(['killed', 'stops']);
  expect((await statusServers(prefix, dir)).sort()).toEqual(['killed', 'stops']);

  await stopping.stop();
  expect((await board.servers()).map((s) => s.instance)).toEqual(['killed']);
  // The lease lapses 15 s after it was taken; asked until then, with a deadline well past it.
  await until('the killed process unlisted', async () => (await board.servers()).length === 0, { timeoutMs: 30_000, everyMs: 500 });
  expect(await statusServers(prefix, dir)).toEqual([]);
  // Nothing of it is in the catalogue's table.
  expect((await testStore().queryRange({ table: catalogueTable(prefix), partitionKey: 'server', limit: 10 })).entities).toEqual([]);
  fs.rmSync(dir, { recursive: true, force: true });
}, 90_000);
