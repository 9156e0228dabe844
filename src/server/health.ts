/**
 * `/health`, for people: whether storage answers (never what it said: that is logged), and — for an operator — the
 * work queue and the derived paths' states. What it costs storage does not grow with how often it is asked: one check
 * at a time, its result kept a second (a storage ping and three queue calls at most once a second, however many ask;
 * the worker's counters and the paths' states, which cost none, are read at each answer),
 * and each caller counted against its address's rate like any request. With authentication on, the details (queue
 * depths, worker counters, every path's name, state and progress) go only to a bearer token holding the admin role
 * (TABLEGRAPH_ADMIN_ROLE); anyone else is told `status` alone.
 */
import type express from 'express';
import type { IncomingMessage } from 'node:http';
import type { Logger } from '../log';
import type { PathRecord } from '../evolution/catalogue-records';
import type { LatestPass } from '../backup/change-format';
import { progressOf } from '../evolution/path-states';
import type { TableStore } from '../storage/table-store';
import type { QueueStore } from '../storage/queue-store';
import type { QueueWorker } from '../worker/queue-worker';
import type { Authenticator } from './auth';
import type { RateLimit } from './rate-limit';
import { sendHttpError } from './http-errors';
import { requestIdOf } from './request-log';

/** How long one check's result answers every caller (ms). */
export const HEALTH_CHECK_MS = 1000;

export interface HealthDeps {
  store: TableStore;
  log: Logger;
  storageTarget: string;
  queues?: QueueStore;
  queueNames?: { queue: string; poison: string };
  worker?: () => QueueWorker | undefined;
  pathStates?: () => PathRecord[];
  /** Continuous backup's latest pass (absent: capture off). */
  backup?: () => Promise<LatestPass | undefined>;
  /** Absent: no authentication, and the details are everyone's (a loopback server). */
  authenticate?: Authenticator;
  /** The role whose tokens see the details (TABLEGRAPH_ADMIN_ROLE). */
  adminRole?: string;
  rateLimit?: RateLimit;
}

/** One check of storage and the work queue (the parts that cost storage calls). */
interface Check {
  at: number;
  ok: boolean;
  latencyMs?: number;
  queue?: Record<string, unknown>;
}

/** Mounts `/health` on `app`. */
export function mountHealth(app: express.Express, deps: HealthDeps): void {
  const checks = checker(deps);
  app.get('/health', async (req, res) => {
    const requestId = requestIdOf(req);
    try {
      await deps.rateLimit?.(`ip:${req.socket.remoteAddress ?? 'unknown'}`);
    } catch (e) {
      const ext = (e as { extensions?: { code?: string; retryAfterSeconds?: number } }).extensions;
      res.setHeader('retry-after', String(ext?.retryAfterSeconds ?? 1));
      sendHttpError(res, 429, ext?.code ?? 'RATE_LIMITED', (e as Error).message, requestId);
      return;
    }
    const [check, details] = await Promise.all([checks(), mayReadDetails(deps, req)]);
    res.setHeader('cache-control', 'no-store');
    if (!check.ok) {
      res.status(503).json({ status: 'unavailable', ...(details && { storage: { target: deps.storageTarget, answers: false } }), requestId });
      return;
    }
    if (!details) {
      res.json({ status: 'ok' });
      return;
    }
    res.json({
      status: 'ok',
      storage: { target: deps.storageTarget, answers: true, latencyMs: check.latencyMs },
      fanout: check.queue && { ...check.queue, worker: workerHealth(deps) },
      ...(deps.pathStates && { paths: deps.pathStates().map(pathHealth) }),
      ...(deps.backup && { backup: await backupHealth(deps) }),
    });
  });
}

/** A derived path as /health shows it: its state, progress, and what a scanned build waits for, since when. */
function pathHealth(p: PathRecord): Record<string, unknown> {
  const waiting = p.state === 'building' && p.waitingSince !== undefined && { waitingSince: new Date(p.waitingSince).toISOString(), waitingFor: p.waitingFor };
  return { path: p.id, state: p.state, ...progressOf(p), ...waiting };
}

/** Whether the caller sees the details: always without authentication; with it, a valid token with the admin role. */
async function mayReadDetails(deps: HealthDeps, req: IncomingMessage): Promise<boolean> {
  if (!deps.authenticate) return true;
  if (!req.headers.authorization) return false;
  try {
    const principal = await deps.authenticate(req.headers.authorization);
    return principal.roles.includes(deps.adminRole ?? 'admin');
  } catch {
    return false;
  }
}

/** The check, made at most once a HEALTH_CHECK_MS and shared by every caller meanwhile. */
function checker(deps: HealthDeps): () => Promise<Check> {
  let last: Check | undefined;
  let running: Promise<Check> | undefined;
  return () => {
    if (last && Date.now() - last.at < HEALTH_CHECK_MS) return Promise.resolve(last);
    running ??= check(deps).then((c) => {
      last = c;
      running = undefined;
      return c;
    });
    return running;
  };
}

async function check(deps: HealthDeps): Promise<Check> {
  const at = Date.now();
  try {
    const latencyMs = await deps.store.ping({ timeoutMs: 3000 });
    return { at, ok: true, latencyMs: Math.round(latencyMs * 10) / 10, queue: await workQueueHealth(deps) };
  } catch (e) {
    // What storage said (hosts, ports, SDK text) goes to the log, not to an endpoint that answers anyone.
    deps.log.warn({ err: e }, '/health: storage does not answer');
    return { at, ok: false };
  }
}

/** Visible messages /health counts exactly, with one peek (the Queue service's most). */
const VISIBLE_PEEK = 32;

/**
 * The eventual-consistency side of /health, as storage says it: work queue depth and poison count (messages,
 * approximate, as the service reports them), the messages visible now (up to 32, then `32+`) and hidden (sent with a
 * delay, or being handled).
 */
async function workQueueHealth(deps: HealthDeps): Promise<Record<string, unknown> | undefined> {
  if (!deps.queues || !deps.queueNames) return undefined;
  const [queueDepth, visible, poisonCount] = await Promise.all([
    deps.queues.approximateDepth(deps.queueNames.queue),
    deps.queues.visibleCount(deps.queueNames.queue, VISIBLE_PEEK),
    deps.queues.approximateDepth(deps.queueNames.poison),
  ]);
  // Hidden: messages sent with a delay (blob cleanups) or being handled; a drained queue has none visible.
  const visibleMessages = visible < VISIBLE_PEEK ? visible : `${VISIBLE_PEEK}+`;
  return { queueDepth, visibleMessages, hiddenMessages: visible < VISIBLE_PEEK ? Math.max(0, queueDepth - visible) : undefined, poisonCount };
}

/**
 * Continuous backup, as its latest pass says (latest.json, read at most every 5 s): the latest restorable time, how far
 * behind now it is (s), and the pass's lag from a write to its durable segment (ms).
 */
async function backupHealth(deps: HealthDeps): Promise<Record<string, unknown> | string> {
  try {
    const latest = await deps.backup!();
    if (!latest) return 'no capture pass yet';
    return {
      latestRestorableTime: latest.startedAt,
      lagSeconds: Math.round((Date.now() - Date.parse(latest.startedAt)) / 100) / 10,
      lastPass: { changes: latest.changes, lagP99Ms: latest.lagP99Ms, lagMaxMs: latest.lagMaxMs },
    };
  } catch (e) {
    deps.log.warn({ err: e }, '/health: the backup container does not answer');
    return 'unreadable';
  }
}

/** The in-process worker's counters and enqueue-to-reconcile lag (ms), as they are now (no storage call). */
function workerHealth(deps: HealthDeps): Record<string, unknown> | string {
  const worker = deps.worker?.();
  if (!worker) return 'not in this process';
  // An error's text can name the storage's host and port: it shows when and which code.
  const { lastError: _text, ...stats } = worker.stats();
  return stats;
}
