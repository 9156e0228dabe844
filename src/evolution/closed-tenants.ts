/**
 * The tenants a running server or worker refuses (docs/tenancy.md, "Deleting a tenant"): read from the catalogue at
 * start-up and every `refreshMs` after, as the paths' states are (path-states.ts), so a tenant closed by
 * `npm run tenant -- delete` is refused everywhere within that time — which the delete waits out before it deletes.
 * A failed refresh keeps the last known set: a closed tenant is never taken for open again.
 */
import type { Logger } from '../log';
import type { Catalogue } from './catalogue';
import { STATES_REFRESH_MS } from './path-states';

export class ClosedTenants {
  private closed = new Set<string>();
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly catalogue: Catalogue,
    private readonly opts: { refreshMs?: number; log?: Logger } = {},
  ) {}

  /** Whether `tenant` is closed or deleted. */
  has(tenant: string): boolean {
    return this.closed.has(tenant);
  }

  /** Reads the closed tenants now. @throws from the catalogue (the start-up read must succeed) */
  async refresh(): Promise<void> {
    const rows = await this.catalogue.tenants();
    // Only ever more: a tenant once closed stays closed here whatever a later read says.
    for (const r of rows) this.closed.add(r.tenant);
  }

  /** Refreshes every `refreshMs` (default STATES_REFRESH_MS) until `stop`. */
  start(): void {
    const every = this.opts.refreshMs ?? STATES_REFRESH_MS;
    this.timer = setInterval(() => {
      this.refresh().catch((e: unknown) => this.opts.log?.warn({ err: e }, 'closed tenants: the catalogue did not answer; keeping the last known'));
    }, every);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
