/**
 * Starting and stopping one Azurite (src/storage/azurite.ts), connection-string parsing (src/storage/connection.ts)
 * and the configuration (src/runtime/config.ts). The Azurite tests start their own Azurite processes; they do not use the
 * test run's shared one. The embedded Azurite shared per data folder: embedded-azurite.test.ts.
 */
import fs from 'node:fs';
import { TableServiceClient } from '@azure/data-tables';
import { QueueServiceClient } from '@azure/storage-queue';
import { BlobServiceClient } from '@azure/storage-blob';
import { loadConfig } from '../src/runtime/config';
import { ErrorCode, isTablegraphError } from '../src/errors';
import { startAzurite, type AzuriteHandle } from '../src/storage/azurite';
import { parseConnectionString, resolveTarget, tableEndpoint } from '../src/storage/connection';

const suffix = Math.random().toString(36).slice(2, 8);
const handles: AzuriteHandle[] = [];

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const stat = fs.existsSync(`/proc/${pid}/stat`) ? fs.readFileSync(`/proc/${pid}/stat`, 'utf8') : '';
  return !/\) Z /.test(stat);
}

afterAll(async () => {
  await Promise.allSettled(handles.map((h) => h.stop()));
}, 60_000);

describe('startAzurite', () => {
  test('in memory: working table, queue and blob endpoints; stop ends the process', async () => {
    const azurite = await startAzurite({ inMemory: true });
    handles.push(azurite);
    const cs = azurite.connectionString;
    expect(resolveTarget(cs)).toBe('azurite');

    const tables = TableServiceClient.fromConnectionString(cs, { allowInsecureConnection: true });
    await tables.createTable(`mem${suffix}`);
    const names: string[] = [];
    for await (const t of tables.listTables()) names.push(t.name as string);
    expect(names).toContain(`mem${suffix}`);

    const queue = QueueServiceClient.fromConnectionString(cs).getQueueClient(`mem-${suffix}`);
    await queue.create();
    await queue.sendMessage('hello');
    const received = await queue.receiveMessages();
    expect(received.receivedMessageItems[0]?.messageText).toBe('hello');

    const container = BlobServiceClient.fromConnectionString(cs).getContainerClient(`mem-${suffix}`);
    await container.create();
    await container.getBlockBlobClient('a.txt').upload('abc', 3);
    expect((await container.getBlobClient('a.txt').getProperties()).contentLength).toBe(3);

    await azurite.stop();
    expect(alive(azurite.pid)).toBe(false);
  }, 60_000);

  test('not listening within the start timeout: STORAGE_UNAVAILABLE', async () => {
    const err = await startAzurite({ inMemory: true, startTimeoutMs: 0 }).catch((e: unknown) => e);
    expect(isTablegraphError(err, ErrorCode.STORAGE_UNAVAILABLE)).toBe(true);
    expect((err as Error).message).toMatch(/Azurite did not start: no listening ports after 0 ms/);
  });
});

describe('connection strings', () => {
  const azure = 'DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=a2V5==;EndpointSuffix=core.windows.net';

  test('resolveTarget', () => {
    expect(resolveTarget(process.env.AZURE_STORAGE_CONNECTION_STRING as string)).toBe('azurite');
    expect(resolveTarget('UseDevelopmentStorage=true')).toBe('azurite');
    expect(resolveTarget(azure)).toBe('azure');
    expect(resolveTarget(`${azure};TableEndpoint=https://acme.table.cosmos.azure.com:443/;`)).toBe('cosmos');
    expect(resolveTarget('AccountName=acme;AccountKey=a2V5;TableEndpoint=http://localhost:10002/acme')).toBe('azurite');
    expect(resolveTarget('AccountName=acme;AccountKey=a2V5;TableEndpoint=http://[::1]:10002/acme')).toBe('azurite');
    expect(resolveTarget('AccountName=devstoreaccount1;AccountKey=a2V5;TableEndpoint=http://azurite:10002/x')).toBe('azurite');
    expect(resolveTarget(azure, 'cosmos')).toBe('cosmos');
  });

  test('parseConnectionString and tableEndpoint', () => {
    const parsed = parseConnectionString('ACCOUNTNAME=acme; accountKey=a2V5==;');
    expect(parsed).toEqual({ accountname: 'acme', accountkey: 'a2V5==' });
    expect(tableEndpoint(azure)).toBe('https://acme.table.core.windows.net');
    expect(tableEndpoint('TableEndpoint=http://127.0.0.1:9/devstoreaccount1/;AccountName=x')).toBe('http://127.0.0.1:9/devstoreaccount1');
    expect(() => parseConnectionString('not a connection string')).toThrow(expect.objectContaining({ code: ErrorCode.CONFIG_INVALID }));
  });
});

describe('loadConfig', () => {
  test('defaults', () => {
    expect(loadConfig({}, '/srv/app')).toEqual({
      port: 4000,
      host: '127.0.0.1',
      connectionString: undefined,
      dataDir: '/srv/app/.data/hr',
      dataDirDefaulted: true,
      target: undefined,
      logLevel: 'info',
      cursorSecret: undefined,
      schemaDir: '/srv/app/examples/hr', // the HR example, served by default
      maxPageSize: 100,
      defaultPageSize: 20,
      storageTimeoutMs: 10000,
      readConcurrency: 16,
      tablePrefix: '',
      worker: 'inline',
      workerConcurrency: 8,
      maxDequeueCount: 5,
      settleMs: 30000,
      visibilityTimeoutSeconds: 30,
      builds: { entitiesPerSecond: 500, leaseMs: 30000, pollMs: 5000, pageSize: 1000 },
      blobCleanupDelaySeconds: 3600,
      backup: { container: 'tablegraph-backup', retentionDays: 7, capture: true, captureIntervalMs: 10_000, snapshotEveryMs: 86_400_000 },
      corsOrigins: [],
      allowedHosts: [],
      trustedDocuments: undefined,
      httpCache: { maxAgeSeconds: 5, unwrittenMaxAgeSeconds: 60 },
      subscriptions: {
        pollMs: 500,
        retentionMs: 3_600_000,
        maxSubscriptions: 10_000,
        perConnection: 20,
        perSubject: 100,
        heartbeatMs: 15_000,
        maxBuffered: 1000,
      },
      introspection: true,
      maxBodyBytes: 262144,
      maxStorageCalls: 1000,
      maxNodes: 10000,
      auth: { off: false, jwksUrl: undefined, issuer: undefined, audience: undefined, secret: undefined, rolesClaim: 'roles', requireExp: true },
      requestTimeoutMs: 30000,
      bodyTimeoutMs: 30000,
      adminRole: 'admin',
      maxStorageInFlight: 8,
      maxStorageQueue: 2000,
      maxHeavyRequests: 4,
      heavyRequestCalls: 16,
      metrics: 'loopback',
      rateLimit: 1200,
      tenantBudget: { transactionsPerSecond: 1000, entitiesPerSecond: 10000 },
    });
  });

  test('the backup container: the table prefix in lower case by default; a name that is no container name is CONFIG_INVALID naming it', () => {
    expect(loadConfig({ TABLEGRAPH_TABLE_PREFIX: 'Prod1' }, '/srv/app').backup).toEqual({
      container: 'prod1-backup',
      retentionDays: 7,
      capture: true,
      captureIntervalMs: 10_000,
      snapshotEveryMs: 86_400_000,
    });
    expect(
      loadConfig({ TABLEGRAPH_BACKUP_CONTAINER: 'dr-copies', TABLEGRAPH_BACKUP_CONNECTION_STRING: 'UseDevelopmentStorage=true' }, '/srv/app').backup,
    ).toEqual({
      container: 'dr-copies',
      connectionString: 'UseDevelopmentStorage=true',
      retentionDays: 7,
      capture: true,
      captureIntervalMs: 10_000,
      snapshotEveryMs: 86_400_000,
    });
    expect(
      loadConfig({ TABLEGRAPH_BACKUP_CAPTURE: 'false', TABLEGRAPH_BACKUP_CAPTURE_SECONDS: '30', TABLEGRAPH_BACKUP_SNAPSHOT_HOURS: '0' }, '/srv/app').backup,
    ).toMatchObject({ capture: false, captureIntervalMs: 30_000, snapshotEveryMs: 0 });
    for (const bad of ['Backups', 'ab', 'a--b', '-ab'])
      expect(() => loadConfig({ TABLEGRAPH_BACKUP_CONTAINER: bad }, '/srv/app')).toThrow(
        expect.objectContaining({ code: 'CONFIG_INVALID', details: { errors: { TABLEGRAPH_BACKUP_CONTAINER: expect.stringMatching(/container name/) } } }),
      );
  });

  test('a blob cleanup delay under 6 × the storage timeout: CONFIG_INVALID naming it', () => {
    expect(() => loadConfig({ TABLEGRAPH_STORAGE_TIMEOUT_MS: '10000', TABLEGRAPH_BLOB_CLEANUP_DELAY_SECONDS: '59' })).toThrow(
      expect.objectContaining({ code: 'CONFIG_INVALID', details: { errors: { TABLEGRAPH_BLOB_CLEANUP_DELAY_SECONDS: expect.stringContaining('(60 s)') } } }),
    );
    expect(loadConfig({ TABLEGRAPH_STORAGE_TIMEOUT_MS: '10000', TABLEGRAPH_BLOB_CLEANUP_DELAY_SECONDS: '60' }).blobCleanupDelaySeconds).toBe(60);
  });

  test('values, and empty values count as unset', () => {
    const c = loadConfig({ PORT: '8080', TABLEGRAPH_TARGET: 'cosmos', TABLEGRAPH_DATA_DIR: '/d', LOG_LEVEL: '' });
    expect(c).toMatchObject({ port: 8080, target: 'cosmos', dataDir: '/d', dataDirDefaulted: false, logLevel: 'info' });
    // Unset: a data folder per schema folder, under the working directory's .data.
    expect(loadConfig({ TABLEGRAPH_SCHEMA_DIR: '../my notes' }, '/srv/app')).toMatchObject({ dataDir: '/srv/app/.data/my_notes', dataDirDefaulted: true });
  });

  test('invalid values: CONFIG_INVALID naming each variable', () => {
    const err = (() => {
      try {
        return loadConfig({ PORT: 'abc', TABLEGRAPH_READ_CONCURRENCY: '0' });
      } catch (e) {
        return e;
      }
    })();
    expect(isTablegraphError(err, ErrorCode.CONFIG_INVALID)).toBe(true);
    expect((err as Error).message).toMatch(/PORT/);
    expect((err as Error).message).toMatch(/TABLEGRAPH_READ_CONCURRENCY/);
    expect(() => loadConfig({ TABLEGRAPH_DEFAULT_PAGE_SIZE: '500' })).toThrow(/TABLEGRAPH_MAX_PAGE_SIZE/);
    expect(() => loadConfig({ TABLEGRAPH_METRICS: 'public' })).toThrow(/TABLEGRAPH_METRICS/);
  });
});
