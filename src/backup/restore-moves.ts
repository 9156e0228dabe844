/**
 * Moves under way in what a restore wrote (src/model/types.ts MOVE_ID_PROPERTY, MOVED_IN_PROPERTY): the work queue
 * that would carry them out is not restored, so a restore settles each one itself, once every row is written —
 * - its copy at the new address was written (the worker's create had committed): the move is in — the entity at the
 *   old address is deleted, and the copy loses its mark;
 * - only the entity at the old address, marked: the move was requested but not carried out, and is out — the entity
 *   loses its mark, and stays where it was (run the move again on the restored deployment).
 * Either way no entity is left at two addresses, or marked for a move that will never come (its writes would be
 * refused with MovePending). The marks met are kept in the restore's progress, so that a resumed restore settles them.
 */
import { MOVE_ID_PROPERTY, MOVED_IN_PROPERTY } from '../model/types';
import { decodeRow, encodeRow } from '../model/row-text';
import type { TableStore } from '../storage/table-store';
import type { EntityToWrite } from '../storage/storage-types';

/**
 * The marked rows written, by move id: the entity at the old address and the copy at the new one (row-text.ts lines,
 * target tables), and the old address as the copy's change named it (`from`: the old entity's mark is not in the
 * captured changes — the request sets it outside an EGT with a change entity — so the copy's change tells where it was).
 */
export type MoveMarks = Record<string, { old?: string; copy?: string; from?: { table: string; partitionKey: string; rowKey: string } }>;

/** Notes a row written under `table` (the target's name) when it carries a move mark. */
export function noteMoveMarks(marks: MoveMarks, table: string, entity: EntityToWrite): void {
  for (const [property, side] of [
    [MOVE_ID_PROPERTY, 'old'],
    [MOVED_IN_PROPERTY, 'copy'],
  ] as const) {
    const id = entity.properties[property]?.value;
    if (typeof id === 'string' && id !== '') (marks[id] ??= {})[side] = encodeRow({ table, entity });
  }
}

function unmarked(entity: EntityToWrite): EntityToWrite {
  const properties = { ...entity.properties };
  delete properties[MOVE_ID_PROPERTY];
  delete properties[MOVED_IN_PROPERTY];
  return { ...entity, properties };
}

/**
 * Settles every move noted (see the file comment). Idempotent: run again after a kill, it does the same.
 * @returns how many moves were carried (in) and dropped (out)
 * @throws storage errors (run the restore again)
 */
export async function settleMoves(target: TableStore, marks: MoveMarks): Promise<{ carried: number; dropped: number }> {
  let carried = 0;
  let dropped = 0;
  for (const [id, { old, copy }] of Object.entries(marks)) {
    if (copy) {
      const row = decodeRow(copy, `move ${id}`);
      const before = old ? decodeRow(old, `move ${id}`) : undefined;
      const at = before ? { table: before.table, partitionKey: before.entity.partitionKey, rowKey: before.entity.rowKey } : marks[id].from;
      if (at) await target.deleteEntity(at);
      await target.upsertEntity(row.table, unmarked(row.entity), 'replace');
      carried++;
    } else if (old) {
      const row = decodeRow(old, `move ${id}`);
      await target.upsertEntity(row.table, unmarked(row.entity), 'replace');
      dropped++;
    }
  }
  return { carried, dropped };
}
