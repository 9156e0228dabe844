/**
 * A write's message handled as the worker's dispatcher does (src/worker/message-worker.ts), for tests that deliver
 * messages by hand: a `fanout` message reconciled, a `move` message carried out.
 */
import type { EntityMessage } from '../../src/queue/messages';
import { carryOutMove, type MoveOptions, type MoveResult } from '../../src/worker/carry-out-move';
import { reconcile, type ReconcileOptions, type ReconcileResult } from '../../src/worker/reconciler';

export type HandleOptions = ReconcileOptions & MoveOptions;

export function handleMessage(message: EntityMessage, opts: HandleOptions): Promise<ReconcileResult | MoveResult> {
  return message.kind === 'move' ? carryOutMove(message, opts) : reconcile(message, opts);
}
