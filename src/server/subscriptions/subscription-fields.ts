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
import { ErrorCode, TablegraphError } from '../../errors';
import { decide } from '../../model/authorization';
import { changeTime, type Change } from '../../model/change-log';
import { renderKey } from '../../model/key-template';
import type { EntityModel, Model, SubscriptionModel } from '../../model/types';
import { allowsEntity, authorizeTypeBefore, keyValues } from '../../resolvers/authorize';
import { createRequestContext, type ContextDeps, type RequestContext } from '../../resolvers/context';
import type { EntityNode } from '../../resolvers/entity-node';
import { checkKey } from '../../storage/limits';
import type { StorageTarget } from '../../storage/types';
import type { ChangeEvent, ChangePoller } from './change-poller';
import { EventQueue } from './event-queue';

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
  const live = { count: 0 };
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

function subscriber(
  sub: SubscriptionModel,
  deps: SubscriptionDeps,
  live: { count: number },
): GraphQLFieldResolver<unknown, RequestContext, Record<string, unknown>> {
  const { entity } = sub;
  return async (_root, args, ctx) => {
    const table = entity.layout.table;
    const partitionKey = renderKey(entity.layout.partitionKey, args);
    const rowKey = sub.oneEntity ? renderKey(entity.layout.rowKey, args) : undefined;
    checkKey('PartitionKey', partitionKey, deps.target, { table, partitionKey });
    if (rowKey !== undefined) checkKey('RowKey', rowKey, deps.target, { table, partitionKey, rowKey });
    authorizeTypeBefore(entity, ctx.principal, keyValues(entity.layout, partitionKey, rowKey), `subscribe to ${sub.coordinate}`);
    const after = sub.after && typeof args[sub.after] === 'string' ? (args[sub.after] as string) : undefined;
    let since = Date.now() - START_SKEW_MS;
    let resumedFrom: string | undefined;
    if (after !== undefined) {
      const position = ctx.cursors.decode(cursorScope(sub, table, partitionKey), after);
      if (!('rowKey' in position)) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, 'The cursor is not a change cursor.', { argument: sub.after });
      resumedFrom = position.rowKey;
      const at = changeTime(resumedFrom);
      if (at < Date.now() - deps.retentionMs) {
        throw new TablegraphError(
          ErrorCode.BAD_USER_INPUT,
          `The change log keeps changes for ${deps.retentionMs / 1000} s: this cursor is older. Read the data again.`,
          {
            argument: sub.after,
            reason: 'ChangesExpired',
          },
        );
      }
      since = at - deps.overlapMs;
    }
    if (live.count >= deps.maxSubscriptions) {
      throw new TablegraphError(
        ErrorCode.OVERLOADED,
        `This server serves ${deps.maxSubscriptions} subscriptions at most: try again shortly, or another server.`,
        {
          reason: 'TooManySubscriptions',
        },
      );
    }
    const wants = (c: Change) => c.of === entity.entityType && (rowKey === undefined || c.address.rowKey === rowKey) && c.changeKey !== resumedFrom;
    const allows = (e: ChangeEvent) => allowed(entity, ctx, e);
    live.count++;
    const watching: { stop?: () => void } = {};
    let caughtUp: Change[] = [];
    const queue = new EventQueue<QueuedEvent>(
      () => {
        live.count--;
        watching.stop?.();
      },
      (failure) => ({ failure }),
    );
    const listener = { since, wants, allows, deliver: (events: ChangeEvent[]) => queue.push(...events) };
    if (after !== undefined) {
      // Catch up alone first: what was made since the cursor (and the overlap before it), then the shared polls,
      // which skip what this listener already got.
      let missed: ChangeEvent[];
      try {
        missed = (await deps.poller.changesSince(table, partitionKey, since, wants)).filter(allows);
      } catch (e) {
        await queue.return();
        throw e;
      }
      queue.push(...missed);
      caughtUp = missed.map((e) => e.change);
    }
    watching.stop = deps.poller.watch(table, partitionKey, listener, caughtUp);
    return queue;
  };
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
    cursor: ctx.cursors.encode(cursorScope(sub, change.address.table, change.address.partitionKey), { rowKey: change.changeKey }),
  };
  for (const f of entity.keyFields) {
    const value = stored?.properties[f] ?? keys[f];
    const kind = entity.fields.get(f)?.graphqlType;
    out[f] = typeof value === 'string' && (kind === 'Int' || kind === 'Float') ? Number(value) : value;
  }
  return out;
}
