/**
 * Runs the builds of a deployment in this process until each is ready or failed (`npm run migrate -- apply`,
 * `npm run restore`), printing their progress on stderr every 2 s. Builds another process holds the lease of are
 * waited for: their lease is renewed or lapses, and this process takes them over. A pass that storage did not answer
 * (a timeout, a 5xx after the SDK's retries) is run again from the builds' checkpoints, as a worker's next poll would.
 */
import { randomUUID } from 'node:crypto';
import { ErrorCode, isTablegraphError } from '../errors';
import type { Logger } from '../log';
import type { Model } from '../model/types';
import type { BlobStore } from '../storage/blob-store';
import type { TableStore } from '../storage/table-store';
import { BuildRunner, holdsPath } from './build-runner';
import type { Catalogue } from './catalogue';
import type { PathRecord } from './catalogue-records';
import type { SchemaLayout } from './deployment';
import { formatStatus } from './migration-report';
import { presenceBoard } from './presence';

export interface RunBuildsOptions {
  catalogue: Catalogue;
  store: TableStore;
  blobs: BlobStore;
  model: Model;
  layout: SchemaLayout;
  /** The builds' settings (config.builds: entities/s, lease and poll ms, page size, the test hold) and table prefix. */
  config: {
    builds: { entitiesPerSecond: number; leaseMs: number; pollMs: number; pageSize: number; holdAfter?: { path: string; steps: number } };
    tablePrefix: string;
  };
  log: Logger;
  /** Entities written per second at most (default the configured build budget). */
  budget?: number;
  /** Names this process's leases (`migrate`, `restore`). */
  command: string;
  /** Builds carried forward at once, each under its own lease (default 1). */
  runners?: number;
}

/**
 * The builds of a table prefix that serves nobody yet (a restore's): no write budget, as nothing there is read
 * until they are done, and four at once, each its own lease.
 */
export const UNSERVED_PREFIX_BUILDS = { budget: 0, runners: 4 } as const;

/** Passes in a row that storage may fail (STORAGE_UNAVAILABLE) before the run gives up. */
const UNAVAILABLE_PASSES = 10;

/**
 * @returns every path's row once none of this layout's is building
 * @throws TablegraphError STORAGE_UNAVAILABLE and others from the catalogue and the builds' storage calls
 */
export async function runBuildsHere(opts: RunBuildsOptions): Promise<PathRecord[]> {
  const { catalogue, config, layout } = opts;
  const presence = presenceBoard(catalogue, opts.blobs, config.tablePrefix);
  const runners = Array.from(
    { length: Math.max(1, opts.runners ?? 1) },
    () =>
      new BuildRunner({
        catalogue,
        store: opts.store,
        model: opts.model,
        layout: layout.layout,
        instance: `${opts.command}-${randomUUID().slice(0, 8)}`,
        log: opts.log,
        entitiesPerSecond: opts.budget ?? config.builds.entitiesPerSecond,
        leaseMs: config.builds.leaseMs,
        pollMs: config.builds.pollMs,
        pageSize: config.builds.pageSize,
        presence,
        holdAfter: config.builds.holdAfter,
      }),
  );
  const ours = (rows: PathRecord[]) => rows.filter((p) => p.state === 'building' && holdsPath(layout.layout, p));
  const report = setInterval(() => {
    catalogue.paths().then(
      (rows) => process.stderr.write(formatStatus(undefined, ours(rows), []).split('\n').slice(1).join('\n')),
      () => undefined,
    );
  }, 2000);
  let unavailable = 0;
  try {
    while (ours(await catalogue.paths()).length > 0) {
      // Each runner leases the first build free of a lease: started together, they take different ones.
      const failed = (await Promise.allSettled(runners.map((r) => r.runOnce()))).flatMap((r) => (r.status === 'rejected' ? [r.reason] : []));
      const other = failed.find((e) => !isTablegraphError(e, ErrorCode.STORAGE_UNAVAILABLE));
      if (other !== undefined) throw other;
      unavailable = failed.length > 0 ? unavailable + 1 : 0;
      if (unavailable >= UNAVAILABLE_PASSES) throw failed[0];
      if (failed.length > 0) opts.log.warn({ err: failed[0], passes: unavailable }, 'schema builds: storage did not answer; going on from the checkpoints');
      if (ours(await catalogue.paths()).length > 0) await new Promise((r) => setTimeout(r, config.builds.pollMs));
    }
  } finally {
    clearInterval(report);
  }
  return catalogue.paths();
}
