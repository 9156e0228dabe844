/**
 * Carrying out a move (`@write(action: MOVE)`, src/write/move.ts), as the guide's "Eventually consistent
 * transactions pattern" lays it out: copy the entity to its new address, then delete it at the old one, then the
 * message goes. Each step is an ordinary write through the write path — the new partition's summaries and indexes
 * come with the create, the old partition's with the delete — and each is idempotent, so a redelivered message, or
 * a worker that died between the steps, ends where one delivery would ("Recovering from failures").
 *
 * A move acts only on the entity its request marked (types.ts MOVE_ID_PROPERTY), and marks its copy while both
 * exist (MOVED_IN_PROPERTY), so a message delivered again, late, after the move was carried out and the old address
 * reused, changes nothing:
 * - the old entity does not carry this move's mark: carried out already (its copy's mark is removed if still
 *   there), deleted since by a client, or the request failed to mark it — nothing to do. An entity still in the
 *   state the request read and not yet marked may yet be: the message waits for it up to the settle time;
 * - no entity at the new address: create the copy, marked, taking over the old entity's unique keys;
 * - the copy, marked by this move, differing from the old entity: replace it (an update of the old entity made
 *   after the request is carried along);
 * - an entity at the new address that is not this move's copy: someone created it after the request checked the
 *   address was free; the move cannot be honoured without destroying it, so it is abandoned — the old entity's
 *   mark is removed and the abandonment reported (`outcome: 'abandoned'`);
 * - then delete the old entity, conditional on the ETag read (if it changed meanwhile, go round again), and remove
 *   the copy's mark.
 * An archive (`@write(to:)`) is the same, the copy being of the target type: its fields filled from the fields of
 * the same name, its own indexes and summaries coming with its create. A `@blob` field's blob is copied to a name
 * under the new address (the delete's cleanup message then takes the old one).
 */
import { ErrorCode, isTablegraphError, TablegraphError } from '../errors';
import { entityWrites, primaryAddress, valuesOf } from '../model/entity-codec';
import { blobFields } from '../model/blob-fields';
import type { BlobCopy } from '../write/blob-writes';
import { MOVE_ID_PROPERTY, MOVED_IN_PROPERTY, WRITE_ID_PROPERTY, type EntityModel, type WriteModel } from '../model/types';
import type { TableStore } from '../storage/table-store';
import type { EntityAddress, StorageObserver, StoredEntity } from '../storage/storage-types';
import { stateId } from '../queue/messages';
import { isMarked } from '../write/move';
import { repointDependents } from '../derived/dependent-upkeep';
import type { MoveMessage } from '../queue/messages';
import type { WriteExecutor } from '../write/write-executor';
import type { ReconcileOptions } from './reconciler';

/** What a move message came to: carried out now, nothing left to do, or given up (the new address was taken). */
export type MoveOutcome = 'moved' | 'nothingToDo' | 'abandoned';

/** Done, with its passes, the entities it wrote and its outcome; or to be tried again after `afterMs` (ms). */
export type MoveResult = { kind: 'done'; passes: number; upserted: number; deleted: number; outcome: MoveOutcome } | { kind: 'retryLater'; afterMs: number };

/** What carrying out a move is given: the reconciler's options it shares (reconciler.ts), the write path, and a re-key's record of moves. */
export interface MoveOptions extends Pick<ReconcileOptions, 'model' | 'store' | 'observer' | 'afterUpserts' | 'settleMs' | 'holdMs' | 'now'> {
  /** The write path its steps go through; without it a move message fails (poison). */
  writer?: WriteExecutor;
  /**
   * After a re-key (src/evolution/rekey-build.ts): whether entity type `type` was re-keyed after `enqueuedAt` (ms since
   * 1970), and if so where the entity of move `moveId`, under way then, was carried (absent: not under way then).
   */
  movedTo?(type: string, moveId: string, enqueuedAt: number): { rekeyed: boolean; address?: EntityAddress };
}

/** Rounds before giving up on an entity that keeps changing under the move (the message is then retried). */
const PASSES = 10;

/**
 * Carries out (or finishes) the move a message names.
 * @param opts.settleMs how long after the request an unmarked entity in the state it read may still be marked
 *   (ms, default 30000); see ReconcileOptions
 * @returns done with the outcome, or retryLater while the request's mark may still come
 * @throws TablegraphError BAD_USER_INPUT when the worker has no write path or the type is unknown (the message can
 *   never succeed: poison); STORAGE_UNAVAILABLE (reason Contention) when the entity kept changing; what the writes
 *   throw otherwise
 */
export async function carryOutMove(message: MoveMessage, opts: MoveOptions): Promise<MoveResult> {
  const run = startMove(message, opts);
  const { entity, target, primary, to, store, call } = run;
  const moveId = message.writeId;
  const now = opts.now ?? Date.now;
  const settleMs = opts.settleMs ?? 30000;
  const holdUntil = now() + (opts.holdMs ?? 500);
  for (let pass = 1; pass <= PASSES; pass++) {
    const [old, copy] = await Promise.all([store.getEntity(primary, call), store.getEntity(to, call)]);
    const ours = old?.properties[MOVE_ID_PROPERTY] === moveId;
    const ourCopy = copy?.properties[MOVED_IN_PROPERTY] === moveId;
    try {
      if (!ours) {
        if (ourCopy) {
          await release(store, target, copy!, MOVED_IN_PROPERTY, call); // deleted the old entity, died before this
          return done(pass, 'moved');
        }
        // The request marks the entity right after queueing: unmarked in the state it read, it may still be.
        if (old && !isMarked(old) && stateId(old) === message.basedOn && now() - message.enqueuedAt < settleMs) {
          if (now() < holdUntil) {
            await new Promise((r) => setTimeout(r, 20));
            pass--; // a wait for the mark, not a pass
            continue;
          }
          return { kind: 'retryLater', afterMs: settleMs - (now() - message.enqueuedAt) };
        }
        return done(pass, 'nothingToDo');
      }
      if (copy && !ourCopy) {
        await release(store, entity, old!, MOVE_ID_PROPERTY, call);
        return done(pass, 'abandoned');
      }
      await copyThenDelete(run, old!, copy);
      return done(pass, 'moved', 1);
    } catch (e) {
      // Someone wrote one of the two addresses between the reads and the writes: read both again.
      if (isTablegraphError(e, ErrorCode.CONFLICT) && ['ETagMismatch', 'EntityAlreadyExists'].includes(String(e.details.reason))) continue;
      if (isTablegraphError(e, ErrorCode.NOT_FOUND) && e.details.reason === undefined) continue; // deleted meanwhile
      throw e;
    }
  }
  throw new TablegraphError(ErrorCode.STORAGE_UNAVAILABLE, `${entity.name} ${primary.partitionKey}/${primary.rowKey} kept changing while it was moved`, {
    messageId: message.id,
    reason: 'Contention',
  });
}

function done(pass: number, outcome: MoveOutcome, written = 0): MoveResult {
  return { kind: 'done', passes: pass, upserted: written, deleted: written, outcome };
}

/** One move under way: its message, its types and addresses as they are now, and what its writes go through. */
interface MoveRun {
  message: MoveMessage;
  opts: MoveOptions & { writer: WriteExecutor };
  entity: EntityModel;
  /** The type at the new address: the entity's own, or an archive's (`@write(to:)`). */
  target: EntityModel;
  primary: EntityAddress;
  to: EntityAddress;
  store: TableStore;
  call: { observer?: StorageObserver };
}

/** @throws TablegraphError BAD_USER_INPUT when the worker has no write path or a type is unknown */
function startMove(message: MoveMessage, opts: MoveOptions): MoveRun {
  const entity = opts.model.entities.get(message.entity);
  if (!entity) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `move message ${message.id} names ${message.entity}, which the schema does not have`);
  const { writer } = opts;
  if (!writer) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `move message ${message.id}: this worker has no write path to carry out moves`);
  // An archive (`@write(to:)`) creates another type at the new address, from the fields of the same name.
  const target = opts.model.entities.get(message.move.entity ?? entity.name);
  if (!target) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `move message ${message.id} names ${message.move.entity}, which the schema does not have`);
  const { primary, to } = addressesNow(message, entity, target, opts);
  return { message, opts: { ...opts, writer }, entity, target, primary, to, store: opts.store, call: { observer: opts.observer } };
}

/**
 * The marked entity (`old`) copied to the new address (created, or `copy` replaced when it differs), its join
 * entities re-pointed, then deleted at the old address, and the copy's mark removed.
 */
async function copyThenDelete(run: MoveRun, old: StoredEntity, copy: StoredEntity | null): Promise<void> {
  const { message, opts, entity, target, primary, to, store, call } = run;
  const { writer, observer } = opts;
  const { keys } = message.move;
  const moveId = message.writeId;
  // The same type takes over the unique keys it holds at the old address; another type has its own.
  const step = { moveId, ...(target === entity && { takeOverFrom: primary }) };
  const writes = (action: WriteModel['action'], of: EntityModel): WriteModel => ({
    coordinate: `${entity.name}.move`,
    entity: of,
    action,
    inputFields: new Set([...of.fields.keys()].filter((f) => !of.summaryFields.has(f) && !of.copies.has(f) && !of.fields.get(f)!.series)),
    payloadField: '',
  });
  const input: Record<string, unknown> = {};
  const values = valuesOf(entity, old.properties);
  for (const f of writes('CREATE', target).inputFields) input[f] = values[f] ?? null;
  // A @blob is copied to a name of the new address: the old address's cleanup deletes the blobs under its own.
  for (const { name } of blobFields(target)) {
    const blob = entity.fields.get(name)?.blob;
    input[name] = typeof values[name] === 'string' && blob ? ({ copyOf: { container: blob.container, name: values[name] } } satisfies BlobCopy) : null;
  }
  Object.assign(input, keys);
  if (!copy) await writer.execute(writes('CREATE', target), input, observer, undefined, step);
  else if (!sameValues(input, valuesOf(target, copy.properties)))
    await writer.execute(writes('REPLACE', target), { ...input, ifMatch: copy.etag }, observer, undefined, step);
  await opts.afterUpserts?.(message); // copied, not yet deleted: where a killed worker leaves it
  // Join entities pointing at it follow it to its new address (the same type's; an archive's are deleted after).
  if (target === entity) await repointDependents({ model: opts.model, store, writer, entity, primary, observer }, old, keys);
  const oldKeys = Object.fromEntries(entity.keyFields.map((k) => [k, values[k]]));
  await writer.execute(writes('DELETE', entity), { ...oldKeys, ifMatch: old.etag }, observer, undefined, step);
  const copied = await store.getEntity(to, call);
  if (copied?.properties[MOVED_IN_PROPERTY] === moveId) await release(store, target, copied, MOVED_IN_PROPERTY, call);
}

/**
 * The move's two addresses as they are now. A move requested before its type was re-keyed (src/evolution/rekey-build.ts)
 * names addresses of the old layout: its entity is where the re-key carried it (the re-key recorded each move under
 * way), and its new address is rendered again from its keys by this schema's layout.
 */
function addressesNow(
  message: MoveMessage,
  entity: EntityModel,
  target: EntityModel,
  opts: Pick<MoveOptions, 'movedTo'>,
): { primary: EntityAddress; to: EntityAddress } {
  const from = opts.movedTo?.(entity.name, message.writeId, message.enqueuedAt);
  let to = message.move.to;
  if (opts.movedTo?.(target.name, message.writeId, message.enqueuedAt).rekeyed) {
    try {
      to = primaryAddress(target, message.move.keys);
    } catch {
      // The new layout's keys need fields the move did not give: its address as requested (the move abandons there).
    }
  }
  return { primary: from?.address ?? message.primary, to };
}

/**
 * Rewrites an entity without one move mark, as it is otherwise (same values, same WriteId: the same state for the
 * fan-out), conditional on the ETag read. A merge cannot remove a property, so this is a replace, its properties
 * typed by the model. @throws TablegraphError CONFLICT (ETagMismatch) or NOT_FOUND when it changed meanwhile
 */
async function release(store: TableStore, of: EntityModel, stored: StoredEntity, mark: string, call: { observer?: StorageObserver }): Promise<void> {
  const writeId = stored.properties[WRITE_ID_PROPERTY];
  const { primary } = entityWrites(of, valuesOf(of, stored.properties), typeof writeId === 'string' ? writeId : undefined);
  for (const other of [MOVE_ID_PROPERTY, MOVED_IN_PROPERTY]) {
    const value = stored.properties[other];
    if (other !== mark && typeof value === 'string' && value !== '') primary.entity.properties[other] = { type: 'String', value };
  }
  await store.updateEntity(primary.table, primary.entity, 'replace', { ...call, ifMatch: stored.etag });
}

function sameValues(a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  const text = (v: unknown) => JSON.stringify(v instanceof Date ? v.toISOString() : typeof v === 'bigint' ? v.toString() : (v ?? null));
  return Object.keys(a).every((k) => text(a[k]) === text(b[k]));
}
