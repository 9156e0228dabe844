/**
 * The import's progress bar as a person sees it in a terminal (createImportProgress drawing on a stream that says it
 * is one): every frame's numbers are numbers — the ETA is a time or `…`, never NaN, NULL or INF — and the bar counts
 * rows stored, not rows read: while the last EGTs are still being written it is below 100%, and it reaches 100% only
 * in its last frame, drawn once every entity is written.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { importEmployees } from '../examples/hr/import/import-employees';
import { createLogger } from '../src/log';
import { createImportProgress, estimateDataRows } from '../src/load/progress';
import { chicagoCsvText, compileHr, testStore, uniquePrefix } from './support/harness';

jest.setTimeout(120_000);

const ROWS = 3000;
let tmp: string;

beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-progress-'));
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** A terminal stand-in: what is drawn on it, frame by frame. */
function terminal(): { stream: NodeJS.WritableStream; text(): string } {
  let out = '';
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      out += chunk.toString('utf8');
      done();
    },
  });
  Object.assign(stream, { isTTY: true, columns: 250, cursorTo: () => true, clearLine: () => true, moveCursor: () => true });
  return { stream, text: () => out };
}

interface Frame {
  percent: number;
  stored: number;
  total: number;
  read: number;
  entities: number;
  eta: string;
}

function framesOf(text: string): Frame[] {
  const plain = text.replace(/\u001b\[[0-9;?]*[A-Za-z]/g, '\n').replace(/\r/g, '\n');
  const frames = [...plain.matchAll(/import \|[^|]*\| (\S+)% \| (\S+)\/(\S+) rows stored \| (\S+) read \| (\S+) entities \| \S+ EGTs \| ETA (\S+)/g)];
  return frames.map((m) => ({ percent: Number(m[1]), stored: Number(m[2]), total: Number(m[3]), read: Number(m[4]), entities: Number(m[5]), eta: m[6] }));
}

test('the bar counts rows stored, shows no non-number, and reaches 100% only once every entity is written', async () => {
  const file = path.join(tmp, 'slice.csv');
  fs.writeFileSync(
    file,
    `${chicagoCsvText()
      .split('\n')
      .slice(0, ROWS + 1)
      .join('\n')}\n`,
  );
  const { model } = compileHr(uniquePrefix());
  const screen = terminal();
  const progress = createImportProgress({ totalRows: await estimateDataRows(file), log: createLogger({ level: 'silent' }), stream: screen.stream });
  let summary;
  try {
    summary = await importEmployees({ store: testStore(), model, file, concurrency: 8, onProgress: progress.update });
  } finally {
    progress.stop();
  }
  const text = screen.text();
  expect(text).not.toMatch(/NaN|NULL|INF|Infinity|undefined/);
  const frames = framesOf(text);
  expect(frames.length).toBeGreaterThan(2);
  for (const f of frames) {
    expect([f.percent, f.stored, f.total, f.read, f.entities].every(Number.isFinite)).toBe(true);
    expect(f.eta).toMatch(/^(…|\d+s|\d+m\d\ds|\d+h\d\dm)$/);
  }
  const last = frames[frames.length - 1];
  expect(last).toMatchObject({ percent: 100, stored: ROWS, total: ROWS, read: ROWS, entities: summary.entities, eta: '0s' });
  expect(frames.slice(0, -1).filter((f) => f.percent >= 100)).toEqual([]);
  // The moment the old bar said 100%: every row read, entities still being written. Now it says less.
  const allRead = frames.slice(0, -1).filter((f) => f.read === ROWS);
  expect(allRead.length).toBeGreaterThan(0);
  for (const f of allRead) expect(f.entities).toBeLessThan(summary.entities);
});
