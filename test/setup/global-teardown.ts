/**
 * Stops the Azurites that global-setup.ts started. Should anything a test started still hold the process open 15 s
 * later (a handle jest names with --detectOpenHandles), the run ends anyway, saying so, with jest's own exit code:
 * CI must get the suite's verdict, not wait out its time limit.
 */
import type { AzuriteHandle } from '../../src/storage/azurite';

export default async function globalTeardown(): Promise<void> {
  const azurites = (globalThis as { __azurites?: AzuriteHandle[] }).__azurites ?? [];
  await Promise.all(azurites.map((a) => a.stop()));
  // eslint-disable-next-line no-restricted-globals -- not a wait: the run's exit, should a handle hold it open
  setTimeout(() => {
    process.stderr.write('test run: something a test started still held the process 15 s after the last test; exiting (find it with --detectOpenHandles)\n');
    process.exit();
  }, 15_000).unref();
}
