/**
 * The catalogue: a table of the project's own (`<prefix>TablegraphCatalogue`) recording which schema wrote the stored
 * data, and the state of every derived access path (docs/schema-changes.md). Every change is a conditional write
 * (If-Match on the ETag read, or an insert refused when the row exists), so that servers starting at once agree on
 * one deployment, and only one worker at a time holds a build's lease.
 *
 * | PartitionKey | RowKey | what |
 * | --- | --- | --- |
 * | `deployment` | `current` | the deployed version: its number, layout hash, layout, accepted drops |
 * | `version` | `v000001` … | each deployed version: its SDL and layout (gzip, base64), when |
 * | `path` | a path id (`index:Order.byCustomer`, `rekey:Order`) | the path's state, build checkpoint, progress, lease |
 * | `server` | an instance id | a running server's or worker's version, and when it last said so |
 */
import { gunzipSync, gzipSync } from 'node:zlib';
import { ErrorCode, isTablegraphError, TablegraphError, type ReasonName } from '../errors';
import type { TableStore } from '../storage/table-store';
import type { EntityAddress, EntityToWrite, StoredEntity, TypedValue } from '../storage/storage-types';
import type { PathKind } from '../model/derived-paths';
import type { RecordedLayout } from './layout-record';

/** The catalogue table's name under a table prefix. */
export function catalogueTable(tablePrefix: string): string {
  return `${tablePrefix}TablegraphCatalogue`;
}

/**
 * A derived access path's state: `building` (its entities are being written from the stored ones; reads through it
 * are refused with ACCESS_PATH_BUILDING), `ready`, `failed` (the build met data it must not guess at — a unique value
 * held twice — and stopped; `problem` says what), `retired` (no longer in the schema; its entities stay, unread).
 */
export type PathState = 'building' | 'ready' | 'failed' | 'retired';

/** A path's row in the catalogue. Times in ms since 1970; counts in entities. */
export interface PathRecord {
  id: string;
  kind: PathKind;
  state: PathState;
  /** The deployed version that added (or last changed) it. */
  version: number;
  /** The layout definition it is built to (layout-record.ts). */
  definition: Record<string, unknown>;
  /** Where the build goes on: the continuation token of the next page of the scan; '' = from the start. */
  checkpoint: string;
  /** Whether the scan has read every page. */
  scanned: boolean;
  /** Stored entities read by the build so far (entities). */
  read: number;
  /** Entities the build wrote (entities). */
  written: number;
  /** Entities the build left because a write made since its read already holds them (entities). */
  skipped: number;
  /** The entities to read, counted when the build started (entities); 0 when unknown. */
  total: number;
  /** The worker holding the build's lease, and until when (ms). */
  leaseOwner?: string;
  leaseUntil?: number;
  /** How many times a worker took the build over from another's lease (a kill, a restart). */
  takeovers: number;
  /** Whether the build must end with a repair pass: a step was cut short, or servers of an older version wrote meanwhile. */
  needsRepair: boolean;
  startedAt?: number;
  updatedAt?: number;
  finishedAt?: number;
  /** For a failed build: why, in a code and a sentence, and its details (the keys of a value held twice). */
  problem?: { reason: ReasonName; message: string; details?: unknown };
  /**
   * A re-key's moves under way when it switched (`rekey` rows only): each move's id and its entity's new address, so
   * that the worker carries the move out from there (src/worker/carry-out-move.ts).
   */
  moves?: Record<string, EntityAddress>;
  etag?: string;
}

/** The deployed version: what wrote the data from then on. */
export interface Deployment {
  version: number;
  hash: string;
  layout: RecordedLayout;
  /** Types and fields the operator said may go (`migrate apply --drop`), by coordinate. */
  drops: string[];
  deployedAt: number;
  etag?: string;
}

/** A running server's or worker's last word: which version it serves (ms since 1970). */
export interface ServerRecord {
  instance: string;
  version: number;
  hash: string;
  seenAt: number;
}

/** Text properties hold at most 32 K UTF-16 code units: a longer text is split over `Name0`, `Name1`… */
const CHUNK = 30000;
const MAX_CHUNKS = 30;

const str = (value: string): TypedValue => ({ type: 'String', value });
const int = (value: number): TypedValue => ({ type: 'Int64', value: BigInt(Math.round(value)) });
const bool = (value: boolean): TypedValue => ({ type: 'Boolean', value });
const date = (ms: number): TypedValue => ({ type: 'DateTime', value: new Date(ms) });

function packed(name: string, text: string): Record<string, TypedValue> {
  const b64 = gzipSync(Buffer.from(text, 'utf8')).toString('base64');
  const parts: Record<string, TypedValue> = {};
  const count = Math.ceil(b64.length / CHUNK);
  if (count > MAX_CHUNKS) throw new Error(`${name} is ${b64.length} characters compressed, over the catalogue's ${CHUNK * MAX_CHUNKS}`);
  for (let i = 0; i < count; i++) parts[`${name}${i}`] = str(b64.slice(i * CHUNK, (i + 1) * CHUNK));
  parts[`${name}Chunks`] = int(count);
  return parts;
}

function unpacked(name: string, p: Record<string, unknown>): string {
  const count = Number(p[`${name}Chunks`] ?? 0);
  let b64 = '';
  for (let i = 0; i < count; i++) b64 += String(p[`${name}${i}`] ?? '');
  return gunzipSync(Buffer.from(b64, 'base64')).toString('utf8');
}

const num = (v: unknown): number => (v === undefined || v === null ? 0 : Number(v));

/** The catalogue of one table prefix. Every method is one or two storage calls; none scans beyond a partition. */
export class Catalogue {
  readonly table: string;

  constructor(
    readonly store: TableStore,
    tablePrefix: string,
  ) {
    this.table = catalogueTable(tablePrefix);
  }

  /** Creates the table when it does not exist. */
  async ensure(): Promise<void> {
    await this.store.ensureTable(this.table);
  }

  /** The deployed version, or null before the first deployment. */
  async deployment(): Promise<Deployment | null> {
    const e = await this.store.getEntity({ table: this.table, partitionKey: 'deployment', rowKey: 'current' });
    if (!e) return null;
    const p = e.properties;
    return {
      version: num(p.Version),
      hash: String(p.Hash),
      layout: JSON.parse(unpacked('Layout', p)) as RecordedLayout,
      drops: JSON.parse(String(p.Drops ?? '[]')) as string[],
      deployedAt: new Date(p.DeployedAt as Date).getTime(),
      etag: e.etag,
    };
  }

  /**
   * Records `next` as the deployed version, with its SDL kept under `version/v<NNNNNN>`: an insert when `ifMatch` is
   * absent (the first deployment), else a replace on that ETag.
   * @returns false when another process deployed first (the row exists, or its ETag changed): read it again
   */
  async deploy(next: Deployment, sdl: string, ifMatch?: string): Promise<boolean> {
    const properties = {
      Version: int(next.version),
      Hash: str(next.hash),
      ...packed('Layout', JSON.stringify(next.layout)),
      Drops: str(JSON.stringify(next.drops)),
      DeployedAt: date(next.deployedAt),
    };
    const current: EntityToWrite = { partitionKey: 'deployment', rowKey: 'current', properties };
    try {
      if (ifMatch) await this.store.updateEntity(this.table, current, 'replace', { ifMatch });
      else await this.store.createEntity(this.table, current);
    } catch (e) {
      if (isTablegraphError(e, ErrorCode.CONFLICT) || isTablegraphError(e, ErrorCode.NOT_FOUND)) return false;
      throw e;
    }
    await this.store.upsertEntity(
      this.table,
      { partitionKey: 'version', rowKey: versionRowKey(next.version), properties: { ...properties, ...packed('Sdl', sdl) } },
      'replace',
    );
    return true;
  }

  /**
   * Adds coordinates to the deployment's drops (`migrate apply --drop`): a merge of that one property, If-Match on
   * the deployment's ETag. @returns false when another process changed the deployment first
   */
  async recordDrops(current: Deployment, drops: string[]): Promise<boolean> {
    const all = [...new Set([...current.drops, ...drops])].sort();
    try {
      await this.store.updateEntity(this.table, { partitionKey: 'deployment', rowKey: 'current', properties: { Drops: str(JSON.stringify(all)) } }, 'merge', {
        ifMatch: current.etag,
      });
      return true;
    } catch (e) {
      if (isTablegraphError(e, ErrorCode.CONFLICT)) return false;
      throw e;
    }
  }

  /** A recorded version's SDL, or null when it was never recorded. */
  async sdlOf(version: number): Promise<string | null> {
    const e = await this.store.getEntity({ table: this.table, partitionKey: 'version', rowKey: versionRowKey(version) });
    return e ? unpacked('Sdl', e.properties) : null;
  }

  /** A recorded version's layout hash, or null when it was never recorded. */
  async versionHash(version: number): Promise<string | null> {
    const e = await this.store.getEntity({ table: this.table, partitionKey: 'version', rowKey: versionRowKey(version) }, { select: ['Hash'] });
    return e ? String(e.properties.Hash) : null;
  }

  /** Every path's row (one range query over the `path` partition). */
  async paths(): Promise<PathRecord[]> {
    const out: PathRecord[] = [];
    let after: string | undefined;
    for (;;) {
      const page = await this.store.queryRange({ table: this.table, partitionKey: 'path', rowKeyAfter: after, limit: 1000 });
      out.push(...page.entities.map(decodePath));
      if (!page.more || page.entities.length === 0) return out;
      after = page.entities[page.entities.length - 1].rowKey;
    }
  }

  /** One path's row, or null. */
  async path(id: string): Promise<PathRecord | null> {
    const e = await this.store.getEntity({ table: this.table, partitionKey: 'path', rowKey: id });
    return e ? decodePath(e) : null;
  }

  /**
   * Writes a path's row: an insert when `record.etag` is absent, else a replace If-Match on it.
   * @returns the row with its new ETag, or null when another process wrote it first
   */
  async putPath(record: PathRecord): Promise<PathRecord | null> {
    const entity = encodePath(record);
    try {
      const etag = record.etag
        ? await this.store.updateEntity(this.table, entity, 'replace', { ifMatch: record.etag })
        : await this.store.createEntity(this.table, entity);
      return { ...record, etag: etag as string };
    } catch (e) {
      if (isTablegraphError(e, ErrorCode.CONFLICT) || isTablegraphError(e, ErrorCode.NOT_FOUND)) return null;
      throw e;
    }
  }

  /** Says that `server` runs `version` now (an unconditional upsert: each instance writes only its own row). */
  async heartbeat(server: ServerRecord): Promise<void> {
    await this.store.upsertEntity(
      this.table,
      {
        partitionKey: 'server',
        rowKey: server.instance,
        properties: { Version: int(server.version), Hash: str(server.hash), SeenAt: date(server.seenAt) },
      },
      'replace',
    );
  }

  /** Removes a server's row (it stopped). */
  async leave(instance: string): Promise<void> {
    await this.store.deleteEntity({ table: this.table, partitionKey: 'server', rowKey: instance });
  }

  /** Every server's row (one range query over the `server` partition). */
  async servers(): Promise<ServerRecord[]> {
    const page = await this.store.queryRange({ table: this.table, partitionKey: 'server', limit: 1000 });
    return page.entities.map((e) => ({
      instance: e.rowKey,
      version: num(e.properties.Version),
      hash: String(e.properties.Hash),
      seenAt: new Date(e.properties.SeenAt as Date).getTime(),
    }));
  }
}

function versionRowKey(version: number): string {
  return `v${String(version).padStart(6, '0')}`;
}

function encodePath(r: PathRecord): EntityToWrite {
  const properties: Record<string, TypedValue | null> = {
    Kind: str(r.kind),
    State: str(r.state),
    Version: int(r.version),
    Definition: str(JSON.stringify(r.definition)),
    Checkpoint: str(r.checkpoint),
    Scanned: bool(r.scanned),
    Read: int(r.read),
    Written: int(r.written),
    Skipped: int(r.skipped),
    Total: int(r.total),
    Takeovers: int(r.takeovers),
    NeedsRepair: bool(r.needsRepair),
    LeaseOwner: r.leaseOwner ? str(r.leaseOwner) : null,
    LeaseUntil: r.leaseUntil ? int(r.leaseUntil) : null,
    StartedAt: r.startedAt ? int(r.startedAt) : null,
    UpdatedAt: r.updatedAt ? int(r.updatedAt) : null,
    FinishedAt: r.finishedAt ? int(r.finishedAt) : null,
    Problem: r.problem ? str(problemText(r.problem)) : null,
    Moves: r.moves && Object.keys(r.moves).length > 0 ? str(movesText(r.moves)) : null,
  };
  return { partitionKey: 'path', rowKey: r.id, properties: Object.fromEntries(Object.entries(properties).filter(([, v]) => v !== null)) };
}

/** A problem as recorded: its details dropped when they would not fit one property (the build's log has them). */
function problemText(problem: NonNullable<PathRecord['problem']>): string {
  const text = JSON.stringify(problem);
  return text.length <= CHUNK ? text : JSON.stringify({ ...problem, details: 'too long to record here: see the worker log' });
}

/**
 * A re-key's moves as recorded: at most what one property holds (32 K characters, some 200 moves).
 * @throws TablegraphError LIMIT_EXCEEDED when more moves were under way: the re-key stops (failed) rather than lose one
 */
function movesText(moves: Record<string, EntityAddress>): string {
  const text = JSON.stringify(moves);
  if (text.length > CHUNK)
    throw new TablegraphError(ErrorCode.LIMIT_EXCEEDED, `${Object.keys(moves).length} moves were under way: more than the catalogue records at once`, {
      reason: 'TooManyMoves',
    });
  return text;
}

function decodePath(e: StoredEntity): PathRecord {
  const p = e.properties;
  const opt = (v: unknown) => (v === undefined || v === null ? undefined : Number(v));
  return {
    id: e.rowKey,
    kind: String(p.Kind) as PathKind,
    state: String(p.State) as PathState,
    version: num(p.Version),
    definition: JSON.parse(String(p.Definition ?? '{}')) as Record<string, unknown>,
    checkpoint: String(p.Checkpoint ?? ''),
    scanned: p.Scanned === true,
    read: num(p.Read),
    written: num(p.Written),
    skipped: num(p.Skipped),
    total: num(p.Total),
    takeovers: num(p.Takeovers),
    needsRepair: p.NeedsRepair === true,
    leaseOwner: typeof p.LeaseOwner === 'string' ? p.LeaseOwner : undefined,
    leaseUntil: opt(p.LeaseUntil),
    startedAt: opt(p.StartedAt),
    updatedAt: opt(p.UpdatedAt),
    finishedAt: opt(p.FinishedAt),
    problem: typeof p.Problem === 'string' ? (JSON.parse(p.Problem) as PathRecord['problem']) : undefined,
    moves: typeof p.Moves === 'string' ? (JSON.parse(p.Moves) as PathRecord['moves']) : undefined,
    etag: e.etag,
  };
}
