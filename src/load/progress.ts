/**
 * How a long import shows its progress: a cli-progress bar on stderr when stderr is a terminal, otherwise a log
 * line every few seconds (so CI logs and `2> file` stay readable, and stdout stays the summary's alone).
 */
import { openDataFile } from './file-stream';
import { Presets, SingleBar } from 'cli-progress';
import type { Logger } from '../log';
import type { LoadProgress } from './load-entities';
import { formatSeconds, TimeLeft } from './time-left';

/**
 * Progress so far: data rows read (malformed included), rows done (stored, or skipped), of them skipped, entities
 * written and planned, EGTs committed.
 */
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
  const before = { read: 0, stored: 0, skipped: 0 };
  let current: LoadProgress | undefined;
  return (p) => {
    if (current && p.type !== current.type) {
      before.read += current.rowsRead;
      before.stored += current.rowsStored;
      before.skipped += current.rowsSkipped;
    }
    current = p;
    reporter.update({
      rowsRead: before.read + p.rowsRead,
      rowsStored: before.stored + p.rowsStored,
      rowsSkipped: before.skipped + p.rowsSkipped,
      entitiesWritten: p.entitiesWritten,
      entitiesPlanned: p.entitiesPlanned,
      transactions: p.transactions,
    });
  };
}

/** A frame's numbers: rows done of the total (stored or needing no write, and skipped), and the percent. */
function shown(p: ImportProgress, total: number) {
  const percent = total > 0 ? Math.floor((100 * Math.min(p.rowsStored, total)) / total) : 0;
  return { done: p.rowsStored, stored: p.rowsStored - p.rowsSkipped, skipped: p.rowsSkipped, percent };
}

/**
 * The bar counts rows **done** — stored (each of their entities committed, or none needed) or skipped — not rows read,
 * and shows 100% only once `stop` is called after the last write: summary holders and stale index entities, written
 * after the rows, included. The time left is LoadTimeLeft's.
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

const NOTHING: ImportProgress = { rowsRead: 0, rowsStored: 0, rowsSkipped: 0, entitiesWritten: 0, entitiesPlanned: 0, transactions: 0 };

/**
 * The time left of a load, from the time its work has taken so far (time-left.ts): the entities it writes, towards what
 * all its rows will write (the entities planned per row read so far, times the rows) — the EGTs of the last
 * partitions, written once every row is read, are work too, which the rows they complete do not show until then. Rows
 * done stand in while nothing is planned (every row stored as it is already).
 */
class LoadTimeLeft {
  private readonly entities = new TimeLeft();
  private readonly rows = new TimeLeft();

  update(p: ImportProgress): void {
    this.entities.update(p.entitiesWritten);
    this.rows.update(p.rowsStored);
  }

  /** @returns seconds left (s), or undefined while that cannot be told */
  seconds(p: ImportProgress, totalRows: number): number | undefined {
    if (p.rowsStored >= totalRows) return 0;
    if (p.entitiesPlanned === 0 || p.rowsRead === 0) return this.rows.seconds(totalRows);
    return this.entities.seconds(Math.max(p.entitiesWritten, (p.entitiesPlanned * totalRows) / p.rowsRead));
  }
}

function progressBar(totalRows: number, stream: NodeJS.WritableStream): ProgressReporter {
  let latest: ImportProgress = NOTHING;
  const left = new LoadTimeLeft();
  const bar = new SingleBar(
    {
      stream,
      format:
        'import |{bar}| {percentage}% | {value}/{total} rows done | {stored} stored | {skipped} skipped | {read} read | {entities} entities | {transactions} EGTs | ETA {etaText}',
      hideCursor: true,
      // The stream is a terminal, or a test's on purpose.
      noTTYOutput: true,
    },
    Presets.shades_classic,
  );
  const payload = (p: ImportProgress, total: number) => ({
    stored: shown(p, total).stored,
    skipped: p.rowsSkipped,
    read: p.rowsRead,
    entities: p.entitiesWritten,
    transactions: p.transactions,
    etaText: formatSeconds(left.seconds(p, total)),
  });
  bar.start(Math.max(1, totalRows), 0, payload(latest, totalRows));
  return {
    update(p) {
      latest = p;
      left.update(p);
      // The estimate can be short (blank lines, quoted breaks): a total is at least what was read.
      if (p.rowsRead > bar.getTotal()) bar.setTotal(p.rowsRead);
      // Rows done may reach the total while holders and index entities are still being written: 100% waits for stop.
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
  let latest: ImportProgress = NOTHING;
  const left = new LoadTimeLeft();
  const intervalMs = opts.intervalMs ?? 2000;
  let lastLogged = performance.now();
  const line = (p: ImportProgress, total: number, etaSeconds: number | undefined) => {
    const { done, stored, skipped, percent } = shown(p, total);
    const eta = formatSeconds(etaSeconds);
    opts.log.info(
      { ...p, totalRows: total, percent, eta, ...(etaSeconds !== undefined && { etaSeconds: Math.round(etaSeconds * 10) / 10 }) },
      `${done}/${total} rows done (${percent}%): ${stored} stored, ${skipped} skipped; ${p.rowsRead} read, ${p.entitiesWritten} entities, ETA ${eta}`,
    );
  };
  return {
    update(p) {
      latest = p;
      left.update(p);
      if (performance.now() - lastLogged < intervalMs) return;
      lastLogged = performance.now();
      const total = Math.max(opts.totalRows, p.rowsRead);
      line(p, total, left.seconds(p, total));
    },
    stop() {
      line(latest, latest.rowsRead, latest.rowsStored === latest.rowsRead ? 0 : undefined);
    },
  };
}
