/**
 * Runs a command's main function: a logger, and on failure one readable line (with the error's code) and exit
 * code 1 instead of a stack trace — unless LOG_LEVEL=debug.
 */
import { InvalidArgumentError } from 'commander';
import { LOG_LEVELS } from '../runtime/config';
import { isTablegraphError } from '../errors';
import type { Logger, LoggerOptions } from '../log';

/** @param name the command, shown in logs; @param main its body; @param createLogger src/log.ts's factory */
export function runMain(
  name: string,
  main: (log: Logger) => Promise<void>,
  createLogger: (opts: LoggerOptions) => Logger,
  destination: LoggerOptions['destination'] = 'stdout',
): void {
  // Before the configuration is read: a LOG_LEVEL that is no level name is refused by it (with its name), not by pino.
  const level = (LOG_LEVELS as readonly string[]).includes(process.env.LOG_LEVEL ?? '') ? process.env.LOG_LEVEL! : 'info';
  const log = createLogger({ name, level, destination });
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

/**
 * Calls `stop` once on the first SIGTERM or SIGINT, then exits 0 (1 if `stop` failed): the graceful shutdown of a
 * long-running command (server, worker).
 */
export function onShutdownSignal(log: Logger, stop: (signal: string) => Promise<void>): void {
  let stopping = false;
  const handler = (signal: string) => {
    if (stopping) return;
    stopping = true;
    stop(signal).then(
      () => process.exit(0),
      (e: unknown) => {
        log.error({ err: e }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => handler('SIGTERM'));
  process.on('SIGINT', () => handler('SIGINT'));
}

/** A commander argument parser for a positive integer (e.g. `--concurrency 8`); commander reports the error. */
export function positiveIntArgument(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError('expected a positive integer');
  return n;
}
