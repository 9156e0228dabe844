/**
 * The probes an orchestrator asks, under Kubernetes' names, apart from `/health` (for people):
 *
 * - `GET /livez`: whether the process serves HTTP. It makes no storage call, so a storage outage never restarts a
 *   replica (a restart would not bring storage back, and every replica would restart at once). 200 `{status:"live"}`.
 * - `GET /readyz`: whether this replica can serve a request now — storage answers and the schema catalogue (the
 *   deployed schema's record, one point query) is readable. 200 `{status:"ready"}`, else 503
 *   `{status:"unavailable", failed}`, `failed` naming the check: `storage` (no answer within READY_WAIT_MS, or an
 *   error). What storage said goes to the log only. One check at a time, its result kept CHECK_MS (so however
 *   many probes ask, storage sees at most one ping and one point query a second); a check that hangs (a frozen
 *   service) is answered 503 after READY_WAIT_MS while it goes on.
 *
 * While the server stops, both answer 503 `SHUTTING_DOWN` (the shutdown gate, shutdown-gate.ts): the replica leaves
 * the load balancer before its connections close.
 */
import type express from 'express';
import type { Logger } from '../log';
import type { TableStore } from '../storage/table-store';

/** How long one readiness check's result answers every probe (ms). */
export const CHECK_MS = 1000;
/** The longest a readiness probe waits for a check before it answers 503 (ms): below Kubernetes' 3 s timeout we document. */
export const READY_WAIT_MS = 2000;

export interface ProbeDeps {
  store: TableStore;
  log: Logger;
  /** One read of the schema catalogue (absent: no catalogue, as in tests of the app alone). */
  catalogue?: () => Promise<unknown>;
}

interface ReadyCheck {
  at: number;
  ok: boolean;
}

/** Mounts `/livez` and `/readyz` on `app`. */
export function mountProbes(app: express.Express, deps: ProbeDeps): void {
  app.get('/livez', (_req, res) => {
    res.setHeader('cache-control', 'no-store');
    res.json({ status: 'live' });
  });
  const ready = readiness(deps);
  app.get('/readyz', async (_req, res) => {
    res.setHeader('cache-control', 'no-store');
    const ok = await ready();
    if (ok) res.json({ status: 'ready' });
    else res.status(503).json({ status: 'unavailable', failed: 'storage' });
  });
}

/** The readiness check: made at most once a CHECK_MS, shared by every probe meanwhile, waited for READY_WAIT_MS at most. */
function readiness(deps: ProbeDeps): () => Promise<boolean> {
  let last: ReadyCheck | undefined;
  let running: Promise<ReadyCheck> | undefined;
  return async () => {
    if (last && Date.now() - last.at < CHECK_MS) return last.ok;
    running ??= readyCheck(deps).then((c) => {
      last = c;
      running = undefined;
      return c;
    });
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((resolve) => (timer = setTimeout(resolve, READY_WAIT_MS, undefined)));
    const done = await Promise.race([running, late]);
    clearTimeout(timer);
    return done?.ok ?? false;
  };
}

async function readyCheck(deps: ProbeDeps): Promise<ReadyCheck> {
  try {
    await deps.store.ping({ timeoutMs: 3 * READY_WAIT_MS });
    await deps.catalogue?.();
    return { at: Date.now(), ok: true };
  } catch (e) {
    deps.log.warn({ err: e }, '/readyz: storage or the schema catalogue does not answer');
    return { at: Date.now(), ok: false };
  }
}
