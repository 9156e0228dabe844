/**
 * `npm run import -- --file <address>`: the file is downloaded from an http(s) address (here a local HTTP server
 * standing in for the data portal's CSV export), then imported like a local file; an address that does not answer
 * the data is refused with BAD_USER_INPUT and nothing is started.
 */
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { chicagoCsvText } from './support/harness';
import { killCommandProcesses, runCommand } from './support/processes';

jest.setTimeout(120_000);

const ROWS = 300;
let tmp: string;
let csv: string;
let base: string;
let server: http.Server;
const served: string[] = [];

beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-import-url-'));
  csv =
    chicagoCsvText()
      .split('\n')
      .slice(0, ROWS + 1)
      .join('\n') + '\n';
  server = http.createServer((req, res) => {
    served.push(req.url ?? '');
    if (req.url === '/api/views/xzkq-xp2w/rows.csv?accessType=DOWNLOAD') {
      res.writeHead(200, { 'content-type': 'text/csv', 'content-length': Buffer.byteLength(csv) });
      res.end(csv);
    } else if (req.url === '/page') {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<html>sign in</html>');
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  killCommandProcesses();
  await new Promise((resolve) => server.close(resolve));
  fs.rmSync(tmp, { recursive: true, force: true });
});

test('an address is downloaded into the data folder, then imported', async () => {
  const dataDir = path.join(tmp, 'data');
  const run = runCommand('import', ['--file', `${base}/api/views/xzkq-xp2w/rows.csv?accessType=DOWNLOAD`], dataDir);
  expect(await run.exited).toEqual({ code: 0, signal: null });
  expect(run.output()).toMatch(/^rows\s+300$/m);
  expect(run.output()).toMatch(/^imported\s+300$/m);
  const saved = path.join(dataDir, 'downloads', 'rows.csv');
  expect(fs.readFileSync(saved, 'utf8')).toBe(csv);
  expect(fs.readdirSync(path.join(dataDir, 'downloads'))).toEqual(['rows.csv']); // no .partial left
});

test('an address that answers 404 or a web page is refused before anything starts', async () => {
  const dataDir = path.join(tmp, 'refused');
  const missing = runCommand('import', ['--file', `${base}/nothing.csv`], dataDir);
  expect(await missing.exited).toEqual({ code: 1, signal: null });
  expect(missing.output()).toContain('Cannot download');
  expect(missing.output()).toContain('HTTP 404');
  expect(missing.output()).toContain('"code":"BAD_USER_INPUT"');

  const page = runCommand('import', ['--file', `${base}/page`], dataDir);
  expect(await page.exited).toEqual({ code: 1, signal: null });
  expect(page.output()).toContain('answered a web page');
  expect(fs.existsSync(path.join(dataDir, 'azurite.json'))).toBe(false); // no Azurite was started
});
