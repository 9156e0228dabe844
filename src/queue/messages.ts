/**
 * Every message of the work queue, one tagged union (`kind`), and its one encoding (docs/architecture.md,
 * "Fan-out and reconciliation"; the guide's "Eventually consistent transactions pattern"):
 * - `fanout`: put on the queue before the EGT of a write commits, it names the entity, the write (its WriteId, a
 *   UUID never reused) and the state that write was based on, and every derived entity the old and the new state
 *   derive. The worker reconciles from the truth, so the message carries no values, only addresses.
 * - `move`: the same, for a `@write(action: MOVE)`, with the entity's new address; the worker carries it out.
 * - `blobCleanup`: queued before a write uploads, replaces, clears or deletes a `@blob` field's blob, hidden for the
 *   cleanup delay; the worker then deletes every blob of the entity that it no longer names.
 * - `batch`: the `fanout` and `move` messages of one group commit's writes (one EGT), sent as one queue message —
 *   Azure bills each message sent, received and deleted — within the queue's 64 KiB (encodeBatches cuts it into
 *   several beyond). The worker handles each item as the message it holds, on its own.
 * Writers send them through one sender (sender.ts); the worker decodes them here and dispatches on `kind`.
 */
import { currentTraceparent } from '../telemetry/spans';
import { randomUUID } from 'node:crypto';
import { ErrorCode, TablegraphError } from '../errors';
import { WRITE_ID_PROPERTY } from '../model/types';
import type { EntityAddress, StoredEntity } from '../storage/storage-types';
import { MAX_MESSAGE_BYTES } from '../storage/queue-store';

/** What a `fanout` and a `move` message both say of the write they announce. */
interface EntityMessageFields {
  /** The encoding's version: 3 (2, without `kind`, is still read). */
  v: 3;
  /** The W3C trace context of the request that sent it, when tracing is on (the worker's span links to it). */
  traceparent?: string;
  /** Unique per message (UUID), for logs and the poison queue. */
  id: string;
  /** The @entity type name, e.g. `Order`. */
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
  /**
   * Summary holders the write changed in its EGT whose values other summaries sum (a summary of a summary): the
   * worker brings their contributions to those up to date once the write is visible (src/derived/summary-chains.ts).
   */
  summaryHolders?: Array<{ entity: string; address: EntityAddress }>;
  /** When the message was enqueued (ms since the epoch): the start of the fan-out lag. */
  enqueuedAt: number;
}

/** Where a move takes its entity: the new address and key field values, and its type there when another (`to:`). */
export interface MoveOrder {
  to: EntityAddress;
  keys: Record<string, string>;
  entity?: string;
}

/** A write's derived entities to reconcile. */
export interface FanoutMessage extends EntityMessageFields {
  kind: 'fanout';
  move?: undefined;
}

/** A move to carry out, and the derived entities of its write to reconcile. */
export interface MoveMessage extends EntityMessageFields {
  kind: 'move';
  move: MoveOrder;
}

/** What the reconciler handles: a write's message, a move's included. */
export type EntityMessage = FanoutMessage | MoveMessage;

/** A `@blob` field's cleanup (the guide's "Large entities pattern"). */
export interface BlobCleanupMessage {
  kind: 'blobCleanup';
  v: 1;
  /** Unique per message (UUID), for logs and the poison queue. */
  id: string;
  /** The @entity type name. */
  entity: string;
  /** The entity whose blobs are cleaned up. */
  primary: EntityAddress;
  /** When it was sent (ms since the epoch). */
  enqueuedAt: number;
  /** When it shows on the queue (ms since the epoch): the start of its fan-out lag. */
  visibleAt: number;
  /** The W3C trace context of the request that sent it, when tracing is on. */
  traceparent?: string;
}

/** The writes' messages of one group commit, in one queue message. */
export interface BatchMessage {
  kind: 'batch';
  v: 1;
  /** Unique per message (UUID), for logs and the poison queue; each item has its own too. */
  id: string;
  /** When it was sent (ms since the epoch). */
  enqueuedAt: number;
  /** Two or more, each handled as if it had been sent alone. */
  messages: EntityMessage[];
}

/** Every message of the work queue. */
export type QueueMessage = EntityMessage | BlobCleanupMessage | BatchMessage;

/** A message of an entity's write, as a writer builds it before it is sent (the sender adds `id` and `enqueuedAt`). */
export type EntityMessageDraft = Omit<FanoutMessage, 'id' | 'enqueuedAt'> | Omit<MoveMessage, 'id' | 'enqueuedAt'>;

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

/** A draft sent now: its id and enqueue time filled in. */
export function entityMessage(draft: EntityMessageDraft, now = Date.now()): EntityMessage {
  const traceparent = currentTraceparent();
  return { ...draft, id: randomUUID(), enqueuedAt: now, ...(traceparent && { traceparent }) } as EntityMessage;
}

/** A new blob cleanup message for the entity at `primary`, sent now and shown `delaySeconds` (s) later. */
export function blobCleanupMessage(entity: string, primary: EntityAddress, delaySeconds: number, now = Date.now()): BlobCleanupMessage {
  const traceparent = currentTraceparent();
  return {
    kind: 'blobCleanup',
    v: 1,
    id: randomUUID(),
    entity,
    primary,
    enqueuedAt: now,
    visibleAt: now + delaySeconds * 1000,
    ...(traceparent && { traceparent }),
  };
}

/** The message as queue text (JSON). */
export function encodeMessage(m: QueueMessage): string {
  return JSON.stringify(m);
}

/** One queue message of encodeBatches: its text and the write messages it carries. */
export interface EncodedBatch {
  text: string;
  items: EntityMessage[];
}

/**
 * Write messages as few queue messages as the queue's size limit allows: one message alone is sent as itself, two or
 * more as `batch` messages of at most `maxBytes` (bytes of UTF-8, default 64 KiB) each, cut in order.
 * @example encodeBatches([a, b, c]) // [{ text: '{"kind":"batch",…}', items: [a, b, c] }]
 */
export function encodeBatches(items: EntityMessage[], maxBytes = MAX_MESSAGE_BYTES, now = Date.now()): EncodedBatch[] {
  const out: EncodedBatch[] = [];
  // The envelope's own bytes, with room for the id's and the time's (a UUID, 13 digits).
  const envelope = Buffer.byteLength(encodeMessage({ kind: 'batch', v: 1, id: randomUUID(), enqueuedAt: now, messages: [] }));
  let group: EntityMessage[] = [];
  let bytes = envelope;
  const flush = () => {
    if (group.length === 1) out.push({ text: encodeMessage(group[0]), items: group });
    else if (group.length > 1) out.push({ text: encodeMessage({ kind: 'batch', v: 1, id: randomUUID(), enqueuedAt: now, messages: group }), items: group });
    group = [];
    bytes = envelope;
  };
  for (const item of items) {
    const size = Buffer.byteLength(encodeMessage(item)) + 1; // and its comma
    if (group.length > 0 && bytes + size > maxBytes) flush();
    group.push(item);
    bytes += size;
  }
  flush();
  return out;
}

function isAddress(a: unknown): a is EntityAddress {
  const x = a as EntityAddress;
  return typeof x === 'object' && x !== null && typeof x.table === 'string' && typeof x.partitionKey === 'string' && typeof x.rowKey === 'string';
}

function isEntityMessage(m: EntityMessage): boolean {
  return (
    typeof m.id === 'string' &&
    typeof m.entity === 'string' &&
    isAddress(m.primary) &&
    typeof m.writeId === 'string' &&
    (m.basedOn === null || typeof m.basedOn === 'string') &&
    typeof m.deleted === 'boolean' &&
    Array.isArray(m.candidates) &&
    m.candidates.every(isAddress) &&
    (m.holderLookups === undefined || (Array.isArray(m.holderLookups) && m.holderLookups.every(isAddress))) &&
    (m.summaryHolders === undefined ||
      (Array.isArray(m.summaryHolders) && m.summaryHolders.every((h) => typeof h?.entity === 'string' && isAddress(h.address)))) &&
    typeof m.enqueuedAt === 'number' &&
    (m.traceparent === undefined || typeof m.traceparent === 'string') &&
    (m.kind === 'fanout'
      ? m.move === undefined
      : isAddress(m.move?.to) && typeof m.move.keys === 'object' && m.move.keys !== null && (m.move.entity === undefined || typeof m.move.entity === 'string'))
  );
}

function isBlobCleanup(m: BlobCleanupMessage): boolean {
  return (
    m.v === 1 &&
    typeof m.id === 'string' &&
    typeof m.entity === 'string' &&
    typeof m.enqueuedAt === 'number' &&
    typeof m.visibleAt === 'number' &&
    (m.traceparent === undefined || typeof m.traceparent === 'string') &&
    isAddress(m.primary)
  );
}

function isBatch(m: BatchMessage): boolean {
  return (
    m.v === 1 &&
    typeof m.id === 'string' &&
    typeof m.enqueuedAt === 'number' &&
    Array.isArray(m.messages) &&
    m.messages.length > 0 &&
    m.messages.every((item) => (item?.kind === 'fanout' || item?.kind === 'move') && item.v === 3 && isEntityMessage(item))
  );
}

/**
 * Parses queue text into a message of any kind. A version 2 message (no `kind`, sent before this encoding) reads
 * as a `fanout` or, with `move`, a `move` message.
 * @throws TablegraphError BAD_USER_INPUT when the text is not JSON or no message of a known kind and version (such a
 *   message can never succeed: the worker moves it to the poison queue)
 */
export function decodeMessage(text: string): QueueMessage {
  let m: Record<string, unknown>;
  try {
    m = JSON.parse(text) as Record<string, unknown>;
  } catch {
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, 'fan-out message is not JSON');
  }
  if (m?.v === 2 && m.kind === undefined) m = { ...m, v: 3, kind: m.move === undefined ? 'fanout' : 'move' };
  const kind = m?.kind;
  const valid =
    kind === 'blobCleanup'
      ? isBlobCleanup(m as unknown as BlobCleanupMessage)
      : kind === 'batch'
        ? isBatch(m as unknown as BatchMessage)
        : (kind === 'fanout' || kind === 'move') && m.v === 3 && isEntityMessage(m as unknown as EntityMessage);
  if (!valid)
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `fan-out message has an unknown shape (kind ${JSON.stringify(kind ?? null)})`, { messageId: m?.id });
  return m as unknown as QueueMessage;
}

/**
 * Parses queue text into a write's message (`fanout` or `move`).
 * @throws TablegraphError BAD_USER_INPUT when it is not one (decodeMessage; a blob cleanup or batch message too)
 */
export function decodeEntityMessage(text: string): EntityMessage {
  const m = decodeMessage(text);
  if (m.kind === 'blobCleanup') throw new TablegraphError(ErrorCode.BAD_USER_INPUT, "a blob cleanup message, not a write's", { messageId: m.id });
  if (m.kind === 'batch') throw new TablegraphError(ErrorCode.BAD_USER_INPUT, "a batch of writes' messages, not one", { messageId: m.id });
  return m;
}

/**
 * Parses queue text into the writes' messages it carries: one for a `fanout` or `move` message, each item of a
 * `batch`.
 * @throws TablegraphError BAD_USER_INPUT when it carries none (decodeMessage; a blob cleanup message too)
 */
export function decodeEntityMessages(text: string): EntityMessage[] {
  const m = decodeMessage(text);
  if (m.kind === 'blobCleanup') throw new TablegraphError(ErrorCode.BAD_USER_INPUT, "a blob cleanup message, not a write's", { messageId: m.id });
  return m.kind === 'batch' ? m.messages : [m];
}
