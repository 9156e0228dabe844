/**
 * How a test waits: for an event (`until`: a condition polled against a deadline), or — where no event exists — for a
 * time it names (`pause`, with its reason). Test files import no timer of their own (eslint.config.mjs), so every wait
 * in test/ is one of the two, and a wait of time says why it is one.
 */
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Why a test waits for a time rather than for an event:
 * - `pace`: the rhythm of a load (a storm's writer or reader between two calls), so that its calls spread over the
 *   window the assertion is about instead of flooding the one Azurite;
 * - `clock`: the thing awaited is a time (a lease that lapses, a retention window, a save Azurite makes within 5 s
 *   and does not announce), read off a clock the test cannot move;
 * - `quiet`: the assertion is that nothing happens (no event is delivered, no write is made), and an absence is only
 *   seen over a window of time;
 * - `backoff`: a client's wait before it asks again after a refusal that tells it to (OVERLOADED, 429), as a real
 *   client does;
 * - `latency`: a storage call made slow on purpose, the fault the test is about.
 */
export type PauseReason = 'pace' | 'clock' | 'quiet' | 'backoff' | 'latency';

/** Waits `ms` milliseconds, for the `why` named (see PauseReason). */
export function pause(ms: number, why: PauseReason): Promise<void> {
  void why;
  return sleep(ms);
}

export interface UntilOptions {
  /** The deadline (ms from the call, default 60000): a generous bound, not an expectation. */
  timeoutMs?: number;
  /** Time between two checks (ms, default 50). */
  everyMs?: number;
}

/**
 * Checks `check` until it returns a truthy value, and returns that value.
 * @param what what is awaited, named in the error at the deadline (a function: read then, with what was last seen)
 * @throws Error `timed out after N ms waiting for <what>` at the deadline
 * @example const ready = await until('the path ready', async () => (await states()).get(id) === 'ready');
 */
export async function until<T>(
  what: string | (() => string),
  check: () => T | Promise<T>,
  opts: UntilOptions = {},
): Promise<Exclude<T, false | 0 | '' | null | undefined>> {
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as Exclude<T, false | 0 | '' | null | undefined>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${typeof what === 'string' ? what : what()}`);
    await sleep(opts.everyMs ?? 50);
  }
}
