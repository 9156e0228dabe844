/**
 * Builds of a schema change whose worker processes are killed (SIGKILL) twice mid-build each, on schemas written for
 * the test, while a write storm runs through a server of the new version: a unique index over a value two members
 * hold (the build stops and reports both keys, overwriting nothing; once one changed, the retried build is killed
 * twice and resumes from its checkpoint each time), and a summary and a copy. Reads through a path are refused until
 * it is ready and exact after; every acknowledged write is present and `verify` is clean at the end.
 */
import { formatVerifyReport, verifyDerived } from '../src/maintenance/verify-derived';
import { testStore } from './support/harness';
import { killCommandProcesses } from './support/processes';
import { seededRng } from './support/fanout-fixtures';
import { Deployment, killedTwice, MEMBER, mutate, MUTATIONS, ok, TEAMS_COPY, TEAMS_V1, TEAMS_V2 } from './support/schema-evolution';
import { testSeed } from './support/seed';
import { pause, until } from './support/wait';

afterAll(() => killCommandProcesses());

const V2_UNIQUE = `${MEMBER(`
  @index(name: "byEmail", table: "MembersByEmail", partitionKey: "e_{email:hash16}", rowKey: "{email}", unique: true)`)}
type Query {
  member(teamId: ID!, id: Int!): Member @point
  memberByEmail(email: String!): Member @point(index: "byEmail")
}${MUTATIONS}`;

test('a unique index over a value held twice: reported, not overwritten; once changed, the retried build killed twice resumes and completes under a write storm', async () => {
  const d = new Deployment();
  const seed = testSeed();
  const rng = seededRng(seed);
  let server = await d.start(MEMBER('') + MUTATIONS.replace('type Mutation', 'type Query { member(teamId: ID!, id: Int!): Member @point }\ntype Mutation'));
  let storm = true;
  try {
    // The twins first in the scan (partitions a0 and a1), then 160 members with e-mails of their own.
    await ok(server, 'createMember', { teamId: 'a0', id: 100, name: 'Twin', email: 'twin@x.test' });
    await ok(server, 'createMember', { teamId: 'a1', id: 200, name: 'Twin', email: 'twin@x.test' });
    const emails = new Map<string, string | null>([
      ['a0/100', 'twin@x.test'],
      ['a1/200', 'twin@x.test'],
    ]);
    await Promise.all(
      Array.from({ length: 160 }, async (_, i) => {
        await ok(server, 'createMember', { teamId: `t${i % 4}`, id: i, name: 'N', email: `m${i}@x.test` });
        emails.set(`t${i % 4}/${i}`, `m${i}@x.test`);
      }),
    );
    await server.close();

    // plan names the build with its cost: 162 index entities, each member read twice.
    d.write(V2_UNIQUE);
    const planned = d.command('migrate', ['plan']);
    await planned.exited;
    expect(planned.output()).toMatch(
      /build {6}index:Member\.byEmail: new index Member\.byEmail: built online from the stored entities\n {13}reads 324 entities, writes 162; \d+ transactions, 1,134 RU/,
    );

    // Small pages, no budget: many steps, each taken at once; the kills land at named steps (killedTwice).
    const pages = { TABLEGRAPH_BUILD_PAGE_SIZE: '8', TABLEGRAPH_BUILD_ENTITIES_PER_SECOND: '0' };
    server = await d.start(V2_UNIQUE, { TABLEGRAPH_WORKER: 'off' });
    const live = server;
    // The storm: each key's e-mail its own; creates, e-mails changed, deletes and re-creates of a key.
    const busy = new Set<string>();
    let acknowledged = 0;
    const write = async (w: number) => {
      for (let n = 0; storm; n++) {
        const key = `t${rng.int(4)}/${1000 + rng.int(40)}`;
        if (busy.has(key)) {
          await pause(5, 'pace'); // another writer has this key: pick again
          continue;
        }
        busy.add(key);
        const [teamId, id] = key.split('/');
        const email = `w${id}-${w}-${n}@x.test`;
        const had = emails.get(key);
        const del = !!had && rng.int(3) === 0;
        const r = del
          ? await mutate(live, 'deleteMember', { teamId, id: Number(id) })
          : had
            ? await mutate(live, 'updateMember', { teamId, id: Number(id), email })
            : await mutate(live, 'createMember', { teamId, id: Number(id), name: 'W', email });
        expect(r.errors).toBeUndefined();
        emails.set(key, del ? null : email);
        acknowledged++;
        busy.delete(key);
      }
    };
    const writers = [write(0), write(1)];
    let refused = 0;
    let answered = 0;
    const readers = (async () => {
      while (storm) {
        const i = rng.int(160);
        const r = await live.query(`{ memberByEmail(email: "m${i}@x.test") { teamId id } }`);
        if (r.errors) {
          expect(r.errors[0].extensions.code).toBe('ACCESS_PATH_BUILDING');
          refused++;
        } else {
          expect(r.data.memberByEmail).toEqual({ teamId: `t${i % 4}`, id: i });
          answered++;
        }
        await pause(100, 'pace');
      }
    })();

    // The first worker meets the twins: the build stops, reporting both, and overwrites neither.
    const first = d.command('worker', [], pages);
    const failed = await d.waitFor((p) => p.get('index:Member.byEmail')?.state === 'failed');
    const problem = failed.get('index:Member.byEmail')!.problem!;
    expect(problem.reason).toBe('UniqueValueHeldTwice');
    const held = problem.details as Array<{ primaries: Array<{ partitionKey: string; rowKey: string }> }>;
    expect(held[0].primaries.map((p) => `${p.partitionKey}/${p.rowKey}`).sort()).toEqual(['a0/m_000100', 'a1/m_000200']);
    const model = d.model(V2_UNIQUE);
    const byEmail = model.entities.get('Member')!.indexes.get('byEmail')!;
    const twins = [];
    for await (const page of testStore().scan(byEmail.layout.table)) twins.push(...page.filter((e) => e.rowKey === 'twin@x.test'));
    expect(twins).toHaveLength(1);
    first.child.kill('SIGTERM');
    await first.exited;

    // One twin changes its e-mail; the retried build (apply) is killed twice, a worker resuming it each time.
    await ok(live, 'updateMember', { teamId: 'a1', id: 200, email: 'twin2@x.test' });
    emails.set('a1/200', 'twin2@x.test');
    const last = await killedTwice(d, 'index:Member.byEmail', {
      first: (env) => d.command('migrate', ['apply', '--retry', 'index:Member.byEmail'], { ...pages, ...env }),
      next: (env) => d.command('worker', [], { ...pages, ...env }),
    });
    const done = await d.waitFor((p) => p.get('index:Member.byEmail')!.state === 'ready', 120_000);
    expect(done.get('index:Member.byEmail')!.takeovers).toBe(2);
    await last.waitFor('repair pass');
    await live.refreshPathStates(); // the server reads the index's state (ready) now, not at its next refresh
    const stormed = acknowledged;
    await until('20 writes acknowledged after the build', () => acknowledged >= stormed + 20);
    await until('a read answered through the built index', () => answered > 0);
    storm = false;
    await Promise.all([...writers, readers]);
    expect(refused).toBeGreaterThan(0);
    expect(answered).toBeGreaterThan(0);

    await d.drained(live);
    const report = await verifyDerived({ store: testStore(), model });
    expect(formatVerifyReport(report)).toMatch(/^verify: ok/m);
    // Every acknowledged write: each member found by its e-mail, and none by an e-mail it no longer has.
    for (const [key, email] of emails) {
      if (!email) continue;
      const r = await live.query(`{ memberByEmail(email: "${email}") { teamId id } }`);
      expect([key, r.data.memberByEmail && `${r.data.memberByEmail.teamId}/${r.data.memberByEmail.id}`]).toEqual([key, key]);
    }
    console.log(
      `unique index (seed ${seed}): ${acknowledged} writes acknowledged, ${refused} reads refused, ${answered} answered; ${JSON.stringify(done.get('index:Member.byEmail'))}`,
    );
  } finally {
    storm = false;
    await d.stopProcesses();
    await server.close();
    d.remove();
  }
}, 240_000);

test('a new summary and a new copy, each build killed twice mid-build while members and team titles change: refused until ready, then exact; verify clean', async () => {
  const d = new Deployment();
  const seed = testSeed();
  const rng = seededRng(seed);
  let server = await d.start(TEAMS_V1);
  let older: typeof server | undefined;
  let storm = true;
  try {
    const teams = Array.from({ length: 48 }, (_, i) => `t${String(i).padStart(2, '0')}`);
    for (const teamId of teams) await ok(server, 'createTeam', { teamId, title: `Team ${teamId}` });
    const members = new Map<string, boolean>();
    await Promise.all(
      Array.from({ length: 96 }, async (_, i) => {
        await ok(server, 'createMember', { teamId: teams[i % teams.length], id: i, name: `N${i}` });
        members.set(`${teams[i % teams.length]}/${i}`, true);
      }),
    );
    await server.close();

    // Small pages, no budget: 16 pages of 3 holders, each step taken at once; the kills land at named steps.
    const pages = { TABLEGRAPH_BUILD_PAGE_SIZE: '3', TABLEGRAPH_BUILD_ENTITIES_PER_SECOND: '0' };
    // Two deployments, one build each, so that a fresh worker has only the one to take: the copy, then the summary.
    server = await d.start(TEAMS_COPY, { TABLEGRAPH_WORKER: 'off' });
    let live = server;
    let reads = '{ member(teamId: "$t", id: 1) { teamTitle } }';
    let acknowledged = 0;
    const busy = new Set<string>();
    const writer = async (w: number) => {
      for (let n = 0; storm; n++) {
        // A title now and then: a team's write rewrites its members' copies in its EGT, leaving the build less to do.
        if (rng.int(40) === 0) {
          const teamId = teams[rng.int(teams.length)];
          if (busy.has(teamId)) continue;
          busy.add(teamId);
          await ok(live, 'updateTeam', { teamId, title: `Team ${teamId} ${w}.${n}` }).finally(() => busy.delete(teamId));
          acknowledged++;
          continue;
        }
        const key = `${teams[rng.int(teams.length)]}/${rng.int(130)}`;
        if (busy.has(key)) {
          await pause(5, 'pace'); // another writer has this key: pick again
          continue;
        }
        busy.add(key);
        const [teamId, id] = key.split('/');
        const run = members.get(key)
          ? ok(live, 'deleteMember', { teamId, id: Number(id) })
          : ok(live, 'createMember', { teamId, id: Number(id), name: `M${n}` });
        await run.finally(() => busy.delete(key));
        members.set(key, !members.get(key));
        acknowledged++;
      }
    };
    const writers = [writer(0), writer(1)];
    const seen = { refused: new Set<string>(), answered: 0 };
    const readers = (async () => {
      while (storm) {
        const teamId = teams[rng.int(teams.length)];
        const r = await live.query(reads.replaceAll('$t', teamId));
        for (const e of r.errors ?? []) {
          expect(e.extensions.code).toBe('ACCESS_PATH_BUILDING');
          seen.refused.add(String(e.extensions.accessPath));
        }
        if (!r.errors) seen.answered++;
        await pause(100, 'pace');
      }
    })();

    // The copy's build, its worker killed twice.
    const worker = (env: Record<string, string>) => d.command('worker', [], { ...pages, ...env });
    const copyWorker = await killedTwice(d, 'copy:Member.teamTitle', { first: worker, next: worker });
    // Waited for while it reads on: the storm keeps adding members to copy to, and a busy machine slows it.
    await d.waitWhileBuilding((p) => p.get('copy:Member.teamTitle')!.state === 'ready');
    copyWorker.child.kill('SIGTERM');
    await copyWorker.exited;
    // Then the summary's: a server of version 3 takes the storm over, the one of version 2 stops (until then the build
    // waits for it, which does not keep the summary), and its worker is killed twice.
    d.write(TEAMS_V2);
    // Started now: it takes the summary's build once this version is recorded (below), and holds it at its step.
    const summaryWorkers = killedTwice(d, 'summary:Team.memberCount', { first: worker, next: worker });
    await d.waitFor((p) => p.get('summary:Team.memberCount')?.state === 'building');
    older = live;
    server = live = await d.start(TEAMS_V2, { TABLEGRAPH_WORKER: 'off' });
    reads = '{ team(teamId: "$t") { memberCount } member(teamId: "$t", id: 1) { teamTitle } }';
    await summaryWorkers;
    await older.close();
    older = undefined;
    const built = await d.waitWhileBuilding((p) => p.get('summary:Team.memberCount')!.state === 'ready');
    expect(built.get('copy:Member.teamTitle')!.takeovers).toBe(2);
    expect(built.get('copy:Member.teamTitle')!.written).toBeGreaterThan(0);
    expect(built.get('summary:Team.memberCount')!.written).toBeGreaterThan(0);
    expect(built.get('summary:Team.memberCount')!.takeovers).toBe(2);
    await live.refreshPathStates(); // the server reads the summary's state (ready) now, not at its next refresh
    const stormed = acknowledged;
    await until('20 writes acknowledged after the build', () => acknowledged >= stormed + 20);
    await until('a read answered through the built paths', () => seen.answered > 0);
    storm = false;
    await Promise.all([...writers, readers]);
    expect([...seen.refused].sort()).toEqual(['copy:Member.teamTitle', 'summary:Team.memberCount']);
    expect(seen.answered).toBeGreaterThan(0);

    await d.drained(live);
    const report = await verifyDerived({ store: testStore(), model: d.model(TEAMS_V2) });
    expect(formatVerifyReport(report)).toMatch(/^verify: ok/m);
    for (const teamId of teams) {
      const r = await live.query(`{ team(teamId: "${teamId}") { title memberCount members(first: 100) { edges { node { id teamTitle } } } } }`);
      expect(r.errors).toBeUndefined();
      const stored = [...members].filter(([k, v]) => v && k.startsWith(`${teamId}/`)).map(([k]) => Number(k.split('/')[1]));
      expect(r.data.team.memberCount).toBe(stored.length);
      expect(r.data.team.members.edges.map((e: { node: { id: number } }) => e.node.id).sort((a: number, b: number) => a - b)).toEqual(
        stored.sort((a, b) => a - b),
      );
      expect(r.data.team.members.edges.every((e: { node: { teamTitle: string } }) => e.node.teamTitle === r.data.team.title)).toBe(true);
    }
    console.log(
      `summary and copy (seed ${seed}): ${acknowledged} writes acknowledged; ${JSON.stringify([...built.values()].map((p) => [p.id, p.read, p.written, p.takeovers]))}`,
    );
  } finally {
    storm = false;
    await d.stopProcesses();
    await server.close();
    await older?.close().catch(() => undefined);
    d.remove();
  }
}, 600_000);
