/**
 * What a restore to a time may hold of a key that writers changed one write at a time (a point-in-time restore's
 * tests): the state its last write acknowledged by then left, or the state of the one in flight then (wholly in or
 * wholly out).
 */

/** One acknowledged write of a key: when it began and was acknowledged (ms, one clock), and the key's state after. */
export interface TimedWrite<S> {
  start: number;
  ack: number;
  after: S;
}

/**
 * The states a key may have at `t` (ms): after its last write acknowledged by then (`before` for none), and, when
 * one was in flight at `t`, after that one too.
 * @param writes the key's writes, in order
 */
export function statesAt<S>(writes: ReadonlyArray<TimedWrite<S>>, before: S, t: number): S[] {
  const acked = writes.filter((w) => w.ack <= t);
  const settled = acked.length > 0 ? acked.at(-1)!.after : before;
  const inFlight = writes.find((w) => w.start <= t && w.ack > t);
  return inFlight ? [settled, inFlight.after] : [settled];
}
