/**
 * What `npm run load` and `npm run import` print at the end: the totals on stdout, the skipped rows and the failed
 * EGTs in the log.
 */
import type { Logger } from '../log';

/** Skipped rows listed one by one (per call); the rest are counted. */
const SKIPPED_SHOWN = 20;

interface Totals {
  failed: Array<{ lines: number[]; table: string; partitionKey: string; error: string }>;
  retries: number;
  entities: number;
  transactions: number;
  seconds: number;
  entitiesPerSecond: number;
}

/** The totals, one per line: failed EGTs (and their rows), entities, EGTs, seconds, entities/s. */
export function formatTotals(s: Totals): string[] {
  return [
    `failed EGTs      ${s.failed.length}   (${s.failed.reduce((n, f) => n + f.lines.length, 0)} rows; sent again ${s.retries} times in all)`,
    `entities         ${s.entities}`,
    `transactions     ${s.transactions}`,
    `seconds          ${s.seconds.toFixed(2)}`,
    `entities/s       ${Math.round(s.entitiesPerSecond)}`,
  ];
}

/**
 * One error line per EGT not stored after its attempts (each read back: one whose answer was lost and that was stored
 * is not among them), with the lines of its rows and what to do; sets exit code 1 when there is any.
 * @param rerun the command that loads them, e.g. `npm run import -- --file x.csv`
 */
export function reportFailed(log: Logger, failed: Totals['failed'], rerun: string): void {
  for (const f of failed) {
    log.error(
      { table: f.table, partitionKey: f.partitionKey, lines: f.lines },
      `lines ${f.lines.join(', ')} were not stored (an EGT of ${f.lines.length} rows, ${f.error}): run ${rerun} again to store them; rows stored already are left as they are`,
    );
  }
  if (failed.length > 0) process.exitCode = 1;
}

/** What a load tells of a storage call sent again (an EGT read back and not stored, or a read): a warning. */
export function retryMessage(e: unknown, attempt: number): string {
  return `storage did not answer (${(e as Error).message}); sending it again (attempt ${attempt + 1})`;
}

/**
 * One warning per skipped row, for the first 20, then one line counting the rest.
 * @param opts.where how a row's place is named, e.g. `issues.csv:12` or `line 12`
 * @param opts.fields added to each row's log line (e.g. the entity type)
 * @param opts.rows what the rest are called in the counting line (default `rows`)
 */
export function reportSkipped(
  log: Logger,
  skipped: Array<{ line: number; reason: string }>,
  opts: { where(line: number): string; fields?: Record<string, unknown>; rows?: string },
): void {
  for (const s of skipped.slice(0, SKIPPED_SHOWN)) log.warn({ ...opts.fields, line: s.line }, `skipped ${opts.where(s.line)}: ${s.reason}`);
  if (skipped.length > SKIPPED_SHOWN) log.warn(`… and ${skipped.length - SKIPPED_SHOWN} more skipped ${opts.rows ?? 'rows'} (${skipped.length} in all)`);
}
