/** Stops the Azurite that global-setup.ts started. */
import type { AzuriteHandle } from '../../src/storage/azurite';

export default async function globalTeardown(): Promise<void> {
  const azurite = (globalThis as { __azurite?: AzuriteHandle }).__azurite;
  await azurite?.stop();
}
