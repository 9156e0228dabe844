/**
 * Jest runs the TypeScript sources through ts-jest, in two projects: `unit` (test/unit: the compiler, the planners,
 * codecs, docs and the repository's own checks — no storage, seconds: `npx jest --selectProjects unit`) and
 * `storage` (every other test file, against one Azurite per jest worker: test/setup).
 */
const transform = { '^.+\\.ts$': ['ts-jest', {}] };

module.exports = {
  // Two files at once, each worker with an Azurite of its own (test/setup/global-setup.ts): most files wait on
  // storage, leases and timeouts more than they compute.
  maxWorkers: 2,
  // Generous: a test's storage calls may meet one of Azurite's queue clean-up pauses (test/support/harness.ts).
  // (A project's own testTimeout is not read: it is the run's.)
  testTimeout: 60000,
  projects: [
    {
      displayName: 'unit',
      testEnvironment: 'node',
      roots: ['<rootDir>/test/unit'],
      testMatch: ['**/*.test.ts'],
      transform,
    },
    {
      displayName: 'storage',
      // Node's, deleting each file's tables and queues once it is done (test/setup/environment.js).
      testEnvironment: '<rootDir>/test/setup/environment.js',
      roots: ['<rootDir>/test'],
      testMatch: ['**/*.test.ts'],
      testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/unit/'],
      transform,
      globalSetup: '<rootDir>/test/setup/global-setup.ts',
      globalTeardown: '<rootDir>/test/setup/global-teardown.ts',
    },
  ],
};
