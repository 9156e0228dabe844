/**
 * The project's logger: pino, human-readable (pino-pretty) on a terminal, one JSON object per line otherwise
 * (so log shippers and `jq` can read it).
 */
import pino from 'pino';
import pretty from 'pino-pretty';

export type Logger = pino.Logger;

/** Options of {@link createLogger}. */
export interface LoggerOptions {
  /** pino level name: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent'. Default 'info'. */
  level?: string;
  /** Added to every line as `name` (e.g. 'server', 'worker', 'import'). */
  name?: string;
  /**
   * Where lines go. Default 'stdout'. CLI commands that print their result on stdout (explain, verify, import
   * summaries) log to 'stderr' so their output stays pipeable.
   */
  destination?: 'stdout' | 'stderr';
  /**
   * Whether each line is written before the call returns. Default true. The server and the worker pass false: lines
   * are kept until 8 KiB of them are in hand or FLUSH_EVERY_MS has passed, so a busy server makes one write system
   * call per many requests instead of one per request (measured: a write per line cost 5% of a point query's CPU).
   * Lines in hand are written on exit (pino flushes them synchronously on `process.exit`); a `kill -9` may lose the
   * last FLUSH_EVERY_MS of them.
   */
  sync?: boolean;
}

/**
 * Creates a logger writing to `destination`. Pretty output when that stream is a TTY, JSON otherwise.
 * Throws the Error pino throws for an unknown `level` (callers validate LOG_LEVEL through src/runtime/config.ts first).
 */
export function createLogger(opts: LoggerOptions = {}): Logger {
  const fd = opts.destination === 'stderr' ? 2 : 1;
  const stream = fd === 2 ? process.stderr : process.stdout;
  const base = { level: opts.level ?? 'info', name: opts.name };
  if (stream.isTTY) {
    // The stream form (not a pino transport) keeps pretty printing on this thread: no worker thread to
    // outlive a short CLI command, and lines are written synchronously in order with the command's output.
    return pino(base, pretty({ destination: fd, sync: true, colorize: true, translateTime: 'SYS:HH:MM:ss.l' }));
  }
  if (opts.sync ?? true) return pino(base, pino.destination({ fd, sync: true }));
  const destination = pino.destination({ fd, sync: false, minLength: BUFFERED_BYTES });
  setInterval(() => destination.flush(), FLUSH_EVERY_MS).unref();
  return pino(base, destination);
}

/** Lines kept before they are written, when not sync (bytes). */
const BUFFERED_BYTES = 8_192;
/** The longest a line waits to be written, when not sync (ms). */
export const FLUSH_EVERY_MS = 200;
