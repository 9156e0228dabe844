/**
 * The catalogue's rows (catalogue.ts): what each records, and how it is stored and read back. Every row is read
 * defensively: the catalogue is a table anyone with the account key can write, so a row that does not decode — a
 * definition that is not JSON, a chunk count out of bounds, compressed text that would grow past what the catalogue
 * ever writes — is named (table, PartitionKey, RowKey) and refused with DATA_INTEGRITY (reason `CatalogueRowInvalid`),
 * never passed on as something else, and never allowed to hang or exhaust the process that reads it.
 */
import { gunzipSync, gzipSync } from 'node:zlib';
import { ErrorCode, TablegraphError, type ReasonName } from '../errors';
import type { EntityAddress, EntityToWrite, StoredEntity, TypedValue } from '../storage/storage-types';
import type { PathKind } from '../model/derived-paths';
import type { RecordedLayout } from './layout-record';
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
  /** A scanned build waiting for processes of an older version to stop: since when (ms), and which (a sentence). */
  waitingSince?: number;
  waitingFor?: string;
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
/**
 * The most a packed text may decompress to (bytes): ten times what the catalogue ever writes (a layout or an SDL
 * of at most MAX_CHUNKS chunks of base64 gzip), so a row compressed to explode is refused before it is inflated.
 */
const MAX_UNPACKED_BYTES = 16 * 1024 * 1024;

const PATH_KINDS: readonly PathKind[] = ['index', 'summary', 'copy', 'changeLog', 'rekey'];
const PATH_STATES: readonly PathState[] = ['building', 'ready', 'failed', 'retired'];

export const str = (value: string): TypedValue => ({ type: 'String', value });
export const int = (value: number): TypedValue => ({ type: 'Int64', value: BigInt(Math.round(value)) });
export const bool = (value: boolean): TypedValue => ({ type: 'Boolean', value });
export const date = (ms: number): TypedValue => ({ type: 'DateTime', value: new Date(ms) });

/** The RowKey of a recorded version, e.g. `v000012`. */
export function versionRowKey(version: number): string {
  return `v${String(version).padStart(6, '0')}`;
}

/** A catalogue row that does not decode: DATA_INTEGRITY naming the row and what is wrong with it. */
export function invalidRow(table: string, e: Pick<StoredEntity, 'partitionKey' | 'rowKey'>, what: string): TablegraphError {
  return new TablegraphError(
    ErrorCode.DATA_INTEGRITY,
    `The catalogue row ${table} (PartitionKey "${e.partitionKey}", RowKey "${e.rowKey}") cannot be read: ${what}. It was written around tablegraph, or damaged: restore it, or delete it and deploy again.`,
    { reason: 'CatalogueRowInvalid', table, partitionKey: e.partitionKey, rowKey: e.rowKey },
  );
}

/** `text` gzip-compressed, in base64, over as many `Name<i>` properties as it takes, and their count `NameChunks`. */
export function packed(name: string, text: string): Record<string, TypedValue> {
  const b64 = gzipSync(Buffer.from(text, 'utf8')).toString('base64');
  const parts: Record<string, TypedValue> = {};
  const count = Math.ceil(b64.length / CHUNK);
  if (count > MAX_CHUNKS) throw new Error(`${name} is ${b64.length} characters compressed, over the catalogue's ${CHUNK * MAX_CHUNKS}`);
  for (let i = 0; i < count; i++) parts[`${name}${i}`] = str(b64.slice(i * CHUNK, (i + 1) * CHUNK));
  parts[`${name}Chunks`] = int(count);
  return parts;
}

/**
 * The text `packed` stored under `name` in a row.
 * @throws TablegraphError DATA_INTEGRITY (reason CatalogueRowInvalid) for a chunk count that is not 1 to 30, a chunk
 *   that is not text, base64 that is not gzip, or gzip that would decompress past MAX_UNPACKED_BYTES
 */
export function unpacked(name: string, row: { table: string; entity: StoredEntity }): string {
  const p = row.entity.properties;
  const count = Number(p[`${name}Chunks`]);
  if (!Number.isInteger(count) || count < 1 || count > MAX_CHUNKS) throw invalidRow(row.table, row.entity, `${name}Chunks is ${String(p[`${name}Chunks`])}`);
  let b64 = '';
  for (let i = 0; i < count; i++) {
    const part = p[`${name}${i}`];
    if (typeof part !== 'string' || part.length > CHUNK) throw invalidRow(row.table, row.entity, `${name}${i} is not a chunk of text`);
    b64 += part;
  }
  try {
    return gunzipSync(Buffer.from(b64, 'base64'), { maxOutputLength: MAX_UNPACKED_BYTES }).toString('utf8');
  } catch (e) {
    throw invalidRow(row.table, row.entity, `${name} does not decompress (${(e as Error).message})`);
  }
}

/** JSON.parse of a row's property, or DATA_INTEGRITY naming the row. */
function parsed(row: { table: string; entity: StoredEntity }, what: string, text: string, check: (v: unknown) => boolean): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw invalidRow(row.table, row.entity, `${what} is not JSON`);
  }
  if (!check(value)) throw invalidRow(row.table, row.entity, `${what} is not what the catalogue writes there`);
  return value;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const num = (v: unknown): number => (v === undefined || v === null ? 0 : Number(v));
const time = (v: unknown): number => (v instanceof Date ? v.getTime() : new Date(String(v)).getTime());

/** The `deployment/current` row. @throws TablegraphError DATA_INTEGRITY (reason CatalogueRowInvalid) */
export function decodeDeployment(table: string, e: StoredEntity): Deployment {
  const row = { table, entity: e };
  const p = e.properties;
  const layout = parsed(row, 'Layout', unpacked('Layout', row), (v) => isObject(v) && isObject(v.types) && isObject(v.paths)) as RecordedLayout;
  const drops = parsed(row, 'Drops', String(p.Drops ?? '[]'), (v) => Array.isArray(v) && v.every((d) => typeof d === 'string')) as string[];
  const version = num(p.Version);
  if (!Number.isInteger(version) || version < 1) throw invalidRow(table, e, `Version is ${String(p.Version)}`);
  if (typeof p.Hash !== 'string') throw invalidRow(table, e, 'Hash is not text');
  return { version, hash: p.Hash, layout, drops, deployedAt: time(p.DeployedAt), etag: e.etag };
}

/** A `server/<instance>` row. */
export function decodeServer(e: StoredEntity): ServerRecord {
  return { instance: e.rowKey, version: num(e.properties.Version), hash: String(e.properties.Hash), seenAt: time(e.properties.SeenAt) };
}

export function encodePath(r: PathRecord): EntityToWrite {
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
    WaitingSince: r.waitingSince ? int(r.waitingSince) : null,
    WaitingFor: r.waitingFor ? str(r.waitingFor.slice(0, 1000)) : null,
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

/**
 * A `path/<id>` row. One that does not decode is read as `failed`, its problem naming the row (reason
 * CatalogueRowInvalid): reads through the path are refused (PathBuildFailed) and no build takes it up, while every
 * other path serves on; `npm run migrate -- status` shows it.
 */
export function decodePath(table: string, e: StoredEntity): PathRecord {
  try {
    return decodePathRow(table, e);
  } catch (err) {
    if (!(err instanceof TablegraphError)) throw err;
    const prefix = e.rowKey.slice(0, Math.max(0, e.rowKey.indexOf(':'))) as PathKind;
    return {
      ...newPath({ id: e.rowKey, kind: PATH_KINDS.includes(prefix) ? prefix : 'index', definition: {} }, 'failed', 0),
      problem: { reason: 'CatalogueRowInvalid', message: err.message },
      etag: e.etag,
    };
  }
}

/**
 * A path's row as a deployment first writes it: in `state`, of `version`, nothing read or written yet; `at` (ms since
 * 1970) its start (and its end, when it is `ready` at once).
 */
export function newPath(path: Pick<PathRecord, 'id' | 'kind' | 'definition'>, state: PathState, version: number, at?: number): PathRecord {
  return {
    ...path,
    state,
    version,
    checkpoint: '',
    scanned: false,
    read: 0,
    written: 0,
    skipped: 0,
    total: 0,
    takeovers: 0,
    needsRepair: false,
    ...(at !== undefined && { startedAt: at, updatedAt: at, ...(state === 'ready' && { finishedAt: at }) }),
  };
}

function decodePathRow(table: string, e: StoredEntity): PathRecord {
  const row = { table, entity: e };
  const p = e.properties;
  const opt = (v: unknown) => (v === undefined || v === null ? undefined : Number(v));
  const kind = String(p.Kind) as PathKind;
  const state = String(p.State) as PathState;
  if (!PATH_KINDS.includes(kind)) throw invalidRow(table, e, `Kind is "${String(p.Kind)}"`);
  if (!PATH_STATES.includes(state)) throw invalidRow(table, e, `State is "${String(p.State)}"`);
  return {
    id: e.rowKey,
    kind,
    state,
    version: num(p.Version),
    definition: parsed(row, 'Definition', String(p.Definition ?? '{}'), isObject) as Record<string, unknown>,
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
    problem:
      typeof p.Problem === 'string'
        ? (parsed(row, 'Problem', p.Problem, (v) => isObject(v) && typeof v.message === 'string') as PathRecord['problem'])
        : undefined,
    moves: typeof p.Moves === 'string' ? (parsed(row, 'Moves', p.Moves, isObject) as PathRecord['moves']) : undefined,
    waitingSince: opt(p.WaitingSince),
    waitingFor: typeof p.WaitingFor === 'string' ? p.WaitingFor : undefined,
    etag: e.etag,
  };
}
