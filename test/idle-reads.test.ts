/**
 * An idle server reads no table of the data whole, and its recurring work costs what was written since, not what is
 * stored: the HR example over 10,000 employees, its inline worker running capture passes every second, through a
 * counting proxy in front of the Table service (test/support/storage-proxy.ts). Over ten capture passes with no write,
 * then ten after a burst of writes: no query of an entity or index table without its PartitionKey, and the Table calls
 * a second are printed (docs/backup.md, "Cost").
 */
import { loadEntities } from '../src/load/load-entities';
import { readJsonBlob } from '../src/backup/backup-blobs';
import { LATEST_PASS, type LatestPass } from '../src/backup/change-format';
import { compileHr, connectionString, startTestServer, testBlobs, testStore, type TestServer } from './support/harness';
import { startStorageProxy, type StorageProxy } from './support/storage-proxy';
import { until } from './support/wait';

let proxy: StorageProxy;
let server: TestServer;

beforeAll(async () => {
  proxy = await startStorageProxy(connectionString());
  server = await startTestServer({ AZURE_STORAGE_CONNECTION_STRING: proxy.connectionString, TABLEGRAPH_BACKUP_CAPTURE_SECONDS: '1' });
  const { model } = compileHr(server.config.tablePrefix);
  async function* departments() {
    for (let d = 0; d < 20; d++) yield { line: d + 1, values: { id: `D${d}`, name: `D${d}` } };
  }
  async function* employees() {
    for (let i = 0; i < 10_000; i++)
      yield { line: i + 1, values: { departmentId: `D${i % 20}`, id: String(i), firstName: 'Idle', lastName: `N${i % 300}`, email: `idle.${i}@example.test` } };
  }
  await loadEntities({
    store: testStore(),
    model,
    steps: [
      { type: 'Department', rows: departments() },
      { type: 'Employee', rows: employees() },
    ],
  });
}, 120_000);
afterAll(async () => {
  await server?.close();
  await proxy?.close();
});

/** Waits for `n` more capture passes (changes/latest.json written anew each time). */
async function passes(n: number): Promise<void> {
  const read = async () => (await readJsonBlob<LatestPass>(testBlobs(), server.config.backup.container, LATEST_PASS))?.startedAt;
  let last = await read();
  for (let i = 0; i < n; i++) {
    await until(`capture pass ${i + 1} of ${n}`, async () => {
      const now = await read();
      if (now === undefined || now === last) return false;
      last = now;
      return true;
    });
  }
}

/** The Table requests during `run`: each one's method and path, and how long it took (s). */
async function counted(run: () => Promise<void>): Promise<{ requests: Array<{ method: string; path: string }>; seconds: number }> {
  const from = proxy.forwarded().length;
  const began = performance.now();
  await run();
  return { requests: proxy.forwarded().slice(from), seconds: (performance.now() - began) / 1000 };
}

test('idle, then written to: no table of the data is read whole by any recurring work; the calls a second printed', async () => {
  const data = compileHr(server.config.tablePrefix).model.tables;
  const wholeReads = (requests: Array<{ method: string; path: string }>) =>
    requests
      .filter((r) => r.method === 'GET' && data.some((t) => r.path.includes(`/${t}(`) || r.path.includes(`/${t}()`)))
      .map((r) => decodeURIComponent(r.path))
      .filter((p) => !/PartitionKey eq '/.test(p) && !/\(PartitionKey='/.test(p));
  await passes(2); // the server settled: its start's own reads done
  const idle = await counted(() => passes(10));
  const written = await counted(async () => {
    for (let i = 0; i < 30; i++) {
      const r = await server.query('mutation($i: UpdateEmployeeInput!) { updateEmployee(input: $i) { employee { id } } }', {
        i: { departmentId: `D${i % 20}`, id: String(i), title: `T${i}` },
      });
      expect(r.errors).toBeUndefined();
    }
    await passes(10);
  });
  const byTable = new Map<string, number>();
  for (const r of idle.requests) {
    const table = `${r.method} ${
      r.path
        .replace(/^\/[^/]*\//, '')
        .replace(server.config.tablePrefix, '<prefix>')
        .split(/[(?]/)[0]
    }`;
    byTable.set(table, (byTable.get(table) ?? 0) + 1);
  }
  const perSecond = [...byTable].map(([t, n]) => `${t} ${(n / idle.seconds).toFixed(2)}`).join(', ');
  console.log(
    `idle server over 10,000 employees, capture every second: ${(idle.requests.length / idle.seconds).toFixed(2)} Table calls/s idle ` +
      `(${perSecond}), ${(written.requests.length / written.seconds).toFixed(2)} with 30 writes`,
  );
  expect(wholeReads(idle.requests)).toEqual([]);
  expect(wholeReads(written.requests)).toEqual([]);
}, 180_000);
