/**
 * A rolling update with two new indexes — an inter-partition and an intra-partition one — their builds driven by
 * worker processes that are killed (SIGKILL) twice mid-build each: a server of the old version keeps writing throughout and a server of the new one writes and reads;
 * the build resumes from its checkpoint each time, waits for the old server to stop, ends with a repair pass, and
 * leaves `verify` clean with every acknowledged write present. Reads through the index are refused until then.
 */
import { formatVerifyReport, verifyDerived } from '../src/maintenance/verify-derived';
import { connectionString, testStore, type TestServer } from './support/harness';
import { killCommandProcesses, runCommand, type CommandProcess } from './support/processes';
import { seededRng } from './support/fanout-fixtures';
import { CITIES, Deployment, HELD, holdBuild, killedTwice, ok, QUEUE_ENV, V1, V2 } from './support/schema-evolution';
import { testSeed } from './support/seed';
import { pause } from './support/wait';

afterAll(() => killCommandProcesses());

test('a build killed twice resumes from its checkpoint; an old-version server writing throughout holds it until it stops; verify clean', async () => {
  const d = new Deployment();
  const rng = seededRng(testSeed());
  const old = await d.start(V1);
  let current: TestServer | undefined;
  const workers: CommandProcess[] = [];
  // Small pages, no budget: 15 steps a build, each taken at once; the kills land at named steps (killedTwice).
  const worker = (env: Record<string, string> = {}) => {
    const w = runCommand('worker', [], d.dir, {
      AZURE_STORAGE_CONNECTION_STRING: connectionString(),
      TABLEGRAPH_SCHEMA_DIR: d.dir,
      TABLEGRAPH_TABLE_PREFIX: d.prefix,
      TABLEGRAPH_BUILD_PAGE_SIZE: '20',
      TABLEGRAPH_BUILD_ENTITIES_PER_SECOND: '0',
      TABLEGRAPH_BUILD_LEASE_MS: '2000',
      TABLEGRAPH_BUILD_POLL_MS: '300',
      TABLEGRAPH_STORAGE_TIMEOUT_MS: '30000',
      ...QUEUE_ENV,
      ...env,
    });
    workers.push(w);
    return w;
  };
  try {
    const members = new Map<string, { teamId: string; id: number; name: string; city: string } | null>();
    for (let batch = 0; batch < 6; batch++) {
      await Promise.all(
        Array.from({ length: 50 }, async (_, j) => {
          const i = batch * 50 + j;
          const m = { teamId: `t${i % 5}`, id: i, name: `N${i % 7}`, city: CITIES[i % 4] };
          await ok(old, 'createMember', m);
          members.set(`${m.teamId}/${m.id}`, m);
        }),
      );
    }

    // The new version: its worker records it and starts the build (held at its second step: the first kill's point);
    // a server of it serves beside the old one.
    d.write(V2);
    const first = worker(holdBuild('index:Member.byCity', 2));
    await first.waitFor(HELD, 120_000);
    current = await d.start(V2, { TABLEGRAPH_WORKER: 'off' });

    // Writers on both versions, one per key at a time.
    let storm = true;
    let writes = 0;
    const busy = new Set<string>();
    const turn = async (server: TestServer, key: string) => {
      const m = members.get(key);
      if (!m) {
        const [teamId, id] = key.split('/');
        const fresh = { teamId, id: Number(id), name: `N${rng.int(7)}`, city: CITIES[rng.int(4)] };
        await ok(server, 'createMember', fresh);
        members.set(key, fresh);
      } else if (rng.int(8) === 0) {
        members.set(key, null);
        await ok(server, 'deleteMember', { teamId: m.teamId, id: m.id });
      } else {
        const next = { ...m, name: `N${rng.int(7)}`, city: CITIES[rng.int(4)] };
        members.set(key, next);
        await ok(server, 'updateMember', { teamId: m.teamId, id: m.id, name: next.name, city: next.city });
      }
      writes++;
    };
    const writer = async (server: () => TestServer | undefined) => {
      while (storm) {
        const s = server();
        if (!s) return;
        const keys = [...members.keys()].filter((k) => !busy.has(k));
        const key = keys[rng.int(keys.length)];
        busy.add(key);
        await turn(s, key).finally(() => busy.delete(key));
      }
    };
    let oldOpen = true;
    const oldWriter = writer(() => (oldOpen ? old : undefined));
    const stormDone = Promise.all([oldWriter, writer(() => current), writer(() => current)]);
    let refused = 0;
    const reads = (async () => {
      while (storm) {
        const r = await current!.query('{ membersInCity(city: "Oslo", first: 5) { edges { node { id } } } }');
        if (r.errors) {
          expect(r.errors[0].extensions).toMatchObject({ code: 'ACCESS_PATH_BUILDING', accessPath: 'index:Member.byCity' });
          refused++;
        }
        await pause(100, 'pace');
      }
    })();

    // Killed twice mid-build, at named steps: each time another worker takes the lease over once it lapses, from the
    // checkpoint. The third resumes it (and will hold the next build, byName, at its second step).
    const third = await killedTwice(d, 'index:Member.byCity', { first: () => first, next: worker, last: holdBuild('index:Member.byName', 2) });
    // The scan ends, and the build waits: the old version's server is still writing without keeping the index.
    await third.waitFor('waiting for the servers of an older version to stop');
    const waiting = (await d.paths()).get('index:Member.byCity')!;
    expect(waiting).toMatchObject({ state: 'building', scanned: true, needsRepair: true, takeovers: 2 });

    // The intra-partition index is built next, and killed twice too: the third worker, then a fourth.
    const last = await killedTwice(d, 'index:Member.byName', { first: () => third, next: worker });
    await d.waitFor((p) => p.get('index:Member.byName')!.scanned, 90_000);

    // The old server stops (its presence row goes with it): the repair pass runs, and the index is ready.
    oldOpen = false;
    await oldWriter; // its write in hand answered
    await old.close();
    const done = await d.waitFor((p) => p.get('index:Member.byCity')!.state === 'ready' && p.get('index:Member.byName')!.state === 'ready', 90_000);
    // byCity, waiting under the third worker's lease, was taken over again with byName: 4 takeovers.
    expect(done.get('index:Member.byCity')!.takeovers).toBe(4);
    expect(done.get('index:Member.byName')!.takeovers).toBe(2);
    await last.waitFor('repair pass');
    await current.refreshPathStates(); // the server reads the indexes' states (ready) now, not at its next refresh
    storm = false;
    await Promise.all([stormDone, reads]);
    expect(refused).toBeGreaterThan(0);
    expect(writes).toBeGreaterThan(100);

    // The worker works the work queue off; then every acknowledged write is there, and verify is clean.
    await d.drained(current);
    const model = d.model(V2);
    const report = await verifyDerived({ store: testStore(), model });
    expect(formatVerifyReport(report)).toMatch(/^verify: ok/m);
    for (const [key, m] of members) {
      const [teamId, id] = key.split('/');
      const r = await current.query(`{ member(teamId: "${teamId}", id: ${id}) { name city } }`);
      expect(r.data.member).toEqual(m && { name: m.name, city: m.city });
    }
    for (const city of CITIES) {
      const r = await current.query(`{ membersInCity(city: "${city}", first: 100) { edges { node { teamId id } } } }`);
      expect(r.errors).toBeUndefined();
      const got = r.data.membersInCity.edges.map((e: { node: { teamId: string; id: number } }) => `${e.node.teamId}/${e.node.id}`).sort();
      expect(got).toEqual(
        [...members]
          .filter(([, m]) => m?.city === city)
          .map(([k]) => k)
          .sort(),
      );
    }
  } finally {
    for (const w of workers) if (w.child.exitCode === null) w.child.kill('SIGTERM');
    await Promise.all(workers.map((w) => w.exited));
    await current?.close();
    await old.close().catch(() => undefined);
    d.remove();
  }
}, 240_000);
