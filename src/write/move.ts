/**
 * A move request (`@write(action: MOVE)`): a change of an entity's keys, as the guide's "Eventually consistent
 * transactions pattern" moves an employee between departments — the request checks what can be known now and puts
 * a message on the work queue; the worker copies the entity to its new address, then deletes it at the old one
 * (src/worker/carry-out-move.ts). The old address answers the entity until the worker deletes it there. With `@write(to:)` the
 * entity becomes another type at its new address — the guide's archiving example, an employee moved to an Archive
 * table.
 */
import { randomUUID } from 'node:crypto';
import { ErrorCode, isTablegraphError, TablegraphError } from '../errors';
import { primaryAddress, valuesOf } from '../model/entity-codec';
import { referenceAddress } from '../model/references';
import { MOVE_ID_PROPERTY, MOVED_IN_PROPERTY, type EntityModel, type Model, type WriteModel } from '../model/types';
import { IF_MATCH_FIELD } from '../model/write-inputs';
import { checkKey } from '../storage/limits';
import type { TableStore } from '../storage/table-store';
import type { EntityAddress, StorageObserver, StoredEntity } from '../storage/storage-types';
import { addressKey } from '../storage/address-key';
import { encodeMessage, stateId } from '../queue/messages';
import type { GroupMember } from './group-plan';
import type { SentMessage, WorkQueueSender } from '../queue/sender';
import type { WriteResult } from './commit-types';
import { checkReferences } from './check-references';
import type { Values } from './plan-types';

/** Attempts at marking the entity when other writes keep changing it between the read and the mark. */
const MARK_ATTEMPTS = 5;

/**
 * Checks a move, queues it, then marks the entity with the move's id (types.ts MOVE_ID_PROPERTY), conditional on
 * the ETag read: the worker carries out only a move whose mark the entity carries, so the move acts on this
 * entity once, and never on one created later at the same address. The message goes first, so that no entity is
 * ever marked for a move nobody will carry out; when the mark fails, the message is withdrawn (or, received
 * already, finds no mark and does nothing).
 * @returns the entity as it is now, at its old address (the move is carried out eventually)
 * @throws TablegraphError BAD_USER_INPUT (a key value that cannot form a key, or no key changes), LIMIT_EXCEEDED (the
 *   new keys over the target's limits), NOT_FOUND (nothing at the old address; ReferenceMissing: a reference of the
 *   moved entity would point at nothing), CONFLICT (ETagMismatch: stale `ifMatch`; EntityAlreadyExists: the new
 *   address is taken; MovePending: a move of the entity, or into its new address, is already under way),
 *   FORBIDDEN (from `check`), STORAGE_UNAVAILABLE (also when other writes kept changing the entity)
 */
export async function requestMove(
  ctx: MoveContext,
  write: WriteModel,
  input: Values,
  observer?: StorageObserver,
  check?: GroupMember['check'],
): Promise<WriteResult> {
  const { entity } = write;
  const move = moveAddresses(ctx, write, input);
  const { from, to } = move;
  const call = { observer };
  for (let attempt = 1; ; attempt++) {
    const [current, taken] = await Promise.all([ctx.store.getEntity(from, call), ctx.store.getEntity(to, call)]);
    const previous = await checkMove(ctx, { write, input, check, call }, move, { current, taken });
    const moveId = randomUUID();
    const sent = await ctx.workQueue.send(
      encodeMessage({
        kind: 'move',
        v: 3,
        id: randomUUID(),
        entity: entity.name,
        primary: from,
        writeId: moveId,
        basedOn: stateId(current),
        deleted: false,
        candidates: [],
        enqueuedAt: Date.now(),
        move: { to, keys: move.keys, ...(move.target !== entity && { entity: move.target.name }) },
      }),
    );
    const marked = await markForMove(ctx, { from, current: current!, moveId, previous, sent }, call);
    if (marked) return marked;
    if (attempt === MARK_ATTEMPTS)
      throw new TablegraphError(ErrorCode.STORAGE_UNAVAILABLE, `${entity.name} ${from.partitionKey}/${from.rowKey} kept changing while its move was requested`);
  }
}

/** What a move request reaches: the model, the store, and the work queue its message goes to. */
type MoveContext = { model: Model; store: TableStore; workQueue: WorkQueueSender };

/** A move's two addresses and the key values it moves to; `target`: the type at the new address (an archive's). */
interface MoveAddresses {
  target: EntityModel;
  from: EntityAddress;
  to: EntityAddress;
  keys: Record<string, string>;
}

/** @throws TablegraphError BAD_USER_INPUT, LIMIT_EXCEEDED (see requestMove) */
function moveAddresses(ctx: MoveContext, write: WriteModel, input: Values): MoveAddresses {
  const { entity } = write;
  // An archive (`@write(to:)`) becomes another type at its new address, keyed by key fields of this one.
  const target = write.moveTarget ?? entity;
  const from = primaryAddress(entity, input);
  const keys: Record<string, string> = {};
  for (const [toField, key] of write.moveTo!) keys[key] = String(input[toField] ?? input[key]);
  const to = primaryAddress(target, keys);
  for (const address of [from, to]) {
    checkKey('PartitionKey', address.partitionKey, ctx.store.target, { ...address });
    checkKey('RowKey', address.rowKey, ctx.store.target, { ...address });
  }
  if (addressKey(from) === addressKey(to))
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${write.coordinate}: the new keys address the same ${entity.name}: nothing to move`);
  return { target, from, to, keys };
}

/**
 * Whether the move may be requested on the entity as read (`current`), its new address as read (`taken`).
 * @returns the entity's values
 * @throws TablegraphError NOT_FOUND, CONFLICT, FORBIDDEN (see requestMove)
 */
async function checkMove(
  ctx: MoveContext,
  request: { write: WriteModel; input: Values; check?: GroupMember['check']; call: { observer?: StorageObserver } },
  move: MoveAddresses,
  read: { current: StoredEntity | null; taken: StoredEntity | null },
): Promise<Values> {
  const { write, input, check, call } = request;
  const { entity } = write;
  const { target, from, to, keys } = move;
  const { current, taken } = read;
  if (!current) throw new TablegraphError(ErrorCode.NOT_FOUND, `${entity.name} ${from.partitionKey}/${from.rowKey} does not exist`);
  if (typeof input[IF_MATCH_FIELD] === 'string' && input[IF_MATCH_FIELD] !== current.etag) {
    throw new TablegraphError(ErrorCode.CONFLICT, `${entity.name} ${from.partitionKey}/${from.rowKey} changed since it was read (stale ifMatch ETag)`, {
      reason: 'ETagMismatch',
      currentEtag: current.etag,
    });
  }
  if (isMarked(current)) {
    throw new TablegraphError(
      ErrorCode.CONFLICT,
      `${entity.name} ${from.partitionKey}/${from.rowKey}: a move of it is under way; request another once it is carried out`,
      { reason: 'MovePending' },
    );
  }
  const becomes = target === entity ? entity.name : `${target.name} (${entity.name} archived)`;
  if (taken)
    throw new TablegraphError(ErrorCode.CONFLICT, `${becomes} ${to.partitionKey}/${to.rowKey} already exists: the move would overwrite it`, {
      reason: 'EntityAlreadyExists',
    });
  const previous = valuesOf(entity, current.properties);
  const moved = { ...previous, ...keys };
  // Its references from the new address must point at something (the department it moves to exists).
  const targets = new Map<string, StoredEntity | null>();
  for (const path of ctx.model.references.get(target.name) ?? []) {
    const address = referenceAddress(path, moved);
    if (address && !targets.has(addressKey(address))) targets.set(addressKey(address), await ctx.store.getEntity(address, call));
  }
  checkReferences(ctx.model, { ...write, entity: target, action: 'REPLACE' }, moved, moved, targets);
  check?.(previous, moved);
  return previous;
}

/**
 * Marks the entity with the move's id, conditional on the ETag read; withdraws the message when the mark is refused.
 * @returns the write's result; undefined when the entity changed since it was read (read it again)
 * @throws TablegraphError STORAGE_UNAVAILABLE (reason OutcomeUnknown) when the mark's answer was lost and the entity
 *   is gone; what the store throws otherwise
 */
async function markForMove(
  ctx: MoveContext,
  mark: { from: EntityAddress; current: StoredEntity; moveId: string; previous: Values; sent: SentMessage | void },
  call: { observer?: StorageObserver },
): Promise<WriteResult | undefined> {
  const { from, current, moveId, previous, sent } = mark;
  try {
    const entity = { partitionKey: from.partitionKey, rowKey: from.rowKey, properties: { [MOVE_ID_PROPERTY]: { type: 'String' as const, value: moveId } } };
    const etag = await ctx.store.updateEntity(from.table, entity, 'merge', { ...call, ifMatch: current.etag });
    return { address: from, values: previous, etag, deleted: false };
  } catch (e) {
    const changed = isTablegraphError(e, ErrorCode.CONFLICT) || isTablegraphError(e, ErrorCode.NOT_FOUND);
    if (changed && typeof e.details.attempts === 'number' && e.details.attempts > 1) {
      // Refused on the SDK's retry: the first attempt may have been applied, its answer lost. The mark tells.
      const now = await ctx.store.getEntity(from, call).catch(() => undefined);
      if (now && now.properties[MOVE_ID_PROPERTY] === moveId) return { address: from, values: previous, etag: now.etag, deleted: false };
      if (!now) {
        // Gone: the worker may have carried out this very move already, or another client deleted it. The message
        // stays: a move whose mark is not there does nothing.
        throw new TablegraphError(
          ErrorCode.STORAGE_UNAVAILABLE,
          "The move's answer was lost and its outcome cannot be read back: read the entity before moving it again.",
          { reason: 'OutcomeUnknown' },
        );
      }
    }
    if (sent) await ctx.workQueue.withdraw?.(sent).catch(() => undefined);
    // Written or deleted since it was read: read it again (a client's ifMatch is then stale, said above).
    if (!changed) throw e;
    return undefined;
  }
}

/** Whether a stored entity is the old entity of a move under way, or a move's copy not yet released (types.ts). */
export function isMarked(e: StoredEntity): boolean {
  return [MOVE_ID_PROPERTY, MOVED_IN_PROPERTY].some((p) => typeof e.properties[p] === 'string' && e.properties[p] !== '');
}
