/**
 * Carrying out a move (`@write(action: MOVE)`, src/write/move.ts), as the guide's "Eventually consistent
 * transactions pattern" lays it out: copy the entity to its new address, then delete it at the old one, then the
 * message goes. Each step is an ordinary write through the write path — the new partition's summaries and indexes
 * come with the create, the old partition's with the delete — and each is idempotent, so a redelivered message, or
 * a worker that died between the steps, ends where one delivery would ("Recovering from failures"):
 * - nothing at the old address: moved (or deleted by someone) — done;
 * - nothing at the new address: create it from the old entity as it is now, taking over its unique keys;
 * - something at the new address that differs from the old entity: replace it (a write to the old address after
 *   the copy is carried along);
 * - then delete the old entity, conditional on the ETag read; if it changed meanwhile, go round again.
 * An archive (`@write(to:)`) is the same, the copy being of the target type: its fields filled from the fields of
 * the same name, its own indexes and summaries coming with its create. A `@blob` field's blob is copied to a name
 * under the new address (the delete's cleanup message then takes the old one).
 */
import { ErrorCode, isTablegraphError, TablegraphError } from '../errors';
import { valuesOf } from '../model/entity-codec';
import { blobFields } from '../model/blob-fields';
import type { BlobCopy } from '../write/blob-writes';
import type { EntityModel, Model, WriteModel } from '../model/types';
import type { TableStore } from '../storage/table-store';
import type { StorageObserver } from '../storage/types';
import type { FanoutMessage } from '../write/fanout-message';
import type { WriteExecutor } from '../write/write-executor';
import type { ReconcileResult } from './reconciler';

/** Rounds before giving up on an entity that keeps changing under the move (the message is then retried). */
const PASSES = 10;

/**
 * @throws TablegraphError BAD_USER_INPUT when the worker has no write path or the type is unknown (the message can
 *   never succeed: poison); STORAGE_UNAVAILABLE when the entity kept changing; what the writes throw otherwise
 */
export async function carryOutMove(
  message: FanoutMessage,
  opts: { model: Model; store: TableStore; writer?: WriteExecutor; observer?: StorageObserver; afterUpserts?(m: FanoutMessage): void | Promise<void> },
): Promise<ReconcileResult> {
  const entity = opts.model.entities.get(message.entity);
  if (!entity) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `move message ${message.id} names ${message.entity}, which the schema does not have`);
  if (!opts.writer) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `move message ${message.id}: this worker has no write path to carry out moves`);
  const { to, keys } = message.move!;
  // An archive (`@write(to:)`) creates another type at the new address, from the fields of the same name.
  const target = opts.model.entities.get(message.move!.entity ?? entity.name);
  if (!target) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `move message ${message.id} names ${message.move!.entity}, which the schema does not have`);
  const writes = (action: WriteModel['action'], of: EntityModel): WriteModel => ({
    coordinate: `${entity.name}.move`,
    entity: of,
    action,
    inputFields: new Set([...of.fields.keys()].filter((f) => !of.summaryFields.has(f) && !of.copies.has(f) && !of.fields.get(f)!.series)),
    payloadField: '',
  });
  // The same type takes over the unique keys it holds at the old address; another type has its own.
  const takeOver = target === entity ? { takeOverFrom: message.primary } : {};
  const call = { observer: opts.observer };
  for (let pass = 1; pass <= PASSES; pass++) {
    const [old, moved] = await Promise.all([opts.store.getEntity(message.primary, call), opts.store.getEntity(to, call)]);
    if (!old) return { kind: 'done', passes: pass, upserted: 0, deleted: 0 };
    const input: Record<string, unknown> = {};
    const values = valuesOf(entity, old.properties);
    for (const f of writes('CREATE', target).inputFields) input[f] = values[f] ?? null;
    // A @blob is copied to a name of the new address: the old address's cleanup deletes the blobs under its own.
    for (const { name } of blobFields(target)) {
      const blob = entity.fields.get(name)?.blob;
      input[name] = typeof values[name] === 'string' && blob ? ({ copyOf: { container: blob.container, name: values[name] } } satisfies BlobCopy) : null;
    }
    Object.assign(input, keys);
    try {
      if (!moved) {
        await opts.writer.execute(writes('CREATE', target), input, opts.observer, undefined, takeOver);
      } else if (!sameValues(input, valuesOf(target, moved.properties))) {
        await opts.writer.execute(writes('REPLACE', target), { ...input, ifMatch: moved.etag }, opts.observer, undefined, takeOver);
      }
      await opts.afterUpserts?.(message); // copied, not yet deleted: where a killed worker leaves it
      const oldKeys = Object.fromEntries(entity.keyFields.map((k) => [k, valuesOf(entity, old.properties)[k]]));
      await opts.writer.execute(writes('DELETE', entity), { ...oldKeys, ifMatch: old.etag }, opts.observer);
      return { kind: 'done', passes: pass, upserted: 1, deleted: 1 };
    } catch (e) {
      // Someone wrote one of the two addresses between the reads and the writes: read both again.
      if (isTablegraphError(e, ErrorCode.CONFLICT) && ['ETagMismatch', 'EntityAlreadyExists'].includes(String(e.details.reason))) continue;
      if (isTablegraphError(e, ErrorCode.NOT_FOUND) && e.details.reason === undefined) continue; // deleted meanwhile
      throw e;
    }
  }
  throw new TablegraphError(ErrorCode.STORAGE_UNAVAILABLE, `${entity.name} ${message.primary.partitionKey}/${message.primary.rowKey} kept changing while it was moved`, { messageId: message.id });
}

function sameValues(a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  const text = (v: unknown) => JSON.stringify(v instanceof Date ? v.toISOString() : typeof v === 'bigint' ? v.toString() : (v ?? null));
  return Object.keys(a).every((k) => text(a[k]) === text(b[k]));
}
