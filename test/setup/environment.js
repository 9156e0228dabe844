/**
 * The test files' environment: Node's, and its worker's own Azurite (global-setup.ts) as
 * AZURE_STORAGE_CONNECTION_STRING; and once a file is done — its own afterAll hooks run, its servers closed — the
 * tables, queues and blob containers of the table prefixes it used (test/support/harness.ts uniquePrefix) are deleted, so that the
 * worker's Azurite does not carry every earlier file's data: its memory, and with it every later
 * file's storage calls, would grow with each. CommonJS: jest loads it before any transform.
 */
const path = require('node:path');
const { setTimeout: sleep } = require('node:timers/promises');
const { TestEnvironment } = require('jest-environment-node');
const { TableServiceClient } = require('@azure/data-tables');
const { QueueServiceClient } = require('@azure/storage-queue');
const { BlobServiceClient } = require('@azure/storage-blob');

class TablegraphEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    // The file's seed (test/support/seed.ts): as given, or a new one, printed with the failure of any of its tests.
    this.seed = process.env.TEST_SEED || String(1 + Math.floor(Math.random() * (2 ** 31 - 2)));
    this.global.process.env.TEST_SEED = this.seed;
    this.testPath = context.testPath;
    this.failed = false;
    // This worker's own Azurite (global-setup.ts), for the file's code and for the processes it starts.
    const own = process.env[`TABLEGRAPH_TEST_AZURITE_${process.env.JEST_WORKER_ID ?? '1'}`];
    if (own) {
      process.env.AZURE_STORAGE_CONNECTION_STRING = own;
      this.global.process.env.AZURE_STORAGE_CONNECTION_STRING = own;
    }
  }

  /** jest-circus's events: a test that failed has the file's seed said once, with how to replay it. */
  handleTestEvent(event) {
    if (event.name === 'test_done' && event.test.errors.length > 0 && !this.failed) {
      this.failed = true;
      const file = path.relative(process.cwd(), this.testPath);
      process.stderr.write(`\n${file} failed with TEST_SEED=${this.seed}: replay its random choices with TEST_SEED=${this.seed} npx jest ${file}\n`);
    }
  }

  async setup() {
    await super.setup();
    this.resourcesBefore = resourceCounts();
  }

  async teardown() {
    const prefixes = [...(this.global.__tablegraphPrefixes ?? [])];
    const cs = process.env.AZURE_STORAGE_CONNECTION_STRING;
    if (prefixes.length > 0 && cs) await dropPrefixes(cs, prefixes).catch((e) => console.warn(`test cleanup: ${e.message}`));
    const left = await leftBehind(this.resourcesBefore);
    await super.teardown();
    if (left.length > 0) {
      const file = path.relative(process.cwd(), this.testPath);
      throw new Error(`${file} left ${left.join(', ')} behind after its last test: stop what it started (await its exit or close) in afterAll`);
    }
  }
}

/** What a file must not leave running: child processes, listening servers, timers that hold the process open. */
const LEAKS = { ProcessWrap: 'a child process', TCPServerWrap: 'a listening server', Timeout: 'a timer', Immediate: 'an immediate' };

/** The resources of LEAKS keeping this process's event loop alive, counted by type. */
function resourceCounts() {
  const counts = {};
  for (const type of process.getActiveResourcesInfo()) if (type in LEAKS) counts[type] = (counts[type] ?? 0) + 1;
  return counts;
}

/**
 * What is running now and was not when the file began, given 3 s to end (a process killed at the end of the file's
 * last hook exits a moment later; a timer of a closed client fires once more): e.g. ['a child process (1)'].
 */
async function leftBehind(before) {
  const extra = () =>
    Object.entries(resourceCounts())
      .filter(([type, n]) => n > (before[type] ?? 0))
      .map(([type, n]) => `${LEAKS[type]} (${n - (before[type] ?? 0)})`);
  const deadline = Date.now() + 3000;
  while (extra().length > 0 && Date.now() < deadline) await sleep(50);
  return extra();
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
