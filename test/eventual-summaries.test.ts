/**
 * Summaries held in another partition than what they count (the tracker's `User.reportedCount` and
 * `User.reportedEstimate`, of issues in every project's partition), kept eventually by the worker through
 * contribution entities: exact after concurrent writers, redelivered and reordered messages, two workers on the
 * same messages, a worker killed mid-message, and a delete and re-create of one key; marked eventual in
 * `extensions.consistency`; checked by `verify` and restored by `repair-summaries`.
 */
import path from 'node:path';
import { Decimal } from 'decimal.js';
import { verifyDerived } from '../src/maintenance/verify-derived';
import { repairSummaries } from '../src/maintenance/summary-state';
import { formatRepair } from '../src/maintenance/repair-report';
import { compileSchema } from '../src/compiler/compile';
import { contributionPrefix } from '../src/model/contributions';
import { loadSchemaSources } from '../src/compiler/load-schema';
import type { Model } from '../src/model/types';
import { handleMessage } from './support/handle-message';
import type { EntityMessage } from '../src/queue/messages';
import { ROOT, startTestServer, testQueues, type TestServer } from './support/harness';
import { deliverTwiceByTwoWorkers } from './support/fanout-fixtures';
import { receiveFanout } from './support/write-fixtures';
import { testSeed } from './support/seed';

const SCHEMA = path.join(ROOT, 'examples/tracker');
let server: TestServer;
let model: Model;

beforeAll(async () => {
  server = await startTestServer({ TABLEGRAPH_SCHEMA_DIR: SCHEMA, TABLEGRAPH_WORKER: 'off' });
  model = compileSchema(loadSchemaSources(SCHEMA), { tablePrefix: server.config.tablePrefix }).model;
}, 60_000);
afterAll(() => server?.close());

async function ok(query: string, input: Record<string, unknown>): Promise<any> {
  const r = await server.query(query, { input });
  expect(r.errors).toBeUndefined();
  return r.data;
}
const CREATE = 'mutation($input: CreateIssueInput!) { createIssue(input: $input) { issue { number } } }';
const UPDATE = 'mutation($input: UpdateIssueInput!) { updateIssue(input: $input) { issue { number } } }';
const DELETE = 'mutation($input: DeleteIssueInput!) { deleteIssue(input: $input) { issue { number } } }';
const USERS = ['ana', 'bo', 'cy'];
const PROJECTS = ['ALPHA', 'BETA', 'GAMMA'];

/** A seeded random in [0, 1). */
function random(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => (x = (x * 1664525 + 1013904223) >>> 0) / 2 ** 32;
}

async function userSummaries(): Promise<Record<string, { reportedCount: number; reportedEstimate: string }>> {
  const out: Record<string, { reportedCount: number; reportedEstimate: string }> = {};
  for (const id of USERS) {
    const r = await server.query('query($id: ID!) { user(id: $id) { reportedCount reportedEstimate } }', { id });
    expect(r.extensions.consistency).toMatchObject({ eventual: true, summaries: ['User.reportedCount', 'User.reportedEstimate'] });
    out[id] = r.data.user;
  }
  return out;
}

test('exact after concurrent writers, redelivery, reordering, two workers and a worker killed mid-message', async () => {
  const seed = testSeed();
  const rand = random(seed);
  for (const id of USERS)
    await ok('mutation($input: CreateUserInput!) { createUser(input: $input) { user { id } } }', { id, email: `${id}@eventual.example`, name: id });
  for (const key of PROJECTS) await ok('mutation($input: CreateProjectInput!) { createProject(input: $input) { project { key } } }', { key, name: key });

  // The truth, kept here: issue → reporter and estimate.
  const truth = new Map<string, { reporterId: string; estimateHours: string | null }>();
  const issueInput = (key: string, n: number) => {
    const reporterId = USERS[Math.floor(rand() * USERS.length)];
    const estimateHours = rand() < 0.2 ? null : (Math.floor(rand() * 4000) / 100).toString();
    return { projectKey: key, number: String(n), title: `issue ${n}`, state: 'OPEN', openedAt: '2026-11-22T10:00:00.000Z', reporterId, estimateHours };
  };
  // 60 concurrent creates across three projects.
  const creates = PROJECTS.flatMap((key) => Array.from({ length: 20 }, (_, i) => issueInput(key, i + 1)));
  await Promise.all(creates.map((input) => ok(CREATE, input)));
  for (const c of creates) truth.set(`${c.projectKey}/${c.number}`, { reporterId: c.reporterId, estimateHours: c.estimateHours });
  const opts = { model, store: server.store, settleMs: 0, holdMs: 0 };
  let killed = 0;
  let deliveries = 0;
  /** Every message twice, shuffled, by two workers at once; one delivery in five dies after its upserts. */
  const deliver = async (messages: EntityMessage[]) => {
    const done = await deliverTwiceByTwoWorkers(messages, opts, rand);
    deliveries += done.deliveries;
    killed += done.killed;
  };

  // Before any message is handled the summaries are 0: kept eventually, and the response says so.
  expect(Object.values(await userSummaries()).every((u) => u.reportedCount === 0)).toBe(true);
  const first = (await receiveFanout(testQueues(), server.config.tablePrefix)).map((r) => r.message);
  expect(first.filter((m) => m.entity === 'Issue').length).toBe(creates.length);
  await deliver(first);

  // Then concurrent updates that move issues to other reporters and change estimates, deletes, and a delete and
  // re-create of one key: the contributions counted above must now leave their holders.
  const changes = creates
    .filter(() => rand() < 0.5)
    .map((c) => ({ ...issueInput(c.projectKey, Number(c.number)), title: undefined, state: undefined, openedAt: undefined }));
  await Promise.all(changes.map((input) => ok(UPDATE, input)));
  for (const c of changes) truth.set(`${c.projectKey}/${c.number}`, { reporterId: c.reporterId, estimateHours: c.estimateHours });
  const gone = creates.filter(() => rand() < 0.15);
  await Promise.all(gone.map((c) => ok(DELETE, { projectKey: c.projectKey, number: c.number })));
  for (const c of gone) truth.delete(`${c.projectKey}/${c.number}`);
  const again = issueInput('ALPHA', 1);
  if (truth.has('ALPHA/1')) await ok(DELETE, { projectKey: 'ALPHA', number: '1' });
  await ok(CREATE, again);
  truth.set('ALPHA/1', { reporterId: again.reporterId, estimateHours: again.estimateHours });

  const second = (await receiveFanout(testQueues(), server.config.tablePrefix)).map((r) => r.message);
  // The earlier messages come again too (late redeliveries), mixed with the new ones.
  await deliver([...second, ...first]);
  // And whatever was never acknowledged once more, late and in reverse.
  for (const m of [...first, ...second].reverse()) await handleMessage(m, opts);
  const received = [...first, ...second];

  const expected: Record<string, { reportedCount: number; reportedEstimate: string }> = {};
  for (const id of USERS) {
    const mine = [...truth.values()].filter((t) => t.reporterId === id);
    expected[id] = { reportedCount: mine.length, reportedEstimate: mine.reduce((n, t) => n.plus(t.estimateHours ?? 0), new Decimal(0)).toString() };
  }
  expect(await userSummaries()).toEqual(expected);
  const report = await verifyDerived({ store: server.store, model });
  expect(report.problems).toBe(0);
  console.log(`eventual summaries seed ${seed}: ${received.length} messages, ${deliveries + received.length} deliveries, ${killed} killed mid-message`);
}, 120_000);

test('verify finds a drifted holder and a lost contribution; repair-summaries restores both', async () => {
  const users = `${server.config.tablePrefix}Users`;
  const before = await userSummaries();
  const id = USERS.find((u) => before[u].reportedCount > 0)!;
  await server.store.updateEntity(users, { partitionKey: 'users', rowKey: id, properties: { reportedCount: { type: 'Int32', value: 999 } } }, 'merge');
  const s = model.summaries.get('User.reportedCount')!;
  const contributions = await server.store.queryRange({
    table: users,
    partitionKey: 'users',
    rowKeyFrom: contributionPrefix(s),
    rowKeyTo: `${contributionPrefix(s)}\uffff`,
    limit: 1000,
  });
  const lost = contributions.entities.find((e) => e.rowKey.startsWith(`${contributionPrefix(s)}${id}_`))!;
  await server.store.deleteEntity({ table: users, partitionKey: 'users', rowKey: lost.rowKey });

  const report = await verifyDerived({ store: server.store, model });
  const diff = report.summaries.find((d) => d.summary === 'User.reportedCount')!;
  expect(diff.different.map((d) => [d.rowKey, d.stored, d.expected])).toEqual([[id, '999', String(before[id].reportedCount)]]);
  expect(diff.contributions.map((a) => a.rowKey)).toEqual([lost.rowKey]);

  const repaired = await repairSummaries({ store: server.store, model });
  expect(repaired.busy).toEqual([]);
  // Both changes said: the holder rewritten, and the contribution entity written back.
  expect(formatRepair(repaired).at(-1)).toBe('repaired 1 holder (1 summary value) and 1 contribution entity; 0 kept changing');
  expect((await verifyDerived({ store: server.store, model })).problems).toBe(0);
  expect(await userSummaries()).toEqual(before);
}, 60_000);
