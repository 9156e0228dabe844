/**
 * The second example schema (examples/tracker: projects, users, issues, comments), served and loaded as a new user
 * would: `npm run load -- --manifest` loads its sample data (examples/tracker/data), bad rows reported with their lines
 * and skipped; every access path of the schema is then checked against an independent computation over the
 * fixture files, page by page; a second load changes nothing; `verify` is clean; mutations keep the summaries.
 * Prints each query's storage cost (extensions.cost) for the record.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { parse } from 'csv-parse/sync';
import { Decimal } from 'decimal.js';
import type { GraphQLSchema } from 'graphql';
import { loadEntities } from '../src/load/load-entities';
import { readLoadRows } from '../src/load/load-rows';
import { readManifest } from '../src/load/manifest';
import { verifyDerived } from '../src/maintenance/verify-derived';
import { compileSchema } from '../src/compiler/compile';
import { invertedTicks } from '../src/model/key-template';
import { loadSchemaSources } from '../src/compiler/load-schema';
import type { Model } from '../src/model/types';
import { connectionString, ROOT, startTestServer, type TestServer } from './support/harness';
import { firstError, pollUntil } from './support/write-fixtures';

const SCHEMA = path.join(ROOT, 'examples/tracker');
const FIXTURES = path.join(ROOT, 'examples/tracker/data');
const MANIFEST = path.join(FIXTURES, 'manifest.json');

// The fixtures, read here with nothing of tablegraph's.
type Row = Record<string, string>;
const csv = (file: string): Row[] => parse(readFileSync(path.join(FIXTURES, file), 'utf8'), { columns: true }) as Row[];
const ndjsonLines = (file: string) =>
  readFileSync(path.join(FIXTURES, file), 'utf8')
    .split('\n')
    .filter((l) => l !== '');
const users = ndjsonLines('users.ndjson').map((l) => JSON.parse(l) as Row);
const projects = csv('projects.csv');
const issueRows = csv('issues.csv');
/** The issue rows the fixture spoils on purpose, by title: an unknown state, an unknown reporter, a duplicate, a negative estimate. */
const BAD_ISSUES = ['Reopened state', 'Ghost reporter', 'Duplicate of 3', 'Negative estimate'];
const issues = issueRows.filter((r) => !BAD_ISSUES.includes(r.title));
const labels = csv('labels.csv');
const issueLabelRows = csv('issue-labels.csv');
/** The join rows whose label exists (not the fixture's label 9). */
const issueLabels = issueLabelRows.filter((r) => labels.some((l) => l.projectKey === r.projectKey && l.id === r.labelId));
/** The name of a join row's label. */
const labelName = (r: Row) => labels.find((l) => l.projectKey === r.projectKey && l.id === r.labelId)!.name;
const commentLines = ndjsonLines('comments.ndjson');
const comments = commentLines.flatMap((l) => {
  try {
    const c = JSON.parse(l) as Row;
    return issues.some((i) => i.projectKey === c.projectKey && i.number === c.issueNumber) ? [c] : [];
  } catch {
    return [];
  }
});
const byNumber = (a: Row, b: Row) => Number(a.number) - Number(b.number);
const newestFirst = (a: Row, b: Row) => Date.parse(b.at) - Date.parse(a.at);
const decimalOrNull = (s: string) => (s === '' ? null : new Decimal(s).toString());

let server: TestServer;
let model: Model;
let schema: GraphQLSchema;
const costs: Array<[string, number]> = [];

/** Runs a query, expects no error, records its round trips. */
async function ok(name: string, query: string, variables: Record<string, unknown> = {}): Promise<any> {
  const r = await server.query(query, variables);
  expect(r.errors).toBeUndefined();
  expect(r.extensions.cost).toMatchObject({ partitionScans: 0, tableScans: 0 });
  costs.push([name, r.extensions.cost.roundTrips]);
  return r.data;
}

/** Every node of a connection, following endCursor `pageSize` at a time. */
async function allPages(name: string, query: string, variables: Record<string, unknown>, at: (data: any) => any, pageSize = 4): Promise<any[]> {
  const nodes: any[] = [];
  let after: string | null = null;
  for (let page = 0; page < 100; page++) {
    const connection = at(await ok(name, query, { ...variables, first: pageSize, after }));
    nodes.push(...connection.edges.map((e: any) => e.node));
    if (!connection.pageInfo.hasNextPage) return nodes;
    after = connection.pageInfo.endCursor;
  }
  throw new Error('more than 100 pages');
}

beforeAll(async () => {
  server = await startTestServer({ TABLEGRAPH_SCHEMA_DIR: SCHEMA });
  ({ model, schema } = compileSchema(loadSchemaSources(SCHEMA), { tablePrefix: server.config.tablePrefix }));
}, 60_000);
afterAll(async () => {
  await server?.close();
  console.log(
    `tracker query costs (round trips):\n${costs
      .filter(([n], i) => costs.findIndex(([m]) => m === n) === i)
      .map(([n, c]) => `  ${n}: ${c}`)
      .join('\n')}`,
  );
});

describe('npm run load', () => {
  test('loads the manifest; bad rows are reported with their lines and skipped', async () => {
    const { stdout, stderr: rawStderr } = await promisify(execFile)(
      process.execPath,
      [path.join(ROOT, 'node_modules/tsx/dist/cli.mjs'), 'src/cli/load.ts', '--manifest', MANIFEST],
      {
        cwd: ROOT,
        env: {
          ...process.env,
          AZURE_STORAGE_CONNECTION_STRING: connectionString(),
          TABLEGRAPH_TARGET: 'azurite',
          TABLEGRAPH_SCHEMA_DIR: SCHEMA,
          TABLEGRAPH_TABLE_PREFIX: server.config.tablePrefix,
          LOG_LEVEL: 'info',
        },
      },
    );
    const line = (title: string) => issueRows.findIndex((r) => r.title === title) + 2;
    // The log lines on stderr are JSON (not a terminal): their messages.
    const stderr = rawStderr
      .split('\n')
      .filter(Boolean)
      .map((l) => {
        try {
          return (JSON.parse(l) as { msg: string }).msg;
        } catch {
          return l;
        }
      })
      .join('\n');
    expect(stdout).toContain(`User             rows ${users.length}, loaded ${users.length}`);
    expect(stdout).toContain(`Project          rows ${projects.length}, loaded ${projects.length}`);
    expect(stdout).toContain(`Issue            rows ${issueRows.length}, loaded ${issues.length} (0 unchanged), kept 0, skipped 4`);
    expect(stdout).toContain(`Comment          rows ${commentLines.length}, loaded ${comments.length} (0 unchanged), kept 0, skipped 2`);
    expect(stdout).toContain(`Label            rows ${labels.length}, loaded ${labels.length}`);
    expect(stdout).toContain(`IssueLabel       rows ${issueLabelRows.length}, loaded ${issueLabels.length} (0 unchanged), kept 0, skipped 1`);
    expect(stdout).toMatch(/failed EGTs\s+0/);
    // The progress bar's total: each CSV's lines less its header, each NDJSON file's lines (no header); its counts are
    // the summary's: the rows stored and the seven skipped.
    const rowsInFiles = users.length + projects.length + issueRows.length + labels.length + issueLabelRows.length + commentLines.length;
    expect(stderr).toContain(`${rowsInFiles}/${rowsInFiles} rows done (100%): ${rowsInFiles - 7} stored, 7 skipped; ${rowsInFiles} read,`);
    expect(stderr).toContain(`issues.csv:${line('Reopened state')}: state: "REOPENED" is not one of OPEN, CLOSED`);
    expect(stderr).toContain(`issues.csv:${line('Ghost reporter')}: reporter: no User at users/ghost`);
    expect(stderr).toContain(`issues.csv:${line('Duplicate of 3')}: the same Issue as line 4`);
    expect(stderr).toContain(`issues.csv:${line('Negative estimate')}: estimateHours: must be at least 0`);
    expect(stderr).toContain(`comments.ndjson:${commentLines.findIndex((l) => l.includes('oops')) + 1}: not JSON`);
    expect(stderr).toContain(`issue-labels.csv:${issueLabelRows.findIndex((r) => r.labelId === '9') + 2}: label: no Label at CORE/9`);
    expect(stderr).toContain(`comments.ndjson:${commentLines.findIndex((l) => l.includes('"99"')) + 1}: issue: no Issue at CORE/issue_000099`);
  }, 120_000);

  test('a second load changes nothing, and verify finds nothing', async () => {
    const steps = readManifest(MANIFEST).map((s) => ({ type: s.type, rows: readLoadRows(s.file, model.entities.get(s.type)!, schema), source: s.file }));
    const again = await loadEntities({ store: server.store, model, steps });
    // Nothing written: no summary holder either (the counts were right).
    expect(again.steps.map((s) => [s.type, s.loaded, s.unchanged, s.skipped.length, s.staleDeleted, s.holders])).toEqual([
      ['User', users.length, users.length, 0, 0, 0],
      ['Project', projects.length, projects.length, 0, 0, 0],
      ['Issue', issues.length, issues.length, 4, 0, 0],
      ['Label', labels.length, labels.length, 0, 0, 0],
      ['IssueLabel', issueLabels.length, issueLabels.length, 1, 0, 0],
      ['Comment', comments.length, comments.length, 2, 0, 0],
    ]);
    const report = await verifyDerived({ store: server.store, model });
    expect(report.problems).toBe(0);
    expect(report.summaries.map((s) => [s.summary, s.different.length, s.contributions.length])).toEqual([
      ['Project.issueCount', 0, 0],
      ['Project.estimateTotal', 0, 0],
      ['User.reportedCount', 0, 0],
      ['User.reportedEstimate', 0, 0],
      ['User.assignedCount', 0, 0],
      ['Issue.commentCount', 0, 0],
    ]);
  }, 120_000);
});

describe('every access path against the fixtures', () => {
  test('projects, their summaries, lead (an optional reference across tables) and SAS', async () => {
    const keys = (
      await allPages(
        'Query.projects',
        'query($first: Int, $after: String) { projects(first: $first, after: $after) { edges { node { key } } pageInfo { hasNextPage endCursor } } }',
        {},
        (d) => d.projects,
        2,
      )
    ).map((n) => n.key);
    expect(keys).toEqual(projects.map((p) => p.key).sort());
    for (const p of projects) {
      const mine = issues.filter((i) => i.projectKey === p.key);
      const d = await ok(
        'Query.project + lead + summaries',
        'query($key: ID!) { project(key: $key) { name leadId lead { name } issueCount estimateTotal boardSas } }',
        { key: p.key },
      );
      expect(d.project).toMatchObject({
        name: p.name,
        leadId: p.leadId || null,
        lead: p.leadId ? { name: users.find((u) => u.id === p.leadId)!.name } : null,
        issueCount: mine.length,
        estimateTotal: mine.reduce((sum, i) => sum.plus(i.estimateHours || 0), new Decimal(0)).toString(),
      });
      expect(d.project.boardSas).toMatch(/[?&]sig=/);
    }
  });

  test("a project's issues, all and by state, in number order", async () => {
    for (const p of projects) {
      const mine = issues.filter((i) => i.projectKey === p.key).sort(byNumber);
      const all = await allPages(
        'Project.issues',
        'query($key: ID!, $first: Int, $after: String) { project(key: $key) { issues(first: $first, after: $after) { edges { node { number title } } pageInfo { hasNextPage endCursor } } } }',
        { key: p.key },
        (d) => d.project.issues,
      );
      expect(all).toEqual(mine.map((i) => ({ number: i.number, title: i.title })));
      for (const state of ['OPEN', 'CLOSED']) {
        const some = await allPages(
          'Project.issuesByState',
          'query($key: ID!, $state: IssueState!, $first: Int, $after: String) { project(key: $key) { issuesByState(state: $state, first: $first, after: $after) { edges { node { number state priority } } pageInfo { hasNextPage endCursor } } } }',
          { key: p.key, state },
          (d) => d.project.issuesByState,
        );
        expect(some).toEqual(mine.filter((i) => i.state === state).map((i) => ({ number: i.number, state, priority: i.priority || null })));
      }
    }
  });

  test('each issue by its keys, with its references and typed fields', async () => {
    for (const i of issues) {
      const d = await ok(
        'Query.issue + project, assignee, reporter',
        'query($k: ID!, $n: ID!) { issue(projectKey: $k, number: $n) { title state priority estimateHours openedAt views assignee { id } reporter { name } project { key } commentCount } }',
        { k: i.projectKey, n: i.number },
      );
      expect(d.issue).toEqual({
        title: i.title,
        state: i.state,
        priority: i.priority || null,
        estimateHours: decimalOrNull(i.estimateHours),
        openedAt: new Date(i.openedAt).toISOString(),
        views: i.views || null,
        assignee: i.assigneeId ? { id: i.assigneeId } : null,
        reporter: { name: users.find((u) => u.id === i.reporterId)!.name },
        project: { key: i.projectKey },
        commentCount: comments.filter((c) => c.projectKey === i.projectKey && c.issueNumber === i.number).length,
      });
    }
  });

  test('users by id and by e-mail (a unique index), and the issues assigned to each across projects', async () => {
    for (const u of users) {
      const reported = issues.filter((i) => i.reporterId === u.id);
      expect(
        (await ok('Query.user + eventual summaries', 'query($id: ID!) { user(id: $id) { email name reportedCount reportedEstimate } }', { id: u.id })).user,
      ).toEqual({
        email: u.email,
        name: u.name,
        reportedCount: reported.length,
        reportedEstimate: reported.reduce((sum, i) => sum.plus(i.estimateHours || 0), new Decimal(0)).toString(),
      });
      expect((await ok('Query.userByEmail', 'query($e: String!) { userByEmail(email: $e) { id } }', { e: u.email })).userByEmail).toEqual({ id: u.id });
      const assigned = await allPages(
        'User.assigned',
        'query($id: ID!, $first: Int, $after: String) { user(id: $id) { assigned(first: $first, after: $after) { edges { node { projectKey number state } } pageInfo { hasNextPage endCursor } } } }',
        { id: u.id },
        (d) => d.user.assigned,
      );
      const expected = issues
        .filter((i) => i.assigneeId === u.id)
        .sort((a, b) => (a.projectKey === b.projectKey ? byNumber(a, b) : a.projectKey < b.projectKey ? -1 : 1))
        .map((i) => ({ projectKey: i.projectKey, number: i.number, state: i.state }));
      expect(assigned).toEqual(expected);
      // A summary over an optional reference: unassigned issues count towards nobody.
      expect((await ok('User.assignedCount', 'query($id: ID!) { user(id: $id) { assignedCount } }', { id: u.id })).user.assignedCount).toBe(expected.length);
    }
  });

  test("an issue's comments newest first, a closed window of them, and each comment's references", async () => {
    const withComments = issues.filter((i) => comments.some((c) => c.projectKey === i.projectKey && c.issueNumber === i.number));
    expect(withComments.length).toBeGreaterThan(5);
    for (const i of withComments) {
      const mine = comments.filter((c) => c.projectKey === i.projectKey && c.issueNumber === i.number).sort(newestFirst);
      const all = await allPages(
        'Issue.comments + author, issue',
        'query($k: ID!, $n: ID!, $first: Int, $after: String) { issue(projectKey: $k, number: $n) { comments(first: $first, after: $after) { edges { node { at body author { id } issue { number } } } pageInfo { hasNextPage endCursor } } } }',
        { k: i.projectKey, n: i.number },
        (d) => d.issue.comments,
        2,
      );
      expect(all).toEqual(mine.map((c) => ({ at: new Date(c.at).toISOString(), body: c.body, author: { id: c.authorId }, issue: { number: i.number } })));
      if (mine.length < 3) continue;
      // Both ends in: from the second oldest to the newest.
      const from = mine[mine.length - 2].at;
      const to = mine[0].at;
      const window = await allPages(
        'Query.commentsBetween',
        'query($k: ID!, $n: ID!, $from: DateTime!, $to: DateTime!, $first: Int, $after: String) { commentsBetween(projectKey: $k, issueNumber: $n, from: $from, to: $to, first: $first, after: $after) { edges { node { at } } pageInfo { hasNextPage endCursor } } }',
        { k: i.projectKey, n: i.number, from, to },
        (d) => d.commentsBetween,
        2,
      );
      expect(window.map((c) => c.at)).toEqual(
        mine.filter((c) => Date.parse(c.at) >= Date.parse(from) && Date.parse(c.at) <= Date.parse(to)).map((c) => new Date(c.at).toISOString()),
      );
    }
  });

  test("many-to-many: an issue's labels and a label's issues, through the join entities, in one range and one wave", async () => {
    for (const i of issues) {
      const expected = issueLabels
        .filter((r) => r.projectKey === i.projectKey && r.issueNumber === i.number)
        .sort((a, b) => (a.labelId < b.labelId ? -1 : 1))
        .map(labelName); // in RowKey order: by label id
      const mine = await allPages(
        'Issue.labels (through IssueLabel)',
        'query($k: ID!, $n: ID!, $first: Int, $after: String) { issue(projectKey: $k, number: $n) { labels(first: $first, after: $after) { edges { node { name color } } pageInfo { hasNextPage endCursor } } } }',
        { k: i.projectKey, n: i.number },
        (d) => d.issue.labels,
        1,
      );
      expect(mine).toEqual(expected.map((name) => ({ name, color: labels.find((l) => l.projectKey === i.projectKey && l.name === name)!.color || null })));
    }
    for (const l of labels) {
      const expected = issueLabels
        .filter((r) => r.projectKey === l.projectKey && r.labelId === l.id)
        .map((r) => r.issueNumber)
        .sort((a, b) => Number(a) - Number(b));
      const mine = await allPages(
        'Label.issues (through the byLabel index)',
        'query($k: ID!, $n: String!, $first: Int, $after: String) { label(projectKey: $k, name: $n) { issues(first: $first, after: $after) { edges { node { number title } } pageInfo { hasNextPage endCursor } } } }',
        { k: l.projectKey, n: l.name },
        (d) => d.label.issues,
        3,
      );
      expect(mine).toEqual(expected.map((n) => ({ number: n, title: issues.find((i) => i.projectKey === l.projectKey && i.number === n)!.title })));
    }
    // The join entities hold the label's id and a copy of its color: a page of { id color } needs no second wave;
    // its names are read through the labels' unique index (two more waves: the index entities, then the labels),
    // and so is its ETag.
    const i = issues.find((x) => issueLabels.filter((r) => r.projectKey === x.projectKey && r.issueNumber === x.number).length >= 2)!;
    const n = issueLabels.filter((r) => r.projectKey === i.projectKey && r.issueNumber === i.number).length;
    const covered = await server.query('query($k: ID!, $n: ID!) { issue(projectKey: $k, number: $n) { labels(first: 5) { edges { node { id color } } } } }', {
      k: i.projectKey,
      n: i.number,
    });
    expect(covered.extensions.cost).toMatchObject({ pointQueries: 1, rangeQueries: 1, waves: 2 });
    expect(covered.extensions.consistency.indexes).toContain('IssueLabel.label');
    // The demand estimate knows it too: the two calls made, not 2 + 2 per node.
    expect(covered.extensions.cost.estimate.storageCalls).toBe(2);
    const named = await server.query('query($k: ID!, $n: ID!) { issue(projectKey: $k, number: $n) { labels(first: 5) { edges { node { name color } } } } }', {
      k: i.projectKey,
      n: i.number,
    });
    expect(named.extensions.cost).toMatchObject({ pointQueries: 1 + 2 * n, rangeQueries: 1, waves: 4 });
    const withEtag = await server.query('query($k: ID!, $n: ID!) { issue(projectKey: $k, number: $n) { labels(first: 5) { edges { node { name etag } } } } }', {
      k: i.projectKey,
      n: i.number,
    });
    expect(withEtag.data.issue.labels.edges.every((e: any) => typeof e.node.etag === 'string' && e.node.etag.length > 0)).toBe(true);
    expect(withEtag.extensions.cost.pointQueries).toBeGreaterThan(1);
    for (const q of [named, withEtag])
      expect(q.extensions.cost.estimate.storageCalls).toBeGreaterThanOrEqual(q.extensions.cost.pointQueries + q.extensions.cost.rangeQueries);
    // One range query, then one wave of point queries for the page's nodes.
    const label = labels.find((l) => issueLabels.filter((r) => r.projectKey === l.projectKey && r.labelId === l.id).length >= 3)!;
    const r = await server.query('query($k: ID!, $n: String!) { label(projectKey: $k, name: $n) { issues(first: 3) { edges { node { title } } } } }', {
      k: label.projectKey,
      n: label.name,
    });
    expect(r.extensions.cost).toMatchObject({ pointQueries: 1 + 3, rangeQueries: 1, waves: 3 });
    expect(r.extensions.cost.estimate.storageCalls).toBeGreaterThanOrEqual(r.extensions.cost.pointQueries + r.extensions.cost.rangeQueries);
  });

  test('the stored layout: one partition per project, comments keyed by the .NET inverted ticks of their instant', async () => {
    const c = comments[0];
    const rowKey = `comment_${c.issueNumber.padStart(6, '0')}_${invertedTicks(new Date(c.at))}`;
    const stored = await server.store.getEntity({ table: `${server.config.tablePrefix}Tracker`, partitionKey: c.projectKey, rowKey });
    expect(stored?.properties).toMatchObject({ EntityType: 'Comment', body: c.body, authorId: c.authorId });
    // DateTime.MaxValue.Ticks − ticks, computed here from the Unix epoch (621355968000000000 ticks after 0001-01-01).
    expect(invertedTicks(new Date(c.at))).toBe((3155378975999999999n - (621355968000000000n + BigInt(Date.parse(c.at)) * 10000n)).toString());
  });
});

describe('mutations on the loaded data', () => {
  const CREATE = 'mutation($input: CreateIssueInput!) { createIssue(input: $input) { issue { number assignee { id } project { issueCount estimateTotal } } } }';

  test('a new issue updates its project in the same EGT and reaches its assignee through the queue', async () => {
    const core = issues.filter((i) => i.projectKey === 'CORE');
    const before = core.reduce((sum, i) => sum.plus(i.estimateHours || 0), new Decimal(0));
    const input = {
      projectKey: 'CORE',
      number: '500',
      title: 'Written through the API',
      state: 'OPEN',
      openedAt: '2026-11-22T10:00:00.000Z',
      estimateHours: '0.1',
      assigneeId: 'ken',
      reporterId: 'ada',
    };
    const d = await ok('Mutation.createIssue', CREATE, { input });
    expect(d.createIssue.issue).toEqual({
      number: '500',
      assignee: { id: 'ken' },
      project: { issueCount: core.length + 1, estimateTotal: before.plus('0.1').toString() },
    });
    await pollUntil('the assignee index', async () => {
      const r = await server.query('{ user(id: "ken") { assigned(first: 100) { edges { node { number } } } } }');
      return r.data.user.assigned.edges.some((e: any) => e.node.number === '500') || undefined;
    });
    // References are checked: an unknown assignee is refused, nothing written.
    const refused = await server.query(CREATE, { input: { ...input, number: '501', assigneeId: 'nobody' } });
    expect(firstError(refused)).toMatchObject({ code: 'NOT_FOUND', extensions: { reason: 'ReferenceMissing', field: 'assignee' } });
    // An issue with comments is a summary holder whose count is not 0: it cannot be deleted.
    const busy = comments[0];
    const del = await server.query('mutation($input: DeleteIssueInput!) { deleteIssue(input: $input) { issue { number } } }', {
      input: { projectKey: busy.projectKey, number: busy.issueNumber },
    });
    expect(firstError(del)).toMatchObject({ code: 'CONFLICT', extensions: { reason: 'HasDependents' } });
    await pollUntil('the work queue to drain', async () => ((await verifyDerived({ store: server.store, model })).problems === 0 ? true : undefined), 30_000);
  }, 60_000);
});
