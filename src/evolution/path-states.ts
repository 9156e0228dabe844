/**
 * The states of the derived access paths as a running server knows them (docs/schema-changes.md): read from the
 * catalogue at start-up and every `refreshMs` after (one range query over its `path` partition), so a build that
 * finishes in a worker elsewhere is served within that time. Until then the path stays refused: a state is only
 * ever learnt from the catalogue, never assumed, so a failed refresh keeps the last known states.
 */
import { ErrorCode, TablegraphError } from '../errors';
import type { Logger } from '../log';
import type { PathGate } from '../read/path-gate';
import type { Catalogue, PathRecord } from './catalogue';

/** How far a build is: entities read of those to read, and a percentage (null when the total is unknown). */
export function progressOf(p: PathRecord): { read: number; total: number; written: number; percent: number | null } {
  const percent = p.total > 0 ? Math.min(99.9, Math.round((1000 * p.read) / p.total) / 10) : null;
  return { read: p.read, total: p.total, written: p.written, percent: p.state === 'ready' ? 100 : percent };
}

export class PathStates implements PathGate {
  private states = new Map<string, PathRecord>();
  private timer?: NodeJS.Timeout;
  private lastRefresh = 0;

  constructor(
    private readonly catalogue: Catalogue,
    private readonly opts: { refreshMs?: number; log?: Logger } = {},
  ) {}

  /** Reads every path's state now. @throws from the catalogue (the start-up read must succeed) */
  async refresh(): Promise<void> {
    const rows = await this.catalogue.paths();
    this.states = new Map(rows.map((r) => [r.id, r]));
    this.lastRefresh = Date.now();
  }

  /** Refreshes every `refreshMs` (default 2000 ms) until `stop`; a failed refresh is logged and the last states kept. */
  start(): void {
    const every = this.opts.refreshMs ?? 2000;
    this.timer = setInterval(() => {
      this.refresh().catch((e: unknown) => this.opts.log?.warn({ err: e }, 'path states: the catalogue did not answer; keeping the last known states'));
    }, every);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** Every path's last known row. */
  all(): PathRecord[] {
    return [...this.states.values()].sort((a, b) => (a.id < b.id ? -1 : 1));
  }

  /** When the states were last read (ms since 1970). */
  get refreshedAt(): number {
    return this.lastRefresh;
  }

  assertReadable(pathId: string, coordinate: string): void {
    const state = this.states.get(pathId);
    // A path with no row is one this server's schema has and the catalogue does not: a first deployment's, written
    // before the rows (deployment.ts writes them first), so none exists on a running server.
    if (!state || state.state === 'ready') return;
    const reason = state.state === 'failed' ? 'PathBuildFailed' : state.state === 'retired' ? 'PathRetired' : 'PathBuilding';
    const message =
      reason === 'PathBuildFailed'
        ? `${coordinate} reads ${pathId}, whose build stopped: ${state.problem?.message ?? 'see npm run migrate -- status'}`
        : reason === 'PathRetired'
          ? `${coordinate} reads ${pathId}, which a newer deployed schema removed: its entities are no longer kept`
          : `${coordinate} reads ${pathId}, which is being built from the stored entities (${describe(state)}): try again later`;
    throw new TablegraphError(ErrorCode.ACCESS_PATH_BUILDING, message, {
      reason,
      accessPath: pathId,
      state: state.state,
      progress: progressOf(state),
      ...(reason === 'PathBuilding' && { retryAfterSeconds: 5 }),
    });
  }
}

function describe(p: PathRecord): string {
  const { read, total, percent } = progressOf(p);
  return percent === null ? `${read} entities read` : `${read} of ${total} entities read, ${percent}%`;
}
