/**
 * The worker's side of copies (`@copy`, the guide's "Denormalization pattern"): after a write of an entity that
 * holds copies, they are checked against their targets as they are now; after a write of an entity others copy
 * from, every copy of it — found through the declared range of its type over the copying type — is brought up to
 * date. Each copy is written from the target as read, with If-Match on the copying entity's ETag (a conflict reads
 * both again), so redelivered, reordered and concurrently handled messages converge to the targets' values.
 *
 * A copy that keys the reference a summary counts its entity through (`Item.ownerId @copy(…)`, `Item.owner` keyed by
 * it, `Owner.spent @summary(of: "Item", via: "owner")`) moves the entity's contribution when it changes: such an
 * entity is written through the write path (worker-write.ts) — as an update that sets its references again, so the
 * write path fills the copies from the targets it reads — and its summaries follow, in its EGT or through its own
 * fan-out message, exactly as after a client's write.
 */
import { ErrorCode, isTablegraphError, TablegraphError } from '../errors';
import type { DerivedTarget } from './derived-target';
import { entityWrites, primaryAddress, typedValue, valuesOf } from '../model/entity-codec';
import { parseKey, prefixUpperBound, renderKey, renderKeyPrefix } from '../model/key-template';
import { readReferenced, referenceFields } from '../model/references';
import { summaryKeyFields } from '../model/summaries';
import { ENTITY_TYPE_PROPERTY, WRITE_ID_PROPERTY, type EntityModel, type Model, type RangePath } from '../model/types';
import type { TableStore } from '../storage/table-store';
import type { EntityAddress, StorageObserver, StoredEntity, TypedValue } from '../storage/storage-types';
import type { WriteExecutor } from '../write/write-executor';
import { quietly, workerWrite } from './worker-write';

/** Attempts at one entity's copies while other writers keep changing it (attempts). */
const ATTEMPTS = 10;

/**
 * Brings the copies the message's entity holds, and the copies others hold of it, up to date.
 * @returns entities whose copies were written (entities)
 * @throws TablegraphError STORAGE_UNAVAILABLE when an entity kept changing; storage errors
 */
export async function reconcileCopies(target: DerivedTarget, current: StoredEntity | null, candidates: readonly EntityAddress[]): Promise<number> {
  const { model, store, entity, primary, observer, writer } = target;
  let written = 0;
  const through = writer && { model, writer };
  if (entity.copies.size > 0 && current) written += (await refreshCopies(store, entity, primary, observer, through)) ? 1 : 0;
  for (const copy of model.copiesOf.get(entity.name) ?? []) {
    for (const holder of await listedBy(target, { reverse: copy.reverse, holder: copy.entity }, current, candidates)) {
      if (await refreshCopies(store, copy.entity, holder, observer, through)) written++;
    }
  }
  return written;
}

/**
 * The entities of `holder` a range of `target` (`reverse`: over them, their index entities or join entities)
 * lists for the target at `primary` (all pages): their addresses. The range's keys come from the target's values,
 * or — the target deleted — from what its keys and its index entities' keys (`candidates`, the message's) tell,
 * where that suffices (none listed otherwise).
 */
export async function listedBy(
  at: Pick<DerivedTarget, 'store' | 'entity' | 'primary' | 'observer'>,
  list: { reverse: RangePath; holder: EntityModel },
  current: StoredEntity | null,
  candidates: readonly EntityAddress[],
): Promise<EntityAddress[]> {
  const { store, entity: target, primary, observer } = at;
  const { reverse, holder } = list;
  const values = current ? valuesOf(target, current.properties) : keyedValues(target, primary, candidates);
  const path = reverse;
  const render = (bound: NonNullable<typeof path.rowKeyPrefix>, prefix: boolean) => {
    const args = Object.fromEntries([...bound.bindings].map(([placeholder, b]) => [placeholder, values[b.name]]));
    return prefix ? renderKeyPrefix(bound.template, args) : renderKey(bound.template, args);
  };
  let partitionKey: string;
  let rowKeyFrom: string;
  try {
    partitionKey = render(path.partitionKey, false);
    rowKeyFrom = render(path.rowKeyPrefix!, true);
  } catch {
    return []; // the deleted target's keys do not give the range: what it lists stays as it was
  }
  const range = await store.queryRange(
    { table: path.table, partitionKey, rowKeyFrom, rowKeyTo: prefixUpperBound(rowKeyFrom), limit: Number.MAX_SAFE_INTEGER - 1 },
    { observer },
  );
  const listed = path.join?.entity ?? path.index?.entity ?? path.target;
  const type = path.index ? path.index.entityType : listed.entityType;
  return range.entities.filter((e) => e.properties[ENTITY_TYPE_PROPERTY] === type).map((e) => primaryAddress(holder, e.properties));
}

/**
 * What the keys of a deleted entity tell of its values: its own keys, and the keys of its index entities among
 * `candidates` (a unique index's `{id}`, say, when the entity's keys do not hold it). A hash bucket tells nothing.
 */
function keyedValues(entity: EntityModel, primary: EntityAddress, candidates: readonly EntityAddress[]): Record<string, unknown> {
  const values: Record<string, unknown> = { ...parseKey(entity.layout.partitionKey, primary.partitionKey), ...parseKey(entity.layout.rowKey, primary.rowKey) };
  for (const index of entity.indexes.values()) {
    if (index.element) continue; // its keys tell one element of a list, never the list
    for (const a of candidates) {
      if (a.table !== index.layout.table) continue;
      const pk = parseKey(index.layout.partitionKey, a.partitionKey);
      const rk = parseKey(index.layout.rowKey, a.rowKey);
      if (!pk || !rk) continue;
      const found = { ...pk, ...rk };
      // Another index's entity may parse too: taken only where it agrees with what is known already.
      if (Object.entries(found).every(([k, v]) => values[k] === undefined || values[k] === v)) Object.assign(values, found);
    }
  }
  return values;
}

/**
 * Writes an entity's copies from their targets as they are now, if any differs: the entity replaced with If-Match
 * on the ETag read (again after a conflict). A target gone (or not of its type) gives null copies. A copy that keys
 * a summary's reference goes through `through.writer` (an update of the entity that sets the copies' references
 * again), so the summaries follow; without a write path it is written as the others, and `repair-summaries` puts
 * the summaries right.
 * @returns whether anything was written
 */
export async function refreshCopies(
  store: TableStore,
  entity: EntityModel,
  address: EntityAddress,
  observer?: StorageObserver,
  through?: { model: Model; writer: WriteExecutor },
): Promise<boolean> {
  const call = { observer };
  for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
    const stored = await store.getEntity(address, call);
    if (!stored || stored.properties[ENTITY_TYPE_PROPERTY] !== entity.entityType) return false;
    const values = valuesOf(entity, stored.properties);
    const changed: Record<string, unknown> = {};
    const reads = new Map<string, Promise<StoredEntity | null>>();
    const get = (at: EntityAddress) => {
      const key = `${at.table}\u0000${at.partitionKey}\u0000${at.rowKey}`;
      if (!reads.has(key)) reads.set(key, store.getEntity(at, call));
      return reads.get(key)!;
    };
    for (const copy of entity.copies.values()) {
      const target = await readReferenced(copy.reference, values, get);
      const wanted = target ? (target.properties[copy.targetField] ?? null) : null;
      const field = entity.fields.get(copy.field)!;
      if (same(typedValue(field, wanted), typedValue(field, values[copy.field]))) continue;
      changed[copy.field] = wanted;
    }
    if (Object.keys(changed).length === 0) return false;
    const keyed = through && summaryKeyFields(through.model, entity);
    if (keyed && Object.keys(changed).some((f) => keyed.has(f))) {
      // Through the write path: an update giving the entity's keys and the references of the changed copies, as
      // stored, conditional on the ETag read; the write path reads the targets and fills the copies from them.
      const input: Record<string, unknown> = { ifMatch: stored.etag };
      for (const f of entity.keyFields) input[f] = values[f];
      for (const f of Object.keys(changed)) for (const r of referenceFields(entity.copies.get(f)!.reference)) input[r] = values[r];
      if (await quietly(through.writer.execute(workerWrite(entity, 'UPDATE'), input, observer))) return true;
      continue; // changed meanwhile: read it again
    }
    // A replace, not a merge: a merge cannot remove a copy whose target is gone. The state's WriteId stays: the
    // copies are not a write of the entity (its fan-out messages still name the state they were based on).
    const { primary } = entityWrites(entity, { ...values, ...changed }, String(stored.properties[WRITE_ID_PROPERTY] ?? ''));
    try {
      await store.updateEntity(address.table, primary.entity, 'replace', { ...call, ifMatch: stored.etag });
      return true;
    } catch (e) {
      if (!isTablegraphError(e, ErrorCode.CONFLICT) && !isTablegraphError(e, ErrorCode.NOT_FOUND)) throw e;
    }
  }
  throw new TablegraphError(
    ErrorCode.STORAGE_UNAVAILABLE,
    `${entity.name} ${address.partitionKey}/${address.rowKey} kept changing while its copies were brought up to date`,
    { reason: 'Contention' },
  );
}

function same(a: TypedValue | null, b: TypedValue | null): boolean {
  const text = (v: TypedValue | null) => JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? x.toString() : x));
  return text(a) === text(b);
}
