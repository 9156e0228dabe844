/**
 * Starts one in-memory Azurite (tables, queues, blobs) on free loopback ports per jest worker for the whole test run
 * and hands their connection strings to the workers through the environment (environment.js gives each worker its
 * own as AZURE_STORAGE_CONNECTION_STRING). Azurite is single-threaded: with one for all, two workers' storage-heavy
 * files wait on each other, and the run takes as long as with one worker.
 */
import type { Config } from '@jest/types';
import { startAzurite } from '../../src/storage/azurite';

export default async function globalSetup(globalConfig: Config.GlobalConfig): Promise<void> {
  const workers = Math.max(1, globalConfig.maxWorkers || 1);
  const azurites = await Promise.all(Array.from({ length: workers }, () => startAzurite({ inMemory: true })));
  azurites.forEach((a, i) => (process.env[`TABLEGRAPH_TEST_AZURITE_${i + 1}`] = a.connectionString));
  process.env.AZURE_STORAGE_CONNECTION_STRING = azurites[0].connectionString;
  (globalThis as { __azurites?: typeof azurites }).__azurites = azurites;
}
