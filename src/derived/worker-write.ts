/**
 * The writes the worker makes through the write path, not for a client: a join entity deleted or re-pointed
 * (dependent-upkeep.ts), an entity whose copies move what it contributes to a summary (copy-refresh.ts). Going through the write
 * path keeps everything a client's write keeps — summaries in the EGT or through the work queue, indexes, the
 * change log — where a plain write of the entity would leave them behind.
 */
import { ErrorCode, isTablegraphError } from '../errors';
import type { EntityModel, WriteModel } from '../model/types';

/**
 * A write of `entity` by the worker: every stored field may be given but summaries, copies (filled from their
 * targets by the write path) and series.
 */
export function workerWrite(entity: EntityModel, action: WriteModel['action']): WriteModel {
  const inputFields = new Set([...entity.fields.keys()].filter((f) => !entity.summaryFields.has(f) && !entity.copies.has(f) && !entity.fields.get(f)!.series));
  return { coordinate: `${entity.name}.worker`, entity, action, inputFields, payloadField: '' };
}

/**
 * Whether a worker's write went through; false when it found its entity already changed or gone (CONFLICT, or a
 * NOT_FOUND without a reason): a redelivery of the same message, or a client, did it first.
 * @throws any other error of the write (the message is retried)
 */
export async function quietly(write: Promise<unknown>): Promise<boolean> {
  try {
    await write;
    return true;
  } catch (e) {
    if (isTablegraphError(e, ErrorCode.CONFLICT) || (isTablegraphError(e, ErrorCode.NOT_FOUND) && e.details.reason === undefined)) return false;
    throw e;
  }
}
