/**
 * The queue's one message contract (src/queue/messages.ts): every kind encodes and decodes to itself, a version 2
 * message already on a queue (no `kind`) still reads as the write or move it announces, and anything else is
 * refused with BAD_USER_INPUT — which the worker answers by moving it to the poison queue. A group commit's messages
 * go as `batch` messages within the queue's size limit.
 */
import { ErrorCode, isTablegraphError } from '../../src/errors';
import {
  blobCleanupMessage,
  decodeEntityMessage,
  decodeEntityMessages,
  decodeMessage,
  encodeBatches,
  encodeMessage,
  entityMessage,
  type QueueMessage,
} from '../../src/queue/messages';

const primary = { table: 'T', partitionKey: 'p', rowKey: 'r' };
const fanout = entityMessage({ kind: 'fanout', v: 3, entity: 'E', primary, writeId: 'w1', basedOn: null, deleted: false, candidates: [primary] });
const move = entityMessage({
  kind: 'move',
  v: 3,
  entity: 'E',
  primary,
  writeId: 'w2',
  basedOn: 'w1',
  deleted: false,
  candidates: [],
  move: { to: { ...primary, partitionKey: 'q' }, keys: { group: 'q' } },
});
const cleanup = blobCleanupMessage('E', primary, 60, 1000);

function refusal(text: string): string {
  try {
    decodeMessage(text);
  } catch (e) {
    if (isTablegraphError(e, ErrorCode.BAD_USER_INPUT)) return e.message;
    throw e;
  }
  throw new Error(`accepted: ${text}`);
}

test('every kind decodes to what was encoded', () => {
  for (const m of [fanout, move, cleanup] as QueueMessage[]) expect(decodeMessage(encodeMessage(m))).toEqual(m);
  expect(cleanup).toMatchObject({ kind: 'blobCleanup', visibleAt: 61_000 });
  expect(decodeEntityMessage(encodeMessage(move)).kind).toBe('move');
  expect(() => decodeEntityMessage(encodeMessage(cleanup))).toThrow(/a blob cleanup message/);
});

test('a version 2 message (no kind) reads as a fanout or a move message', () => {
  const { kind: _fanoutKind, ...oldFanout } = fanout;
  const { kind: _moveKind, ...oldMove } = move;
  expect(decodeMessage(JSON.stringify({ ...oldFanout, v: 2 }))).toEqual(fanout);
  expect(decodeMessage(JSON.stringify({ ...oldMove, v: 2 }))).toEqual(move);
});

test('anything else is refused, naming its kind', () => {
  expect(refusal('not json {')).toBe('fan-out message is not JSON');
  expect(refusal(JSON.stringify({ ...fanout, kind: 'teleport' }))).toContain('(kind "teleport")');
  expect(refusal(JSON.stringify({ ...fanout, v: 4 }))).toContain('unknown shape');
  expect(refusal(JSON.stringify({ ...fanout, candidates: [{ table: 'T' }] }))).toContain('unknown shape');
  expect(refusal(JSON.stringify({ ...move, move: undefined }))).toContain('(kind "move")');
  expect(refusal(JSON.stringify({ ...fanout, move: move.move }))).toContain('(kind "fanout")');
  expect(refusal(JSON.stringify({ ...cleanup, visibleAt: 'soon' }))).toContain('(kind "blobCleanup")');
});

test("a group commit's messages: one alone as itself, more as one batch, cut in order where the size limit says", () => {
  const one = encodeBatches([fanout]);
  expect(one).toEqual([{ text: encodeMessage(fanout), items: [fanout] }]);
  expect(encodeBatches([])).toEqual([]);
  const many = Array.from({ length: 40 }, (_, i) =>
    entityMessage({
      kind: 'fanout',
      v: 3,
      entity: 'E',
      primary,
      writeId: `w${i}`,
      basedOn: null,
      deleted: false,
      candidates: [{ ...primary, rowKey: 'x'.repeat(200) }],
    }),
  );
  const [whole, ...rest] = encodeBatches(many);
  expect(rest).toEqual([]);
  expect(decodeMessage(whole.text)).toMatchObject({ kind: 'batch', v: 1, messages: many });
  expect(decodeEntityMessages(whole.text)).toEqual(many);
  expect(() => decodeEntityMessage(whole.text)).toThrow(/a batch/);
  // A limit of 2,000 bytes: each item is about 450, so four a message at most.
  const cut = encodeBatches(many, 2000);
  expect(cut.length).toBeGreaterThan(9);
  for (const b of cut) expect(Buffer.byteLength(b.text)).toBeLessThanOrEqual(2000);
  expect(cut.flatMap((b) => decodeEntityMessages(b.text))).toEqual(many);
  expect(cut.flatMap((b) => b.items)).toEqual(many);
  // An item over the limit alone still goes (alone): the queue's own check refuses it, as it did before batches.
  expect(encodeBatches(many.slice(0, 2), 100).map((b) => b.items.length)).toEqual([1, 1]);
});

test('a batch is refused when empty or holding anything but write messages', () => {
  const batch = JSON.parse(encodeBatches([fanout, move])[0].text);
  expect(decodeMessage(JSON.stringify(batch))).toMatchObject({ kind: 'batch', messages: [fanout, move] });
  expect(refusal(JSON.stringify({ ...batch, messages: [] }))).toContain('(kind "batch")');
  expect(refusal(JSON.stringify({ ...batch, messages: [fanout, cleanup] }))).toContain('(kind "batch")');
  expect(refusal(JSON.stringify({ ...batch, messages: [{ ...fanout, candidates: 'all' }] }))).toContain('(kind "batch")');
  expect(refusal(JSON.stringify({ ...batch, v: 2 }))).toContain('(kind "batch")');
});
