/**
 * The catalogue read defensively: a row written around tablegraph (or damaged) is named and refused — a path's row
 * read as failed while every other path serves, a deployment row that does not decode stopping the start with a
 * DATA_INTEGRITY error that names it — and a row made to hang or exhaust the reader (a chunk count of 1e9, a gzip
 * bomb) is refused before it is read whole.
 */
import { gzipSync } from 'node:zlib';
import { Catalogue, catalogueTable } from '../src/evolution/catalogue';
import { ErrorCode, isTablegraphError } from '../src/errors';
import { startTestServer, testStore, uniquePrefix, type TestServer } from './support/harness';

const LAST_NAME_QUERY = '{ employeesByLastName(lastName: "Hall", first: 5) { edges { node { id } } } }';
const POINT_QUERY = '{ department(id: "Marketing") { id name } }';

/** Starts a server on `prefix`, expecting it to fail, and returns its error. */
async function refusedStart(prefix: string): Promise<unknown> {
  let server: TestServer | undefined;
  try {
    server = await startTestServer({ TABLEGRAPH_TABLE_PREFIX: prefix });
  } catch (e) {
    return e;
  }
  await server.close();
  throw new Error('the server started over a catalogue row that does not decode');
}

describe('a path row that does not decode', () => {
  let server: TestServer;
  let prefix: string;

  beforeAll(async () => {
    prefix = uniquePrefix();
    const first = await startTestServer({ TABLEGRAPH_TABLE_PREFIX: prefix });
    await first.close();
    // Written around tablegraph: the definition is not JSON.
    await testStore().updateEntity(
      catalogueTable(prefix),
      { partitionKey: 'path', rowKey: 'index:Employee.byLastName', properties: { Definition: { type: 'String', value: '{not json' } } },
      'merge',
    );
    server = await startTestServer({ TABLEGRAPH_TABLE_PREFIX: prefix });
  });
  afterAll(() => server?.close());

  test('the server starts, and the path is read as failed, its problem naming the row', async () => {
    const row = (await new Catalogue(testStore(), prefix).path('index:Employee.byLastName'))!;
    expect(row.state).toBe('failed');
    expect(row.problem?.reason).toBe('CatalogueRowInvalid');
    expect(row.problem?.message).toContain(`${catalogueTable(prefix)} (PartitionKey "path", RowKey "index:Employee.byLastName")`);
    expect(row.problem?.message).toContain('Definition is not JSON');
  });

  test('reads through it are refused, with nothing of the row in the answer; other paths serve', async () => {
    const refused = await server.query(LAST_NAME_QUERY);
    expect(refused.errors?.[0].extensions.code).toBe(ErrorCode.ACCESS_PATH_BUILDING);
    expect(refused.errors?.[0].extensions.reason).toBe('PathBuildFailed');
    expect(JSON.stringify(refused)).not.toContain('not JSON');
    const served = await server.query(POINT_QUERY);
    expect(served.errors).toBeUndefined();
    expect(served.data.department).toEqual({ id: 'Marketing', name: expect.any(String) });
  });
});

describe('a deployment row that does not decode stops the start, naming the row', () => {
  async function deployedPrefix(): Promise<string> {
    const prefix = uniquePrefix();
    const first = await startTestServer({ TABLEGRAPH_TABLE_PREFIX: prefix });
    await first.close();
    return prefix;
  }

  test('a chunk count of 1e9 is refused at once (not read chunk by chunk)', async () => {
    const prefix = await deployedPrefix();
    await testStore().updateEntity(
      catalogueTable(prefix),
      { partitionKey: 'deployment', rowKey: 'current', properties: { LayoutChunks: { type: 'Int64', value: 1_000_000_000n } } },
      'merge',
    );
    const e = await refusedStart(prefix);
    expect(isTablegraphError(e, ErrorCode.DATA_INTEGRITY)).toBe(true);
    expect((e as Error).message).toContain(`${catalogueTable(prefix)} (PartitionKey "deployment", RowKey "current")`);
    expect((e as Error).message).toContain('LayoutChunks is 1000000000');
  });

  test('a gzip bomb is refused before it is inflated whole', async () => {
    const prefix = await deployedPrefix();
    // 256 MiB of zeros compress to about 250 KB: 9 chunks of base64.
    const b64 = gzipSync(Buffer.alloc(256 * 1024 * 1024), { level: 9 }).toString('base64');
    const chunks = Math.ceil(b64.length / 30000);
    const properties: Record<string, { type: 'String' | 'Int64'; value: string | bigint }> = { LayoutChunks: { type: 'Int64', value: BigInt(chunks) } };
    for (let i = 0; i < chunks; i++) properties[`Layout${i}`] = { type: 'String', value: b64.slice(i * 30000, (i + 1) * 30000) };
    await testStore().updateEntity(catalogueTable(prefix), { partitionKey: 'deployment', rowKey: 'current', properties }, 'merge');
    const before = process.memoryUsage().rss;
    const e = await refusedStart(prefix);
    expect(isTablegraphError(e, ErrorCode.DATA_INTEGRITY)).toBe(true);
    expect((e as Error).message).toMatch(/Layout does not decompress/);
    // Refused at 16 MiB of output, not after 256 MiB.
    expect(process.memoryUsage().rss - before).toBeLessThan(128 * 1024 * 1024);
  });

  test('a layout that is not JSON', async () => {
    const prefix = await deployedPrefix();
    const b64 = gzipSync(Buffer.from('{"types": {', 'utf8')).toString('base64');
    await testStore().updateEntity(
      catalogueTable(prefix),
      {
        partitionKey: 'deployment',
        rowKey: 'current',
        properties: { LayoutChunks: { type: 'Int64', value: 1n }, Layout0: { type: 'String', value: b64 } },
      },
      'merge',
    );
    const e = await refusedStart(prefix);
    expect(isTablegraphError(e, ErrorCode.DATA_INTEGRITY)).toBe(true);
    expect((e as Error).message).toMatch(/RowKey "current"\) cannot be read: Layout is not JSON/);
  });
});
