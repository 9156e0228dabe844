/**
 * Concurrent INCREMENTs of one `@series` entity through several servers (the guide's "Data series pattern" and "Wide
 * entities pattern"): runs them all at once, counts the EGTs each server lost to another's write, and adds up what
 * the acknowledged ones should have stored.
 */
import type { TestServer } from './harness';

/** One writer: the server it goes through, and the element `at` it adds `by` to. */
export interface IncrementWriter {
  via: TestServer;
  at: number;
  by: number;
}

export interface IncrementOutcome {
  /** What the series must hold: the sum of the acknowledged writers' amounts, per element. */
  expected: number[];
  acknowledged: number;
  /** The error code of each refused writer. */
  refusals: string[];
  /** EGTs that failed, by the reason the service gave (ETagMismatch, EntityAlreadyExists), over all servers. */
  lost: Record<string, number>;
}

/**
 * @param send runs one writer's mutation and returns its GraphQL response
 * @param length the series' elements
 */
export async function runConcurrentIncrements(
  servers: TestServer[],
  writers: IncrementWriter[],
  length: number,
  send: (w: IncrementWriter) => Promise<{ errors?: Array<{ extensions: { code: string } }> }>,
): Promise<IncrementOutcome> {
  const lost: Record<string, number> = {};
  const spies = servers.map((s) => {
    const submit = s.store.submitTransaction.bind(s.store);
    return jest.spyOn(s.store, 'submitTransaction').mockImplementation(async (...args) => {
      try {
        return await submit(...args);
      } catch (e) {
        const reason = String((e as { details?: { reason?: unknown } }).details?.reason);
        lost[reason] = (lost[reason] ?? 0) + 1;
        throw e;
      }
    });
  });
  let results;
  try {
    results = await Promise.all(writers.map(send));
  } finally {
    spies.forEach((s) => s.mockRestore());
  }
  const expected = new Array<number>(length).fill(0);
  let acknowledged = 0;
  const refusals: string[] = [];
  results.forEach((r, i) => {
    if (r.errors) {
      refusals.push(r.errors[0].extensions.code);
      return;
    }
    acknowledged++;
    expected[writers[i].at] += writers[i].by;
  });
  return { expected, acknowledged, refusals, lost };
}
