/**
 * An online build as an operator watches it (src/evolution/build-runner.ts), on a schema written for the test:
 * members of teams, version 1 without an index, version 2 with one by city holding their names, version 3 with it
 * holding their e-mails too (a changed definition: rebuilt, ending with a repair pass):
 * - the build's budget holds per second, not per page: no second of the build sees much more than the budget written
 *   (as the service's own clock stamps each index entity);
 * - a repair pass is under the budget too, and what it writes is counted in the build's `written`, as `npm run
 *   migrate -- status` shows it.
 * A BuildRunner driven in the test.
 */
import { compileSchema } from '../src/compiler/compile';
import { loadSchemaSources } from '../src/compiler/load-schema';
import { BuildRunner } from '../src/evolution/build-runner';
import { Catalogue } from '../src/evolution/catalogue';
import { deploySchema, schemaLayout } from '../src/evolution/deployment';
import { CatalogueRowsBoard } from '../src/evolution/presence';
import { formatStatus } from '../src/evolution/migration-report';
import { loadEntities } from '../src/load/load-entities';
import { testStore } from './support/harness';
import { Deployment, MEMBER } from './support/schema-evolution';

const QUERY = `
type Query {
  member(teamId: ID!, id: Int!): Member @point
}`;
const indexed = (include: string) =>
  `${MEMBER(`\n  @index(name: "byCity", table: "MembersByCity", partitionKey: "c_{city:hash16}", rowKey: "{city}_{teamId}_{id:06}", include: [${include}])`)}${QUERY}`;
const V1 = `${MEMBER('')}${QUERY}`;
const V2 = indexed('"name"');
const V3 = indexed('"name", "email"');
const MEMBERS = 1000;
const BUDGET = 200;

const d = new Deployment();
const store = testStore();
const catalogue = new Catalogue(store, d.prefix);
afterAll(() => d.remove());

function compiled(sdl: string) {
  d.write(sdl);
  return compileSchema(loadSchemaSources(d.dir), { tablePrefix: d.prefix });
}

/** A runner of `next`'s builds at `budget` (entities/s; 0: none), looking for older servers every `pollMs` (ms). */
function runnerOf(next: ReturnType<typeof compiled>, budget: number, pollMs?: number): BuildRunner {
  const layout = schemaLayout(next.model, next.schema).layout;
  const presence = new CatalogueRowsBoard(catalogue);
  return new BuildRunner({ catalogue, store, model: next.model, layout, instance: 'test', entitiesPerSecond: budget, pageSize: 1000, pollMs, presence });
}

/** Deploys `sdl` and runs its build of the index to the end. @returns the index's row, and how long its build took (ms) */
async function build(sdl: string) {
  const next = compiled(sdl);
  await deploySchema({ catalogue, schema: schemaLayout(next.model, next.schema), sdl: next.sdl });
  const runner = runnerOf(next, BUDGET);
  const started = Date.now();
  for (let i = 0; i < 200 && (await catalogue.path('index:Member.byCity'))!.state === 'building'; i++) await runner.runOnce();
  return { row: (await catalogue.path('index:Member.byCity'))!, ms: Date.now() - started };
}

beforeAll(async () => {
  const v1 = compiled(V1);
  await deploySchema({ catalogue, schema: schemaLayout(v1.model, v1.schema), sdl: v1.sdl });
  async function* rows() {
    for (let i = 0; i < MEMBERS; i++)
      yield { line: i + 1, values: { teamId: `t${i % 7}`, id: i, name: `N${i}`, email: `m${i}@x.test`, city: ['Oslo', 'Lima', 'Pune'][i % 3] } };
  }
  await loadEntities({ store, model: v1.model, steps: [{ type: 'Member', rows: rows() }] });
}, 60_000);

test('a new index: at most a few seconds of its budget written in any one second', async () => {
  const { row } = await build(V2);
  // Its total counted before its first page, as `migrate plan` counts it: /health and `migrate status` show it.
  expect(row).toMatchObject({ state: 'ready', read: MEMBERS, written: MEMBERS, total: MEMBERS });
  const times: number[] = [];
  for await (const page of store.scan(`${d.prefix}MembersByCity`)) times.push(...page.map((e) => Date.parse(e.timestamp!)));
  times.sort((a, b) => a - b);
  expect(times).toHaveLength(MEMBERS);
  let most = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while (times[i] - times[j] >= 1000) j++;
    most = Math.max(most, i - j + 1);
  }
  console.log(`a build of ${MEMBERS} at ${BUDGET}/s: at most ${most} index entities written in one second`);
  // A page is at most a second of the budget; at most two pages' writes meet in a second (a third if storage stalls).
  expect(most).toBeLessThanOrEqual(3 * BUDGET);
}, 60_000);

test('the index changed: its repair pass under the budget, and counted', async () => {
  const { row, ms } = await build(V3);
  expect(row.state).toBe('ready');
  // Every index entity existed with the old projection: the page steps skipped them, the repair pass replaced them.
  expect(row.read).toBe(MEMBERS);
  expect(row.written).toBeGreaterThanOrEqual(MEMBERS);
  // Paced: a second's worth at once, then the budget's rate.
  expect(ms).toBeGreaterThanOrEqual(((MEMBERS - BUDGET) / BUDGET) * 1000);
}, 60_000);

test('a scanned build waiting for a process of an older version says which, and since when; it finishes once that process stops', async () => {
  const V4 = `${MEMBER(`
  @index(name: "byCity", table: "MembersByCity", partitionKey: "c_{city:hash16}", rowKey: "{city}_{teamId}_{id:06}", include: ["name", "email"])
  @index(name: "byName", table: "MembersByName", partitionKey: "n_{name:hash16}", rowKey: "{name}_{teamId}_{id:06}")`)}${QUERY}`;
  const next = compiled(V4);
  const deployed = await deploySchema({ catalogue, schema: schemaLayout(next.model, next.schema), sdl: next.sdl });
  // A server of the version before still runs (it writes members without keeping the new index).
  await catalogue.heartbeat({ instance: 'old-server-1', version: deployed.version - 1, hash: 'older', seenAt: Date.now() });
  const runner = runnerOf(next, 0, 0);
  const id = 'index:Member.byName';
  for (let i = 0; i < 20 && (await catalogue.path(id))!.waitingSince === undefined; i++) await runner.runOnce();
  const waiting = (await catalogue.path(id))!;
  expect(waiting).toMatchObject({ state: 'building', scanned: true, total: MEMBERS, read: MEMBERS });
  expect(waiting.waitingFor).toBe(`1 process of version ${deployed.version - 1} (old-server-1)`);
  const text = formatStatus(deployed.version, [waiting], []);
  expect(text).toMatch(
    /all read: waiting since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ, \d+ s ago for 1 process of version \d+ \(old-server-1\) to stop, then finishes/,
  );
  expect(text).not.toContain('finishing');

  await catalogue.leave('old-server-1');
  for (let i = 0; i < 20 && (await catalogue.path(id))!.state === 'building'; i++) await runner.runOnce();
  const done = (await catalogue.path(id))!;
  expect(done.state).toBe('ready');
  expect([done.waitingSince, done.waitingFor]).toEqual([undefined, undefined]);
}, 60_000);
