/** Jest runs the TypeScript sources through ts-jest against one Azurite per test run (test/setup). */
module.exports = {
  // Node's, deleting each file's tables and queues once it is done (test/setup/environment.js).
  testEnvironment: '<rootDir>/test/setup/environment.js',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: { '^.+\\.ts$': ['ts-jest', {}] },
  globalSetup: '<rootDir>/test/setup/global-setup.ts',
  globalTeardown: '<rootDir>/test/setup/global-teardown.ts',
  // Generous: a test's storage calls may meet one of Azurite's queue clean-up pauses (test/support/harness.ts).
  testTimeout: 60000,
};
