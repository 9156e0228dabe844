/**
 * The Subscription type's fields (`@subscribe`, src/compiler/subscriptions.ts): `subscribe` checks the arguments and
 * the caller's `@auth` on the keys, then watches the partition's change log through the ChangePoller (after a
 * catch-up read when the client resumes with `after`); `resolve` turns each change into its `<Entity>Change`, with
 * a fresh request context — new DataLoaders, new cost — per event, so that fields below `node` read current state.
 *
 * Each change is checked against the subscriber's `@auth` before it is sent: on the entity as read, or, for a
 * delete, on its keys and the scope values its change entity kept (a delete that they cannot decide — a scope
 * field `@encrypted` — is not sent). A change out of scope is never sent, not even its keys.
 */
import type { GraphQLFieldResolver, GraphQLSchema } from 'graphql';
import { isObjectType } from 'graphql';
import { ErrorCode, TablegraphError } from '../errors';
import { decide } from '../model/authorization';
import { changeTime, type Change, type ChangeSnapshot } from '../model/change-log';
import { renderKey } from '../model/key-template';
import { requireTenant, TENANT_FIELD } from '../model/tenancy';
import type { EntityModel, Model, SubscriptionModel } from '../model/types';
import { allowsEntity, authorizeTypeBefore, keyValues } from './authorize';
import { createRequestContext, type ContextDeps, type RequestContext } from './context';
import type { EntityNode } from './entity-node';
import { checkKey } from '../storage/limits';
import type { StorageTarget } from '../storage/storage-types';
import type { ChangeEvent, ChangePoller, ResumePoint } from '../read/change-poller';
import { EventQueue } from '../read/event-queue';

/** How far before its start a new subscription reports changes (ms): writes in flight when it began. */
export const START_SKEW_MS = 1000;

export interface SubscriptionDeps extends ContextDeps {
  poller: ChangePoller;
  target: StorageTarget;
  /** How long the change log keeps changes (ms): an older `after` cursor is refused. */
  retentionMs: number;
  /** How far back a resume reads before its cursor (ms): the poller's overlap. */
  overlapMs: number;
  /** Subscriptions this server serves at most, all connections together. */
  maxSubscriptions: number;
  /** Subscriptions one token subject holds at most on this server. */
  perSubject: number;
  /** Entities a resume's catch-up may read (point queries; default: the demand budget's storage calls). */
  maxResumeReads: number;
  /** Events one subscriber may have waiting (events). */
  maxBuffered: number;
}

/** What the subscription's iterator yields: a change, or last, the error it ends with. */
type QueuedEvent = ChangeEvent | { failure: unknown };

/** What a resolved event holds for `<Entity>Change`'s fields. */
interface ChangePayload {
  kind: Change['kind'];
  node: EntityNode | null;
  cursor: string;
  [keyField: string]: unknown;
}

/**
 * Sets `subscribe` and `resolve` on every `@subscribe` field of `schema`'s Subscription type.
 * Mutates and returns `schema`.
 */
export function attachSubscriptions(schema: GraphQLSchema, model: Model, deps: SubscriptionDeps): GraphQLSchema {
  const type = schema.getSubscriptionType();
  if (!type || !isObjectType(type)) return schema;
  // Subscriptions live on this server: all fields, all connections.
  const live: LiveCounts = { count: 0, bySubject: new Map() };
  for (const field of Object.values(type.getFields())) {
    const sub = model.subscriptions.get(`${type.name}.${field.name}`);
    if (!sub) continue;
    field.subscribe = subscriber(sub, deps, live);
    field.resolve = (event: QueuedEvent, args, ctx: RequestContext) => {
      if ('failure' in event) throw event.failure; // the subscriber fell behind (event-queue.ts)
      return payload(sub, event, args, ctx, deps);
    };
  }
  return schema;
}

function cursorScope(sub: SubscriptionModel, table: string, partitionKey: string): string {
  return `change\u0000${sub.coordinate}\u0000${table}\u0000${partitionKey}`;
}

function subscriber(sub: SubscriptionModel, deps: SubscriptionDeps, live: LiveCounts): GraphQLFieldResolver<unknown, RequestContext, Record<string, unknown>> {
  const { entity } = sub;
  return async (_root, args, ctx) => {
    const table = entity.layout.table;
    // A tenant-scoped partition is the caller's tenant's: the token's claim, never an argument.
    const keyArgs = entity.tenantScoped ? { ...args, [TENANT_FIELD]: requireTenant(ctx.principal?.tenant) } : args;
    const partitionKey = renderKey(entity.layout.partitionKey, keyArgs);
    const rowKey = sub.oneEntity ? renderKey(entity.layout.rowKey, keyArgs) : undefined;
    checkKey('PartitionKey', partitionKey, deps.target, { table, partitionKey });
    if (rowKey !== undefined) checkKey('RowKey', rowKey, deps.target, { table, partitionKey, rowKey });
    const expiresAt = tokenExpiry(ctx);
    authorizeTypeBefore(entity, ctx.principal, keyValues(entity.layout, partitionKey, rowKey), `subscribe to ${sub.coordinate}`);
    // A type being re-keyed has its changes logged at the addresses of the schema serving it: not this one's, yet.
    ctx.paths?.assertServed(entity.name, sub.coordinate);
    const after = sub.after && typeof args[sub.after] === 'string' ? (args[sub.after] as string) : undefined;
    const from = after === undefined ? undefined : resumePoint(ctx, cursorScope(sub, table, partitionKey), after, sub.after!, deps.retentionMs);
    const subject = ctx.principal?.subject;
    admit(deps, live, subject);
    const wants = (c: Change) => c.of === entity.entityType && (rowKey === undefined || c.address.rowKey === rowKey);
    const allows = (e: ChangeEvent) => allowed(entity, ctx, e);
    live.count++;
    if (subject !== undefined) live.bySubject.set(subject, (live.bySubject.get(subject) ?? 0) + 1);
    const watching: { stop?: () => void; expiry?: NodeJS.Timeout } = {};
    const queue = new EventQueue<QueuedEvent>(
      () => {
        live.count--;
        if (subject !== undefined) {
          const n = (live.bySubject.get(subject) ?? 1) - 1;
          if (n > 0) live.bySubject.set(subject, n);
          else live.bySubject.delete(subject);
        }
        clearTimeout(watching.expiry);
        watching.stop?.();
      },
      (failure) => ({ failure }),
      deps.maxBuffered,
    );
    if (expiresAt !== undefined) {
      // The token's end is the subscription's: a last event says so, with a code; the client subscribes again with a
      // new token and the last cursor.
      watching.expiry = setTimeout(
        () =>
          queue.fail(
            new TablegraphError(ErrorCode.UNAUTHENTICATED, 'The token has expired: subscribe again with a new token and the last cursor.', {
              reason: 'TokenExpired',
            }),
          ),
        Math.max(0, expiresAt - Date.now()),
      );
      watching.expiry.unref?.();
    }
    let alreadySeen: Parameters<ChangePoller['watch']>[3];
    if (from) {
      // Catch up alone first: what came after the cursor, then the shared polls, which skip what this one read.
      try {
        const caughtUp = await deps.poller.resume(table, partitionKey, from, wants, deps.maxResumeReads);
        if (!caughtUp) {
          throw new TablegraphError(
            ErrorCode.QUERY_TOO_COSTLY,
            `More than ${deps.maxResumeReads} entities changed since this cursor: read the data again, then subscribe without ${sub.after}.`,
            { argument: sub.after, reason: 'ResumeTooLarge', limit: deps.maxResumeReads },
          );
        }
        queue.push(...caughtUp.events.filter(allows));
        alreadySeen = { changes: caughtUp.read, snapshot: caughtUp.snapshot };
      } catch (e) {
        await queue.return();
        throw e;
      }
    }
    const since = from ? changeTime(from.changeKey) - deps.overlapMs : Date.now() - START_SKEW_MS;
    const listener = { since, wants, allows, deliver: (events: ChangeEvent[]) => queue.push(...events) };
    watching.stop = deps.poller.watch(table, partitionKey, listener, alreadySeen);
    return queue;
  };
}

/** Subscriptions live on this server: all of them, and by token subject. */
interface LiveCounts {
  count: number;
  bySubject: Map<string, number>;
}

/**
 * Refuses a subscription past the server's cap or its subject's.
 * @throws TablegraphError OVERLOADED (TooManySubscriptions, TooManyForSubject)
 */
function admit(deps: SubscriptionDeps, live: LiveCounts, subject: string | undefined): void {
  if (live.count >= deps.maxSubscriptions) {
    throw new TablegraphError(
      ErrorCode.OVERLOADED,
      `This server serves ${deps.maxSubscriptions} subscriptions at most: try again shortly, or another server.`,
      {
        reason: 'TooManySubscriptions',
      },
    );
  }
  if (subject !== undefined && (live.bySubject.get(subject) ?? 0) >= deps.perSubject) {
    throw new TablegraphError(ErrorCode.OVERLOADED, `One caller holds ${deps.perSubject} subscriptions at most on a server: complete one first.`, {
      reason: 'TooManyForSubject',
      limit: deps.perSubject,
    });
  }
}

/**
 * When the caller's token expires (ms since the epoch; undefined: it does not).
 * @throws TablegraphError UNAUTHENTICATED (TokenExpired) when it has already
 */
function tokenExpiry(ctx: RequestContext): number | undefined {
  const exp = ctx.principal?.claims.exp;
  if (typeof exp !== 'number') return undefined;
  if (exp * 1000 <= Date.now()) {
    throw new TablegraphError(ErrorCode.UNAUTHENTICATED, 'The token has expired: subscribe again with a new token.', { reason: 'TokenExpired' });
  }
  return exp * 1000;
}

/** A change cursor as sealed: the change's RowKey and the round that delivered it (change-poller.ts DeliveryRound). */
type SealedChangeCursor = [4, string, ChangeSnapshot, ChangeSnapshot | null];

function isSnapshot(x: unknown): x is ChangeSnapshot {
  const s = x as ChangeSnapshot;
  return typeof s === 'object' && s !== null && typeof s.through === 'string' && Array.isArray(s.keys) && s.keys.every((k) => typeof k === 'string');
}

/**
 * The change a client resumes after, from its cursor.
 * @throws TablegraphError BAD_USER_INPUT when the cursor is not one of this subscription's, or older than the change
 *   log keeps (ChangesExpired)
 */
function resumePoint(ctx: RequestContext, scope: string, cursor: string, argument: string, retentionMs: number): ResumePoint {
  const value = ctx.cursors.open(scope, cursor, argument) as SealedChangeCursor;
  if (!Array.isArray(value) || value[0] !== 4 || typeof value[1] !== 'string' || !isSnapshot(value[2]) || (value[3] !== null && !isSnapshot(value[3]))) {
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, 'The cursor is not a change cursor.', { argument });
  }
  if (changeTime(value[1]) < Date.now() - retentionMs) {
    throw new TablegraphError(
      ErrorCode.BAD_USER_INPUT,
      `The change log keeps changes for ${retentionMs / 1000} s: this cursor is older. Read the data again.`,
      {
        argument,
        reason: 'ChangesExpired',
      },
    );
  }
  return { changeKey: value[1], round: { seen: value[2], before: value[3] ?? undefined } };
}

/** Whether the subscriber may see this change: on the entity as read, or for a delete on its keys and kept scope values. */
function allowed(entity: EntityModel, ctx: RequestContext, e: ChangeEvent): boolean {
  if (e.stored) return allowsEntity([entity.auth], ctx.principal, e.stored.properties);
  const known: Record<string, unknown> = { ...e.change.scope, ...keyValues(entity.layout, e.change.address.partitionKey, e.change.address.rowKey) };
  return decide(entity.auth, ctx.principal, (f) => known[f]) === 'allow';
}

function payload(sub: SubscriptionModel, event: ChangeEvent, _args: unknown, ctx: RequestContext, deps: SubscriptionDeps): ChangePayload {
  // Each event is a request of its own for what lies below `node`: fresh loaders, fresh cost, no stale cache.
  Object.assign(ctx, createRequestContext(deps, ctx.requestId, ctx.principal));
  const { entity } = sub;
  const { change, stored } = event;
  const keys = keyValues(entity.layout, change.address.partitionKey, change.address.rowKey);
  const out: ChangePayload = {
    kind: change.kind,
    node: stored ? { entity, stored } : null,
    cursor: ctx.cursors.seal(cursorScope(sub, change.address.table, change.address.partitionKey), [
      4,
      change.changeKey,
      event.round!.seen,
      event.round!.before ?? null,
    ] satisfies SealedChangeCursor),
  };
  for (const f of entity.keyFields) {
    const value = stored?.properties[f] ?? keys[f];
    const kind = entity.fields.get(f)?.graphqlType;
    out[f] = typeof value === 'string' && (kind === 'Int' || kind === 'Float') ? Number(value) : value;
  }
  return out;
}
