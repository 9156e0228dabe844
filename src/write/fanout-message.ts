/**
 * The fan-out message (docs/architecture.md, "Fan-out and reconciliation", the guide's "Eventually consistent
 * transactions pattern"): put on the queue before the EGT of a write commits, it names the entity, the write (its
 * WriteId, a UUID never reused) and the state that write was based on, and every derived entity (inter-partition index
 * entity) the old and the new state derive. The worker reconciles from the truth, so the message carries no values,
 * only addresses.
 */
import { ErrorCode, TablegraphError } from '../errors';
import { WRITE_ID_PROPERTY } from '../model/types';
import type { EntityAddress, StoredEntity } from '../storage/types';

export interface FanoutMessage {
  v: 2;
  /** Unique per message (UUID), for logs and the poison queue. */
  id: string;
  /** The @entity type name, e.g. `Employee`. */
  entity: string;
  /** The entity written. */
  primary: EntityAddress;
  /** The write's id: the `WriteId` the entity carries once the write has committed (for a delete: none). */
  writeId: string;
  /**
   * The state id (see stateId) of the entity the write read and is conditional on; null for a create, which is
   * conditional on the entity's absence. While the entity is still in this state, the write may yet commit.
   */
  basedOn: string | null;
  /** Whether the write deletes the entity. */
  deleted: boolean;
  /** Addresses of the derived entities of the old and the new state. */
  candidates: EntityAddress[];
  /**
   * Where the old and the new state's summaries held elsewhere find their holders when they reach them through a
   * unique index (`@summary(via)` over `@point(index:)`): the index entities' addresses, read by the worker.
   */
  holderLookups?: EntityAddress[];
  /** When the message was enqueued (ms since the epoch): the start of the fan-out lag. */
  enqueuedAt: number;
  /**
   * A move (`@write(action: MOVE)`): the entity's new address and key field values, and the type it becomes there
   * when that is another (`@write(to:)`); the worker carries it out.
   */
  move?: { to: EntityAddress; keys: Record<string, string>; entity?: string };
}

/**
 * What identifies an entity's state: the WriteId of the write that produced it, or, for an entity written
 * without one (by an older version), its ETag; null when the entity does not exist. Write ids are never reused,
 * so a state, once left, never comes back — except absence.
 */
export function stateId(e: StoredEntity | null): string | null {
  if (!e) return null;
  const id = e.properties[WRITE_ID_PROPERTY];
  return typeof id === 'string' ? id : `etag:${e.etag}`;
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
    m?.v === 2 &&
    typeof m.id === 'string' &&
    typeof m.entity === 'string' &&
    isAddress(m.primary) &&
    typeof m.writeId === 'string' &&
    (m.basedOn === null || typeof m.basedOn === 'string') &&
    typeof m.deleted === 'boolean' &&
    Array.isArray(m.candidates) &&
    m.candidates.every(isAddress) &&
    (m.holderLookups === undefined || (Array.isArray(m.holderLookups) && m.holderLookups.every(isAddress))) &&
    typeof m.enqueuedAt === 'number' &&
    (m.move === undefined ||
      (isAddress(m.move.to) && typeof m.move.keys === 'object' && m.move.keys !== null && (m.move.entity === undefined || typeof m.move.entity === 'string')));
  if (!valid) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, 'fan-out message has an unknown shape', { messageId: m?.id });
  return m;
}

/** A stable string for an address, for sets and maps. */
export function addressKey(a: EntityAddress): string {
  return `${a.table}\u0000${a.partitionKey}\u0000${a.rowKey}`;
}
