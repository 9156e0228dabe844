/**
 * `npm run migrate -- plan`: what deploying a schema would do to the stored data, before it is deployed
 * (docs/schema-changes.md) — each change of the diff (layout-diff.ts) with its class, and for each build the work it
 * takes, counted from what is stored: entities to read and write, transactions (Azure bills each REST request, an
 * EGT included), Cosmos DB request units, and the time at the build budget. An index build's writes are counted
 * exactly: every stored primary's index entity derived (a keys-only read of the type) and grouped into the EGTs the
 * build would send, page by page.
 */
import { indexWrites, valuesOf } from '../model/entity-codec';
import type { EntityModel, IndexModel, Model } from '../model/types';
import { RU_PER_ENTITY_READ, RU_PER_ENTITY_WRITTEN } from '../read/cost';
import type { TableStore } from '../storage/table-store';
import { planEgtBatches } from '../write/egt-batches';
import type { Catalogue } from './catalogue';
import { classify, type SchemaLayout } from './deployment';
import { addressingOf, type LayoutChange } from './layout-diff';
import type { RecordedLayout } from './layout-record';
import { countRekey, rekeyOf } from './rekey-build';
import { pathTypes } from '../model/derived-paths';
import { countEntities, scanOrNothing } from './entity-count';

/** The work of one build (entities, calls, RU, s). */
export interface BuildCost {
  /** Stored entities the build reads (entities; an index build reads its page twice). */
  entitiesRead: number;
  /** Entities it writes (entities): index entities, summary holders, copies at most. */
  entitiesWritten: number;
  /** Azure Table storage transactions: reads, EGTs, and checkpoints (requests). */
  transactions: number;
  /** Estimated Cosmos DB Table API request units (RU; entities of at most 1 KB). */
  requestUnits: number;
  /** Time at the build budget (s); null with no budget. */
  secondsAtBudget: number | null;
  /**
   * A re-key's switch, once no process of the older version is left, during which no server serves the type: the old
   * and new addresses read whole, and the old entities deleted (rekey-build.ts).
   */
  switch?: { entitiesRead: number; entitiesDeleted: number; transactions: number; requestUnits: number };
  /** The derived paths a re-key sets back to their start, rebuilt after it (reads through them refused meanwhile). */
  rebuilt?: string[];
}

export interface PlannedChange extends LayoutChange {
  cost?: BuildCost;
}

export interface MigrationPlan {
  /** The recorded version (0: none recorded yet) and the one the schema would become. */
  from: number;
  to: number;
  /** Whether the schema is the recorded one already. */
  same: boolean;
  changes: PlannedChange[];
}

/** Pages of an index build (entities). */
const PAGE = 1000;

/**
 * @param entitiesPerSecond the build budget (entities/s; 0: none)
 * @throws from the store only: a refused change is a planned change, not an error
 */
export async function planMigration(catalogue: Catalogue, schema: SchemaLayout, model: Model, entitiesPerSecond: number): Promise<MigrationPlan> {
  await catalogue.ensure();
  const current = await catalogue.deployment();
  if (!current) return { from: 0, to: 1, same: false, changes: [] };
  if (current.hash === schema.hash) return { from: current.version, to: current.version, same: true, changes: [] };
  const changes: PlannedChange[] = await classify(catalogue, current, schema);
  // A type being re-keyed is counted where it is stored now: its old table.
  const rekeyed = new Set(changes.filter((c) => c.class === 'rekey').map((c) => c.coordinate));
  const tableOf = (entity: EntityModel) => (rekeyed.has(entity.name) ? current.layout.types[entity.name].table : entity.layout.table);
  for (const change of changes) {
    if (change.class === 'rekey')
      change.cost = await rekeyCost(catalogue.store, model, change.coordinate, { recorded: current.layout, now: schema.layout }, entitiesPerSecond);
    if (change.class !== 'build' || !change.pathId) continue;
    change.cost = await buildCost({ store: catalogue.store, model, tableOf }, change.pathId, entitiesPerSecond);
  }
  return { from: current.version, to: current.version + 1, same: false, changes };
}

/** Where a plan counts: the store, the new schema's model, and the table each entity type is stored in now. */
interface Counting {
  store: TableStore;
  model: Model;
  tableOf(entity: EntityModel): string;
}

async function buildCost({ store, model, tableOf }: Counting, pathId: string, entitiesPerSecond: number): Promise<BuildCost> {
  const [kind, coordinate] = [pathId.slice(0, pathId.indexOf(':')), pathId.slice(pathId.indexOf(':') + 1)];
  const [type, name] = coordinate.split('.');
  const finish = (read: number, written: number, transactions: number): BuildCost => ({
    entitiesRead: read,
    entitiesWritten: written,
    transactions,
    requestUnits: read * RU_PER_ENTITY_READ + written * RU_PER_ENTITY_WRITTEN,
    secondsAtBudget: entitiesPerSecond > 0 ? Math.ceil(written / entitiesPerSecond) : null,
  });
  if (kind === 'index') {
    const index = model.entities.get(type)?.indexes.get(name);
    if (!index) return finish(0, 0, 0);
    const { primaries, written, egts, pages } = await countIndexBuild(store, index, tableOf(index.entity));
    // The build's count of its total (a keys-only read), then each page: read, read again, checkpoint; plus its EGTs.
    return finish(2 * primaries, written, 4 * pages + egts);
  }
  if (kind === 'summary') {
    const summary = model.summaries.get(coordinate);
    if (!summary) return finish(0, 0, 0);
    const holders = await countEntities(store, tableOf(summary.holder), summary.holder.entityType);
    const of = await countEntities(store, tableOf(summary.of), summary.of.entityType);
    // Every holder read and its partition recounted (holders + counted entities read); each holder merged once: a
    // point read, a partition scan and a merge per holder, and a page read and a checkpoint per page of holders; and
    // the build's count of its total first (keys-only reads).
    const counting = summary.scope === 'egt' ? holders.pages : holders.pages + of.pages;
    return finish(holders.count + of.count, holders.count, counting + 2 * holders.pages + 3 * holders.count);
  }
  const entity = model.entities.get(type);
  if (!entity) return finish(0, 0, 0);
  const held = await countEntities(store, tableOf(entity), entity.entityType);
  // Every holder of a copy read, its target read, and rewritten at most; a page read and a checkpoint per page; and
  // the build's count of its total first.
  return finish(2 * held.count, held.count, 3 * held.pages + 2 * held.count);
}

/**
 * A re-key's work (rekey-build.ts): the copy — each old row read once and written at its new address, page by page,
 * in EGTs per new partition — and the switch — both addresses read whole, each old row deleted, in EGTs per old
 * partition; then the type's derived paths, rebuilt as their own builds.
 */
async function rekeyCost(
  store: TableStore,
  model: Model,
  type: string,
  layouts: { recorded: RecordedLayout; now: RecordedLayout },
  entitiesPerSecond: number,
): Promise<BuildCost> {
  const rekey = rekeyOf(model.entities.get(type)!, { from: addressingOf(layouts.recorded.types[type]), to: addressingOf(layouts.now.types[type]) });
  const n = await countRekey(store, rekey);
  return {
    entitiesRead: n.rows,
    entitiesWritten: n.rows,
    // The build's count of its total (as this one), then each page: read and checkpoint; plus its EGTs.
    transactions: 3 * n.pages + n.copyEgts,
    requestUnits: n.rows * (RU_PER_ENTITY_READ + RU_PER_ENTITY_WRITTEN),
    secondsAtBudget: entitiesPerSecond > 0 ? Math.ceil(n.rows / entitiesPerSecond) : null,
    switch: {
      entitiesRead: 2 * n.rows,
      entitiesDeleted: n.rows,
      transactions: 2 * n.pages + n.deleteEgts,
      requestUnits: 2 * n.rows * RU_PER_ENTITY_READ + n.rows * RU_PER_ENTITY_WRITTEN,
    },
    rebuilt: Object.keys(layouts.now.paths).filter((id) => layouts.now.paths[id].kind !== 'changeLog' && pathTypes(model, id).includes(type)),
  };
}

/** An index build's writes, exactly: each primary's index entity derived, grouped into EGTs as the build groups them. */
async function countIndexBuild(
  store: TableStore,
  index: IndexModel,
  table: string,
): Promise<{ primaries: number; written: number; egts: number; pages: number }> {
  const entity = index.entity;
  const fields = [...new Set([...entity.keyFields, ...index.layout.partitionKey.fields, ...index.layout.rowKey.fields])];
  let primaries = 0;
  let written = 0;
  let egts = 0;
  let pages = 0;
  for await (const page of scanOrNothing(store, table, { entityType: entity.entityType, select: fields, pageSize: PAGE })) {
    pages++;
    primaries += page.length;
    const writes = page.flatMap((e) => {
      try {
        // The projection's other fields do not move the keys: an entity of the keys only stands for the write.
        return indexWrites({ ...index, projection: new Set(fields) }, valuesOf(entity, e.properties));
      } catch {
        return [];
      }
    });
    written += writes.length;
    egts += planEgtBatches(writes, store.target).length;
  }
  return { primaries, written, egts, pages: Math.max(pages, 1) };
}
