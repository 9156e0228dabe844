// ESLint (typescript-eslint) over the sources, the tests and the benchmarks; formatting is Prettier's alone.
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/', '.data/', 'dist/', 'coverage/', 'examples/hr/generated/'] },
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
    // Tests read GraphQL responses, which are untyped JSON; the tests' own expectations type them.
    files: ['test/**/*.ts'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      // A test of key characters spells the control characters out.
      'no-control-regex': 'off',
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
    // The web client example: a browser script, with graphql-sse's browser build loaded before it.
    files: ['examples/web-client/app.js'],
    languageOptions: {
      sourceType: 'script',
      globals: Object.fromEntries(
        ['document', 'location', 'fetch', 'URLSearchParams', 'FormData', 'CSS', 'console', 'setTimeout', 'graphqlSse'].map((g) => [g, 'readonly']),
      ),
    },
  },
  {
    // Node's ES-module scripts (scripts/build-if-stale.mjs, the web client's static server).
    files: ['scripts/**/*.mjs', 'examples/**/*.mjs'],
    languageOptions: { sourceType: 'module', globals: { process: 'readonly', URL: 'readonly', console: 'readonly' } },
  },
);
