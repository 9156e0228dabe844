/**
 * The loader's rows (src/load/load-rows.ts) and manifests (src/load/manifest.ts): CSV cells and NDJSON values as
 * field values, bad rows reported with their lines, and a bad header, manifest or step order refused before
 * anything is written.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { ErrorCode, isTablegraphError } from '../../src/errors';
import { checkStepOrder } from '../../src/load/load-entities';
import { readLoadRows, type LoadRow } from '../../src/load/load-rows';
import { readManifest } from '../../src/load/manifest';
import { compileSchema } from '../../src/compiler/compile';
import { loadSchemaSources } from '../../src/compiler/load-schema';
import { ROOT } from '../support/harness';

const { schema, model } = compileSchema(loadSchemaSources(path.join(ROOT, 'examples/tracker')));
const issue = model.entities.get('Issue')!;
let dir: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-rows-'));
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function file(name: string, text: string): string {
  const p = path.join(dir, name);
  fs.writeFileSync(p, text);
  return p;
}

async function rows(p: string): Promise<LoadRow[]> {
  const out: LoadRow[] = [];
  for await (const r of readLoadRows(p, issue, schema)) out.push(r);
  return out;
}

async function refusal(run: () => Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await run();
  } catch (e) {
    if (isTablegraphError(e)) return { code: e.code, message: e.message };
    throw e;
  }
  throw new Error('expected a refusal');
}

test('CSV: empty cells are null, quoted cells keep commas, a wrong column count or enum is a bad row with its line', async () => {
  const p = file(
    'issues.csv',
    [
      'projectKey,number,title,state,estimateHours,reporterId',
      'CORE,1,"Comma, inside",OPEN,,ada',
      'CORE,2,Too few,OPEN',
      '',
      'CORE,3,Wrong state,REOPENED,1.5,ada',
    ].join('\n'),
  );
  expect(await rows(p)).toEqual([
    { line: 2, values: { projectKey: 'CORE', number: '1', title: 'Comma, inside', state: 'OPEN', estimateHours: null, reporterId: 'ada' } },
    { line: 3, reason: 'has 4 fields, the header 6' },
    { line: 5, reason: 'state: "REOPENED" is not one of OPEN, CLOSED' },
  ]);
});

test('NDJSON: one object per line; a line that is not an object is a bad row; a missing key field too', async () => {
  const p = file(
    'issues.ndjson',
    [
      JSON.stringify({ projectKey: 'CORE', number: '1', title: 'x', state: 'CLOSED', views: '12' }),
      '[1, 2]',
      '{ nope',
      JSON.stringify({ projectKey: 'CORE', title: 'no number' }),
    ].join('\n'),
  );
  const got = await rows(p);
  expect(got[0]).toEqual({ line: 1, values: { projectKey: 'CORE', number: '1', title: 'x', state: 'CLOSED', views: '12' } });
  expect(got.slice(1).map((r) => [r.line, r.reason?.split(':')[0]])).toEqual([
    [2, 'not a JSON object'],
    [3, 'not JSON'],
    [4, 'the key field(s) number are missing'],
  ]);
});

test('a gzip-compressed file (.csv.gz, .ndjson.gz) reads as the plain one; one that is not gzip is an error', async () => {
  const csv = 'projectKey,number,title,state,reporterId\nCORE,1,Packed,OPEN,ada\nCORE,2,Bad,REOPENED,ada\n';
  const packed = path.join(dir, 'issues.csv.gz');
  fs.writeFileSync(packed, gzipSync(csv));
  expect(await rows(packed)).toEqual(await rows(file('plain.csv', csv)));
  const ndjson = path.join(dir, 'issues.ndjson.gz');
  fs.writeFileSync(ndjson, gzipSync(JSON.stringify({ projectKey: 'CORE', number: '7', title: 't', state: 'OPEN' }) + '\n'));
  expect(await rows(ndjson)).toEqual([{ line: 1, values: { projectKey: 'CORE', number: '7', title: 't', state: 'OPEN' } }]);
  await expect(rows(file('fake.csv.gz', csv))).rejects.toThrow(/incorrect header check/);
});

test('a header naming an unknown field, a summary or missing a key field is refused before any row', async () => {
  expect(await refusal(() => rows(file('a.csv', 'projectKey,number,titel\nCORE,1,x\n')))).toEqual({
    code: ErrorCode.BAD_USER_INPUT,
    message: expect.stringContaining('"titel" is not a stored field of Issue'),
  });
  expect((await refusal(() => rows(file('b.csv', 'projectKey,number,commentCount\nCORE,1,3\n')))).message).toContain(
    'commentCount is a summary, kept by the loader',
  );
  expect((await refusal(() => rows(file('c.csv', 'projectKey,title\nCORE,x\n')))).message).toContain('the key field(s) number of Issue are missing');
  expect((await refusal(() => rows(file('d.ndjson', '{"projectKey":"CORE","number":"1","colour":"red"}\n')))).message).toContain(
    '"colour" is not a stored field',
  );
  expect((await refusal(() => rows(file('e.txt', 'x')))).message).toContain('a load file is .csv');
});

test('manifests and step order', async () => {
  const m = file('manifest.json', JSON.stringify({ steps: [{ type: 'Issue', file: 'issues.csv', existing: 'keep' }] }));
  expect(readManifest(m)).toEqual([{ type: 'Issue', file: path.join(dir, 'issues.csv'), existing: 'keep' }]);
  expect((await refusal(async () => readManifest(file('bad.json', '{"steps": []}')))).message).toContain('at least one step');
  expect((await refusal(async () => readManifest(file('bad2.json', '{"steps": [{"type": "Issue", "file": "x", "existing": "merge"}]}')))).message).toContain(
    '"existing" is "replace" or "keep"',
  );
  // An issue refers to its project and its reporter: they load first. An optional reference (the assignee) does not order.
  expect((await refusal(async () => checkStepOrder(model, ['Issue', 'Project', 'User']))).message).toBe(
    'Issue refers to Project, which is loaded after it: load Project first',
  );
  expect(() => checkStepOrder(model, ['User', 'Project', 'Issue'])).not.toThrow();
  expect((await refusal(async () => checkStepOrder(model, ['Ticket']))).message).toContain('Ticket is not an @entity type');
});
