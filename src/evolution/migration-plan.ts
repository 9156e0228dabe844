/**
 * `npm run migrate -- plan`: what deploying a schema would do to the stored data, before it is deployed
 * (docs/schema-changes.md) — each change of the diff (layout-diff.ts) with its class, and for each build the work it
 * takes, counted from what is stored: entities to read and write, transactions (Azure bills each REST request, an
 * EGT included), Cosmos DB request units, and the time at the build budget. An index build's writes are counted
 * exactly: every stored primary's index entity derived (a keys-only read of the type) and grouped into the EGTs the
 * build would send, page by page.
 */
import { indexWrite, valuesOf } from '../model/entity-codec';
import type { IndexModel, Model } from '../model/types';
import { RU_PER_ENTITY_READ, RU_PER_ENTITY_WRITTEN } from '../read/cost';
import type { TableStore } from '../storage/table-store';
import { planEgtBatches } from '../write/egt-batches';
import type { Catalogue } from './catalogue';
import { classify, type SchemaLayout } from './deployment';
import type { LayoutChange } from './layout-diff';

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
  for (const change of changes) {
    if (change.class !== 'build' || !change.pathId) continue;
    change.cost = await buildCost(catalogue.store, model, change.pathId, entitiesPerSecond);
  }
  return { from: current.version, to: current.version + 1, same: false, changes };
}

async function buildCost(store: TableStore, model: Model, pathId: string, entitiesPerSecond: number): Promise<BuildCost> {
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
    const { primaries, written, egts, pages } = await countIndexBuild(store, index);
    // Each page: read, read again, checkpoint; plus its EGTs.
    return finish(2 * primaries, written, 3 * pages + egts);
  }
  if (kind === 'summary') {
    const summary = model.summaries.get(coordinate);
    if (!summary) return finish(0, 0, 0);
    const holders = await countEntities(store, summary.holder.layout.table, summary.holder.entityType);
    const of = await countEntities(store, summary.of.layout.table, summary.of.entityType);
    // Every holder read and its partition recounted (holders + counted entities read); each holder merged once: a
    // point read, a partition scan and a merge per holder, and a page read and a checkpoint per page of holders.
    return finish(holders.count + of.count, holders.count, 2 * holders.pages + 3 * holders.count);
  }
  const entity = model.entities.get(type);
  if (!entity) return finish(0, 0, 0);
  const held = await countEntities(store, entity.layout.table, entity.entityType);
  // Every holder of a copy read, its target read, and rewritten at most.
  return finish(2 * held.count, held.count, held.pages + 2 * held.count);
}

/** The entities of one type in a table, counted with a keys-only read (entities, and the pages it took). */
async function countEntities(store: TableStore, table: string, entityType: string): Promise<{ count: number; pages: number }> {
  let count = 0;
  let pages = 0;
  try {
    for await (const page of store.scan(table, { entityType, select: ['EntityType'] })) {
      count += page.length;
      pages++;
    }
  } catch (e) {
    if ((e as { code?: string }).code !== 'NOT_FOUND') throw e;
  }
  return { count, pages: Math.max(pages, 1) };
}

/** An index build's writes, exactly: each primary's index entity derived, grouped into EGTs as the build groups them. */
async function countIndexBuild(store: TableStore, index: IndexModel): Promise<{ primaries: number; written: number; egts: number; pages: number }> {
  const entity = index.entity;
  const fields = [...new Set([...entity.keyFields, ...index.layout.partitionKey.fields, ...index.layout.rowKey.fields])];
  let primaries = 0;
  let written = 0;
  let egts = 0;
  let pages = 0;
  for await (const page of store.scan(entity.layout.table, { entityType: entity.entityType, select: fields, pageSize: PAGE })) {
    pages++;
    primaries += page.length;
    const writes = page.flatMap((e) => {
      try {
        // The projection's other fields do not move the keys: an entity of the keys only stands for the write.
        const w = indexWrite({ ...index, projection: new Set(fields) }, valuesOf(entity, e.properties));
        return w ? [w] : [];
      } catch {
        return [];
      }
    });
    written += writes.length;
    egts += planEgtBatches(writes, store.target).length;
  }
  return { primaries, written, egts, pages: Math.max(pages, 1) };
}
