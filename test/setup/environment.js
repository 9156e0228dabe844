/**
 * The test files' environment: Node's, and its worker's own Azurite (global-setup.ts) as
 * AZURE_STORAGE_CONNECTION_STRING; and once a file is done — its own afterAll hooks run, its servers closed — the
 * tables, queues and blob containers of the table prefixes it used (test/support/harness.ts uniquePrefix) are deleted, so that the
 * worker's Azurite does not carry every earlier file's data: its memory, and with it every later
 * file's storage calls, would grow with each. CommonJS: jest loads it before any transform.
 */
const { TestEnvironment } = require('jest-environment-node');
const { TableServiceClient } = require('@azure/data-tables');
const { QueueServiceClient } = require('@azure/storage-queue');
const { BlobServiceClient } = require('@azure/storage-blob');

class TablegraphEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    // This worker's own Azurite (global-setup.ts), for the file's code and for the processes it starts.
    const own = process.env[`TABLEGRAPH_TEST_AZURITE_${process.env.JEST_WORKER_ID ?? '1'}`];
    if (own) {
      process.env.AZURE_STORAGE_CONNECTION_STRING = own;
      this.global.process.env.AZURE_STORAGE_CONNECTION_STRING = own;
    }
  }

  async teardown() {
    const prefixes = [...(this.global.__tablegraphPrefixes ?? [])];
    const cs = process.env.AZURE_STORAGE_CONNECTION_STRING;
    if (prefixes.length > 0 && cs) await dropPrefixes(cs, prefixes).catch((e) => console.warn(`test cleanup: ${e.message}`));
    await super.teardown();
  }
}

async function dropPrefixes(cs, prefixes) {
  const tables = TableServiceClient.fromConnectionString(cs, { allowInsecureConnection: true });
  const queues = QueueServiceClient.fromConnectionString(cs);
  const names = [];
  for await (const t of tables.listTables()) if (prefixes.some((p) => t.name.startsWith(p))) names.push(t.name);
  await Promise.all(names.map((n) => tables.deleteTable(n).catch(() => undefined)));
  const lower = prefixes.map((p) => `${p.toLowerCase()}-`);
  const queueNames = [];
  for await (const q of queues.listQueues()) if (lower.some((p) => q.name.startsWith(p))) queueNames.push(q.name);
  await Promise.all(queueNames.map((n) => queues.deleteQueue(n).catch(() => undefined)));
  // Containers: the servers' presence (src/evolution/presence.ts) and @blob fields', named after the prefix.
  const blobs = BlobServiceClient.fromConnectionString(cs);
  const containers = [];
  for await (const c of blobs.listContainers()) if (prefixes.some((p) => c.name.startsWith(p.toLowerCase()))) containers.push(c.name);
  await Promise.all(containers.map((n) => blobs.deleteContainer(n).catch(() => undefined)));
}

module.exports = TablegraphEnvironment;
