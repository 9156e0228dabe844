/**
 * The test hook TABLEGRAPH_TEST_BUILD_HOLD (config.builds.holdAfter) for the backup commands: `snapshot@<n>` holds a
 * snapshot once its n-th segment (or a later one of the same page) and its progress are written, `restore@<n>` a restore once its n-th segment is,
 * `capture@<n>` a worker's capture pass once its n-th change segment is (before its manifest) —
 * the named points a test kills them at, so that what the kill interrupts is known.
 */
import type { Logger } from '../log';
import type { Config } from '../runtime/config';

/** Waits for ever (until the process is killed) when the hook names `command` and a step `step` reached; returns at once otherwise. */
export async function holdIfAsked(config: Pick<Config, 'builds'>, command: 'snapshot' | 'restore' | 'capture', step: number, log: Logger): Promise<void> {
  const hold = config.builds.holdAfter;
  // At the first step at or past n (a snapshot's page may write several segments at once); held, it never goes on.
  if (hold?.path !== command || step < hold.steps) return;
  log.warn({ command, step }, `test hook: ${command} held (TABLEGRAPH_TEST_BUILD_HOLD)`);
  await new Promise<never>(() => undefined);
}
