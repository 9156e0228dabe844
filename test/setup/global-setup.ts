/**
 * Starts one in-memory Azurite (tables, queues, blobs) on free loopback ports for the whole test run and hands
 * its connection string to the test workers through the environment.
 */
import { startAzurite } from '../../src/storage/azurite';

export default async function globalSetup(): Promise<void> {
  const azurite = await startAzurite({ inMemory: true });
  process.env.AZURE_STORAGE_CONNECTION_STRING = azurite.connectionString;
  process.env.TABLEGRAPH_TEST_AZURITE_PID = String(azurite.pid);
  (globalThis as { __azurite?: typeof azurite }).__azurite = azurite;
}
