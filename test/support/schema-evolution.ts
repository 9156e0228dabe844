/**
 * A schema written for the schema-change tests (docs/schema-changes.md): members of teams, version 1 without
 * indexes, version 2 with an inter-partition index by city and an intra-partition one by name; and a deployment
 * — one schema folder, one table prefix — servers are started on, version after version.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { compileSchema } from '../../src/compiler/compile';
import { loadSchemaSources } from '../../src/compiler/load-schema';
import { Catalogue } from '../../src/evolution/catalogue';
import type { PathRecord } from '../../src/evolution/catalogue-records';
import { connectionString, DIRECTIVES_FILE, startTestServer, testStore, uniquePrefix, type TestServer } from './harness';
import { runCommand, type CommandProcess } from './processes';
import { pause, until } from './wait';

export const MEMBER = (extraIndexes: string, extraFields = '') => `
type Member @entity(table: "Members", partitionKey: "{teamId}", rowKey: "m_{id:06}")${extraIndexes} {
  teamId: ID!
  id: Int!
  name: String!
  email: String
  city: String
  etag: String${extraFields}
}`;

export const MUTATIONS = `
type Mutation {
  createMember(input: CreateMemberInput!): MemberPayload! @write(entity: "Member", action: CREATE)
  updateMember(input: UpdateMemberInput!): MemberPayload! @write(entity: "Member", action: UPDATE)
  deleteMember(input: DeleteMemberInput!): MemberPayload! @write(entity: "Member", action: DELETE)
}`;

export const V1 = `${MEMBER('')}
type Query {
  member(teamId: ID!, id: Int!): Member @point
  members(teamId: ID!, first: Int, after: String): MemberConnection! @range(rowKeyPrefix: "m_")
}${MUTATIONS}`;

const INDEXES = `
  @index(name: "byCity", table: "MembersByCity", partitionKey: "c_{city:hash16}", rowKey: "{city}_{teamId}_{id:06}", include: ["name"])
  @index(name: "byName", rowKey: "n_{name}_{id:06}", include: ["city"])`;

export const V2 = `${MEMBER(INDEXES)}
type Query {
  member(teamId: ID!, id: Int!): Member @point
  members(teamId: ID!, first: Int, after: String): MemberConnection! @range(rowKeyPrefix: "m_")
  membersInCity(city: String!, first: Int, after: String): MemberConnection! @range(index: "byCity", rowKeyPrefix: "{city}_")
  membersNamed(teamId: ID!, name: String!, first: Int, after: String): MemberConnection! @range(index: "byName", rowKeyPrefix: "n_{name}_")
}${MUTATIONS}`;

/**
 * The deployment's queue settings: a message whose write never shows (one that failed after its message went) is
 * reconciled 5 s on, not 30; the messages a killed worker held are visible again 5 s on, not 30.
 */
export const QUEUE_ENV = { TABLEGRAPH_SETTLE_MS: '5000', TABLEGRAPH_VISIBILITY_TIMEOUT_SECONDS: '5' };

/** The build lease of the deployment's processes (ms): short, so that a killed worker's build is taken over soon. */
export const LEASE_MS = 2000;
/** How long after a kill its builds' leases have lapsed (ms). */
export const LEASE_LAPSE_MS = LEASE_MS + 500;

/** A schema folder the test rewrites between starts, and servers started on it with one table prefix. */
export class Deployment {
  readonly dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-evolve-'));
  readonly prefix = uniquePrefix();
  constructor() {
    fs.copyFileSync(DIRECTIVES_FILE, path.join(this.dir, 'directives.graphql'));
  }
  /** Writes `sdl` as the folder's schema (what the next process started on it serves). */
  write(sdl: string): void {
    fs.writeFileSync(path.join(this.dir, 'schema.graphql'), sdl);
  }
  async start(sdl: string, env: Record<string, string> = {}): Promise<TestServer> {
    this.write(sdl);
    return startTestServer({
      TABLEGRAPH_SCHEMA_DIR: this.dir,
      TABLEGRAPH_TABLE_PREFIX: this.prefix,
      TABLEGRAPH_BUILD_POLL_MS: '300',
      TABLEGRAPH_RATE_LIMIT: '1000000',
      // As its commands: storage that froze for a few seconds (Azurite's clean-up beside two other storms) is waited
      // for, not refused, so a setup write is not refused on a busy machine.
      TABLEGRAPH_STORAGE_TIMEOUT_MS: '30000',
      ...QUEUE_ENV,
      ...env,
    });
  }
  model(sdl: string) {
    fs.writeFileSync(path.join(this.dir, 'schema.graphql'), sdl);
    return compileSchema(loadSchemaSources(this.dir), { tablePrefix: this.prefix }).model;
  }
  catalogue(): Catalogue {
    return new Catalogue(testStore(), this.prefix);
  }
  async paths(): Promise<Map<string, PathRecord>> {
    return new Map((await this.catalogue().paths()).map((p) => [p.id, p]));
  }
  async waitFor(done: (paths: Map<string, PathRecord>) => boolean, timeoutMs = 60_000): Promise<Map<string, PathRecord>> {
    let last = new Map<string, PathRecord>();
    const settled = async () => {
      last = await this.paths();
      return done(last) && last;
    };
    const seen = () => JSON.stringify([...last.values()].map((p) => [p.id, p.state, p.read, p.scanned, p.takeovers, p.leaseOwner]));
    return until(() => `paths to settle (${done.toString()}): ${seen()}`, settled, { timeoutMs, everyMs: 200 });
  }
  /**
   * Waits until `done` holds for the paths, for as long as the builds make progress (a path's entities read or
   * written, or its state, changed): it fails after `stallMs` without any — on a busy machine a slow build is waited
   * for, a stuck one is not.
   */
  async waitWhileBuilding(done: (paths: Map<string, PathRecord>) => boolean, stallMs = 60_000): Promise<Map<string, PathRecord>> {
    let last = new Map<string, PathRecord>();
    let mark = '';
    let progressAt = Date.now();
    const seen = () => JSON.stringify([...last.values()].map((p) => [p.id, p.state, p.read, p.written, p.scanned, p.takeovers, p.leaseOwner]));
    return until(
      () => `paths to settle (${done.toString()}), no progress for ${stallMs} ms: ${seen()}`,
      async () => {
        last = await this.paths();
        if (done(last)) return last;
        const now = JSON.stringify([...last.values()].map((p) => [p.id, p.state, p.read, p.written]));
        if (now !== mark) [mark, progressAt] = [now, Date.now()];
        return Date.now() - progressAt > stallMs
          ? Promise.reject(new Error(`no progress for ${stallMs} ms waiting for paths to settle (${done.toString()}): ${seen()}`))
          : false;
      },
      { timeoutMs: Number.MAX_SAFE_INTEGER, everyMs: 200 },
    );
  }
  /**
   * Waits until the work queue of the prefix has been worked off (by a worker of the deployment), for as long as the
   * worker makes progress (a message handled, or the queue shorter): it fails after 60 s without any, naming the
   * queue and the worker as /health last told them — on a busy machine a slow worker is waited for, a stuck one is not.
   */
  async drained(server: TestServer): Promise<void> {
    type Fanout = { queueDepth?: number; worker?: { handled?: number } };
    let fanout: Fanout | undefined;
    let mark = '';
    let progressAt = Date.now();
    const empty = async () => {
      const health = (await (await fetch(server.url.replace('/graphql', '/health'))).json()) as { fanout?: Fanout };
      fanout = health.fanout;
      const now = `${fanout?.queueDepth}/${fanout?.worker?.handled}`;
      if (now !== mark) [mark, progressAt] = [now, Date.now()];
      if (Date.now() - progressAt > 60_000) throw new Error(`the work queue made no progress in 60 s: ${JSON.stringify(fanout)}`);
      return fanout?.queueDepth === 0;
    };
    await until(() => `the work queue to drain: ${JSON.stringify(fanout)}`, empty, { everyMs: 200, timeoutMs: 600_000 });
  }
  /** `npm run <command>` as a process on the deployment (its schema folder, table prefix, the test Azurite). */
  command(command: string, args: string[] = [], env: Record<string, string> = {}): CommandProcess {
    const p = runCommand(command, args, this.dir, {
      AZURE_STORAGE_CONNECTION_STRING: connectionString(),
      TABLEGRAPH_SCHEMA_DIR: this.dir,
      TABLEGRAPH_TABLE_PREFIX: this.prefix,
      TABLEGRAPH_BUILD_LEASE_MS: String(LEASE_MS),
      TABLEGRAPH_BUILD_POLL_MS: '300',
      TABLEGRAPH_STORAGE_TIMEOUT_MS: '30000',
      ...QUEUE_ENV,
      ...env,
    });
    this.processes.push(p);
    return p;
  }
  readonly processes: CommandProcess[] = [];
  /** Stops the processes still running (SIGTERM) and waits for them. */
  async stopProcesses(): Promise<void> {
    for (const p of this.processes) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGTERM');
    await Promise.all(this.processes.map((p) => p.exited));
  }
  remove(): void {
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * The environment of a process that holds build `id` after `steps` of its steps, in this process (the test hook
 * TABLEGRAPH_TEST_BUILD_HOLD): it stops there, its lease left to lapse, and says so — the named point a test kills
 * it at.
 */
export function holdBuild(id: string, steps: number): Record<string, string> {
  return { TABLEGRAPH_TEST_BUILD_HOLD: `${id}@${steps}` };
}

/** The log line of a held build (build-runner.ts holdIfAsked). */
export const HELD = 'test hook: schema build held';

/** Waits until build `id`'s lease has lapsed (its row's `leaseUntil` passed): a fresh process may take it over. */
export async function leaseLapsed(d: Deployment, id: string): Promise<void> {
  const lapsesAt = (await d.paths()).get(id)?.leaseUntil ?? 0;
  await pause(Math.max(0, lapsesAt - Date.now()) + 100, 'clock'); // the lease is a time, by the processes' clocks
}

/**
 * Kills the process building `id` twice, each time at a named point: `start(env)` starts a process with the test hook
 * (holdBuild) — it takes the build, goes `steps` steps, holds, and is killed (SIGKILL) — then, once its lease has
 * lapsed, the next takes the build over from its checkpoint and goes `steps` more. The third, started without the
 * hook, resumes it and is returned.
 * @param first the first process (the hook's environment passed to it), e.g. `migrate apply`; later ones are `start`'s
 */
export async function killedTwice(
  d: Deployment,
  id: string,
  starts: {
    first: (env: Record<string, string>) => CommandProcess;
    next: (env: Record<string, string>) => CommandProcess;
    /** Steps each killed process goes (default 2). */
    steps?: number;
    /** The environment of the third process, which is not killed here (another build's hook, say). */
    last?: Record<string, string>;
  },
): Promise<CommandProcess> {
  const steps = starts.steps ?? 2;
  const row = async () => (await d.paths()).get(id)!;
  const first = starts.first(holdBuild(id, steps));
  await first.waitFor(HELD, 120_000);
  const firstAt = await row();
  first.child.kill('SIGKILL');
  await first.exited;
  await leaseLapsed(d, id);
  const second = starts.next(holdBuild(id, steps));
  await second.waitFor(HELD, 120_000);
  const taken = await row();
  expect(taken.takeovers).toBe(firstAt.takeovers + 1);
  expect(taken.read).toBeGreaterThan(firstAt.read);
  expect(taken.state).toBe('building'); // killed mid-build, both times
  second.child.kill('SIGKILL');
  await second.exited;
  await leaseLapsed(d, id);
  const third = starts.next(starts.last ?? {});
  await third.waitFor('schema build resumed from its checkpoint');
  return third;
}

export async function mutate(server: TestServer, name: string, input: Record<string, unknown>): Promise<{ errors?: Array<{ extensions: { code: string } }> }> {
  const type = `${name[0].toUpperCase()}${name.slice(1)}Input`;
  return server.query(`mutation($input: ${type}!) { ${name}(input: $input) { __typename } }`, { input });
}

export async function ok(server: TestServer, name: string, input: Record<string, unknown>): Promise<void> {
  const r = await mutate(server, name, input);
  expect(r.errors).toBeUndefined();
}

export const CITIES = ['Oslo', 'Lima', 'Pune', 'Kobe'];

/** Teams and their members, version 1: a member refers to its team (in the same partition). */
const teamsSchema = (teamExtra: string, memberExtra: string) => `
type Team @entity(table: "Members", partitionKey: "{teamId}", rowKey: "team") {
  teamId: ID!
  title: String${teamExtra}
  members(first: Int, after: String): MemberConnection! @range(partitionKey: "{teamId}", rowKeyPrefix: "m_")
}
${MEMBER('', `\n  team: Team @point(partitionKey: "{teamId}", rowKey: "team")${memberExtra}`)}
type Query {
  team(teamId: ID!): Team @point(rowKey: "team")
  member(teamId: ID!, id: Int!): Member @point
}
type Mutation {
  createTeam(input: CreateTeamInput!): TeamPayload! @write(entity: "Team", action: CREATE)
  updateTeam(input: UpdateTeamInput!): TeamPayload! @write(entity: "Team", action: UPDATE)
  createMember(input: CreateMemberInput!): MemberPayload! @write(entity: "Member", action: CREATE)
  updateMember(input: UpdateMemberInput!): MemberPayload! @write(entity: "Member", action: UPDATE)
  deleteMember(input: DeleteMemberInput!): MemberPayload! @write(entity: "Member", action: DELETE)
}`;

export const TEAMS_V1 = teamsSchema('', '');

/** Between the two: each member copies its team's title, and no team counts its members yet. */
export const TEAMS_COPY = teamsSchema('', '\n  teamTitle: String @copy(from: "team", field: "title")');

/** Version 2: each team counts its members (a summary in the same EGT) and each member copies its team's title. */
export const TEAMS_V2 = teamsSchema(
  '\n  memberCount: Int! @summary(of: "Member", via: "team", count: true)',
  '\n  teamTitle: String @copy(from: "team", field: "title")',
);
