/**
 * How a long import shows its progress: a cli-progress bar on stderr when stderr is a terminal, otherwise a log
 * line every few seconds (so CI logs and `2> file` stay readable, and stdout stays the summary's alone).
 */
import { openDataFile } from './file-stream';
import { Presets, SingleBar } from 'cli-progress';
import type { Logger } from '../log';
import type { LoadProgress } from './load-entities';

/** Progress so far: data rows read (malformed included), rows stored, entities written, EGTs committed. */
export type ImportProgress = Omit<LoadProgress, 'type'>;

/** Receives progress updates; `stop` ends the bar (or logs the last line). */
export interface ProgressReporter {
  update(p: ImportProgress): void;
  stop(): void;
}

/**
 * An estimate of a file's data rows, for the bar's total: its lines (a last line without a break counts) minus
 * `headerLines` — 1 for a CSV's header, 0 for NDJSON. Over-counts quoted fields that span lines and blank lines;
 * the bar's total is corrected at the end. @throws the fs error when the file cannot be read
 */
export async function estimateDataRows(file: string, headerLines = 1): Promise<number> {
  let breaks = 0;
  let last = 0x0a;
  for await (const chunk of openDataFile(file) as AsyncIterable<Buffer>) {
    for (let i = chunk.indexOf(0x0a); i >= 0; i = chunk.indexOf(0x0a, i + 1)) breaks++;
    if (chunk.length > 0) last = chunk[chunk.length - 1];
  }
  return Math.max(0, breaks + (last === 0x0a ? 0 : 1) - headerLines);
}

/**
 * A load's progress of several steps (each counting its rows from 0) as one import's: the rows of the steps before
 * added to the current step's.
 */
export function acrossSteps(reporter: ProgressReporter): (p: LoadProgress) => void {
  const before = { read: 0, stored: 0 };
  let current: LoadProgress | undefined;
  return (p) => {
    if (current && p.type !== current.type) {
      before.read += current.rowsRead;
      before.stored += current.rowsStored;
    }
    current = p;
    reporter.update({
      rowsRead: before.read + p.rowsRead,
      rowsStored: before.stored + p.rowsStored,
      entitiesWritten: p.entitiesWritten,
      transactions: p.transactions,
    });
  };
}

/**
 * The time left, from the rate so far: `12s`, `3m05s`, `1h02m`; `…` while it cannot be told yet (nothing stored, or
 * under a second of history) — never a non-number.
 * @param done rows stored so far; @param total rows expected; @param elapsedMs time since the start (ms)
 */
export function formatEta(done: number, total: number, elapsedMs: number): string {
  if (done <= 0 || elapsedMs < 1000 || total <= done) return done >= total && done > 0 ? '0s' : '…';
  const seconds = Math.round(((total - done) * elapsedMs) / done / 1000);
  if (!Number.isFinite(seconds)) return '…';
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m${String(seconds % 60).padStart(2, '0')}s`;
  return `${Math.floor(seconds / 3600)}h${String(Math.floor((seconds % 3600) / 60)).padStart(2, '0')}m`;
}

/**
 * The bar counts rows **stored** (each of their entities committed), not rows read, and shows 100% only once `stop`
 * is called after the last write — summary holders and stale index entities, written after the rows, included.
 * @param opts.totalRows the expected data rows (see estimateDataRows)
 * @param opts.log where the periodic lines go when the bar is off
 * @param opts.intervalMs minimum time between two log lines (ms, default 2000)
 * @param opts.tty force the bar on or off (default: whether `stream` is a terminal)
 * @param opts.stream where the bar is drawn (default process.stderr)
 */
export function createImportProgress(opts: {
  totalRows: number;
  log: Logger;
  intervalMs?: number;
  tty?: boolean;
  stream?: NodeJS.WritableStream;
}): ProgressReporter {
  const stream = opts.stream ?? process.stderr;
  const tty = opts.tty ?? Boolean((stream as { isTTY?: boolean }).isTTY);
  return tty ? progressBar(opts.totalRows, stream) : progressLines(opts);
}

function progressBar(totalRows: number, stream: NodeJS.WritableStream): ProgressReporter {
  let latest: ImportProgress = { rowsRead: 0, rowsStored: 0, entitiesWritten: 0, transactions: 0 };
  const started = performance.now();
  const bar = new SingleBar(
    {
      stream,
      format: 'import |{bar}| {percentage}% | {value}/{total} rows stored | {read} read | {entities} entities | {transactions} EGTs | ETA {etaText}',
      hideCursor: true,
      // The stream is a terminal, or a test's on purpose.
      noTTYOutput: true,
    },
    Presets.shades_classic,
  );
  const payload = (p: ImportProgress, total: number) => ({
    read: p.rowsRead,
    entities: p.entitiesWritten,
    transactions: p.transactions,
    etaText: formatEta(p.rowsStored, total, performance.now() - started),
  });
  bar.start(Math.max(1, totalRows), 0, payload(latest, totalRows));
  return {
    update(p) {
      latest = p;
      // The estimate can be short (blank lines, quoted breaks): a total is at least what was read.
      if (p.rowsRead > bar.getTotal()) bar.setTotal(p.rowsRead);
      // Rows stored may reach the total while holders and index entities are still being written: 100% waits for stop.
      bar.update(Math.min(p.rowsStored, bar.getTotal() - 1), payload(p, bar.getTotal()));
    },
    stop() {
      bar.setTotal(Math.max(1, latest.rowsRead));
      bar.update(latest.rowsStored, { ...payload(latest, latest.rowsRead), etaText: '0s' });
      bar.stop();
    },
  };
}

function progressLines(opts: { totalRows: number; log: Logger; intervalMs?: number }): ProgressReporter {
  let latest: ImportProgress = { rowsRead: 0, rowsStored: 0, entitiesWritten: 0, transactions: 0 };
  const started = performance.now();
  const intervalMs = opts.intervalMs ?? 2000;
  let lastLogged = performance.now();
  const line = (p: ImportProgress, total: number, eta: string) =>
    opts.log.info({ ...p, totalRows: total, eta }, `stored ${p.rowsStored}/${total} rows (${p.rowsRead} read, ${p.entitiesWritten} entities), ETA ${eta}`);
  return {
    update(p) {
      latest = p;
      if (performance.now() - lastLogged < intervalMs) return;
      lastLogged = performance.now();
      const total = Math.max(opts.totalRows, p.rowsRead);
      line(p, total, formatEta(p.rowsStored, total, performance.now() - started));
    },
    stop() {
      line(latest, latest.rowsRead, latest.rowsStored === latest.rowsRead ? '0s' : '…');
    },
  };
}
