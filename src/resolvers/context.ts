/**
 * The per-request context every resolver receives: the request's DataLoaders, its storage cost, and the
 * projection of its operation (computed on first use).
 */
import { randomUUID } from 'node:crypto';
import type { GraphQLResolveInfo } from 'graphql';
import type { Model } from '../model/types';
import type { StorageAdmission } from '../read/admission';
import { CostTracker } from '../read/cost';
import type { DemandEstimate } from '../read/demand';
import type { PathGate } from '../read/path-gate';
import type { Principal } from '../model/authorization';
import type { PartitionSasSigner } from '../storage/sas';
import type { BlobStore } from '../storage/blob-store';
import type { CursorCodec } from '../read/cursor';
import { createLoaders, type Loaders } from '../read/loaders';
import { projectionOf, type Projection } from '../read/projection';
import type { TableStore } from '../storage/table-store';
import type { WriteExecutor } from '../write/write-executor';

export interface RequestContext {
  /** The request's id: in every log line of the request, in the `x-request-id` header and in every error. */
  requestId: string;
  /** The operation's worst case, computed before it runs (src/read/demand.ts). */
  demand?: DemandEstimate;
  /** Who the request acts for (a verified token); absent when the server runs without authentication. */
  principal?: Principal;
  /** Signs shared access signature URLs for `@sas` fields; absent: none can be signed. */
  signSas?: PartitionSasSigner;
  /** Signs the read URLs of `@blob` fields; absent: none can be signed. */
  blobs?: BlobStore;
  model: Model;
  loaders: Loaders;
  cost: CostTracker;
  cursors: CursorCodec;
  /** Runs mutations; absent on a read-only server. */
  writer?: WriteExecutor;
  /** Inter-partition indexes this request read (`Type.index`): their answers are eventually consistent. */
  eventuallyConsistent: Set<string>;
  /** Summaries kept by the worker this request read (`Holder.field`): they may lag behind the writes. */
  eventualSummaries: Set<string>;
  /** The properties this request reads of each entity type (the same for every resolver of the request). */
  projection(info: GraphQLResolveInfo): Projection;
  /** What the request turned out to be, for its log line and metrics (src/server/request-log.ts fills it). */
  outcome: { operationName?: string; errorCodes: string[] };
  /** When the request's time ends (ms since the epoch; ContextDeps.requestTimeoutMs), if it has a deadline. */
  deadline?: number;
  /** Refuses reads through derived paths that are not built (absent: every path is read). */
  paths?: PathGate;
}

/** What stays the same across requests. */
export interface ContextDeps {
  model: Model;
  store: TableStore;
  cursors: CursorCodec;
  /** Storage calls in flight at once per request (calls). */
  readConcurrency: number;
  writer?: WriteExecutor;
  /** The server-wide admission of storage reads (absent: none). */
  admission?: StorageAdmission;
  /** A request's time (ms): after it, no further storage read of it is sent (absent: no deadline). */
  requestTimeoutMs?: number;
  /** Signs `@sas` URLs (src/storage/sas.ts). */
  signSas?: PartitionSasSigner;
  /** Signs `@blob` read URLs (src/storage/blob-store.ts). */
  blobs?: BlobStore;
  /** The derived paths' states (src/evolution/path-states.ts). */
  paths?: PathGate;
}

/**
 * A fresh context for one request: new loaders (never shared between requests or users) and a new CostTracker.
 * @param requestId the request's id (request-log.ts); a new UUID when absent
 * @param principal who the request acts for (auth.ts)
 */
export function createRequestContext(deps: ContextDeps, requestId: string = randomUUID(), principal?: Principal): RequestContext {
  const cost = new CostTracker();
  let projection: Projection | undefined;
  const deadline = deps.requestTimeoutMs === undefined ? undefined : Date.now() + deps.requestTimeoutMs;
  return {
    requestId,
    principal,
    signSas: deps.signSas,
    blobs: deps.blobs,
    model: deps.model,
    cursors: deps.cursors,
    writer: deps.writer,
    paths: deps.paths,
    eventuallyConsistent: new Set(),
    eventualSummaries: new Set(),
    outcome: { errorCodes: [] },
    cost,
    loaders: createLoaders(deps.store, {
      concurrency: deps.readConcurrency,
      observer: cost,
      admission: deps.admission && { gate: deps.admission, lane: requestId },
      deadline,
    }),
    deadline,
    projection(info) {
      projection ??= projectionOf(deps.model, info);
      return projection;
    },
  };
}
