/**
 * Deploying a schema onto stored data (docs/schema-changes.md): at start-up, a server or worker compares the layout
 * its schema stores (layout-record.ts) with the one the catalogue recorded (catalogue.ts), classifies the difference
 * (layout-diff.ts), refuses what cannot be done on live data, records what must be built as `building` paths (the
 * workers build them: index-build.ts, build-runner.ts), and — for `migrate apply` only — the re-keys of types whose
 * table or key templates changed (rekey-build.ts), and records the new version; or, when its schema is an older
 * version than the recorded one (a rolling update's old servers), serves it without changing the record.
 */
import { isEnumType, isObjectType, type ASTNode, type GraphQLSchema } from 'graphql';
import { ErrorCode, TablegraphError } from '../errors';
import type { Model } from '../model/types';
import type { Logger } from '../log';
import type { Catalogue } from './catalogue';
import { newPath, type Deployment, type PathRecord } from './catalogue-records';
import { addressingOf, diffLayouts, type LayoutChange } from './layout-diff';
import { layoutHash, recordLayout, type RecordedLayout } from './layout-record';

/** What a schema is to the catalogue: its layout and hash, and where its changes are in the SDL. */
export interface SchemaLayout {
  layout: RecordedLayout;
  hash: string;
  locate(coordinate: string): ASTNode | undefined;
}

/** The stored layout of a compiled schema, with a locator of its coordinates. */
export function schemaLayout(model: Model, schema: GraphQLSchema): SchemaLayout {
  const layout = recordLayout(model, (name) => {
    const type = schema.getType(name);
    return isEnumType(type) ? type.getValues().map((v) => v.name) : undefined;
  });
  return {
    layout,
    hash: layoutHash(layout),
    locate(coordinate) {
      const [typeName, name] = coordinate.split('.');
      const type = schema.getType(typeName);
      if (!name) return type?.astNode ?? undefined;
      const index = model.entities.get(typeName)?.indexes.get(name);
      if (index?.node) return index.node;
      return isObjectType(type) ? (type.getFields()[name]?.astNode ?? undefined) : undefined;
    },
  };
}

/** What a deployment did. */
export interface DeployResult {
  /** The version this process serves. */
  version: number;
  /** `deployed`: this schema is now the recorded version (a first deployment or a change); `same`: it already was; `older`: a newer version is recorded, and this process serves an older one. */
  outcome: 'deployed' | 'same' | 'older';
  /** The changes from the recorded layout (none for `same` and `older`). */
  changes: LayoutChange[];
}

export interface DeployOptions {
  catalogue: Catalogue;
  schema: SchemaLayout;
  sdl: string;
  log?: Logger;
  /** Whether to record the new version (a server, a worker, `migrate apply`) or only to classify it (`migrate plan`). Default: true. */
  record?: boolean;
  /**
   * Whether a re-key (a type's table or key templates changed) may be recorded: `migrate apply` only. A server or
   * worker never starts one: for them it is refused, its remedy saying to run `migrate apply`. Default: false.
   */
  rekeys?: boolean;
  now?: () => number;
}

/**
 * Compares `schema` with the recorded deployment and records it (see the file comment).
 * @throws TablegraphError SCHEMA_INVALID listing each refused change as `coordinate (file:line:column): what —
 *   remedy` (details.changes); STORAGE_UNAVAILABLE and others from the catalogue's table
 */
export async function deploySchema(opts: DeployOptions): Promise<DeployResult> {
  const { catalogue, schema } = opts;
  const now = opts.now ?? Date.now;
  await catalogue.ensure();
  for (let attempt = 1; attempt <= 10; attempt++) {
    const current = await catalogue.deployment();
    if (current?.hash === schema.hash) return { version: current.version, outcome: 'same', changes: [] };
    if (current && (await isOlderVersion(catalogue, current, schema.hash))) {
      opts.log?.warn(
        { recorded: current.version },
        'this schema is an older version than the one deployed: serving it without changing the record (a rolling update)',
      );
      return { version: (await olderVersionNumber(catalogue, current, schema.hash)) ?? current.version, outcome: 'older', changes: [] };
    }
    const changes = current ? await classify(catalogue, current, schema) : await firstDeploymentChanges(catalogue, schema);
    const refused = changes.filter((c) => c.class === 'refused' || (c.class === 'rekey' && !opts.rekeys && opts.record !== false));
    if (refused.length > 0) throw refusal(refused, current!);
    if (opts.record === false) return { version: (current?.version ?? 0) + 1, outcome: 'deployed', changes };
    const version = (current?.version ?? 0) + 1;
    await recordPaths(catalogue, { before: current?.layout, after: schema.layout }, changes, version, now());
    const next: Deployment = { version, hash: schema.hash, layout: schema.layout, drops: current?.drops ?? [], deployedAt: now() };
    if (await catalogue.deploy(next, opts.sdl, current?.etag)) {
      const builds = changes.filter((c) => c.class === 'build').map((c) => c.pathId);
      opts.log?.info(
        { version, builds, changes: changes.length },
        current
          ? 'schema change deployed'
          : builds.length > 0
            ? 'schema recorded (first deployment) over entities no recorded schema wrote: its derived paths are built from them'
            : 'schema recorded (first deployment)',
      );
      return { version, outcome: 'deployed', changes };
    }
    // Another process deployed first: compare with what it recorded.
  }
  throw new TablegraphError(ErrorCode.STORAGE_UNAVAILABLE, 'the catalogue kept changing while this schema was deployed', { reason: 'CatalogueContended' });
}

/**
 * The diff, with each refusal that holds only while entities are stored (`probe`) checked against storage: a
 * type none of whose entities is stored (one filtered scan, stopped at the first match) lets the change through,
 * as does a drop the operator recorded.
 */
export async function classify(catalogue: Catalogue, current: Deployment, schema: SchemaLayout): Promise<LayoutChange[]> {
  const changes = diffLayouts(current.layout, schema.layout, (c) => schema.locate(c));
  const stored = new Map<string, boolean>();
  for (const change of changes) {
    if (change.class !== 'refused') continue;
    if (current.drops.includes(change.coordinate)) {
      Object.assign(change, { class: 'compatible', description: `${change.description} (dropped by the operator)` });
      continue;
    }
    if (!change.probe) continue;
    const key = `${change.probe.table}\u0000${change.probe.entityType}`;
    if (!stored.has(key)) stored.set(key, await holdsAny(catalogue, change.probe.table, change.probe.entityType));
    if (!stored.get(key)) Object.assign(change, { class: 'compatible', description: `${change.description} (none is stored)` });
  }
  return changes;
}

/**
 * A first deployment's changes: none over an empty store — the data will be written by this very schema — but when
 * entities of its types are stored already (written by a process that recorded nothing: a tablegraph of before the
 * catalogue, or a tool writing around it), every derived path is built from them, as if it were new: a path the store
 * never held is built, never assumed. One probe per type (holdsAny); a table per period is not probed (its types have
 * no derived paths to build).
 */
async function firstDeploymentChanges(catalogue: Catalogue, schema: SchemaLayout): Promise<LayoutChange[]> {
  let stored = false;
  for (const type of Object.values(schema.layout.types)) {
    if (type.table.includes('{')) continue;
    if (await holdsAny(catalogue, type.table, type.entityType)) {
      stored = true;
      break;
    }
  }
  if (!stored) return [];
  return diffLayouts({ types: schema.layout.types, paths: {} }, schema.layout, (c) => schema.locate(c));
}

/** Whether `table` holds an entity of `entityType` (a filtered scan that stops at the first match; a missing table holds none). */
async function holdsAny(catalogue: Catalogue, table: string, entityType: string): Promise<boolean> {
  if (table.includes('{')) return true; // a table per period: not probed, assumed held
  let token: string | undefined;
  try {
    do {
      const page = await catalogue.store.scanPage(table, token, { entityType, select: ['EntityType'], pageSize: 1 });
      if (page.entities.length > 0) return true;
      token = page.continuationToken;
    } while (token);
  } catch (e) {
    if (e instanceof TablegraphError && e.code === ErrorCode.NOT_FOUND) return false;
    throw e;
  }
  return false;
}

async function isOlderVersion(catalogue: Catalogue, current: Deployment, hash: string): Promise<boolean> {
  return (await olderVersionNumber(catalogue, current, hash)) !== undefined;
}

/** The number of the recorded version before `current` whose layout hash is `hash`, if any. */
async function olderVersionNumber(catalogue: Catalogue, current: Deployment, hash: string): Promise<number | undefined> {
  for (let v = current.version - 1; v >= Math.max(1, current.version - 20); v--) {
    if ((await catalogue.versionHash(v)) === hash) return v;
  }
  return undefined;
}

/**
 * The path rows of a deployment, written before the deployment row so that a crash between the two leaves no
 * recorded version whose builds are missing: on a first deployment every path is `ready` (there is no data, and this
 * very schema will write it) but those built over stored entities (firstDeploymentChanges); on a change, each `build` becomes `building` from the start (a changed
 * definition's build to end with a repair pass), each `rekey` a `rekey:<Type>` row `building` whose definition holds
 * the type's old and new addressing (rekey-build.ts), each `retire` `retired`. A row another process wrote first is
 * left to it.
 */
async function recordPaths(
  catalogue: Catalogue,
  layouts: { before?: RecordedLayout; after: RecordedLayout },
  changes: LayoutChange[],
  version: number,
  at: number,
): Promise<void> {
  const layout = layouts.after;
  const first = !layouts.before;
  const existing = new Map((await catalogue.paths()).map((p) => [p.id, p]));
  const blank = (id: string, state: PathRecord['state'], path: Pick<PathRecord, 'kind' | 'definition'> = layout.paths[id]): PathRecord =>
    newPath({ id, kind: path.kind, definition: path.definition }, state, version, at);
  const writes: PathRecord[] = [];
  if (first) {
    // Ready, but for the paths a first deployment over stored entities builds (firstDeploymentChanges).
    const built = new Set(changes.filter((c) => c.class === 'build').map((c) => c.pathId));
    for (const id of Object.keys(layout.paths)) if (!existing.has(id) && !built.has(id)) writes.push(blank(id, 'ready'));
  }
  for (const change of changes) {
    if (!change.pathId) continue;
    const row = existing.get(change.pathId);
    if (row?.version === version && row.state === 'building') continue; // recorded by a process deploying this same version
    if (change.class === 'rekey') {
      const type = change.coordinate;
      const definition = { from: addressingOf(layouts.before!.types[type]), to: addressingOf(layout.types[type]) };
      writes.push({ ...blank(change.pathId, 'building', { kind: 'rekey', definition }), ...(row && { etag: row.etag }) });
    } else if (change.class === 'build' || (change.class === 'compatible' && !row)) {
      // A changed index's entities at its old keys go in the repair pass that ends its build (a summary's or a
      // copy's build rewrites every value that differs already).
      const repair = change.class === 'build' && !!change.changed && layout.paths[change.pathId].kind === 'index';
      writes.push({ ...blank(change.pathId, change.class === 'build' ? 'building' : 'ready'), needsRepair: repair, ...(row && { etag: row.etag }) });
    } else if (change.class === 'retire' && row && row.state !== 'retired') {
      writes.push({ ...row, state: 'retired', updatedAt: at, leaseOwner: undefined, leaseUntil: undefined });
    }
  }
  for (const w of writes) await catalogue.putPath(w);
}

/** SCHEMA_INVALID for refused changes, each with its location and remedy. */
function refusal(refused: LayoutChange[], current: Deployment): TablegraphError {
  const where = (c: LayoutChange) => {
    const loc = c.node?.loc;
    if (!loc) return '';
    const line = loc.source.body.slice(0, loc.start).split('\n');
    return ` (${loc.source.name}:${line.length}:${line[line.length - 1].length + 1})`;
  };
  const lines = refused.map((c) => `  - ${c.coordinate}${where(c)}: ${c.description} — ${c.remedy}`);
  return new TablegraphError(
    ErrorCode.SCHEMA_INVALID,
    `The schema cannot be deployed over the stored data of version ${current.version} (${refused.length} change(s) refused; npm run migrate -- plan shows them all):\n${lines.join('\n')}\n` +
      // A schema that is not that data's next version (another application) needs storage of its own, not a migration.
      'If this schema is not the next version of the stored one, serve it beside that data instead, leaving it untouched: ' +
      'give it storage of its own with TABLEGRAPH_TABLE_PREFIX (tables, queues and containers apart in one account), TABLEGRAPH_DATA_DIR ' +
      '(another embedded Azurite) or another storage account.',
    {
      reason: 'ChangeRefused',
      changes: refused.map((c) => ({ coordinate: c.coordinate, description: c.description, remedy: c.remedy, location: where(c).slice(2, -1) || undefined })),
    },
  );
}
