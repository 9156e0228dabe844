/**
 * A schema changed under live data (docs/schema-changes.md), on a schema written for the test: the deployed schema
 * is recorded in the catalogue; a restart with new indexes builds them online while writers run, reads through them
 * answer ACCESS_PATH_BUILDING until they are ready (never a partial list), and `verify` is clean after; a unique
 * value held twice stops its build with both keys and overwrites nothing; changes the stored data cannot take are
 * refused at start-up with their location and what makes them possible.
 */
import fs from 'node:fs';
import path from 'node:path';
import { formatVerifyReport, verifyDerived } from '../src/maintenance/verify-derived';
import { connectionString, testStore } from './support/harness';
import { runCommand } from './support/processes';
import { seededRng } from './support/fanout-fixtures';
import { CITIES, Deployment, MEMBER, MUTATIONS, mutate, ok, TEAMS_V1, TEAMS_V2, V1, V2 } from './support/schema-evolution';
import { testSeed } from './support/seed';
import { pause, until } from './support/wait';

/** `npm run migrate -- …` as a process on the test Azurite, the deployment's schema folder and table prefix. */
async function migrate(d: Deployment, args: string[]): Promise<{ code: number | null; output: string }> {
  const run = runCommand('migrate', args, d.dir, {
    AZURE_STORAGE_CONNECTION_STRING: connectionString(),
    TABLEGRAPH_SCHEMA_DIR: d.dir,
    TABLEGRAPH_TABLE_PREFIX: d.prefix,
    TABLEGRAPH_BUILD_POLL_MS: '300',
  });
  const { code } = await run.exited;
  return { code, output: run.output() };
}

test('new indexes built online under a write storm: refused while building, complete once ready, verify clean', async () => {
  const d = new Deployment();
  const rng = seededRng(testSeed());
  let server = await d.start(V1);
  try {
    // Version 1 records itself with data written by it.
    const members = new Map<string, { teamId: string; id: number; name: string; city: string; email: string } | null>();
    await Promise.all(
      Array.from({ length: 240 }, async (_, i) => {
        const m = { teamId: `t${i % 3}`, id: i, name: `N${i % 7}`, city: CITIES[i % 4], email: `m${i}@x.test` };
        await ok(server, 'createMember', m);
        members.set(`${m.teamId}/${m.id}`, m);
      }),
    );
    expect((await d.catalogue().deployment())?.version).toBe(1);
    await server.close();

    // Before deploying it, plan says what version 2 does and costs: 240 index entities each, read twice.
    d.write(V2);
    const planned = await migrate(d, ['plan']);
    expect(planned.code).toBe(0);
    expect(planned.output).toMatch(/version 1 → 2: 2 change\(s\)/); // the new queries store nothing: no change
    expect(planned.output).toMatch(
      /build {6}index:Member\.byCity: new index Member\.byCity: built online from the stored entities\n {13}reads 480 entities, writes 240; [5-8] transactions, 1,680 RU; 1 s at the budget/,
    );
    expect(planned.output).toMatch(
      /build {6}index:Member\.byName: new index Member\.byName: built online from the stored entities\n {13}reads 480 entities, writes 240; 7 transactions, 1,680 RU; 1 s at the budget/,
    );

    // Version 2: two indexes over the 240 stored members, built slowly (60 entities/s) while writers run.
    server = await d.start(V2, { TABLEGRAPH_BUILD_ENTITIES_PER_SECOND: '60', TABLEGRAPH_BUILD_PAGE_SIZE: '20' });
    const deployed = await d.catalogue().deployment();
    expect(deployed?.version).toBe(2);
    const early = await server.query('{ membersInCity(city: "Oslo") { edges { node { id } } } }');
    expect(early.data).toBeNull();
    expect(early.errors?.[0].extensions).toMatchObject({
      code: 'ACCESS_PATH_BUILDING',
      reason: 'PathBuilding',
      accessPath: 'index:Member.byCity',
      state: 'building',
    });
    const health = (await (await fetch(server.url.replace('/graphql', '/health'))).json()) as { paths: Array<{ path: string; state: string }> };
    expect(health.paths).toEqual(expect.arrayContaining([expect.objectContaining({ path: 'index:Member.byName', state: 'building' })]));

    // The write storm: updates moving members between cities and names, deletes and re-creates of one key, creates.
    let storm = true;
    let refusedReads = 0;
    let partialReads = 0;
    let completeReads = 0;
    const busy = new Set<string>(); // one writer per key at a time: the test knows what each key holds
    const turn = async (w: number, n: number, key: string) => {
      {
        const m = members.get(key);
        const roll = rng.int(10);
        if (!m) {
          const [teamId, id] = key.split('/');
          const fresh = { teamId, id: Number(id), name: `N${rng.int(7)}`, city: CITIES[rng.int(4)], email: `r${w}${n}@x.test` };
          await ok(server, 'createMember', fresh);
          members.set(key, fresh);
        } else if (roll < 2) {
          members.set(key, null); // deleted, to be created again by a later turn
          await ok(server, 'deleteMember', { teamId: m.teamId, id: m.id });
        } else if (roll < 3) {
          const id = 1000 + w * 1000 + n;
          const fresh = { teamId: `t${id % 3}`, id, name: `N${rng.int(7)}`, city: CITIES[rng.int(4)], email: `c${id}@x.test` };
          await ok(server, 'createMember', fresh);
          members.set(`${fresh.teamId}/${fresh.id}`, fresh);
        } else {
          const next = { ...m, name: `N${rng.int(7)}`, city: CITIES[rng.int(4)] };
          members.set(key, next);
          await ok(server, 'updateMember', { teamId: m.teamId, id: m.id, name: next.name, city: next.city });
        }
      }
    };
    const writers = Array.from({ length: 4 }, async (_, w) => {
      for (let n = 0; storm; n++) {
        const keys = [...members.keys()].filter((k) => !busy.has(k));
        const key = keys[rng.int(keys.length)];
        busy.add(key);
        await turn(w, n, key).finally(() => busy.delete(key));
      }
    });
    // Readers meanwhile: every answer through a new index is either refused or complete for the entities written
    // before the build (no partial list is ever served).
    const readers = (async () => {
      while (storm) {
        // Members no writer touched while the read ran: the answer must hold each that matches, and no other.
        const stable = () => new Map([...members].filter(([k]) => !busy.has(k)).map(([k, m]) => [k, JSON.stringify(m)]));
        const before = stable();
        const r = await server.query('{ membersNamed(teamId: "t0", name: "N0", first: 100) { edges { node { teamId id } } } }');
        const after = stable();
        if (r.errors) {
          expect(r.errors[0].extensions.code).toBe('ACCESS_PATH_BUILDING');
          refusedReads++;
        } else {
          const got = new Set(r.data.membersNamed.edges.map((e: { node: { teamId: string; id: number } }) => `${e.node.teamId}/${e.node.id}`));
          for (const [k, json] of before) {
            if (after.get(k) !== json) continue;
            const m = members.get(k);
            if ((m?.teamId === 't0' && m.name === 'N0') !== got.has(k)) partialReads++;
          }
          completeReads++;
        }
        await pause(50, 'pace');
      }
    })();
    const paths = await d.waitFor((p) => p.get('index:Member.byCity')?.state === 'ready' && p.get('index:Member.byName')?.state === 'ready');
    await server.refreshPathStates(); // the server reads the paths' states (ready) now, not at its next refresh
    await until('a complete read through the built index', () => completeReads > 0);
    storm = false;
    await Promise.all([...writers, readers]);
    expect(refusedReads).toBeGreaterThan(0);
    expect(partialReads).toBe(0);
    expect(completeReads).toBeGreaterThan(0);
    expect(paths.get('index:Member.byCity')!.read).toBeGreaterThan(150); // the 240 stored, less those deleted before the build read them
    expect(paths.get('index:Member.byCity')!.written).toBeGreaterThan(0);

    await d.drained(server);
    const model = d.model(V2);
    const report = await verifyDerived({ store: testStore(), model });
    expect(formatVerifyReport(report)).toMatch(/^verify: ok/m);

    // Complete answers through both indexes, equal to the members stored.
    for (const city of CITIES) {
      const r = await server.query(`{ membersInCity(city: "${city}", first: 100) { edges { node { teamId id name } } } }`);
      expect(r.errors).toBeUndefined();
      const got = r.data.membersInCity.edges.map((e: { node: { teamId: string; id: number } }) => `${e.node.teamId}/${e.node.id}`).sort();
      const want = [...members.entries()]
        .filter(([, m]) => m?.city === city)
        .map(([k]) => k)
        .sort();
      expect(got).toEqual(want);
    }
  } finally {
    await server.close();
    d.remove();
  }
}, 180_000);

const V2_UNIQUE = `${MEMBER(`
  @index(name: "byEmail", table: "MembersByEmail", partitionKey: "e_{email:hash16}", rowKey: "{email}", unique: true)`)}
type Query {
  member(teamId: ID!, id: Int!): Member @point
  memberByEmail(email: String!): Member @point(index: "byEmail")
}${MUTATIONS}`;

test('a unique index over a value two members hold, writers running: the build stops with both keys, overwrites nothing, and is retried once one changed', async () => {
  const d = new Deployment();
  let server = await d.start(V1);
  try {
    await Promise.all(Array.from({ length: 30 }, (_, i) => ok(server, 'createMember', { teamId: `t${i % 3}`, id: i, name: 'N', email: `m${i}@x.test` })));
    await ok(server, 'createMember', { teamId: 't1', id: 100, name: 'Twin', email: 'twin@x.test' });
    await ok(server, 'createMember', { teamId: 't2', id: 200, name: 'Twin', email: 'twin@x.test' });
    await server.close();

    server = await d.start(V2_UNIQUE);
    // Writers throughout, each member's e-mail its own: creates, e-mails changed, deletes and re-creates of a key.
    let storm = true;
    const live = server;
    const writers = [0, 1, 2].map(async (w) => {
      for (let n = 0; storm; n++) {
        const id = 1000 + w * 100 + (n % 20);
        const r = await mutate(live, 'createMember', { teamId: 't0', id, name: 'W', email: `w${id}-${n}@x.test` });
        if (r.errors) expect(r.errors[0].extensions.code).toBe('CONFLICT'); // the key is there: change its e-mail instead
        await ok(live, 'updateMember', { teamId: 't0', id, email: `w${id}-${n}b@x.test` });
        if (n % 3 === 0) await ok(live, 'deleteMember', { teamId: 't0', id });
      }
    });
    const paths = await d.waitFor((p) => p.get('index:Member.byEmail')?.state === 'failed');
    const problem = paths.get('index:Member.byEmail')!.problem!;
    expect(problem.reason).toBe('UniqueValueHeldTwice');
    const held = problem.details as Array<{ primaries: Array<{ partitionKey: string; rowKey: string }> }>;
    expect(held).toHaveLength(1);
    expect(held[0].primaries.map((p) => `${p.partitionKey}/${p.rowKey}`).sort()).toEqual(['t1/m_000100', 't2/m_000200']);
    // The value's index entity is one member's, as first written: the other never overwrote it.
    const model = d.model(V2_UNIQUE);
    const byEmail = model.entities.get('Member')!.indexes.get('byEmail')!;
    const twins = [];
    for await (const page of testStore().scan(byEmail.layout.table)) twins.push(...page.filter((e) => e.rowKey === 'twin@x.test'));
    expect(twins).toHaveLength(1);
    // Reads through it are refused, with the reason.
    await server.refreshPathStates();
    const read = await server.query('{ memberByEmail(email: "m1@x.test") { id } }');
    expect(read.errors?.[0].extensions).toMatchObject({ code: 'ACCESS_PATH_BUILDING', reason: 'PathBuildFailed', state: 'failed' });

    // One twin changes its e-mail; the build is retried from its checkpoint, and ends with a repair pass.
    await ok(server, 'updateMember', { teamId: 't2', id: 200, email: 'twin2@x.test' });
    await d.drained(server);
    const retried = await migrate(d, ['apply', '--retry', 'index:Member.byEmail']);
    expect(retried.output).toMatch(/ready\s+index:Member\.byEmail/);
    expect(retried.code).toBe(0);
    await server.refreshPathStates();
    storm = false;
    await Promise.all(writers);
    await d.drained(server);
    const found = await server.query(
      '{ a: memberByEmail(email: "twin@x.test") { id } b: memberByEmail(email: "twin2@x.test") { id } c: memberByEmail(email: "m7@x.test") { id } }',
    );
    expect(found.errors).toBeUndefined();
    expect(found.data).toEqual({ a: { id: 100 }, b: { id: 200 }, c: { id: 7 } });
    const report = await verifyDerived({ store: testStore(), model });
    expect(formatVerifyReport(report)).toMatch(/^verify: ok/m);
  } finally {
    await server.close();
    d.remove();
  }
}, 120_000);

test('changes the stored data cannot take are refused at start-up, with their location and remedy; plan names them; a drop lets a removal through', async () => {
  const d = new Deployment();
  let server = await d.start(V1);
  try {
    await ok(server, 'createMember', { teamId: 't0', id: 1, name: 'A', email: 'a@x.test', city: 'Oslo' });
    await server.close();

    // The RowKey template changed: a re-key, which a server never starts by itself (npm run migrate -- apply does).
    const rekeyed = V1.replaceAll('"m_', '"member_');
    await expect(d.start(rekeyed)).rejects.toMatchObject({ code: 'SCHEMA_INVALID', details: { reason: 'ChangeRefused' } });
    const message = await d.start(rekeyed).catch((e: Error) => e.message);
    expect(message).toMatch(/Member \([^)]*schema\.graphql:2:\d+\): Member's rowKey from "m_\{id:06\}" to "member_\{id:06\}" changed/);
    expect(message).toMatch(/npm run migrate -- apply re-keys Member while the servers of the recorded version serve it/);

    // A non-null field added, and a stored field removed: both refused while members are stored.
    const nonNull = V1.replace('  city: String\n', '  city: String\n  age: Int!\n');
    await expect(d.start(nonNull)).rejects.toThrow(/Member\.age \([^)]*schema\.graphql:\d+:\d+\): new non-null field Member\.age/);
    const noCity = V1.replace('  city: String\n', '');
    await expect(d.start(noCity)).rejects.toThrow(/stored field Member\.city removed .*migrate -- apply --drop Member\.city/s);
    // Not only how to delete: how to serve the schema beside the stored data, leaving it untouched.
    await expect(d.start(noCity)).rejects.toThrow(/serve it beside that data instead, leaving it untouched: .*TABLEGRAPH_TABLE_PREFIX/s);

    // plan names each change with its class; a refused one fails the command.
    fs.writeFileSync(path.join(d.dir, 'schema.graphql'), noCity.replace('  etag: String', '  etag: String\n  nickname: String'));
    const planned = await migrate(d, ['plan']);
    expect(planned.output).toMatch(/version 1 → 2: 2 change\(s\)/);
    expect(planned.output).toMatch(/refused\s+Member\.city: stored field Member\.city removed/);
    expect(planned.output).toMatch(/compatible Member\.nickname: new nullable field/);
    expect(planned.code).toBe(1);

    // The operator says the field may go: the same schema is then deployed, and the stored member still reads.
    const dropped = await migrate(d, ['apply', '--drop', 'Member.city']);
    expect(dropped.output).toMatch(/version 2: deployed/);
    expect(dropped.code).toBe(0);
    server = await d.start(noCity.replace('  etag: String', '  etag: String\n  nickname: String'));
    const read = await server.query('{ member(teamId: "t0", id: 1) { name nickname } }');
    expect(read).toMatchObject({ data: { member: { name: 'A', nickname: null } } });
    expect((await d.catalogue().deployment())?.version).toBe(2);
  } finally {
    await server.close();
    d.remove();
  }
}, 120_000);

test('a new summary and a new copy built online while members and team titles change: refused until ready, then exact; verify clean', async () => {
  const d = new Deployment();
  const rng = seededRng(testSeed());
  let server = await d.start(TEAMS_V1);
  try {
    const teams = ['t0', 't1', 't2', 't3'];
    for (const teamId of teams) await ok(server, 'createTeam', { teamId, title: `Team ${teamId}` });
    const members = new Map<string, boolean>();
    await Promise.all(
      Array.from({ length: 120 }, async (_, i) => {
        await ok(server, 'createMember', { teamId: teams[i % 4], id: i, name: `N${i}` });
        members.set(`${teams[i % 4]}/${i}`, true);
      }),
    );
    await server.close();

    // plan counts each build's work from what is stored: 4 teams and 120 members.
    d.write(TEAMS_V2);
    const planned = (await migrate(d, ['plan'])).output;
    expect(planned).toMatch(
      /build {6}summary:Team\.memberCount: new summary Team\.memberCount: built online from the stored entities\n {13}reads 124 entities, writes 4;/,
    );
    expect(planned).toMatch(
      /build {6}copy:Member\.teamTitle: new copy Member\.teamTitle: built online from the stored entities\n {13}reads 240 entities, writes 120;/,
    );
    expect(planned).toMatch(/compatible Team\.memberCount: new summary field Team\.memberCount/);

    server = await d.start(TEAMS_V2, { TABLEGRAPH_BUILD_ENTITIES_PER_SECOND: '20', TABLEGRAPH_BUILD_PAGE_SIZE: '2' });
    const early = await server.query('{ team(teamId: "t0") { title memberCount } member(teamId: "t0", id: 0) { name teamTitle } }');
    const codes = (early.errors ?? [])
      .map((e: { extensions: { accessPath: string; code: string } }) => `${e.extensions.code} ${e.extensions.accessPath}`)
      .sort();
    expect(codes).toEqual(['ACCESS_PATH_BUILDING copy:Member.teamTitle', 'ACCESS_PATH_BUILDING summary:Team.memberCount']);

    // Writers meanwhile: members created and deleted, team titles changed (their copies follow).
    let storm = true;
    const busy = new Set<string>();
    const writer = async (w: number) => {
      for (let n = 0; storm; n++) {
        if (rng.int(5) === 0) {
          const teamId = teams[rng.int(4)];
          if (busy.has(teamId)) continue;
          busy.add(teamId);
          await ok(server, 'updateTeam', { teamId, title: `Team ${teamId} ${w}.${n}` }).finally(() => busy.delete(teamId));
          continue;
        }
        const key = `${teams[rng.int(4)]}/${rng.int(160)}`;
        if (busy.has(key)) continue;
        busy.add(key);
        const [teamId, id] = key.split('/');
        const run = members.get(key)
          ? ok(server, 'deleteMember', { teamId, id: Number(id) })
          : ok(server, 'createMember', { teamId, id: Number(id), name: `M${n}` });
        await run.finally(() => busy.delete(key));
        members.set(key, !members.get(key));
      }
    };
    const writers = [writer(0), writer(1), writer(2)];
    const built = await d.waitFor((p) => p.get('summary:Team.memberCount')?.state === 'ready' && p.get('copy:Member.teamTitle')?.state === 'ready', 90_000);
    // 4 holders, 2 per step (a page whose holder kept changing is done again, and counted again).
    expect(built.get('summary:Team.memberCount')!.written).toBeGreaterThanOrEqual(4);
    await server.refreshPathStates();
    storm = false;
    await Promise.all(writers);
    await d.drained(server);

    const report = await verifyDerived({ store: testStore(), model: d.model(TEAMS_V2) });
    expect(formatVerifyReport(report)).toMatch(/^verify: ok/m);
    for (const teamId of teams) {
      const r = await server.query(`{ team(teamId: "${teamId}") { title memberCount members(first: 100) { edges { node { id teamTitle } } } } }`);
      expect(r.errors).toBeUndefined();
      const stored = [...members].filter(([k, v]) => v && k.startsWith(`${teamId}/`)).length;
      expect(r.data.team.memberCount).toBe(stored);
      expect(r.data.team.members.edges.every((e: { node: { teamTitle: string } }) => e.node.teamTitle === r.data.team.title)).toBe(true);
    }
  } finally {
    await server.close();
    d.remove();
  }
}, 180_000);

test('a summary and a copy whose first pass an older-version server wrote after: not ready while it runs, passed again once it stops, then exact; verify clean', async () => {
  const d = new Deployment();
  const older = await d.start(TEAMS_V1, { TABLEGRAPH_WORKER: 'off' });
  let server: Awaited<ReturnType<typeof d.start>> | undefined;
  try {
    const teams = ['t0', 't1', 't2', 't3'];
    for (const teamId of teams) await ok(older, 'createTeam', { teamId, title: `Team ${teamId}` });
    for (let i = 0; i < 24; i++) await ok(older, 'createMember', { teamId: teams[i % 4], id: i, name: `N${i}` });

    // A server of the new version builds both paths while the older one still runs: each scan ends, then waits.
    server = await d.start(TEAMS_V2, { TABLEGRAPH_BUILD_PAGE_SIZE: '2' });
    const scanned = await d.waitFor(
      (p) => ['summary:Team.memberCount', 'copy:Member.teamTitle'].every((id) => p.get(id)?.scanned && p.get(id)?.state === 'building'),
      60_000,
    );
    expect(scanned.get('summary:Team.memberCount')).toMatchObject({ needsRepair: true, takeovers: 0 });

    // After every page was recounted and compared, the older server — which keeps neither path — adds to t0, takes
    // from t1, and renames t2.
    for (const id of [100, 101, 102]) await ok(older, 'createMember', { teamId: 't0', id, name: 'Late' });
    await ok(older, 'deleteMember', { teamId: 't1', id: 1 });
    await ok(older, 'updateTeam', { teamId: 't2', title: 'Renamed by the older server' });
    await server.refreshPathStates(); // what the server reads of the states now: still building, waiting for the older one
    const waiting = await server.query('{ team(teamId: "t0") { memberCount } }');
    expect(waiting.errors?.[0]?.extensions).toMatchObject({ code: 'ACCESS_PATH_BUILDING', accessPath: 'summary:Team.memberCount' });

    await older.close();
    const built = await d.waitFor((p) => p.get('summary:Team.memberCount')!.state === 'ready' && p.get('copy:Member.teamTitle')!.state === 'ready', 60_000);
    await d.drained(server);

    const report = await verifyDerived({ store: testStore(), model: d.model(TEAMS_V2) });
    expect(formatVerifyReport(report)).toMatch(/^verify: ok/m);
    await server.refreshPathStates(); // the server reads the states now, not at its next refresh
    const r = await server.query(
      '{ t0: team(teamId: "t0") { memberCount } t1: team(teamId: "t1") { memberCount } t2: team(teamId: "t2") { title members(first: 10) { edges { node { teamTitle } } } } }',
    );
    expect(r.errors).toBeUndefined();
    expect(r.data.t0.memberCount).toBe(9);
    expect(r.data.t1.memberCount).toBe(5);
    expect(r.data.t2.members.edges.map((e: { node: { teamTitle: string } }) => e.node.teamTitle)).toEqual(Array(6).fill('Renamed by the older server'));
    // The second pass read every holder (4) and every member (26) again.
    expect(built.get('summary:Team.memberCount')!.read).toBe(8);
    expect(built.get('copy:Member.teamTitle')!.read).toBe(24 + 26);
  } finally {
    await older.close().catch(() => undefined);
    await server?.close();
    d.remove();
  }
}, 120_000);

test('two servers of a new version starting at once agree on one deployment and one build', async () => {
  const d = new Deployment();
  const first = await d.start(V1);
  await Promise.all(Array.from({ length: 20 }, (_, i) => ok(first, 'createMember', { teamId: 't0', id: i, name: 'N', city: CITIES[i % 4] })));
  await first.close();
  const servers = await Promise.all([d.start(V2), d.start(V2)]);
  try {
    expect((await d.catalogue().deployment())?.version).toBe(2);
    expect(await d.catalogue().versionHash(3)).toBeNull();
    const paths = await d.waitFor((p) => p.get('index:Member.byCity')?.state === 'ready' && p.get('index:Member.byName')?.state === 'ready');
    expect(paths.get('index:Member.byCity')).toMatchObject({ version: 2, takeovers: 0, read: 20 });
    for (const s of servers) await s.refreshPathStates();
    for (const s of servers) {
      const r = await s.query('{ membersInCity(city: "Oslo", first: 10) { edges { node { id } } } }');
      expect(r.data.membersInCity.edges.map((e: { node: { id: number } }) => e.node.id).sort((a: number, b: number) => a - b)).toEqual([0, 4, 8, 12, 16]);
    }
  } finally {
    await Promise.all(servers.map((s) => s.close()));
    d.remove();
  }
}, 60_000);
