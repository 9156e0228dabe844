/**
 * Jest runs the TypeScript sources through ts-jest, in three projects:
 * - `unit` (test/unit: the compiler, the planners, codecs, docs and the repository's own checks — no storage, seconds:
 *   `npx jest --selectProjects unit`);
 * - `storage` (every other test file but the long ones, against one Azurite per jest worker: test/setup) — with
 *   `unit`, what `npm test` runs;
 * - `long` (the files listed in LONG: builds killed mid-way, write storms under storage faults, the whole Chicago
 *   file, twenty browsers, an idle server watched for 30 s): `npm run test:long`, which CI runs after `npm test`.
 * Which project a file is in is decided here alone.
 */
const transform = { '^.+\\.ts$': ['ts-jest', {}] };

/** The long files (test/<name>.test.ts), each a minute or more of storms, kills, builds or waits. */
const LONG = [
  'backup-restore',
  'chicago-import',
  'container-layout',
  'first-minute-restore',
  'idle-reads',
  'idle-writes',
  'import-progress',
  'large-entities',
  'offline-client',
  'point-in-time',
  'reservation-confirmations',
  'schema-evolution',
  'schema-evolution-kills',
  'schema-evolution-workers',
  'schema-rekey',
  'shared-azurite',
  'storage-faults',
  'tenant-move',
  'tenant-move-faults',
  'transaction-effects',
  'unique-lifecycle',
];
const longFiles = LONG.map((name) => `<rootDir>/test/${name}.test.ts`);

/** A project of storage tests: one Azurite per jest worker, each file's tables and queues dropped once it is done. */
const storageProject = (displayName, files) => ({
  displayName,
  // Node's, deleting each file's tables, queues and containers once it is done (test/setup/environment.js).
  testEnvironment: '<rootDir>/test/setup/environment.js',
  roots: ['<rootDir>/test'],
  transform,
  globalSetup: '<rootDir>/test/setup/global-setup.ts',
  globalTeardown: '<rootDir>/test/setup/global-teardown.ts',
  ...files,
});

module.exports = {
  // Four files at once on two cores, each worker with an Azurite of its own (test/setup/global-setup.ts): most files
  // wait on storage, leases and processes they started more than they compute (with three, the fast tier took 6.5 min
  // on two cores, with four 5.7 min). The long tier's storms and kills compute: `npm run test:long` runs three at once
  // (four took as long, each file slower).
  maxWorkers: 4,
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
    storageProject('storage', {
      testMatch: ['**/*.test.ts'],
      testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/unit/', ...longFiles.map((f) => `${f}$`)],
    }),
    storageProject('long', { testMatch: longFiles }),
  ],
};
