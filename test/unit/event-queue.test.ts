/**
 * The subscription's event queue (src/read/event-queue.ts): events in order; a subscriber that falls
 * behind gets what was waiting, then one last event carrying the error, then the end; a client that leaves while
 * waiting ends it at once, and the poller stops feeding it.
 */
import { EventQueue } from '../../src/read/event-queue';

type Item = number | { failure: unknown };

test('events in order; past the bound, what waited, then the error as the last event, then done', async () => {
  let ended = 0;
  const q = new EventQueue<Item>(
    () => void ended++,
    (failure) => ({ failure }),
    3,
  );
  q.push(1, 2, 3);
  expect(ended).toBe(0);
  q.push(4);
  expect(ended).toBe(1);
  q.push(5); // after the end: dropped
  const got: Item[] = [];
  for await (const item of q) got.push(item);
  expect(got.slice(0, 4)).toEqual([1, 2, 3, 4]);
  expect(got[4]).toMatchObject({ failure: { code: 'OVERLOADED' } });
  expect(got).toHaveLength(5);
});

test('a client that leaves while waiting ends the subscription at once', async () => {
  let ended = 0;
  const q = new EventQueue<Item>(
    () => void ended++,
    (failure) => ({ failure }),
  );
  const waiting = q.next();
  await q.return();
  expect(await waiting).toEqual({ value: undefined, done: true });
  expect(ended).toBe(1);
  q.push(1);
  expect(await q.next()).toEqual({ value: undefined, done: true });
});
