/**
 * The fan-out message (DESIGN.md §4.2, the guide's "Eventually consistent transactions pattern"): put on the
 * queue before the EGT of a write commits, it names the entity, the version the write creates, and every derived
 * entity (inter-partition index entity) the old and the new version derive. The worker reconciles from the truth,
 * so the message carries no values, only addresses.
 */
import { ErrorCode, TablegraphError } from '../errors';
import type { EntityAddress } from '../storage/types';

export interface FanoutMessage {
  v: 1;
  /** Unique per message (UUID), for logs and the poison queue. */
  id: string;
  /** The @entity type name, e.g. `Employee`. */
  entity: string;
  /** The entity written. */
  primary: EntityAddress;
  /** The `Version` the write creates (for a delete: the version after the last write, plus one). */
  version: number;
  /** Whether the write deletes the entity. */
  deleted: boolean;
  /** Addresses of the derived entities of the old and the new version. */
  candidates: EntityAddress[];
  /** When the message was enqueued (ms since the epoch): the start of the fan-out lag. */
  enqueuedAt: number;
}

/** The message as queue text (JSON). */
export function encodeFanout(m: FanoutMessage): string {
  return JSON.stringify(m);
}

function isAddress(a: unknown): a is EntityAddress {
  const x = a as EntityAddress;
  return typeof x === 'object' && x !== null && typeof x.table === 'string' && typeof x.partitionKey === 'string' && typeof x.rowKey === 'string';
}

/**
 * Parses queue text into a message.
 * @throws TablegraphError BAD_USER_INPUT when the text is not a fan-out message of this version (such a message
 *   can never succeed: the worker moves it to the poison queue)
 */
export function decodeFanout(text: string): FanoutMessage {
  let m: FanoutMessage;
  try {
    m = JSON.parse(text) as FanoutMessage;
  } catch {
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, 'fan-out message is not JSON');
  }
  const valid =
    m?.v === 1 &&
    typeof m.id === 'string' &&
    typeof m.entity === 'string' &&
    isAddress(m.primary) &&
    Number.isInteger(m.version) &&
    typeof m.deleted === 'boolean' &&
    Array.isArray(m.candidates) &&
    m.candidates.every(isAddress) &&
    typeof m.enqueuedAt === 'number';
  if (!valid) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, 'fan-out message has an unknown shape', { messageId: m?.id });
  return m;
}

/** A stable string for an address, for sets and maps. */
export function addressKey(a: EntityAddress): string {
  return `${a.table}\u0000${a.partitionKey}\u0000${a.rowKey}`;
}
