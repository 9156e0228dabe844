/**
 * Runs a command's main function: a logger, and on failure one readable line (with the error's code) and exit
 * code 1 instead of a stack trace — unless LOG_LEVEL=debug.
 */
import { isTablegraphError } from '../errors';
import type { Logger, LoggerOptions } from '../log';

/** @param name the command, shown in logs; @param main its body; @param createLogger src/log.ts's factory */
export function runMain(
  name: string,
  main: (log: Logger) => Promise<void>,
  createLogger: (opts: LoggerOptions) => Logger,
  destination: LoggerOptions['destination'] = 'stdout',
): void {
  const log = createLogger({ name, level: process.env.LOG_LEVEL || 'info', destination });
  main(log).catch((e: unknown) => {
    if (isTablegraphError(e)) {
      log.error({ code: e.code, details: log.level === 'debug' ? e.details : undefined }, e.message);
    } else {
      log.error({ err: e }, 'failed');
    }
    process.exitCode = 1;
    // Leave time for the log line to be written, then make sure no handle keeps the process alive.
    setTimeout(() => process.exit(1), 50).unref();
  });
}
