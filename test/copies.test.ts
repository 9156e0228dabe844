/**
 * Copies (`@copy`, the guide's "Denormalization pattern"), on the tracker schema: `Issue.reporterName` (a copy
 * across tables, found through the inter-partition index `User.reported`) and `IssueLabel.labelColor` (in the same
 * partition, found through `Label.issues`, and changed in the label's own EGT). Set by the writer; kept in step by
 * the worker after renames, under
 * concurrent writers, redelivered and reordered messages, two workers and workers killed mid-message; a target
 * deleted leaves null copies; `verify` finds a wrong copy and `rebuild-index <Type> copies` repairs it.
 */
import path from 'node:path';
import { repairCopies } from '../src/maintenance/copy-state';
import { formatVerifyReport, verifyDerived } from '../src/maintenance/verify-derived';
import { compileSchema } from '../src/compiler/compile';
import { loadSchemaSources } from '../src/compiler/load-schema';
import type { Model } from '../src/model/types';
import { handleMessage } from './support/handle-message';
import { WriteExecutor } from '../src/write/write-executor';
import type { EntityMessage } from '../src/queue/messages';
import { ROOT, startTestServer, testQueues, type TestServer } from './support/harness';
import { deliverTwiceByTwoWorkers, drainWithRedelivery, queueWriter } from './support/fanout-fixtures';
import { receiveFanout } from './support/write-fixtures';
import { testSeed } from './support/seed';

const SCHEMA = path.join(ROOT, 'examples/tracker');
let server: TestServer;
let model: Model;
let tracker: string;

beforeAll(async () => {
  server = await startTestServer({ TABLEGRAPH_SCHEMA_DIR: SCHEMA, TABLEGRAPH_WORKER: 'off' });
  model = compileSchema(loadSchemaSources(SCHEMA), { tablePrefix: server.config.tablePrefix }).model;
  tracker = `${server.config.tablePrefix}Tracker`;
}, 60_000);
afterAll(() => server?.close());

async function run(mutation: string, type: string, input: Record<string, unknown>, selection = '__typename'): Promise<any> {
  const inputType = {
    createUser: 'CreateUserInput',
    updateUser: 'UpdateUserInput',
    createProject: 'CreateProjectInput',
    createIssue: 'CreateIssueInput',
    updateIssue: 'UpdateIssueInput',
    createLabel: 'CreateLabelInput',
    renameLabel: 'MoveLabelInput',
    updateLabel: 'UpdateLabelInput',
    deleteLabel: 'DeleteLabelInput',
    labelIssue: 'CreateIssueLabelInput',
  }[mutation];
  const r = await server.query(`mutation($input: ${inputType}!) { ${mutation}(input: $input) { ${type} { ${selection} } } }`, { input });
  expect(r.errors).toBeUndefined();
  return r.data[mutation][type];
}

function random(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => (x = (x * 1664525 + 1013904223) >>> 0) / 2 ** 32;
}

const issueLabel = (n: string) => server.store.getEntity({ table: tracker, partitionKey: 'P1', rowKey: `issuelabel_${n.padStart(6, '0')}_7` });

test('copies set by the writer, kept in step by the worker under concurrency, redelivery and killed workers', async () => {
  const seed = testSeed();
  const rand = random(seed);
  for (const id of ['ana', 'bo']) await run('createUser', 'user', { id, email: `${id}@copies.example`, name: `${id} one` });
  for (const key of ['P1', 'P2']) await run('createProject', 'project', { key, name: key });
  await run('createLabel', 'label', { projectKey: 'P1', id: '7', name: 'bug', color: '#111111' });
  const issue = (key: string, n: number, reporterId: string) => ({
    projectKey: key,
    number: String(n),
    title: `t${n}`,
    state: 'OPEN',
    openedAt: '2026-11-22T10:00:00.000Z',
    reporterId,
  });
  const first = ['P1', 'P2'].flatMap((key) => Array.from({ length: 10 }, (_, i) => issue(key, i + 1, rand() < 0.5 ? 'ana' : 'bo')));
  const created = await Promise.all(first.map((input) => run('createIssue', 'issue', input, 'reporterName')));
  // The writer copies at once, with no worker: each issue carries its reporter's name.
  expect(created.map((c) => c.reporterName)).toEqual(first.map((i) => `${i.reporterId} one`));
  for (let n = 1; n <= 5; n++) await run('labelIssue', 'issueLabel', { projectKey: 'P1', issueNumber: String(n), labelId: '7' }, 'labelColor');
  expect((await issueLabel('1'))?.properties.labelColor).toBe('#111111');

  const opts = { model, store: server.store, settleMs: 0, holdMs: 0 };
  let killed = 0;
  const deliver = async (messages: EntityMessage[]) => {
    killed += (await deliverTwiceByTwoWorkers(messages, opts, rand)).killed;
  };
  const before = (await receiveFanout(testQueues(), server.config.tablePrefix)).map((r) => r.message);
  await deliver(before);

  // Concurrently: ana renamed twice, new issues by ana, one of bo's issues given to ana, the label recolored.
  const late = Array.from({ length: 5 }, (_, i) => issue('P2', 100 + i, 'ana'));
  const moved = first.find((i) => i.reporterId === 'bo')!;
  await Promise.all([
    run('updateUser', 'user', { id: 'ana', name: 'ana two' }).then(() => run('updateUser', 'user', { id: 'ana', name: 'ana three' })),
    ...late.map((input) => run('createIssue', 'issue', input)),
    run('updateIssue', 'issue', { projectKey: moved.projectKey, number: moved.number, reporterId: 'ana' }),
    run('updateLabel', 'label', { projectKey: 'P1', name: 'bug', color: '#222222' }),
  ]);
  const after = (await receiveFanout(testQueues(), server.config.tablePrefix)).map((r) => r.message);
  await deliver([...after, ...before]);
  for (const m of [...before, ...after].reverse()) await handleMessage(m, opts);

  const reporters = new Map([...first, ...late].map((i) => [`${i.projectKey}/${i.number}`, i.reporterId]));
  reporters.set(`${moved.projectKey}/${moved.number}`, 'ana');
  for (const [key, reporterId] of reporters) {
    const [projectKey, number] = key.split('/');
    const r = await server.query('query($k: ID!, $n: ID!) { issue(projectKey: $k, number: $n) { reporterName reporter { name } } }', {
      k: projectKey,
      n: number,
    });
    expect(r.data.issue).toEqual({
      reporterName: reporterId === 'ana' ? 'ana three' : 'bo one',
      reporter: { name: reporterId === 'ana' ? 'ana three' : 'bo one' },
    });
  }
  for (let n = 1; n <= 5; n++) expect((await issueLabel(String(n)))?.properties.labelColor).toBe('#222222');
  const report = await verifyDerived({ store: server.store, model });
  expect(report.copies.map((c) => [c.copy, c.checked, c.different.length])).toEqual([
    ['Issue.reporterName', reporters.size, 0],
    ['IssueLabel.labelColor', 5, 0],
  ]);
  expect(report.problems).toBe(0);
  console.log(`copies seed ${seed}: ${before.length + after.length} messages, ${killed} deliveries killed mid-message`);
}, 120_000);

test("copies in the target's own partition change in the target's EGT, with no worker", async () => {
  await receiveFanout(testQueues(), server.config.tablePrefix); // left from before: not delivered here
  const label = { table: tracker, partitionKey: 'P1', rowKey: 'label_bug' };
  const before = await server.store.getEntity(label);
  await run('updateLabel', 'label', { projectKey: 'P1', name: 'bug', color: '#333333' });
  const after = await server.store.getEntity(label);
  expect(after?.etag).not.toBe(before?.etag);
  for (let n = 1; n <= 5; n++) expect((await issueLabel(String(n)))?.properties.labelColor).toBe('#333333');
  const r = await server.query('{ issue(projectKey: "P1", number: "1") { labels { edges { node { name color } } } } }');
  expect(r.data.issue.labels.edges).toEqual([{ node: { name: 'bug', color: '#333333' } }]);
  // The worker, handling the message later, finds nothing left to do.
  for (const m of (await receiveFanout(testQueues(), server.config.tablePrefix)).map((x) => x.message))
    await handleMessage(m, { model, store: server.store, settleMs: 0, holdMs: 0 });
  const report = await verifyDerived({ store: server.store, model });
  if (report.problems) console.log(formatVerifyReport(report));
  expect(report.problems).toBe(0);
});

test('a label renamed (moved to the RowKey of its new name): the join entities name it by id, and stay as they were', async () => {
  await drainWithRedelivery(
    { model, store: server.store, writer: queueWriter(model, server), queues: testQueues(), tablePrefix: server.config.tablePrefix },
    random(7),
  );
  const before = await Promise.all([1, 2, 3, 4, 5].map((n) => issueLabel(String(n))));
  await run('renameLabel', 'label', { projectKey: 'P1', name: 'bug', toName: 'defect' });
  await drainWithRedelivery(
    { model, store: server.store, writer: queueWriter(model, server), queues: testQueues(), tablePrefix: server.config.tablePrefix },
    random(8),
  );
  const after = await Promise.all([1, 2, 3, 4, 5].map((n) => issueLabel(String(n))));
  expect(after.map((e) => e?.etag)).toEqual(before.map((e) => e?.etag));
  const r = await server.query('{ issue(projectKey: "P1", number: "1") { labels { edges { node { id name color } } } } }');
  expect(r.data.issue.labels.edges).toEqual([{ node: { id: '7', name: 'defect', color: '#333333' } }]);
  expect((await server.query('{ label(projectKey: "P1", name: "bug") { id } }')).data.label).toBeNull();
  const report = await verifyDerived({ store: server.store, model });
  if (report.problems) console.log(formatVerifyReport(report));
  expect(report.problems).toBe(0);
});

test('a deleted target: its copies null, its join entities deleted by the worker (verify reports them until then); verify finds a wrong copy and the rebuild repairs it', async () => {
  await run('deleteLabel', 'label', { projectKey: 'P1', name: 'defect' });
  const messages = (await receiveFanout(testQueues(), server.config.tablePrefix)).map((r) => r.message);
  // A worker without a write path nulls the copies, and leaves the join entities: verify reports them dangling.
  for (const m of messages) await handleMessage(m, { model, store: server.store, settleMs: 0, holdMs: 0 });
  expect((await issueLabel('1'))?.properties.labelColor).toBeUndefined();
  const dangling = (await verifyDerived({ store: server.store, model })).references.find((r) => r.reference === 'IssueLabel.label')!;
  expect([dangling.join, dangling.dangling.map((d) => d.rowKey).sort()]).toEqual([
    true,
    [1, 2, 3, 4, 5].map((n) => `issuelabel_${String(n).padStart(6, '0')}_7`),
  ]);
  // The worker as it runs, with its write path: the join entities go (and the issues' label pages with them).
  const writer = new WriteExecutor({ model, store: server.store, workQueue: { send: async () => undefined } });
  for (const m of messages) await handleMessage(m, { model, store: server.store, settleMs: 0, holdMs: 0, writer });
  for (let n = 1; n <= 5; n++) expect(await issueLabel(String(n))).toBeNull();
  expect((await server.query('{ issue(projectKey: "P1", number: "1") { labels { edges { node { name } } } } }')).data.issue.labels.edges).toEqual([]);

  const wrong = (await server.store.queryRange({ table: tracker, partitionKey: 'P2', rowKeyFrom: 'issue_', rowKeyTo: 'issue`', limit: 1 })).entities[0];
  await server.store.updateEntity(
    tracker,
    { partitionKey: 'P2', rowKey: wrong.rowKey, properties: { reporterName: { type: 'String', value: 'nobody' } } },
    'merge',
  );
  const report = await verifyDerived({ store: server.store, model });
  expect(report.copies.find((c) => c.copy === 'Issue.reporterName')!.different).toEqual([
    expect.objectContaining({ partitionKey: 'P2', rowKey: wrong.rowKey, stored: '"nobody"' }),
  ]);
  expect(await repairCopies(server.store, model, 'Issue')).toMatchObject({ repaired: 1 });
  expect((await verifyDerived({ store: server.store, model })).problems).toBe(0);
}, 60_000);
