/** Jest runs the TypeScript sources through ts-jest against one Azurite per jest worker (test/setup). */
module.exports = {
  // Node's, deleting each file's tables and queues once it is done (test/setup/environment.js).
  testEnvironment: '<rootDir>/test/setup/environment.js',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: { '^.+\\.ts$': ['ts-jest', {}] },
  globalSetup: '<rootDir>/test/setup/global-setup.ts',
  globalTeardown: '<rootDir>/test/setup/global-teardown.ts',
  // Two files at once, each worker with an Azurite of its own (test/setup/global-setup.ts): most files wait on
  // storage, leases and timeouts more than they compute.
  maxWorkers: 2,
  // Generous: a test's storage calls may meet one of Azurite's queue clean-up pauses (test/support/harness.ts).
  testTimeout: 60000,
};
