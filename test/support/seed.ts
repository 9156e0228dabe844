/**
 * The seed of a test file's random choices — fault schedules, write storms, deliveries shuffled — so that a failure
 * replays: each file gets one (test/setup/environment.js: TEST_SEED as given, else a new one), printed when a test of
 * the file fails, and `TEST_SEED=<seed> npx jest <file>` runs the same choices again. (FANOUT_SEED, its older name, is
 * read too.) The interleaving of processes, timers and storage is not replayed: a seed fixes what the test decides.
 */
export function testSeed(): number {
  return Number(process.env.TEST_SEED) || Number(process.env.FANOUT_SEED) || Date.now() % 2 ** 31;
}

/** A generator of numbers in [0, 1) from `seed` (a linear congruential one): the same seed, the same choices. */
export function seededRandom(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => (x = (x * 1664525 + 1013904223) >>> 0) / 2 ** 32;
}
