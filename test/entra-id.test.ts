/**
 * Microsoft Entra ID to storage, for real: Azurite in its OAuth mode (https with a certificate made here, bearer
 * tokens accepted) and a managed identity endpoint as App Service has one, which `DefaultAzureCredential` finds. The
 * server runs as `npm start` runs it, configured with account URLs and no key: it creates its tables, queues and
 * container, writes (an EGT and a fan-out message), its worker receives the message and writes the index entities,
 * and a `@blob` field's upload and read URLs are signed with a user delegation key. Then what cannot work under
 * Entra ID stops the start with CONFIG_INVALID: a schema with `@sas` fields, a token the storage refuses.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Agent, fetch as undiciFetch } from 'undici';
import { loadConfig } from '../src/runtime/config';
import { accountUrls } from '../src/storage/account-urls';
import { startAzurite, type AzuriteHandle } from '../src/storage/azurite';
import { ErrorCode, type TablegraphError } from '../src/errors';
import { makeCertificate, startTokenService, type TokenService } from './support/entra-id';
import { freePort, killCommandProcesses, runCommand, type CommandProcess } from './support/processes';
import { ROOT } from './support/harness';
import { until } from './support/wait';

const SDL = `
type Doc @entity(table: "Docs", partitionKey: "{folder}", rowKey: "doc_{id}")
  @index(name: "byTitle", table: "DocsByTitle", partitionKey: "{title}", rowKey: "{folder}_{id}") {
  etag: String! folder: ID! id: ID! title: String!
  scan: String @blob(container: "scans", contentTypes: ["image/png"])
}
type Query {
  doc(folder: ID!, id: ID!): Doc @point
  docsTitled(title: String!, first: Int, after: String): DocConnection! @range(index: "byTitle", partitionKey: "{title}")
}
input AttachScanInput { folder: ID! id: ID! scan: BlobInput }
type AttachScanPayload { doc: Doc! scanUploadUrl: String @blobUpload(field: "scan") }
type Mutation {
  createDoc(input: CreateDocInput!): DocPayload! @write(entity: "Doc", action: CREATE)
  attachScan(input: AttachScanInput!): AttachScanPayload! @write(entity: "Doc", action: UPDATE)
}`;

let work: string;
let azurite: AzuriteHandle;
let tokens: TokenService;
let tls: Agent;
let certPath: string;

/** The settings of the Entra ID path: Azurite's three endpoints (path-style, so one per service), the CA, the identity. */
function entraEnv(schemaDir: string, port: number, identity: TokenService = tokens): Record<string, string> {
  const url = (p: number) => `https://127.0.0.1:${p}/devstoreaccount1`;
  return {
    PORT: String(port),
    TABLEGRAPH_SCHEMA_DIR: schemaDir,
    TABLEGRAPH_TABLE_URL: url(azurite.ports.table),
    TABLEGRAPH_QUEUE_URL: url(azurite.ports.queue),
    TABLEGRAPH_BLOB_URL: url(azurite.ports.blob),
    TABLEGRAPH_TABLE_PREFIX: `e${Date.now().toString(36)}`,
    NODE_EXTRA_CA_CERTS: certPath,
    ...identity.env,
  };
}

function schemaFolder(name: string, sdl: string): string {
  const dir = path.join(work, name);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'schema.graphql'), sdl);
  return dir;
}

beforeAll(async () => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-entra-'));
  ({ certPath } = await makeCertificate(work));
  azurite = await startAzurite({ inMemory: true, oauth: { certPath, keyPath: path.join(work, 'key.pem') } });
  tokens = await startTokenService();
  tls = new Agent({ connect: { ca: fs.readFileSync(certPath, 'utf8') } });
}, 60_000);

afterAll(async () => {
  killCommandProcesses();
  await tokens?.close();
  await azurite?.stop();
  await tls?.close();
  fs.rmSync(work, { recursive: true, force: true });
});

describe('a server reaching storage with Microsoft Entra ID', () => {
  let server: CommandProcess;
  let port: number;
  const gql = async (query: string, variables: Record<string, unknown> = {}) => {
    const res = await fetch(`http://127.0.0.1:${port}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query, variables }),
    });
    return (await res.json()) as { data?: any; errors?: Array<{ message: string; extensions: { code: string } }> };
  };

  beforeAll(async () => {
    port = await freePort();
    server = runCommand('start', [], path.join(work, 'data'), entraEnv(schemaFolder('docs', SDL), port));
    await server.waitFor('tablegraph is serving', 90_000);
  }, 120_000);
  afterAll(async () => {
    server?.child.kill('SIGTERM');
    await server?.exited;
  });

  test('starts with no account key, says so, and asked the managed identity for a storage token', () => {
    expect(server.output()).toMatch(/storage: Microsoft Entra ID \(no account key\)/);
    expect(server.output()).not.toMatch(/AccountKey|embedded Azurite/);
    expect(tokens.requests.get('https://storage.azure.com')).toBeGreaterThanOrEqual(1);
  });

  test('writes and reads tables, and its worker carries the fan-out message through the queue', async () => {
    const created = await gql('mutation($i: CreateDocInput!) { createDoc(input: $i) { doc { id title etag } } }', {
      i: { folder: 'F1', id: '1', title: 'Report' },
    });
    expect(created.errors).toBeUndefined();
    expect(created.data.createDoc.doc).toMatchObject({ id: '1', title: 'Report', etag: expect.any(String) });
    const read = await gql('{ doc(folder: "F1", id: "1") { title } }');
    expect(read.data.doc).toEqual({ title: 'Report' });
    // The index in its own table is written by the worker, from the queue message the write sent.
    let titled: any;
    const indexed = async () =>
      (titled = await gql('{ docsTitled(title: "Report", first: 5) { edges { node { folder id } } } }')).data?.docsTitled.edges.length;
    await until('the index entity written', indexed, { timeoutMs: 30_000, everyMs: 250 }).catch(() => undefined); // the assertions below say what is there
    expect(titled.errors).toBeUndefined();
    expect(titled.data.docsTitled.edges).toEqual([{ node: { folder: 'F1', id: '1' } }]);
    const health = (await (await fetch(`http://127.0.0.1:${port}/health`)).json()) as any;
    expect(health).toMatchObject({ status: 'ok', storage: { answers: true }, fanout: { queueDepth: 0 } });
  }, 60_000);

  test('signs blob upload and read URLs with a user delegation key, and they work', async () => {
    const attached = await gql('mutation($i: AttachScanInput!) { attachScan(input: $i) { doc { scan } scanUploadUrl } }', {
      i: { folder: 'F1', id: '1', scan: { contentType: 'image/png' } },
    });
    expect(attached.errors).toBeUndefined();
    const { scanUploadUrl, doc } = attached.data.attachScan;
    // A user delegation SAS carries the key's object id (skoid) and its signed version; no account key signed it.
    expect(scanUploadUrl).toMatch(/[?&]skoid=[0-9a-f-]{36}/);
    expect(doc.scan).toMatch(/[?&]skoid=/);
    const bytes = Buffer.from('\x89PNG scan bytes');
    const put = await undiciFetch(scanUploadUrl, {
      method: 'PUT',
      headers: { 'x-ms-blob-type': 'BlockBlob', 'content-type': 'image/png' },
      body: bytes,
      dispatcher: tls,
    });
    expect(put.status).toBe(201);
    const got = await undiciFetch(doc.scan, { dispatcher: tls });
    expect(got.status).toBe(200);
    expect(Buffer.from(await got.arrayBuffer())).toEqual(bytes);
    // The read URL reads only.
    const overwrite = await undiciFetch(doc.scan, { method: 'PUT', headers: { 'x-ms-blob-type': 'BlockBlob' }, body: 'x', dispatcher: tls });
    expect(overwrite.status).toBe(403);
  }, 60_000);
});

describe('what Entra ID cannot do stops the start', () => {
  test('a schema with @sas fields: CONFIG_INVALID naming them, before serving', async () => {
    const sdl = SDL.replace('title: String!', 'title: String! readUrl: String @sas');
    const run = runCommand('start', [], path.join(work, 'data-sas'), entraEnv(schemaFolder('sas', sdl), await freePort()));
    const { code } = await run.exited;
    expect(code).toBe(1);
    expect(run.output()).toMatch(/"code":"CONFIG_INVALID"/);
    expect(run.output()).toMatch(/@sas fields \(Doc\.readUrl\).*account key/);
    expect(run.output()).not.toMatch(/tablegraph is serving/);
  }, 90_000);

  test('no Blob endpoint: CONFIG_INVALID at start-up, naming the setting — for continuous backup, and for @blob fields', async () => {
    const env = entraEnv(schemaFolder('noblob', SDL), await freePort());
    delete env.TABLEGRAPH_BLOB_URL;
    // Continuous backup, on by default, copies every write to Blob storage.
    const backup = runCommand('start', [], path.join(work, 'data-noblob'), env);
    expect(await backup.exited).toMatchObject({ code: 1 });
    expect(backup.output()).toMatch(/"code":"CONFIG_INVALID".*Continuous backup.*no Blob endpoint is configured.*TABLEGRAPH_BLOB_URL/);
    // Without it, the schema's @blob fields still need one.
    const run = runCommand('start', [], path.join(work, 'data-noblob'), { ...env, TABLEGRAPH_BACKUP_CAPTURE: 'false' });
    expect(await run.exited).toMatchObject({ code: 1 });
    expect(run.output()).toMatch(/"code":"CONFIG_INVALID".*No Blob endpoint is configured.*TABLEGRAPH_BLOB_URL/);
  }, 90_000);

  test('a token the storage refuses (wrong audience): the start fails on the first call, with the service said', async () => {
    const wrong = await startTokenService({ audience: 'https://management.azure.com' });
    try {
      const run = runCommand('start', [], path.join(work, 'data-aud'), entraEnv(schemaFolder('aud', SDL), await freePort(), wrong));
      const { code } = await run.exited;
      expect(code).toBe(1);
      expect(run.output()).toMatch(
        /"code":"CONFIG_INVALID".*ensureTable on table '\w+Docs': the service refused the credentials: Server failed to authenticate/,
      );
      expect(run.output()).not.toMatch(/tablegraph is serving/);
      expect(wrong.requests.size).toBe(1);
    } finally {
      await wrong.close();
    }
  }, 90_000);
});

describe('the configuration of Entra ID', () => {
  const refused = (env: Record<string, string>): TablegraphError => {
    try {
      loadConfig(env, ROOT);
    } catch (e) {
      return e as TablegraphError;
    }
    throw new Error('accepted');
  };

  test('one account URL gives the three endpoints; a path-style or Cosmos DB one needs the others named', () => {
    expect(accountUrls({ account: 'https://contoso.table.core.windows.net/' })).toEqual({
      table: 'https://contoso.table.core.windows.net',
      queue: 'https://contoso.queue.core.windows.net',
      blob: 'https://contoso.blob.core.windows.net',
    });
    expect(accountUrls({})).toBeUndefined();
    expect(accountUrls({ table: 'https://contoso-db.table.cosmos.azure.com:443', queue: 'https://contoso.queue.core.windows.net' })).toEqual({
      table: 'https://contoso-db.table.cosmos.azure.com:443',
      queue: 'https://contoso.queue.core.windows.net',
      blob: undefined,
    });
    expect(loadConfig({ TABLEGRAPH_STORAGE_ACCOUNT_URL: 'https://contoso.blob.core.windows.net' }, ROOT).accountUrls?.queue).toBe(
      'https://contoso.queue.core.windows.net',
    );
  });

  test.each([
    [
      { TABLEGRAPH_STORAGE_ACCOUNT_URL: 'https://contoso.table.core.windows.net', AZURE_STORAGE_CONNECTION_STRING: 'UseDevelopmentStorage=true' },
      /choose one way/,
    ],
    [{ TABLEGRAPH_STORAGE_ACCOUNT_URL: 'http://contoso.table.core.windows.net' }, /must be an https URL/],
    [{ TABLEGRAPH_STORAGE_ACCOUNT_URL: 'https://127.0.0.1:10002/devstoreaccount1' }, /set TABLEGRAPH_TABLE_URL and TABLEGRAPH_QUEUE_URL/],
    [{ TABLEGRAPH_TABLE_URL: 'https://contoso.table.core.windows.net' }, /TABLEGRAPH_QUEUE_URL is needed/],
    [{ TABLEGRAPH_STORAGE_ACCOUNT_URL: 'https://contoso.table.core.windows.net?sv=2020&sig=x' }, /no query string/],
    [{ TABLEGRAPH_TABLE_URL: 'not a url', TABLEGRAPH_QUEUE_URL: 'https://contoso.queue.core.windows.net' }, /TABLEGRAPH_TABLE_URL is not a URL/],
  ])('%j is refused with CONFIG_INVALID', (env, message) => {
    const e = refused(env);
    expect(e.code).toBe(ErrorCode.CONFIG_INVALID);
    expect(e.message).toMatch(message);
  });
});
