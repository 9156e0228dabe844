/**
 * A process's part in deploying its schema onto the stored data (docs/schema-changes.md): it records the schema in
 * the catalogue (or finds it recorded), says it is running that version, keeps the derived paths' states current
 * for its reads and, where a worker runs, builds what the change needs.
 */
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import type { GraphQLSchema } from 'graphql';
import type { Config } from './config';
import type { Logger } from '../log';
import type { Model } from '../model/types';
import type { TableStore } from '../storage/table-store';
import { BuildRunner } from '../evolution/build-runner';
import { Catalogue } from '../evolution/catalogue';
import { deploySchema, schemaLayout, type DeployResult } from '../evolution/deployment';
import { PathStates } from '../evolution/path-states';
import { Presence } from '../evolution/presence';

export interface SchemaDeployment {
  result: DeployResult;
  catalogue: Catalogue;
  /** The paths' states, for reads (the PathGate) and for /health and /metrics. */
  states: PathStates;
  /** The builds this process drives (absent without a worker). */
  builds?: BuildRunner;
  /** Stops building (after the step in hand), refreshing and saying it runs. */
  close(): Promise<void>;
}

export interface SchemaDeploymentOptions {
  config: Config;
  store: TableStore;
  model: Model;
  schema: GraphQLSchema;
  sdl: string;
  log: Logger;
  /** Whether this process builds (it runs a worker). */
  builds: boolean;
}

/**
 * @throws TablegraphError SCHEMA_INVALID when the schema changes the stored data in a way that is refused
 *   (deployment.ts); STORAGE_UNAVAILABLE and others from the catalogue
 */
export async function startSchemaDeployment(opts: SchemaDeploymentOptions): Promise<SchemaDeployment> {
  const { config, store, model, log } = opts;
  const catalogue = new Catalogue(store, config.tablePrefix);
  const layout = schemaLayout(model, opts.schema);
  const result = await deploySchema({ catalogue, schema: layout, sdl: opts.sdl, log });
  const instance = `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
  const presence = new Presence(catalogue, { instance, version: result.version, hash: layout.hash }, { log });
  await presence.start();
  const states = new PathStates(catalogue, { log, layout: layout.layout });
  await states.refresh();
  states.start();
  const building = states.all().filter((p) => p.state === 'building');
  if (building.some((p) => p.kind !== 'rekey'))
    log.info(
      { paths: building.filter((p) => p.kind !== 'rekey').map((p) => p.id) },
      'derived paths being built: reads through them answer ACCESS_PATH_BUILDING until they are ready',
    );
  if (building.some((p) => p.kind === 'rekey'))
    log.info(
      { rekeys: building.filter((p) => p.kind === 'rekey').map((p) => p.id) },
      'entity types being re-keyed: the servers of one version serve each until it is done, those of the other after',
    );
  const builds = opts.builds
    ? new BuildRunner({
        catalogue,
        store,
        model,
        layout: layout.layout,
        instance,
        log: log.child({ component: 'builds' }),
        entitiesPerSecond: config.builds.entitiesPerSecond,
        leaseMs: config.builds.leaseMs,
        pollMs: config.builds.pollMs,
        pageSize: config.builds.pageSize,
        concurrency: config.workerConcurrency,
      })
    : undefined;
  builds?.start();
  return {
    result,
    catalogue,
    states,
    builds,
    async close() {
      await builds?.stop();
      states.stop();
      await presence.stop();
    },
  };
}
