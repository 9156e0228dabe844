/**
 * A unique value a refused write reserved is not left taken (the "Inter-partition secondary index pattern" with a
 * uniqueness rule: src/write/reservations.ts), on a schema written for this test: members of clubs, each with an
 * e-mail unique across every club. The Table service drops one member's EGTs (test/support/storage-proxy.ts holds
 * them past the storage timeout, and passes none on): its create fails STORAGE_UNAVAILABLE, nothing stored.
 * - With change entities in the EGT (continuous backup on), a fence decides that the EGT never applies: the write's
 *   reservation is released at once, and another member takes the e-mail straight away.
 * - Without any (backup off, no subscription), nothing can tell that the EGT will not apply later, so the e-mail stays
 *   held for the reservation's lease: another member is refused UniqueKeyTaken with `extensions.heldUntil`, and gets
 *   it once that time has passed — with no worker running, the refused write's reservation found lapsed and deleted.
 */
import { connectionString, startSdlServer } from './support/harness';
import { startStorageProxy, type StorageProxy } from './support/storage-proxy';
import { until } from './support/wait';

const SDL = `
type Member @entity(table: "Clubs", partitionKey: "club_{clubId}", rowKey: "member_{memberId}")
  @index(name: "byEmail", table: "MembersByEmail", partitionKey: "{email}", rowKey: "member", unique: true) {
  clubId: ID!
  memberId: ID!
  email: String!
}
type Query {
  member(clubId: ID!, memberId: ID!): Member @point
  memberByEmail(email: String!): Member @point(index: "byEmail")
}
type Mutation {
  createMember(input: CreateMemberInput!): MemberPayload! @write(entity: "Member", action: CREATE)
}
`;

const CREATE = 'mutation($i: CreateMemberInput!) { createMember(input: $i) { member { memberId email } } }';
/** The member whose EGTs the service drops. */
const DROPPED = 'lost';
/** The storage timeout of the servers here (ms): a dropped EGT fails after it, and a reservation's lease is 2 × it + 5 s. */
const TIMEOUT_MS = 3000;

let proxy: StorageProxy;
beforeAll(async () => {
  proxy = await startStorageProxy(connectionString(), {
    // Every EGT that writes the dropped member, held past the timeout and then dropped (passAbandoned: false).
    delayMs: (method, path, body) => (method === 'POST' && path.includes('$batch') && body.includes(`"memberId":"${DROPPED}"`) ? 2 * TIMEOUT_MS : 0),
  });
});
afterAll(() => proxy?.close());

async function serve(env: Record<string, string>) {
  return startSdlServer(SDL, { AZURE_STORAGE_CONNECTION_STRING: proxy.connectionString, TABLEGRAPH_STORAGE_TIMEOUT_MS: String(TIMEOUT_MS), ...env });
}

const create = (ctx: Awaited<ReturnType<typeof serve>>, memberId: string, email: string) => ctx.server.query(CREATE, { i: { clubId: 'c1', memberId, email } });

test('fenced off, the refused write releases its reservation: the e-mail is free at once', async () => {
  const ctx = await serve({});
  try {
    const refused = await create(ctx, DROPPED, 'a@example.test');
    expect(refused.errors?.[0].extensions.code).toBe('STORAGE_UNAVAILABLE');
    expect((await ctx.server.query('{ member(clubId: "c1", memberId: "lost") { memberId } }')).data).toEqual({ member: null });
    const next = await create(ctx, 'next', 'a@example.test');
    expect(next.errors).toBeUndefined();
    expect(next.data.createMember.member).toEqual({ memberId: 'next', email: 'a@example.test' });
  } finally {
    await ctx.close();
  }
}, 60_000);

test('nothing to fence: the e-mail is refused with the time it is held until, and free once it has passed', async () => {
  const ctx = await serve({ TABLEGRAPH_BACKUP_CAPTURE: 'false', TABLEGRAPH_WORKER: 'off' });
  try {
    const started = Date.now();
    const refused = await create(ctx, DROPPED, 'b@example.test');
    expect(refused.errors?.[0].extensions.code).toBe('STORAGE_UNAVAILABLE');
    const held = await create(ctx, 'next', 'b@example.test');
    const e = held.errors?.[0];
    expect({ code: e?.extensions.code, reason: e?.extensions.reason }).toEqual({ code: 'CONFLICT', reason: 'UniqueKeyTaken' });
    const heldUntil = Date.parse(e!.extensions.heldUntil);
    // The lease of a reservation made after `started`: two storage timeouts and a margin, not more.
    expect(heldUntil).toBeGreaterThan(started);
    expect(heldUntil).toBeLessThanOrEqual(Date.now() + 2 * TIMEOUT_MS + 5000 + 1000);
    expect(e!.message).toMatch(/held by a write of another Member not yet settled .*free again at/);
    // Asked again until it is given: refused as held until that time, then the next member's once it has passed.
    const refusals = new Set<string>();
    await until(
      'the e-mail free',
      async () => {
        const again = await create(ctx, 'next', 'b@example.test');
        if (again.errors) refusals.add(`${again.errors[0].extensions.reason} ${again.errors[0].extensions.heldUntil}`);
        return !again.errors;
      },
      { timeoutMs: 30_000, everyMs: 250 },
    );
    expect(Date.now()).toBeGreaterThanOrEqual(heldUntil);
    expect([...refusals]).toEqual([`UniqueKeyTaken ${e!.extensions.heldUntil}`]);
    expect((await ctx.server.query('{ memberByEmail(email: "b@example.test") { memberId } }')).data).toEqual({ memberByEmail: { memberId: 'next' } });
  } finally {
    await ctx.close();
  }
}, 60_000);
