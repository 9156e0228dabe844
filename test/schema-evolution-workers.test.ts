/**
 * A rolling update with two new indexes — an inter-partition and an intra-partition one — their builds driven by
 * worker processes that are killed (SIGKILL) twice mid-build each: a server of the old version keeps writing throughout and a server of the new one writes and reads;
 * the build resumes from its checkpoint each time, waits for the old server to stop, ends with a repair pass, and
 * leaves `verify` clean with every acknowledged write present. Reads through the index are refused until then.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { formatVerifyReport, verifyDerived } from '../src/maintenance/verify-derived';
import { connectionString, testStore, type TestServer } from './support/harness';
import { killCommandProcesses, runCommand, type CommandProcess } from './support/processes';
import { seededRng } from './support/fanout-fixtures';
import { CITIES, Deployment, killedTwice, LEASE_LAPSE_MS, ok, V1, V2 } from './support/schema-evolution';

afterAll(() => killCommandProcesses());

test('a build killed twice resumes from its checkpoint; an old-version server writing throughout holds it until it stops; verify clean', async () => {
  const d = new Deployment();
  const rng = seededRng(Number(process.env.FANOUT_SEED) || Date.now() % 2 ** 31);
  const old = await d.start(V1);
  let current: TestServer | undefined;
  const workers: CommandProcess[] = [];
  const worker = () => {
    const w = runCommand('worker', [], d.dir, {
      AZURE_STORAGE_CONNECTION_STRING: connectionString(),
      TABLEGRAPH_SCHEMA_DIR: d.dir,
      TABLEGRAPH_TABLE_PREFIX: d.prefix,
      TABLEGRAPH_BUILD_PAGE_SIZE: '20',
      TABLEGRAPH_BUILD_ENTITIES_PER_SECOND: '30',
      TABLEGRAPH_BUILD_LEASE_MS: '2000',
      TABLEGRAPH_BUILD_POLL_MS: '300',
      TABLEGRAPH_STORAGE_TIMEOUT_MS: '30000',
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

    // The new version: its worker records it and starts the build; a server of it serves beside the old one.
    d.write(V2);
    const first = worker();
    await d.waitFor((p) => (p.get('index:Member.byCity')?.read ?? 0) > 0);
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
    const stormDone = Promise.all([writer(() => (oldOpen ? old : undefined)), writer(() => current), writer(() => current)]);
    let refused = 0;
    const reads = (async () => {
      while (storm) {
        const r = await current!.query('{ membersInCity(city: "Oslo", first: 5) { edges { node { id } } } }');
        if (r.errors) {
          expect(r.errors[0].extensions).toMatchObject({ code: 'ACCESS_PATH_BUILDING', accessPath: 'index:Member.byCity' });
          refused++;
        }
        await sleep(100);
      }
    })();

    // Killed twice mid-build: each time another worker takes the lease over once it lapses, from the checkpoint.
    const readAt = async () => (await d.paths()).get('index:Member.byCity')!.read;
    first.child.kill('SIGKILL');
    const killedAt = await readAt();
    await sleep(LEASE_LAPSE_MS); // the next worker takes byCity over (it sorts first), not byName beside it
    const second = worker();
    await d.waitFor((p) => p.get('index:Member.byCity')!.takeovers === 1 && p.get('index:Member.byCity')!.read > killedAt);
    second.child.kill('SIGKILL');
    await sleep(LEASE_LAPSE_MS);
    const third = worker();
    await third.waitFor('schema build resumed from its checkpoint');
    // The scan ends, and the build waits: the old version's server is still writing without keeping the index.
    await d.waitFor((p) => p.get('index:Member.byCity')!.scanned);
    await sleep(1500);
    const waiting = (await d.paths()).get('index:Member.byCity')!;
    expect(waiting).toMatchObject({ state: 'building', scanned: true, needsRepair: true, takeovers: 2 });

    // The intra-partition index is built next, and killed twice too: the third worker, then a fourth.
    const last = await killedTwice(d, 'index:Member.byName', third, worker);
    await d.waitFor((p) => p.get('index:Member.byName')!.scanned, 90_000);

    // The old server stops (its presence row goes with it): the repair pass runs, and the index is ready.
    oldOpen = false;
    await sleep(300);
    await old.close();
    const done = await d.waitFor((p) => p.get('index:Member.byCity')!.state === 'ready' && p.get('index:Member.byName')!.state === 'ready', 90_000);
    // byCity, waiting under the third worker's lease, was taken over again with byName: 4 takeovers.
    expect(done.get('index:Member.byCity')!.takeovers).toBe(4);
    expect(done.get('index:Member.byName')!.takeovers).toBe(2);
    await last.waitFor('repair pass');
    await sleep(2500);
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
