/**
 * A running server's or worker's presence in the catalogue (catalogue.ts, `server` rows): which schema version it
 * serves, said again every `everyMs`. A build does not end while a process of an older version is present — such
 * a process writes without keeping the new path (build-runner.ts) — and a process that stops removes its row.
 */
import type { Logger } from '../log';
import type { Catalogue } from './catalogue';

export class Presence {
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly catalogue: Catalogue,
    private readonly me: { instance: string; version: number; hash: string },
    private readonly opts: { everyMs?: number; log?: Logger } = {},
  ) {}

  /** Says it now, then every `everyMs` (default 5000 ms). @throws from the catalogue, for the first */
  async start(): Promise<void> {
    await this.beat();
    this.timer = setInterval(() => {
      this.beat().catch((e: unknown) => this.opts.log?.warn({ err: e }, 'presence: the catalogue did not answer'));
    }, this.opts.everyMs ?? 5000);
    this.timer.unref();
  }

  /** Stops saying it and removes the row (a failure to remove it is left: the row goes stale by itself). */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.catalogue.leave(this.me.instance).catch(() => undefined);
  }

  private beat(): Promise<void> {
    return this.catalogue.heartbeat({ ...this.me, seenAt: Date.now() });
  }
}
