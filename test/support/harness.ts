/**
 * Test harness: the test run's Azurite (started by test/setup/global-setup.ts), a store over it, the HR schema
 * compiled with a table prefix of the test file's own (so test files never share tables), and a real server.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { loadConfig, type Config } from '../../src/runtime/config';
import { createLogger, type Logger } from '../../src/log';
import { compileSchema, type CompiledSchema } from '../../src/compiler/compile';
import { loadSchemaSources } from '../../src/compiler/load-schema';
import type { OpenStorage } from '../../src/runtime/open-storage';
import { startServer, type RunningServer } from '../../src/runtime/start-server';
import type { Model } from '../../src/model/types';
import { QueueStore } from '../../src/storage/queue-store';
import { BlobStore } from '../../src/storage/blob-store';
import { TableStore } from '../../src/storage/table-store';
import { startShufflingProxy } from './shuffling-proxy';
import { testSeed } from './seed';

export const ROOT = path.resolve(__dirname, '../..');
/** The HR example's schema folder: the schema most tests serve. */
export const SCHEMA_DIR = path.join(ROOT, 'examples/hr');
/** tablegraph's own directive definitions, for tests that compile a schema of their own. */
export const DIRECTIVES_FILE = path.join(ROOT, 'schema/directives.graphql');
/** The Chicago employee snapshot the repository carries, gzip-compressed (examples/hr/data/README.md). */
export const CHICAGO_CSV = path.join(ROOT, 'examples/hr/data/chicago-employees.csv.gz');

/** The snapshot's text, decompressed (2.2 MB): for tests that read the file themselves. */
export function chicagoCsvText(): string {
  return gunzipSync(fs.readFileSync(CHICAGO_CSV)).toString('utf8');
}

/** Writes the snapshot's header and first `rows` rows to `file` (a CSV the import takes), then the lines of `more`. */
export function writeChicagoSlice(file: string, rows: number, more: string[] = []): void {
  fs.writeFileSync(
    file,
    `${[
      ...chicagoCsvText()
        .split('\n')
        .slice(0, rows + 1),
      ...more,
    ].join('\n')}\n`,
  );
}

/** The test run's Azurite connection string. */
export function connectionString(): string {
  const cs = process.env.AZURE_STORAGE_CONNECTION_STRING;
  if (!cs) throw new Error('AZURE_STORAGE_CONNECTION_STRING is not set: run the tests with jest (test/setup starts Azurite)');
  return cs;
}

/**
 * A table name prefix no other test uses, e.g. `t4k2j9x`; its tables and queues are deleted once the test file is done
 * (test/setup/environment.js).
 */
export function uniquePrefix(): string {
  const prefix = `t${Math.random().toString(36).slice(2, 9)}`;
  const used = ((globalThis as { __tablegraphPrefixes?: Set<string> }).__tablegraphPrefixes ??= new Set());
  used.add(prefix);
  return prefix;
}

/**
 * Storage calls in tests may wait this long (ms): Azurite's queue clean-up stops the whole process for 5-10 s
 * about once a minute once thousands of messages have passed through, and the test run shares one Azurite.
 */
export const TEST_STORAGE_TIMEOUT_MS = 30000;

export function testStore(): TableStore {
  return new TableStore({ connectionString: connectionString(), target: 'azurite', timeoutMs: TEST_STORAGE_TIMEOUT_MS });
}

export function testBlobs(): BlobStore {
  return new BlobStore({ connectionString: connectionString(), timeoutMs: TEST_STORAGE_TIMEOUT_MS });
}

export function testQueues(): QueueStore {
  return new QueueStore({ connectionString: connectionString(), timeoutMs: TEST_STORAGE_TIMEOUT_MS });
}

/** The shipped schema (schema/), its tables prefixed. */
export function compileHr(tablePrefix: string): CompiledSchema {
  return compileSchema(loadSchemaSources(SCHEMA_DIR), { tablePrefix });
}

export interface TestServer extends RunningServer {
  store: TableStore;
  config: Config;
  /** POSTs a query to /graphql and returns the parsed JSON body (data, errors, extensions). */
  query<T = any>(query: string, variables?: Record<string, unknown>): Promise<{ data?: T; errors?: any[]; extensions?: any }>;
}

/**
 * How the test Table service returns range results: `sorted` (Azurite as it is) or, with
 * TABLEGRAPH_TEST_RANGES=shuffled, `shuffled` — every query answer's entities in a random order, as the Cosmos DB
 * Table API may return them (test/support/shuffling-proxy.ts), with the `cosmos` target.
 */
export function rangeMode(): 'sorted' | 'shuffled' {
  return process.env.TABLEGRAPH_TEST_RANGES === 'shuffled' ? 'shuffled' : 'sorted';
}

/**
 * A real server (Apollo + Express on a free port) over the test Azurite with its own tables — through a proxy
 * that shuffles range results, with the `cosmos` target, in the `shuffled` range mode.
 */
export async function startTestServer(env: Record<string, string> = {}, opts: { log?: Logger } = {}): Promise<TestServer> {
  const proxy = rangeMode() === 'shuffled' ? await startShufflingProxy(connectionString(), testSeed()) : undefined;
  const target = proxy ? 'cosmos' : 'azurite';
  const config = loadConfig(
    {
      PORT: '0',
      AZURE_STORAGE_CONNECTION_STRING: proxy?.connectionString ?? connectionString(),
      TABLEGRAPH_TARGET: target,
      TABLEGRAPH_SCHEMA_DIR: SCHEMA_DIR,
      TABLEGRAPH_TABLE_PREFIX: uniquePrefix(),
      TABLEGRAPH_CURSOR_SECRET: 'test-secret',
      TABLEGRAPH_STORAGE_TIMEOUT_MS: String(TEST_STORAGE_TIMEOUT_MS),
      ...env,
    },
    ROOT,
  );
  const store = new TableStore({ connectionString: config.connectionString!, target, timeoutMs: config.storageTimeoutMs });
  // Queues and blobs of the account the server is given (the proxy passes those on untouched).
  const storage: OpenStorage = {
    store,
    queues: new QueueStore({ connectionString: config.connectionString!, timeoutMs: TEST_STORAGE_TIMEOUT_MS }),
    blobs: new BlobStore({ connectionString: config.connectionString!, timeoutMs: TEST_STORAGE_TIMEOUT_MS }),
    access: { kind: 'connection-string', connectionString: config.connectionString! },
    target,
    close: async () => {},
  };
  const server = await startServer(config, storage, opts.log ?? createLogger({ level: 'silent' }));
  return {
    ...server,
    async close(graceMs?: number) {
      await server.close(graceMs);
      await proxy?.close();
      // A shuffled mode in which nothing was shuffled would prove nothing.
      if (proxy && proxy.shuffled() === 0) throw new Error('the shuffling proxy shuffled no query answer');
    },
    store,
    config,
    async query(query, variables) {
      const res = await fetch(server.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query, variables }),
      });
      return (await res.json()) as any;
    },
  };
}

/**
 * A test server on a schema of its own: `sdl` beside tablegraph's directive definitions in a temporary folder
 * (removed by `close`), and the compiled model with the server's table prefix.
 */
export async function startSdlServer(
  sdl: string,
  env: Record<string, string> = {},
): Promise<{ server: TestServer; model: Model; dir: string; close(): Promise<void> }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-sdl-'));
  fs.copyFileSync(DIRECTIVES_FILE, path.join(dir, 'directives.graphql'));
  fs.writeFileSync(path.join(dir, 'schema.graphql'), sdl);
  const server = await startTestServer({ TABLEGRAPH_SCHEMA_DIR: dir, ...env });
  const { model } = compileSchema(loadSchemaSources(dir), { tablePrefix: server.config.tablePrefix });
  return {
    server,
    model,
    dir,
    async close() {
      await server.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
