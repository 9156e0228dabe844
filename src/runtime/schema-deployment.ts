/**
 * A process's part in deploying its schema onto the stored data (docs/schema-changes.md): it records the schema in
 * the catalogue (or finds it recorded), says it is running that version, keeps the derived paths' states current
 * for its reads and, where a worker runs, builds what the change needs.
 */
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import type { GraphQLSchema } from 'graphql';
import { ErrorCode, TablegraphError } from '../errors';
import type { Config } from './config';
import type { Logger } from '../log';
import type { Model } from '../model/types';
import type { TableStore } from '../storage/table-store';
import { BuildRunner } from '../evolution/build-runner';
import { Catalogue } from '../evolution/catalogue';
import { deploySchema, schemaLayout, type DeployResult } from '../evolution/deployment';
import { PathStates } from '../evolution/path-states';
import { Presence, presenceBoard } from '../evolution/presence';
import type { BlobStore } from '../storage/blob-store';

export interface SchemaDeployment {
  result: DeployResult;
  catalogue: Catalogue;
  /** The paths' states, for reads (the PathGate) and for /health and /metrics. */
  states: PathStates;
  /** The builds this process drives (absent without a worker). */
  builds?: BuildRunner;
  /** The deployed schema's layout hash (the catalogue's). */
  schemaHash: string;
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
  /** Where it says it runs (presence.ts): blob leases; absent or without an endpoint, the catalogue's rows. */
  blobs?: BlobStore;
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
  const board = presenceBoard(catalogue, opts.blobs, config.tablePrefix);
  const presence = new Presence(board, { instance, version: result.version, hash: layout.hash }, { log });
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
        presence: board,
        holdAfter: config.builds.holdAfter,
      })
    : undefined;
  builds?.start();
  return {
    result,
    catalogue,
    states,
    builds,
    schemaHash: layout.hash,
    async close() {
      await builds?.stop();
      states.stop();
      await presence.stop();
    },
  };
}

export interface WriterDeploymentOptions extends Omit<SchemaDeploymentOptions, 'builds' | 'blobs'> {
  /** The entity types the command writes (an interface's implementations are asked one by one). */
  types: string[];
  /** The command, for messages: `npm run load`. */
  command: string;
}

/**
 * A command that writes entities outside a server — `npm run load`, `npm run import` — records the schema it writes
 * with before its first write, as a server does: a first deployment (every path ready over an empty store, built over
 * stored entities: deployment.ts), the same version, or a change (its new paths `building`, built by the workers:
 * what this command writes, it writes derived entities for). So no server ever takes the data for one a schema of its
 * own wrote, and serves a path the data never held. Its types must be served by this schema now (not re-keyed).
 * @throws TablegraphError SCHEMA_INVALID for a change the stored data refuses (deployment.ts), or (reason
 *   `SchemaOlder`) when a newer schema is recorded: its paths would not be kept by this command's writes;
 *   ACCESS_PATH_BUILDING (reason TypeRekeying, PathRetired) for a type being re-keyed; STORAGE_UNAVAILABLE
 */
export async function deployForWriting(opts: WriterDeploymentOptions): Promise<DeployResult> {
  const { config, store, model, log } = opts;
  const catalogue = new Catalogue(store, config.tablePrefix);
  const layout = schemaLayout(model, opts.schema);
  const result = await deploySchema({ catalogue, schema: layout, sdl: opts.sdl, log });
  if (result.outcome === 'older') {
    throw new TablegraphError(
      ErrorCode.SCHEMA_INVALID,
      `A newer schema than this one is deployed (the recorded version is newer than ${result.version}): ${opts.command} would write its entities without keeping the newer version's derived paths. Run it with the deployed schema (npm run migrate -- status names it).`,
      { reason: 'SchemaOlder', version: result.version },
    );
  }
  const states = new PathStates(catalogue, { log, layout: layout.layout });
  await states.refresh();
  for (const name of opts.types) {
    const entity = model.entities.get(name);
    for (const concrete of entity?.implementations ?? [entity]) if (concrete) states.assertServed(concrete.name, opts.command);
  }
  const building = states.all().filter((p) => p.state === 'building' && p.kind !== 'rekey');
  if (building.length > 0)
    log.info(
      { paths: building.map((p) => p.id) },
      `derived paths being built: ${opts.command} keeps them for what it writes; a server's worker (or npm run migrate -- apply) builds them over the rest`,
    );
  return result;
}
