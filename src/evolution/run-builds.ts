/**
 * Runs the builds of a deployment in this process until each is ready or failed (`npm run migrate -- apply`,
 * `npm run restore`), printing their progress on stderr every 2 s. Builds another process holds the lease of are
 * waited for: their lease is renewed or lapses, and this process takes them over.
 */
import { randomUUID } from 'node:crypto';
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
}

/**
 * @returns every path's row once none of this layout's is building
 * @throws TablegraphError STORAGE_UNAVAILABLE and others from the catalogue and the builds' storage calls
 */
export async function runBuildsHere(opts: RunBuildsOptions): Promise<PathRecord[]> {
  const { catalogue, config, layout } = opts;
  const runner = new BuildRunner({
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
    presence: presenceBoard(catalogue, opts.blobs, config.tablePrefix),
    holdAfter: config.builds.holdAfter,
  });
  const ours = (rows: PathRecord[]) => rows.filter((p) => p.state === 'building' && holdsPath(layout.layout, p));
  const report = setInterval(() => {
    catalogue.paths().then(
      (rows) => process.stderr.write(formatStatus(undefined, ours(rows), []).split('\n').slice(1).join('\n')),
      () => undefined,
    );
  }, 2000);
  try {
    while (ours(await catalogue.paths()).length > 0) {
      await runner.runOnce();
      if (ours(await catalogue.paths()).length > 0) await new Promise((r) => setTimeout(r, config.builds.pollMs));
    }
  } finally {
    clearInterval(report);
  }
  return catalogue.paths();
}
