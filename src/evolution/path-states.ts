/**
 * The states of the derived access paths as a running server knows them (docs/schema-changes.md): read from the
 * catalogue at start-up and every `refreshMs` after (one range query over its `path` partition), so a build that
 * finishes in a worker elsewhere is served within that time. Until then the path stays refused: a state is only
 * ever learnt from the catalogue, never assumed, so a failed refresh keeps the last known states. The same rows say
 * which entity types are being re-keyed, and so which this process serves (path-gate.ts `assertServed`).
 */
import { ErrorCode, TablegraphError } from '../errors';
import { rekeyPathId } from '../model/derived-paths';
import type { EntityAddress } from '../storage/storage-types';
import type { Logger } from '../log';
import type { PathGate } from '../read/path-gate';
import type { Catalogue } from './catalogue';
import type { PathRecord } from './catalogue-records';
import { addressingOf } from './layout-diff';
import { canonicalJson, type RecordedLayout } from './layout-record';

/** How far a build is: entities read of those to read, and a percentage (null when the total is unknown). */
export function progressOf(p: PathRecord): { read: number; total: number; written: number; percent: number | null } {
  const percent = p.total > 0 ? Math.min(99.9, Math.round((1000 * p.read) / p.total) / 10) : null;
  return { read: p.read, total: p.total, written: p.written, percent: p.state === 'ready' ? 100 : percent };
}

/** How often a server reads the paths' states again (ms): a state written is known everywhere within it. */
export const STATES_REFRESH_MS = 2000;

/** What a type's re-key means to this process: refused (and why), or served — with another layout's copies about. */
type TypeService = { refusal: TablegraphError } | { refusal?: undefined; copies: boolean };

export interface PathStatesOptions {
  /** How often the states are read again (ms). Default: STATES_REFRESH_MS. */
  refreshMs?: number;
  log?: Logger;
  /**
   * The layout this process's schema stores: a path the catalogue records with another definition, or a type whose
   * re-key is not at this layout's stage, is refused. Absent: only the paths' states count.
   */
  layout?: RecordedLayout;
}

export class PathStates implements PathGate {
  private states = new Map<string, PathRecord>();
  /** Each re-keyed type's service here, decided at each refresh (a read looks it up: no work per request). */
  private types = new Map<string, TypeService>();
  private timer?: NodeJS.Timeout;
  private lastRefresh = 0;

  constructor(
    private readonly catalogue: Catalogue,
    private readonly opts: PathStatesOptions = {},
  ) {}

  /** Reads every path's state now. @throws from the catalogue (the start-up read must succeed) */
  async refresh(): Promise<void> {
    const rows = await this.catalogue.paths();
    this.states = new Map(rows.map((r) => [r.id, r]));
    this.types = new Map(rows.filter((r) => r.kind === 'rekey').flatMap((r) => this.serviceOf(r)));
    this.lastRefresh = Date.now();
  }

  /**
   * A re-key's meaning here: a process whose schema stores the type at the old addresses serves it until the re-key
   * is done (and meets its copies meanwhile); one whose schema stores it at the new addresses serves it from then on;
   * any other is refused it.
   */
  private serviceOf(row: PathRecord): Array<[string, TypeService]> {
    const type = row.id.slice(row.id.indexOf(':') + 1);
    const mine = this.opts.layout?.types[type];
    if (!mine) return [];
    const here = canonicalJson(addressingOf(mine));
    const { from, to } = row.definition as { from: unknown; to: unknown };
    if (here === canonicalJson(from) && row.state !== 'ready') return [[type, { copies: row.state === 'building' }]];
    if (here === canonicalJson(to) && row.state === 'ready') return [];
    const reason = row.state === 'ready' ? 'PathRetired' : row.state === 'failed' ? 'PathBuildFailed' : 'TypeRekeying';
    const message =
      reason === 'PathRetired'
        ? `a newer deployed schema moved ${type}'s entities to other addresses: this server's schema is older`
        : reason === 'PathBuildFailed'
          ? `${type}'s entities are being moved to the addresses of this schema, and the re-key stopped${stopReason(row)}: the operator sees why with npm run migrate -- status`
          : `${type}'s entities are being moved to the addresses of this schema (${describe(row)}): try again later`;
    const refusal = new TablegraphError(ErrorCode.ACCESS_PATH_BUILDING, message, {
      reason,
      accessPath: row.id,
      state: row.state,
      progress: progressOf(row),
      ...(reason === 'TypeRekeying' && { retryAfterSeconds: 5 }),
    });
    return [[type, { refusal }]];
  }

  assertServed(type: string, coordinate: string): void {
    const refusal = this.types.get(type)?.refusal;
    if (!refusal) return;
    throw new TablegraphError(refusal.code, `${coordinate}: ${refusal.message}`, refusal.details);
  }

  /**
   * Whether `type` was re-keyed (its `rekey:<Type>` row ready) after `enqueuedAt` (ms since 1970), and where the entity
   * of move `moveId`, under way then, was carried (src/worker/carry-out-move.ts).
   */
  movedTo(type: string, moveId: string, enqueuedAt: number): { rekeyed: boolean; address?: EntityAddress } {
    const row = this.states.get(rekeyPathId(type));
    if (!row || row.state !== 'ready' || (row.finishedAt ?? 0) <= enqueuedAt) return { rekeyed: false };
    return { rekeyed: true, address: row.moves?.[moveId] };
  }

  meetsCopies(type: string): boolean {
    const service = this.types.get(type);
    return !!service && !service.refusal && service.copies;
  }

  /** Refreshes every `refreshMs` (default STATES_REFRESH_MS) until `stop`; a failed refresh is logged and the last states kept. */
  start(): void {
    const every = this.opts.refreshMs ?? STATES_REFRESH_MS;
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
    if (!state) return;
    const mine = this.opts.layout?.paths[pathId];
    // A row that does not decode (catalogue-records.ts) is failed whatever its definition says.
    const unreadable = state.problem?.reason === 'CatalogueRowInvalid';
    const changed = !!mine && !unreadable && state.state !== 'retired' && canonicalJson(mine.definition) !== canonicalJson(state.definition);
    if (state.state === 'ready' && !changed) return;
    const reason = changed ? 'PathChanged' : state.state === 'failed' ? 'PathBuildFailed' : state.state === 'retired' ? 'PathRetired' : 'PathBuilding';
    const message =
      reason === 'PathChanged'
        ? `${coordinate} reads ${pathId}, which a newer deployed schema changed: this server's schema is older`
        : reason === 'PathBuildFailed'
          ? `${coordinate} reads ${pathId}, whose build stopped${stopReason(state)}: the operator sees why with npm run migrate -- status`
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

/**
 * Why a build stopped, as a client may be told it: the reason's name alone. The problem's message and details name
 * entities (the keys of a value held twice), which a caller that may not read them must not learn from a refusal:
 * they go to the worker's log and `npm run migrate -- status`.
 */
function stopReason(p: PathRecord): string {
  return p.problem ? ` (${p.problem.reason})` : '';
}

function describe(p: PathRecord): string {
  const { read, total, percent } = progressOf(p);
  return percent === null ? `${read} entities read` : `${read} of ${total} entities read, ${percent}%`;
}
