// ESLint (typescript-eslint) over the sources, the tests and the benchmarks; formatting is Prettier's alone.
import js from '@eslint/js';
import boundaries from 'eslint-plugin-boundaries';
import { createNodeResolver, importX } from 'eslint-plugin-import-x';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

// The floors of src/, lowest first: a file imports from its own folder and from the floors below its own, never
// from its floor's neighbours or from above (docs/architecture.md, "Layout"). The compiler runs at start-up only.
const floors = [
  ['base'],
  ['telemetry'],
  ['storage'],
  ['model'],
  ['compiler', 'queue', 'read'],
  ['write', 'client-cache'],
  ['derived'],
  ['maintenance', 'worker'],
  ['load', 'evolution', 'backup'],
  ['resolvers'],
  ['server'],
  ['runtime'],
  ['cli'],
];
const folders = floors.flat().filter((type) => type !== 'base');
const below = (level) => floors.slice(0, level).flat();

export default tseslint.config(
  { ignores: ['node_modules/', '.data/', 'dist/', 'coverage/', 'examples/hr/generated/', 'examples/web-client/generated/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  prettier,
  {
    rules: {
      // Unused names are the type checker's (noUnusedLocals, noUnusedParameters): one report, not two.
      '@typescript-eslint/no-unused-vars': 'off',
    },
  },
  {
    // Imports: one line per module, no `../compiler/x` from inside compiler/.
    files: ['**/*.ts'],
    plugins: { 'import-x': importX },
    settings: { 'import-x/resolver-next': [createNodeResolver({ extensions: ['.ts', '.js', '.mjs', '.json'] })] },
    rules: {
      'import-x/no-duplicates': 'error',
      'import-x/no-useless-path-segments': 'error',
    },
  },
  {
    // No arrow up: see `floors` above. The examples use src/; src/ never names an example.
    files: ['src/**/*.ts'],
    plugins: { boundaries },
    settings: {
      'boundaries/elements': [
        ...folders.map((type) => ({ type, pattern: `src/${type}`, partialMatch: false })),
        { type: 'examples', pattern: 'examples', partialMatch: false },
        // Last: what no folder above matched, the files at src/'s root (errors, log, package-root).
        { type: 'base', pattern: 'src', partialMatch: false },
      ],
      'import/resolver': { node: { extensions: ['.ts', '.js'] } },
    },
    rules: {
      // Long signatures and functions are cut into parameter objects and named phases (never by a line count alone).
      'max-params': ['error', 5],
      'max-lines-per-function': ['error', { max: 80 }],
      // Every name imported from its one home: no module forwards another's exports.
      'no-restricted-syntax': [
        'error',
        { selector: 'ExportNamedDeclaration[source]', message: "Import the name from its own module; don't re-export it." },
        { selector: 'ExportAllDeclaration', message: "Import the names from their own module; don't re-export them." },
      ],
      'boundaries/no-unknown-files': 'error',
      'boundaries/dependencies': [
        'error',
        {
          default: 'disallow',
          policies: floors.flatMap((floor, level) =>
            floor.map((type) => ({
              from: { element: { type } },
              allow: { to: { element: { types: { anyOf: [type, ...below(level)] } } } },
            })),
          ),
        },
      ],
    },
  },
  {
    // Tests read GraphQL responses, which are untyped JSON; the tests' own expectations type them.
    files: ['test/**/*.ts'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      // A test of key characters spells the control characters out.
      'no-control-regex': 'off',
    },
  },
  {
    // A test waits for an event (`until`) or for a time it names (`pause`, with its reason): test/support/wait.ts
    // holds the only timer. The benchmarks measure time and are not tests.
    files: ['test/**/*.ts'],
    ignores: ['test/support/wait.ts', 'test/bench/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        ...['node:timers/promises', 'timers/promises', 'node:timers', 'timers'].map((name) => ({
          name,
          message: 'Wait for an event with until(), or for a named time with pause(ms, why) (test/support/wait.ts).',
        })),
      ],
      'no-restricted-globals': [
        'error',
        ...['setTimeout', 'setInterval'].map((name) => ({
          name,
          message: 'Wait for an event with until(), or for a named time with pause(ms, why) (test/support/wait.ts).',
        })),
      ],
    },
  },
  {
    // Node's CommonJS configuration and build scripts.
    files: ['**/*.cjs', 'jest.config.js', 'test/setup/*.js'],
    languageOptions: {
      sourceType: 'commonjs',
      globals: { require: 'readonly', module: 'writable', __dirname: 'readonly', process: 'readonly', console: 'readonly' },
    },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    // Browser modules: the web client example, its service worker, and the sync package it is built on.
    files: ['examples/web-client/*.js', 'packages/sync/*.js'],
    languageOptions: {
      sourceType: 'module',
      globals: Object.fromEntries(
        [
          ...['document', 'location', 'navigator', 'fetch', 'URL', 'URLSearchParams', 'FormData', 'CSS', 'console'],
          ...['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'globalThis', 'self', 'caches'],
        ].map((g) => [g, 'readonly']),
      ),
    },
    rules: { 'no-unused-vars': ['error', { varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' }] },
  },
  {
    // Node's ES-module scripts (scripts/build-if-stale.mjs, the web client's static server).
    files: ['scripts/**/*.mjs', 'examples/**/*.mjs'],
    languageOptions: { sourceType: 'module', globals: { process: 'readonly', URL: 'readonly', console: 'readonly' } },
  },
);
