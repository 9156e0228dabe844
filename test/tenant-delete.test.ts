/**
 * `npm run tenant -- delete` on the deployment a user starts with: no table prefix (TABLEGRAPH_TABLE_PREFIX unset),
 * its own account (an Azurite started here), and three tenants on the three tiers of a schema written for this test —
 * acme on an account of its own (ACCOUNT: a second Azurite, through an environment variable), bolt in tables of its own
 * (TABLE), core in the shared tables (PARTITION_PREFIX). Each writes projects with a logo blob, tasks counted on their
 * project (change entities kept for a subscription and the backup), and members with a unique e-mail; acme and core
 * each have a message in the poison queue.
 *
 * acme is deleted, then bolt. After each, a raw listing (the Azure SDK's own clients, none of the project's code) of the
 * tenant's account — every table, queue and blob container — and of the deployment's finds nothing of the tenant; what
 * the command prints and records is what was there before; the other tenants' entities, blobs and messages are all
 * there. (Before the fix the delete read no table at all without a table prefix: "0 entities".)
 */
import { mkdtempSync, rmSync, writeFileSync, copyFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { gunzipSync } from 'node:zlib';
import { SignJWT } from 'jose';
import { TableServiceClient, TableClient } from '@azure/data-tables';
import { QueueServiceClient } from '@azure/storage-queue';
import { BlobServiceClient } from '@azure/storage-blob';
import { startAzurite, type AzuriteHandle } from '../src/storage/azurite';
import { startTestServer, DIRECTIVES_FILE, type TestServer } from './support/harness';
import { runCommand } from './support/processes';
import { Catalogue } from '../src/evolution/catalogue';
import { encodeMessage } from '../src/queue/messages';
import { workQueueNames } from '../src/queue/sender';
import { until } from './support/wait';

const SECRET = 'a-tenant-delete-test-secret-of-32-chars';
const ACCOUNT_VARIABLE = 'TABLEGRAPH_TEST_ACME_ACCOUNT';

const SDL = `
extend schema @tenancy(claim: "tid")

type Project @entity(table: "Proj", partitionKey: "{projectId}", rowKey: "project") {
  projectId: ID!
  name: String!
  logo: String @blob(container: "logos")
  taskCount: Int! @summary(of: "Task", via: "project", count: true)
  tasks(first: Int, after: String): TaskConnection! @range(partitionKey: "{projectId}", rowKeyPrefix: "task_")
}

type Task @entity(table: "Proj", partitionKey: "{projectId}", rowKey: "task_{taskId}") {
  projectId: ID!
  taskId: ID!
  title: String!
  project: Project! @point(partitionKey: "{projectId}", rowKey: "project")
}

type Member @entity(table: "Members", partitionKey: "members", rowKey: "{memberId}")
  @index(name: "byEmail", table: "MembersByEmail", partitionKey: "{email}", rowKey: "member", unique: true) {
  memberId: ID!
  email: String!
}

type Query {
  project(projectId: ID!): Project @point
  member(memberId: ID!): Member @point(partitionKey: "members")
}

type Mutation {
  createProject(input: CreateProjectInput!): ProjectPayload! @write(entity: "Project", action: CREATE)
  createTask(input: CreateTaskInput!): TaskPayload! @write(entity: "Task", action: CREATE)
  createMember(input: CreateMemberInput!): MemberPayload! @write(entity: "Member", action: CREATE)
}

type Subscription {
  taskChanged(projectId: ID!): TaskChange! @subscribe(entity: "Task")
}
`;

const TENANTS = ['acme', 'bolt', 'core'] as const;
type Tenant = (typeof TENANTS)[number];

let deployment: AzuriteHandle;
let account: AzuriteHandle;
let server: TestServer;
let dir: string;
const tokens = new Map<Tenant, string>();

/** The commands' environment: the deployment's account, no table prefix, acme's account variable, short waits. */
const commandEnv = () => ({
  AZURE_STORAGE_CONNECTION_STRING: deployment.connectionString,
  TABLEGRAPH_SCHEMA_DIR: dir,
  TABLEGRAPH_JWT_SECRET: SECRET,
  [ACCOUNT_VARIABLE]: account.connectionString,
  // What a delete waits out (no request of the tenant is in flight here), and a capture pass a second.
  TABLEGRAPH_REQUEST_TIMEOUT_MS: '1000',
  TABLEGRAPH_SETTLE_MS: '1000',
  TABLEGRAPH_STORAGE_TIMEOUT_MS: '2000',
  TABLEGRAPH_BACKUP_CAPTURE_SECONDS: '1',
});

async function as(tenant: Tenant, query: string, variables: Record<string, unknown>): Promise<{ status: number; data?: any; errors?: any[] }> {
  const res = await fetch(server.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${tokens.get(tenant)}` },
    body: JSON.stringify({ query, variables }),
  });
  return { status: res.status, ...((await res.json()) as object) };
}

/** Every entity of every table of an account, read raw: its table and PartitionKey. */
async function rawEntities(connection: string): Promise<Array<{ table: string; partitionKey: string }>> {
  const rows: Array<{ table: string; partitionKey: string }> = [];
  for await (const t of TableServiceClient.fromConnectionString(connection, { allowInsecureConnection: true }).listTables()) {
    const client = TableClient.fromConnectionString(connection, t.name!, { allowInsecureConnection: true });
    for await (const e of client.listEntities()) rows.push({ table: t.name!, partitionKey: String(e.partitionKey) });
  }
  return rows;
}

/** Every blob of every container of an account, read raw: `container/name`, and its text (gunzipped). */
async function rawBlobs(connection: string): Promise<Array<{ name: string; text: string }>> {
  const service = BlobServiceClient.fromConnectionString(connection);
  const blobs: Array<{ name: string; text: string }> = [];
  for await (const c of service.listContainers()) {
    const container = service.getContainerClient(c.name);
    for await (const b of container.listBlobsFlat()) {
      // A blob the capture passes replace (their lease's) may be gone between the listing and its read: not there now.
      const bytes = await container
        .getBlobClient(b.name)
        .downloadToBuffer()
        .catch((e: { statusCode?: number }) => (e.statusCode === 404 ? undefined : Promise.reject(e)));
      if (bytes) blobs.push({ name: `${c.name}/${b.name}`, text: (b.name.endsWith('.gz') ? gunzipSync(bytes) : bytes).toString('utf8') });
    }
  }
  return blobs;
}

/** Every visible message of every queue of an account, peeked raw (they are few here): its queue and text. */
async function rawMessages(connection: string): Promise<Array<{ queue: string; text: string }>> {
  const service = QueueServiceClient.fromConnectionString(connection);
  const messages: Array<{ queue: string; text: string }> = [];
  for await (const q of service.listQueues()) {
    const peeked = await service.getQueueClient(q.name).peekMessages({ numberOfMessages: 32 });
    for (const m of peeked.peekedMessageItems) messages.push({ queue: q.name, text: m.messageText });
  }
  return messages;
}

const tenantOfRow = (r: { partitionKey: string }) => r.partitionKey.slice(0, r.partitionKey.indexOf('_'));
/**
 * A tenant's own blobs (its `@blob` values, named `tenant=<id>/…`; not a snapshot's copies of them), and the backup's
 * blobs that hold its data: the segments with its rows, a snapshot's copies of its blobs (a worker takes a snapshot
 * after its first capture pass).
 */
const blobsOf = (tenant: Tenant, blobs: Array<{ name: string; text: string }>) =>
  blobs.filter((b) => b.name.includes(`/tenant=${tenant}/`) && !b.name.includes('/snapshots/'));
const segmentsOf = (tenant: Tenant, blobs: Array<{ name: string; text: string }>) =>
  blobs.filter(
    (b) => (!b.name.includes('/tenant=') && b.text.includes(`"${tenant}_`)) || (b.name.includes('/snapshots/') && b.name.includes(`/tenant=${tenant}/`)),
  );
const messagesOf = (tenant: Tenant, messages: Array<{ text: string }>) => messages.filter((m) => m.text.includes(`${tenant}_`));

/** A fan-out message of a tenant's task as the worker moves a failing one to the poison queue: its entry. */
function poisonEntry(tenant: Tenant): string {
  const primary = { table: 'Proj', partitionKey: `${tenant}_p1`, rowKey: 'task_t1' };
  const message = encodeMessage({
    v: 3,
    kind: 'fanout',
    id: randomUUID(),
    entity: 'Task',
    primary,
    writeId: randomUUID(),
    basedOn: null,
    deleted: false,
    candidates: [],
    enqueuedAt: Date.now(),
  });
  return JSON.stringify({ message, id: randomUUID(), dequeueCount: 6, error: 'a test entry', poisonedAt: new Date().toISOString() });
}

beforeAll(async () => {
  [deployment, account] = await Promise.all([startAzurite({ inMemory: true }), startAzurite({ inMemory: true })]);
  process.env[ACCOUNT_VARIABLE] = account.connectionString;
  dir = mkdtempSync(path.join(os.tmpdir(), 'tablegraph-tenant-delete-'));
  copyFileSync(DIRECTIVES_FILE, path.join(dir, 'directives.graphql'));
  writeFileSync(path.join(dir, 'schema.graphql'), SDL);
  for (const t of TENANTS) {
    tokens.set(
      t,
      await new SignJWT({ sub: `owner@${t}.test`, tid: t })
        .setProtectedHeader({ alg: 'HS256' })
        .setExpirationTime('30m')
        .sign(new TextEncoder().encode(SECRET)),
    );
  }
  const creating = [
    runCommand('tenant', ['create', 'acme', '--isolation', 'ACCOUNT', '--account', `env:${ACCOUNT_VARIABLE}`], undefined, commandEnv()),
    runCommand('tenant', ['create', 'bolt', '--isolation', 'TABLE'], undefined, commandEnv()),
  ];
  const created = await Promise.all(creating.map((c) => c.exited));
  if (created.some((c) => c.code !== 0)) throw new Error(creating.map((c) => c.output()).join('\n'));
  server = await startTestServer({ ...commandEnv(), TABLEGRAPH_TABLE_PREFIX: '', TABLEGRAPH_RATE_LIMIT: '100000' });
  const write = async (t: Tenant, mutation: string, input: Record<string, unknown>) => {
    const a = await as(t, `mutation($i: ${mutation[0].toUpperCase()}${mutation.slice(1)}Input!) { ${mutation}(input: $i) { __typename } }`, { i: input });
    expect(a.errors).toBeUndefined();
  };
  for (const t of TENANTS) {
    for (const p of ['p1', 'p2']) {
      const logo = { contentType: 'image/png', base64: Buffer.from(`${t} ${p}`).toString('base64') };
      await write(t, 'createProject', { projectId: p, name: `${t} ${p}`, logo });
      for (const k of ['t1', 't2', 't3']) await write(t, 'createTask', { projectId: p, taskId: k, title: `${t} ${k}` });
    }
    for (const m of ['m1', 'm2']) await write(t, 'createMember', { memberId: m, email: `${m}@example.test` });
  }
  const { poison } = workQueueNames('');
  const poisonQueue = QueueServiceClient.fromConnectionString(deployment.connectionString).getQueueClient(poison);
  for (const t of ['acme', 'core'] as const) await poisonQueue.sendMessage(poisonEntry(t));
  // The worker has handled every write's message (each upload's blob cleanup message stays hidden for its delay, an
  // hour), and a capture pass has copied every change to the backup.
  const work = QueueServiceClient.fromConnectionString(deployment.connectionString).getQueueClient(workQueueNames('').queue);
  await until('no message is waiting in the work queue', async () => (await work.peekMessages({ numberOfMessages: 1 })).peekedMessageItems.length === 0);
  await until("the backup holds every tenant's changes", async () => Object.values((await holdings()).inBackup).every((n) => n > 0));
}, 120_000);

afterAll(async () => {
  await server?.close();
  await Promise.all([deployment?.stop(), account?.stop()]);
  delete process.env[ACCOUNT_VARIABLE];
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** What each account holds of each tenant: entities, blobs and messages. */
async function holdings() {
  const [shared, own] = await Promise.all([rawEntities(deployment.connectionString), rawEntities(account.connectionString)]);
  const [sharedBlobs, ownBlobs] = await Promise.all([rawBlobs(deployment.connectionString), rawBlobs(account.connectionString)]);
  const [sharedMessages, ownMessages] = await Promise.all([rawMessages(deployment.connectionString), rawMessages(account.connectionString)]);
  const of = (t: Tenant) => ({
    entities: [...shared, ...own].filter((r) => tenantOfRow(r) === t).length,
    blobs: blobsOf(t, [...sharedBlobs, ...ownBlobs]).length,
    messages: messagesOf(t, [...sharedMessages, ...ownMessages]).length,
  });
  const inBackup = (t: Tenant) => segmentsOf(t, sharedBlobs).length;
  return {
    acme: of('acme'),
    bolt: of('bolt'),
    core: of('core'),
    inBackup: { acme: inBackup('acme'), bolt: inBackup('bolt'), core: inBackup('core') },
    own: { entities: own.length, blobs: ownBlobs.map((b) => b.name), messages: ownMessages },
  };
}

/** Runs the delete of `tenant`; @returns what it printed as deleted: entities, blobs and poison queue messages */
async function deleteTenant(tenant: Tenant): Promise<{ entities: number; blobs: number; messages: number }> {
  const run = runCommand('tenant', ['delete', tenant, '--yes'], undefined, commandEnv());
  const exit = await run.exited;
  if (exit.code !== 0) throw new Error(`the delete of ${tenant} failed:\n${run.output()}`);
  const m = run.output().match(new RegExp(`tenant ${tenant} deleted: (\\d+) entities, (\\d+) blobs, (\\d+) poison queue messages`));
  if (!m) throw new Error(`the delete of ${tenant} printed no total:\n${run.output()}`);
  return { entities: Number(m[1]), blobs: Number(m[2]), messages: Number(m[3]) };
}

test('tier ACCOUNT: a raw listing of its account and of the deployment finds nothing of the tenant; the counts are what was there', async () => {
  const before = await holdings();
  // Everything of acme is in its own account, but its blobs and its poison message, in the deployment's.
  expect(before.acme.entities).toBeGreaterThan(0);
  expect(before.own.entities).toBe(before.acme.entities);
  expect([before.acme.blobs, before.acme.messages]).toEqual([2, 1]);
  const printed = await deleteTenant('acme');
  expect(printed).toEqual(before.acme);
  const after = await holdings();
  expect(after.acme).toEqual({ entities: 0, blobs: 0, messages: 0 });
  expect(after.own).toEqual({ entities: 0, blobs: [], messages: [] });
  // Its rows are out of the backup's segments; the others' are still in them, and all their data is there.
  expect(after.inBackup.acme).toBe(0);
  expect(Math.min(after.inBackup.bolt, after.inBackup.core)).toBeGreaterThan(0);
  expect({ bolt: after.bolt, core: after.core }).toEqual({ bolt: before.bolt, core: before.core });
  const record = await new Catalogue(server.store, '').tenant('acme');
  expect(record?.state).toBe('deleted');
  expect(Object.values(record!.deleted!.entities).reduce((a, b) => a + b, 0)).toBe(before.acme.entities);
  expect([record!.deleted!.blobs, record!.deleted!.messages]).toEqual([2, 1]);
}, 120_000);

test('tier TABLE: its tables dropped, and what was in them counted and recorded; a delete run again finds nothing', async () => {
  const before = await holdings();
  expect(before.bolt.entities).toBeGreaterThan(0);
  // acme's delete run again, beside bolt's: nothing of acme is left to delete.
  const [printed, again] = await Promise.all([deleteTenant('bolt'), deleteTenant('acme')]);
  expect(again).toEqual({ entities: 0, blobs: 0, messages: 0 });
  expect(printed).toEqual({ ...before.bolt, messages: 0 });
  const after = await holdings();
  expect(after.bolt).toEqual({ entities: 0, blobs: 0, messages: 0 });
  expect(after.inBackup.bolt).toBe(0);
  expect(after.core).toEqual(before.core);
  const tables: string[] = [];
  for await (const t of TableServiceClient.fromConnectionString(deployment.connectionString, { allowInsecureConnection: true }).listTables())
    tables.push(t.name!);
  expect(tables.filter((t) => /^(Proj|Members|MembersByEmail)t[a-z2-7]{12}$/.test(t))).toEqual([]);
  const record = await new Catalogue(server.store, '').tenant('bolt');
  expect(Object.values(record!.deleted!.entities).reduce((a, b) => a + b, 0)).toBe(before.bolt.entities);
  // core is still served, its tasks counted.
  const project = await as('core', 'query { project(projectId: "p1") { taskCount } }', {});
  expect(project.data).toEqual({ project: { taskCount: 3 } });
  // acme's tokens are refused.
  expect((await as('acme', 'query { project(projectId: "p1") { name } }', {})).status).toBe(403);
}, 120_000);
