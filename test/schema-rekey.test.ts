/**
 * A type re-keyed on live data (docs/schema-changes.md, "Re-keying a type"), on a schema written for the test: its
 * RowKey template changed, then (another test) its table. `npm run migrate -- apply` records the new version and
 * copies the members to their new addresses while a server of the old version serves them and a write storm runs
 * through it; the copy's process is killed twice (SIGKILL) and a worker of the new version takes over from the
 * checkpoint each time; a server of the new version refuses members until the switch and never answers from a
 * partial copy; once the old server stops, the re-key catches up, deletes the old entities and switches, the
 * members' indexes are rebuilt, and the storm goes on through the new server. Every acknowledged write is then
 * where the new keys say, nothing is left at the old addresses, and `verify` is clean.
 */
import { CHANGE_ENTITY_TYPE } from '../src/model/change-log';
import { formatVerifyReport, verifyDerived } from '../src/maintenance/verify-derived';
import { connectionString, testStore, type TestServer } from './support/harness';
import { killCommandProcesses, runCommand, type CommandProcess } from './support/processes';
import { seededRng } from './support/fanout-fixtures';
import { CITIES, Deployment, HELD, holdBuild, leaseLapsed, MEMBER, mutate, ok, QUEUE_ENV, V2 } from './support/schema-evolution';
import { testSeed } from './support/seed';
import { pause, until } from './support/wait';

afterAll(() => killCommandProcesses());

type Member = { teamId: string; id: number; name: string; city: string };

// Small pages, no budget: some 20 steps of copy, each taken at once; the kills land at named steps (the test hook).
const BUILD_ENV = {
  TABLEGRAPH_BUILD_PAGE_SIZE: '10',
  TABLEGRAPH_BUILD_ENTITIES_PER_SECOND: '0',
  TABLEGRAPH_BUILD_LEASE_MS: '2000',
  TABLEGRAPH_BUILD_POLL_MS: '300',
  TABLEGRAPH_STORAGE_TIMEOUT_MS: '30000',
  ...QUEUE_ENV,
};

async function rekeyUnderStorm(name: string, before: string, after: string, check: { oldRowKey: RegExp; table: (prefix: string) => string }) {
  const d = new Deployment();
  const seed = testSeed();
  const rng = seededRng(seed);
  const old = await d.start(before);
  let current: TestServer | undefined;
  let storm = true;
  const processes: CommandProcess[] = [];
  const command = (cmd: string, args: string[] = [], env: Record<string, string> = {}) => {
    const p = runCommand(cmd, args, d.dir, {
      AZURE_STORAGE_CONNECTION_STRING: connectionString(),
      TABLEGRAPH_SCHEMA_DIR: d.dir,
      TABLEGRAPH_TABLE_PREFIX: d.prefix,
      ...BUILD_ENV,
      ...env,
    });
    processes.push(p);
    return p;
  };
  try {
    const members = new Map<string, Member | null>();
    for (let batch = 0; batch < 4; batch++) {
      await Promise.all(
        Array.from({ length: 50 }, async (_, j) => {
          const i = batch * 50 + j;
          const m = { teamId: `t${i % 4}`, id: i, name: `N${i % 7}`, city: CITIES[i % 4] };
          await ok(old, 'createMember', m);
          members.set(`${m.teamId}/${m.id}`, m);
        }),
      );
    }

    // The write storm: one writer per key at a time, through the old server while it runs, then the new one.
    let oldOpen = true;
    const counts = { acknowledged: 0, refused: 0, oldReads: 0, refusedReads: 0, newReads: 0, unansweredReads: 0 };
    const busy = new Set<string>();
    const serverNow = () => (oldOpen ? old : current);
    let onOld = 0; // writes in flight through the old server
    const turn = async (server: TestServer, key: string) => {
      const m = members.get(key);
      const [teamId, id] = key.split('/');
      const next: Member | null = !m
        ? { teamId, id: Number(id), name: `N${rng.int(7)}`, city: CITIES[rng.int(4)] }
        : rng.int(8) === 0
          ? null
          : { ...m, name: `N${rng.int(7)}`, city: CITIES[rng.int(4)] };
      if (server === old) onOld++;
      const r = await (
        !m
          ? mutate(server, 'createMember', next!)
          : !next
            ? mutate(server, 'deleteMember', { teamId, id: Number(id) })
            : mutate(server, 'updateMember', { teamId, id: Number(id), name: next.name, city: next.city })
      ).finally(() => server === old && onOld--);
      if (r.errors) {
        // Refused while no server of this version serves members: nothing of it is stored.
        expect(r.errors[0].extensions).toMatchObject({ code: 'ACCESS_PATH_BUILDING' });
        counts.refused++;
        return;
      }
      members.set(key, next);
      counts.acknowledged++;
    };
    const writer = async () => {
      while (storm) {
        const server = serverNow();
        if (!server) {
          await pause(50, 'pace'); // no server takes writes just now
          continue;
        }
        const keys = [...members.keys()].filter((k) => !busy.has(k));
        const key = keys[rng.int(keys.length)];
        busy.add(key);
        await turn(server, key).finally(() => busy.delete(key));
      }
    };
    const writers = [writer(), writer(), writer()];

    // Reads meanwhile: the old server answers each team's members whole; the new one refuses them until the switch.
    const listed = async (server: TestServer, teamId: string) => {
      const r = await server.query(`{ members(teamId: "${teamId}", first: 100) { edges { node { teamId id name } } } }`);
      return r;
    };
    const readers = (async () => {
      while (storm) {
        const teamId = `t${rng.int(4)}`;
        const stable = () => new Map([...members].filter(([k]) => k.startsWith(`${teamId}/`) && !busy.has(k)).map(([k, m]) => [k, JSON.stringify(m)]));
        const server = serverNow();
        if (server) {
          const before = stable();
          const r = await listed(server, teamId);
          const afterRead = stable();
          if (r.errors?.[0].extensions?.code === 'STORAGE_UNAVAILABLE') {
            // Storage that did not answer in time (a CI machine running three storms): a coded refusal, no answer to
            // judge. Counted, and bounded below.
            counts.unansweredReads++;
          } else if (r.errors) {
            expect(r.errors[0].extensions).toMatchObject({ code: 'ACCESS_PATH_BUILDING', accessPath: 'rekey:Member' });
            counts.refusedReads++;
          } else {
            const got = new Set(r.data.members.edges.map((e: { node: { teamId: string; id: number } }) => `${e.node.teamId}/${e.node.id}`));
            for (const [k, json] of before) {
              if (afterRead.get(k) !== json) continue;
              expect([k, got.has(k)]).toEqual([k, members.get(k) !== null]);
            }
            if (server === old) counts.oldReads++;
            else counts.newReads++;
          }
        }
        if (current) {
          const r = await listed(current, teamId);
          const rekeyReady = (await d.paths()).get('rekey:Member')?.state === 'ready';
          if (r.errors) expect(r.errors[0].extensions).toMatchObject({ code: 'ACCESS_PATH_BUILDING', accessPath: 'rekey:Member' });
          else expect(rekeyReady).toBe(true); // never an answer from a copy under way
        }
        await pause(100, 'pace');
      }
    })();

    // The new version: apply records it and starts copying; killed twice, a worker of it takes over each time.
    d.write(after);
    const planned = command('migrate', ['plan']);
    await planned.exited;
    expect(planned.output()).toMatch(/rekey +rekey:Member: Member's .* changed: every stored Member is copied to its new address online/);
    expect(planned.output()).toMatch(/copy: reads (1[5-9]\d|2\d\d) entities, writes \1; \d+ transactions/);
    expect(planned.output()).toMatch(
      /switch, once no process of version 1 is left, Member served by no server meanwhile: reads \d+, deletes (1[5-9]\d|2\d\d);/,
    );
    // Each process is killed at a named point: held (the test hook) after its second step of the copy.
    const apply = command('migrate', ['apply'], holdBuild('rekey:Member', 2));
    const progressOf = async () => (await d.paths()).get('rekey:Member');
    await apply.waitFor(HELD, 120_000);
    const killedAt = (await progressOf())!.read;
    apply.child.kill('SIGKILL');
    await apply.exited;
    current = await d.start(after, { TABLEGRAPH_WORKER: 'off' });
    await leaseLapsed(d, 'rekey:Member');
    const second = command('worker', [], holdBuild('rekey:Member', 2));
    await second.waitFor(HELD, 120_000);
    expect((await progressOf())!).toMatchObject({ takeovers: 1, state: 'building' });
    expect((await progressOf())!.read).toBeGreaterThan(killedAt);
    const secondAt = (await progressOf())!.read;
    second.child.kill('SIGKILL');
    await second.exited;
    await leaseLapsed(d, 'rekey:Member');
    const third = command('worker');
    await third.waitFor('schema build resumed from its checkpoint');
    // Copied, the re-key waits for the old server: the storm and the reads go on through it.
    const copied = await d.waitFor((p) => p.get('rekey:Member')!.scanned, 90_000);
    expect(copied.get('rekey:Member')).toMatchObject({ state: 'building', takeovers: 2 });
    expect(copied.get('rekey:Member')!.read).toBeGreaterThan(secondAt);
    await third.waitFor('waiting for the servers of an older version to stop');
    expect((await progressOf())!.state).toBe('building');
    expect(counts.oldReads).toBeGreaterThan(0);

    // The old server stops: the re-key catches up, cleans up and switches; the members' paths are rebuilt.
    oldOpen = false;
    await until('the writes in hand on the old server answered', () => onOld === 0, { everyMs: 10 });
    await old.close();
    const done = await d.waitFor((p) => [...p.values()].every((r) => r.state === 'ready' || r.state === 'retired'), 90_000);
    expect(done.get('rekey:Member')!.takeovers).toBe(2);
    await third.waitFor('re-key: switched to the new addresses');
    await current.refreshPathStates(); // the new server reads the states now, not at its next refresh
    const stormed = counts.acknowledged;
    await until('30 writes acknowledged after the switch', () => counts.acknowledged >= stormed + 30);
    await until('a read answered at the new addresses', () => counts.newReads > 0);
    storm = false;
    await Promise.all([...writers, readers]);
    expect(counts.refusedReads).toBeGreaterThan(0);
    expect(counts.newReads).toBeGreaterThan(0);
    expect(counts.unansweredReads).toBeLessThanOrEqual(3);
    console.log(
      `${name} (seed ${seed}): ${JSON.stringify(counts)}; copy read at the kills ${killedAt}, ${secondAt}; rekey ${JSON.stringify(done.get('rekey:Member'))}`,
    );

    // Every acknowledged write where the new keys say, nothing at the old addresses, verify clean.
    await d.drained(current);
    const report = await verifyDerived({ store: testStore(), model: d.model(after) });
    expect(formatVerifyReport(report)).toMatch(/^verify: ok/m);
    for (const [key, m] of members) {
      const [teamId, id] = key.split('/');
      const r = await current.query(`{ member(teamId: "${teamId}", id: ${id}) { name city } }`);
      expect([key, r.data.member]).toEqual([key, m && { name: m.name, city: m.city }]);
    }
    for (const city of CITIES) {
      const r = await current.query(`{ membersInCity(city: "${city}", first: 100) { edges { node { teamId id } } } }`);
      const got = r.data.membersInCity.edges.map((e: { node: { teamId: string; id: number } }) => `${e.node.teamId}/${e.node.id}`).sort();
      expect(got).toEqual(
        [...members]
          .filter(([, m]) => m?.city === city)
          .map(([k]) => k)
          .sort(),
      );
    }
    const left: string[] = [];
    for await (const page of testStore().scan(check.table(d.prefix), { entityType: 'Member' }))
      left.push(...page.filter((e) => check.oldRowKey.test(e.rowKey)).map((e) => e.rowKey));
    expect(left).toEqual([]);
  } finally {
    storm = false;
    for (const p of processes) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGTERM');
    await Promise.all(processes.map((p) => p.exited));
    await current?.close();
    await old.close().catch(() => undefined);
    d.remove();
  }
}

test('a RowKey template changed: re-keyed online under a write storm, the copy killed twice; every acknowledged write at its new key; verify clean', async () => {
  await rekeyUnderStorm('rowKey', V2, V2.replaceAll('"m_', '"member_'), { oldRowKey: /^m_/, table: (prefix) => `${prefix}Members` });
}, 240_000);

test('a table changed: re-keyed online under a write storm, the copy killed twice; every acknowledged write in the new table; verify clean', async () => {
  await rekeyUnderStorm('table', V2, V2.replace('table: "Members"', 'table: "MembersMoved"'), { oldRowKey: /^m_/, table: (prefix) => `${prefix}Members` });
}, 240_000);

/** Members with a move, whose range over a team lists its whole partition (no RowKey prefix). */
const MOVABLE = `${MEMBER('')}
type Query {
  member(teamId: ID!, id: Int!): Member @point
  members(teamId: ID!, first: Int, after: String): MemberConnection! @range
}
type Mutation {
  createMember(input: CreateMemberInput!): MemberPayload! @write(entity: "Member", action: CREATE)
  moveMember(input: MoveMemberInput!): MemberPayload! @write(entity: "Member", action: MOVE)
}`;

test('while the copy is under way an old server lists a whole partition without the copies in it; a move requested on it and pending at the switch is carried out from the new address', async () => {
  const d = new Deployment();
  const old = await d.start(MOVABLE, { TABLEGRAPH_WORKER: 'off' }); // no worker of the old version: the move waits
  let current: TestServer | undefined;
  try {
    for (let i = 0; i < 6; i++) await ok(old, 'createMember', { teamId: 't0', id: i, name: `N${i}` });
    await ok(old, 'createMember', { teamId: 't1', id: 100, name: 'Other' });
    // Wider ids: the new RowKeys share the old ones' prefix, so a range of the old schema meets the copies.
    const after = MOVABLE.replace('rowKey: "m_{id:06}"', 'rowKey: "m_{id:08}"');
    d.write(after);
    const apply = d.command('migrate', ['apply']);
    await d.waitFor((p) => p.get('rekey:Member')?.scanned === true);
    // The old server's range over t0 meets the copies m_000000xx beside the members m_0000xx: it lists each member once.
    const listed = await old.query('{ members(teamId: "t0", first: 50) { edges { node { id } } } }');
    expect(listed.data.members.edges.map((e: { node: { id: number } }) => e.node.id)).toEqual([0, 1, 2, 3, 4, 5]);
    const rows: string[] = [];
    for await (const page of testStore().scan(`${d.prefix}Members`, { partitionKey: 't0' })) rows.push(...page.map((e) => e.rowKey));
    expect(rows.filter((k) => k.length === 'm_00000000'.length)).toHaveLength(6); // the copies are there
    // A move requested now is marked on the old entity; no worker carries it out before the switch.
    const moved = await mutate(old, 'moveMember', { teamId: 't0', id: 3, toTeamId: 't1' });
    expect(moved.errors).toBeUndefined();
    await old.close();
    const done = await d.waitFor((p) => p.get('rekey:Member')?.state === 'ready', 60_000);
    expect(Object.keys(done.get('rekey:Member')!.moves ?? {})).toHaveLength(1);
    await apply.exited;
    // A server of the new version, with its worker: the move is carried out from the entity's new address.
    current = await d.start(after);
    await until('the move carried out', async () => {
      const r = await current!.query('{ a: member(teamId: "t0", id: 3) { id } b: member(teamId: "t1", id: 3) { teamId name } }');
      return r.data?.a === null && r.data?.b;
    });
    const r = await current.query(
      '{ a: member(teamId: "t0", id: 3) { id } b: member(teamId: "t1", id: 3) { teamId name } t0: members(teamId: "t0", first: 50) { edges { node { id } } } }',
    );
    expect(r.data).toEqual({ a: null, b: { teamId: 't1', name: 'N3' }, t0: { edges: [0, 1, 2, 4, 5].map((id) => ({ node: { id } })) } });
    await d.drained(current);
    const report = await verifyDerived({ store: testStore(), model: d.model(after) });
    expect(formatVerifyReport(report)).toMatch(/^verify: ok/m);
    // The entities left (continuous backup's change entities beside them are the writes' change log: src/backup/).
    const left: string[] = [];
    for await (const page of testStore().scan(`${d.prefix}Members`))
      left.push(...page.filter((e) => e.properties.EntityType !== CHANGE_ENTITY_TYPE).map((e) => `${e.partitionKey}/${e.rowKey}`));
    expect(left.sort()).toEqual(['t0/m_00000000', 't0/m_00000001', 't0/m_00000002', 't0/m_00000004', 't0/m_00000005', 't1/m_00000003', 't1/m_00000100']);
  } finally {
    await d.stopProcesses();
    await current?.close();
    await old.close().catch(() => undefined);
    d.remove();
  }
}, 120_000);
