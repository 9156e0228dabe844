/**
 * `npm run explain -- --states` on a deployment a server recorded: the plan, then each derived path's state from the
 * catalogue, each on a line of its own under its heading (the first one was printed on the heading's line).
 */
import { connectionString, startTestServer, type TestServer } from './support/harness';
import { runCommand } from './support/processes';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
}, 60_000);
afterAll(async () => server?.close());

test('the derived paths come under their heading, one a line, each as the catalogue has it', async () => {
  const run = runCommand('explain', ['--states'], undefined, {
    AZURE_STORAGE_CONNECTION_STRING: connectionString(),
    TABLEGRAPH_TABLE_PREFIX: server.config.tablePrefix,
    LOG_LEVEL: 'warn',
  });
  expect((await run.exited).code).toBe(0);
  const out = run.output();
  const lines = out.slice(out.indexOf('Derived paths (the catalogue):')).trimEnd().split('\n');
  expect(lines[0]).toBe('Derived paths (the catalogue):');
  expect(lines.length).toBeGreaterThan(3);
  for (const line of lines.slice(1)) expect(line).toMatch(/^ {2}(ready|building|retired|failed) +\S+/);
}, 60_000);
