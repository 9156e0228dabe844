/**
 * How a long import shows its progress: a cli-progress bar on stderr when stderr is a terminal, otherwise a log
 * line every few seconds (so CI logs and `2> file` stay readable, and stdout stays the summary's alone).
 */
import { openDataFile } from './file-stream';
import { Presets, SingleBar } from 'cli-progress';
import type { Logger } from '../log';
import type { LoadProgress } from './load-entities';

/** Progress so far: data rows read (malformed included), entities written, EGTs committed. */
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
 * @param opts.totalRows the expected data rows (see estimateDataRows)
 * @param opts.log where the periodic lines go when stderr is not a TTY
 * @param opts.intervalMs minimum time between two log lines (ms, default 2000)
 * @param opts.tty force the bar on or off (default: process.stderr.isTTY)
 */
export function createImportProgress(opts: { totalRows: number; log: Logger; intervalMs?: number; tty?: boolean }): ProgressReporter {
  const tty = opts.tty ?? Boolean(process.stderr.isTTY);
  let latest: ImportProgress = { rowsRead: 0, entitiesWritten: 0, transactions: 0 };
  if (tty) {
    const bar = new SingleBar(
      {
        stream: process.stderr,
        format: 'import |{bar}| {percentage}% | {value}/{total} rows | {entities} entities | {transactions} EGTs | ETA {eta_formatted}',
        hideCursor: true,
        etaBuffer: 50,
      },
      Presets.shades_classic,
    );
    bar.start(opts.totalRows, 0, { entities: 0, transactions: 0 });
    return {
      update(p) {
        latest = p;
        if (p.rowsRead > bar.getTotal()) bar.setTotal(p.rowsRead);
        bar.update(p.rowsRead, { entities: p.entitiesWritten, transactions: p.transactions });
      },
      stop() {
        if (latest.rowsRead !== bar.getTotal()) bar.setTotal(latest.rowsRead);
        bar.update(latest.rowsRead, { entities: latest.entitiesWritten, transactions: latest.transactions });
        bar.stop();
      },
    };
  }
  const intervalMs = opts.intervalMs ?? 2000;
  let lastLogged = performance.now();
  const line = (p: ImportProgress) => opts.log.info({ ...p, totalRows: opts.totalRows }, `imported ${p.rowsRead}/${opts.totalRows} rows`);
  return {
    update(p) {
      latest = p;
      if (performance.now() - lastLogged < intervalMs) return;
      lastLogged = performance.now();
      line(p);
    },
    stop() {
      line(latest);
    },
  };
}
