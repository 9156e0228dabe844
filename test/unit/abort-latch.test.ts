/**
 * AbortLatch (src/storage/abort-latch.ts): what a storage call is aborted by. Its listeners are called once, in
 * order; one that stopped listening is not called; an AbortSignal is made only when asked for, and aborts with it.
 */
import { AbortLatch } from '../../src/storage/abort-latch';

test('listeners are called once, in the order they came; one that stopped is not; later ones are called at once', () => {
  const latch = new AbortLatch();
  const calls: string[] = [];
  latch.onAbort(() => calls.push('a'));
  const stopB = latch.onAbort(() => calls.push('b'));
  latch.onAbort(() => calls.push('c'));
  stopB();
  expect(latch.aborted).toBe(false);
  latch.abort();
  latch.abort();
  expect(latch.aborted).toBe(true);
  expect(calls).toEqual(['a', 'c']);
  const stopD = latch.onAbort(() => calls.push('d'));
  stopD();
  expect(calls).toEqual(['a', 'c', 'd']);
});

test('a listener that stops another while the latch aborts does not keep it from its call', () => {
  const latch = new AbortLatch();
  const calls: string[] = [];
  let stopSecond = () => undefined as void;
  latch.onAbort(() => (calls.push('first'), stopSecond()));
  stopSecond = latch.onAbort(() => calls.push('second'));
  latch.abort();
  expect(calls).toEqual(['first', 'second']);
});

test('the AbortSignal is made only when asked for, and aborts with the latch, with its reason', () => {
  const reason = new Error('time is up');
  const latch = new AbortLatch(() => reason);
  expect(latch.madeSignal).toBeUndefined();
  const signal = latch.signal;
  expect(latch.madeSignal).toBe(signal);
  expect(latch.signal).toBe(signal);
  const heard: unknown[] = [];
  signal.addEventListener('abort', () => heard.push(signal.reason));
  latch.abort();
  expect(signal.aborted).toBe(true);
  expect(heard).toEqual([reason]);
  // Asked for after the abort: made aborted already.
  const late = new AbortLatch(() => reason);
  late.abort();
  expect(late.signal.aborted).toBe(true);
  expect(late.signal.reason).toBe(reason);
});
