/**
 * The import's progress as a person sees it. In a terminal (createImportProgress drawing on a stream that says it is
 * one): every frame's numbers are numbers — the ETA is a time or `…`, never NaN, NULL or INF — and the bar counts rows
 * done, not rows read: while the last EGTs are still being written it is below 100%, and it reaches 100% only in its
 * last frame, drawn once every entity is written. In a log (no terminal): each line has the percent, the rows stored
 * and skipped, and an ETA within ±35% of the time that was actually left, from 25% on — through a Table service that
 * slows down as the import goes (test/support/storage-proxy.ts holds each EGT longer than the one before).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { importEmployees } from '../examples/hr/import/import-employees';
import { createLogger } from '../src/log';
import { createImportProgress, estimateDataRows } from '../src/load/progress';
import pino from 'pino';
import { TableStore } from '../src/storage/table-store';
import { compileHr, connectionString, testStore, uniquePrefix, writeChicagoSlice } from './support/harness';
import { startStorageProxy } from './support/storage-proxy';

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
  const frames = [
    ...plain.matchAll(
      /import \|[^|]*\| (\S+)% \| (\S+)\/(\S+) rows done \| \S+ stored \| \S+ skipped \| (\S+) read \| (\S+) entities \| \S+ EGTs \| ETA (\S+)/g,
    ),
  ];
  return frames.map((m) => ({ percent: Number(m[1]), stored: Number(m[2]), total: Number(m[3]), read: Number(m[4]), entities: Number(m[5]), eta: m[6] }));
}

test('the bar counts rows stored, shows no non-number, and reaches 100% only once every entity is written', async () => {
  const file = path.join(tmp, 'slice.csv');
  writeChicagoSlice(file, ROWS);
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

test('log lines: the percent, rows stored and skipped, and an ETA within ±35% of the time left from 25% on, as the service slows', async () => {
  const file = path.join(tmp, 'slow.csv');
  writeChicagoSlice(file, ROWS, ['not,a,row']);
  // Each EGT held for its entities, a little longer per entity than the one before — 6 ms per entity at first, some
  // 10 ms at the end — as a service whose tables grow. The holds, not the machine's CPU, set the pace: on a busy
  // machine (other test files beside this one) Azurite's own time grows too, and the ETA cannot foresee that.
  let entities = 0;
  const proxy = await startStorageProxy(connectionString(), {
    delayMs: (method, p, body) => {
      if (method !== 'POST' || !p.includes('$batch')) return 0;
      const n = body.split('"PartitionKey"').length - 1;
      entities += n;
      return n * (6 + entities / 3500);
    },
  });
  const lines: Array<{ at: number; percent: number; etaSeconds?: number; msg: string }> = [];
  const log = pino(
    { level: 'info' },
    new Writable({
      write(chunk: Buffer, _enc, done) {
        const j = JSON.parse(chunk.toString('utf8')) as { percent: number; etaSeconds?: number; msg: string };
        lines.push({ at: performance.now(), percent: j.percent, etaSeconds: j.etaSeconds, msg: j.msg });
        done();
      },
    }),
  );
  const { model } = compileHr(uniquePrefix());
  const store = new TableStore({ connectionString: proxy.connectionString, target: 'azurite', timeoutMs: 30_000 });
  const progress = createImportProgress({ totalRows: await estimateDataRows(file), log, intervalMs: 500, tty: false });
  let end: number;
  try {
    await importEmployees({ store, model, file, concurrency: 4, onProgress: progress.update });
  } finally {
    end = performance.now();
    progress.stop();
    await proxy.close();
  }
  const last = lines[lines.length - 1];
  expect(last.msg).toBe(
    `${ROWS + 1}/${ROWS + 1} rows done (100%): ${ROWS} stored, 1 skipped; ${ROWS + 1} read, ${last.msg.match(/ (\d+) entities/)![1]} entities, ETA 0s`,
  );
  const judged = lines.filter((l) => l.percent >= 25 && (end - l.at) / 1000 >= 2);
  expect(judged.length).toBeGreaterThanOrEqual(3);
  const ratios = judged.map((l) => ({ percent: l.percent, ratio: Math.round((100 * (end - l.at)) / 1000 / l.etaSeconds!) / 100 }));
  console.log(`ETA: actual time left ÷ ETA, from 25% on: ${ratios.map((r) => `${r.percent}% ${r.ratio}`).join(', ')}`);
  expect(ratios.filter((r) => !(r.ratio >= 0.65 && r.ratio <= 1.35))).toEqual([]);
}, 120_000);
