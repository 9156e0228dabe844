/**
 * The write planner (docs/architecture.md, "Writes"): one mutation and the state it read become a write plan.
 * Same-partition effects — the entity, its intra-partition index entities — are EGT operations; the summary values it
 * contributes to are deltas per holder, which group-plan.ts adds up over every write sharing an EGT; cross-partition
 * effects — inter-partition index entities — become a fan-out message and, for unique indexes, reservations made before
 * the EGT. Pure: no I/O, so every plan can be tested.
 *
 * Guide sections: "Entity Group Transactions", "Intra-partition secondary index pattern", "Inter-partition
 * secondary index pattern", "Eventually consistent transactions pattern", "Merge or replace", "Data series pattern"
 * (INCREMENT).
 */
import { addressOfWrite } from '../model/entity-codec';
import { ErrorCode, TablegraphError } from '../errors';
import { derive, entityWrites, indexWrites, primaryAddress, seriesProperties, typedValue, valuesOf, type TableWrite } from '../model/entity-codec';
import { contributionOf } from '../model/contributions';
import { decimalText } from '../model/decimal';
import { holderAddress, summaryContribution } from '../model/summaries';
import {
  ENTITY_TYPE_PROPERTY,
  MOVE_ID_PROPERTY,
  MOVED_IN_PROPERTY,
  WRITE_ID_PROPERTY,
  type Model,
  type StoredField,
  type SummaryModel,
  type WriteModel,
} from '../model/types';
import { checkEntity, checkTransaction } from '../storage/limits';
import { MAX_MESSAGE_BYTES } from '../storage/queue-store';
import type { EntityAddress, EntityToWrite, StorageTarget, StoredEntity, TransactionOperation } from '../storage/storage-types';
import { addressKey } from '../storage/address-key';
import { stateId } from '../queue/messages';
import { checkReferences } from './check-references';
import { partOperations } from '../model/wide-entities';
import { isTombstone, tombstone } from '../model/tombstones';
import { copiedFieldsChanged, fillCopies, sameEgtCopies } from './copy-plan';
import type { HolderDelta, ReadState, Values, WritePlan } from './plan-types';

/** The address of the entity a mutation input names (its key fields). @throws BAD_USER_INPUT for a bad key value */
export function addressOf(write: WriteModel, input: Values): EntityAddress {
  return primaryAddress(write.entity, input);
}

/**
 * The entity's values after the write, from the input and the current values ("Merge or replace").
 * @param moveId the move (`@write(action: MOVE)`, worker/carry-out-move.ts) this write is a step of, if any: only its own
 *   steps may change a move's copy still marked MovedIn
 * @throws TablegraphError CONFLICT (reason EntityAlreadyExists) when creating an existing entity; NOT_FOUND when
 *   changing a missing one without `ifMatch`; CONFLICT (reason ETagMismatch) when `input.ifMatch` is not the
 *   current ETag, or names an entity deleted since it was read; CONFLICT (reason MovePending) when the entity is
 *   a move's copy that the move has not finished yet
 */
export function nextValues(write: WriteModel, input: Values, current: StoredEntity | null, moveId?: string): Values | null {
  const { entity, action } = write;
  const ifMatch = input.ifMatch;
  const other = current?.properties[ENTITY_TYPE_PROPERTY];
  if (isTombstone(current)) {
    // Deleted a moment ago; the entities pointing at it are being deleted with it (model/tombstones.ts).
    if (action === 'CREATE' || action === 'INCREMENT') {
      throw new TablegraphError(
        ErrorCode.CONFLICT,
        `${entity.name} ${describeKeys(write, input)} was deleted a moment ago, and what pointed at it is being deleted with it: create it again once that is done (seconds)`,
        { reason: 'DeletePending', retryAfterSeconds: 1 },
      );
    }
    throw new TablegraphError(ErrorCode.NOT_FOUND, `${entity.name} ${describeKeys(write, input)} does not exist (it was deleted)`);
  }
  if (current && other !== entity.entityType) {
    // A sibling type at the same keys (the guide's "Inheritance relationships"): the address is taken, and holds no
    // entity of this type to change.
    if (action === 'CREATE' || action === 'INCREMENT') {
      throw new TablegraphError(ErrorCode.CONFLICT, `${entity.name} ${describeKeys(write, input)}: a ${String(other)} exists with these keys`, {
        reason: 'EntityAlreadyExists',
        entityType: other,
      });
    }
    throw new TablegraphError(ErrorCode.NOT_FOUND, `${entity.name} ${describeKeys(write, input)} does not exist (a ${String(other)} has these keys)`, {
      entityType: other,
    });
  }
  const movingIn = current?.properties[MOVED_IN_PROPERTY];
  if (action !== 'CREATE' && typeof movingIn === 'string' && movingIn !== '' && movingIn !== moveId) {
    // Written now, the copy would differ from the entity still at the old address, and a redelivered move could
    // not tell its copy from someone else's entity: the move finishes first (seconds, src/worker/carry-out-move.ts).
    throw new TablegraphError(
      ErrorCode.CONFLICT,
      `${entity.name} ${describeKeys(write, input)} is being moved here: write it again once the move is carried out`,
      {
        reason: 'MovePending',
      },
    );
  }
  if (action === 'INCREMENT') return incremented(write, input, current);
  if (action === 'CREATE') {
    if (current)
      throw new TablegraphError(ErrorCode.CONFLICT, `${entity.name} ${describeKeys(write, input)} already exists`, { reason: 'EntityAlreadyExists' });
  } else if (!current) {
    // The client read an ETag, so the entity existed: someone deleted it since — its ETag no longer matches.
    if (typeof ifMatch === 'string') {
      throw new TablegraphError(ErrorCode.CONFLICT, `${entity.name} ${describeKeys(write, input)} was deleted since it was read (stale ifMatch ETag)`, {
        reason: 'ETagMismatch',
      });
    }
    throw new TablegraphError(ErrorCode.NOT_FOUND, `${entity.name} ${describeKeys(write, input)} does not exist`);
  } else if (typeof ifMatch === 'string' && ifMatch !== current.etag) {
    throw new TablegraphError(ErrorCode.CONFLICT, `${entity.name} ${describeKeys(write, input)} changed since it was read (stale ifMatch ETag)`, {
      reason: 'ETagMismatch',
      currentEtag: current.etag,
    });
  }
  if (action === 'DELETE') return null;
  const old = current ? valuesOf(entity, current.properties) : null;
  const next: Values = {};
  for (const name of entity.fields.keys()) {
    // Key fields keep their stored spelling: `id: "012"` addresses the entity stored as "12" (same padded RowKey).
    if (old && entity.keyFields.includes(name)) next[name] = old[name];
    // A summary value not stored yet (a summary a schema change added, its build not there yet) counts from 0 until
    // the build recounts it; reads of it are refused until then (src/read/path-gate.ts).
    else if (entity.summaryFields.has(name)) next[name] = old?.[name] ?? 0;
    else if (entity.copies.has(name))
      next[name] = old ? old[name] : null; // filled from the target (fillCopies)
    else if (entity.fields.get(name)!.series)
      next[name] = old ? old[name] : null; // INCREMENT's alone
    else if (action === 'UPDATE' && input[name] === undefined) next[name] = old![name];
    else next[name] = input[name] ?? null;
  }
  return next;
}

/**
 * An INCREMENT's values (the guide's "Data series pattern"): the entity as read — or, absent, created with every
 * element 0 and its other fields null — with each `{ at, by }` of the input added to its series.
 * @throws TablegraphError BAD_USER_INPUT for an element outside the series, or a sum outside the element's type or
 *   `@constraint`
 */
function incremented(write: WriteModel, input: Values, current: StoredEntity | null): Values {
  const { entity } = write;
  const old = current ? valuesOf(entity, current.properties) : null;
  const next: Values = {};
  for (const [name, field] of entity.fields) {
    if (entity.keyFields.includes(name)) next[name] = old ? old[name] : input[name];
    else if (field.series) next[name] = addTo(field, (old?.[name] as number[] | undefined) ?? new Array<number>(field.series.length).fill(0), input[name]);
    else next[name] = entity.summaryFields.has(name) ? (old?.[name] ?? 0) : old ? old[name] : null;
  }
  return next;
}

/** `series` with `increment` ({ at, by }, or nothing) added. @throws TablegraphError BAD_USER_INPUT */
function addTo(field: StoredField, series: number[], increment: unknown): number[] {
  if (increment === undefined || increment === null) return series;
  const { at, by } = checkIncrement(field, increment);
  const next = [...series];
  next[at] += by;
  seriesProperties(field, next); // the sum must still be an element: an Int32, within @constraint
  return next;
}

/**
 * An increment's element and amount, checked before anything is read: `at` an element of the series, `by` a value
 * of the element's type.
 * @throws TablegraphError BAD_USER_INPUT naming the field
 */
export function checkIncrement(field: StoredField, increment: unknown): { at: number; by: number } {
  const { at, by } = increment as { at: unknown; by: unknown };
  if (typeof at !== 'number' || !Number.isInteger(at) || at < 0 || at >= field.series!.length) {
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${field.name}: at must be an element 0..${field.series!.length - 1}, got ${JSON.stringify(at)}`, {
      field: field.name,
    });
  }
  const typed = typedValue({ ...field, series: undefined, constraint: undefined }, by);
  if (typed === null) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${field.name}: by is required`, { field: field.name });
  return { at, by: typed.value as number };
}

/** The merge of an INCREMENT of an existing entity: only the elements it changes, and its WriteId. */
function incrementMerge(write: WriteModel, input: Values, values: Values, address: EntityAddress, writeId: string): EntityToWrite {
  const properties: EntityToWrite['properties'] = { [WRITE_ID_PROPERTY]: { type: 'String', value: writeId } };
  for (const [name, field] of write.entity.fields) {
    if (!field.series || input[name] === undefined || input[name] === null) continue;
    const { at } = checkIncrement(field, input[name]);
    // A 0 is written too: a merge leaves a property it does not name as it was.
    properties[field.series.properties[at]] = typedValue({ ...field, series: undefined }, (values[name] as number[])[at]);
  }
  return { partitionKey: address.partitionKey, rowKey: address.rowKey, properties };
}

function describeKeys(write: WriteModel, input: Values): string {
  return write.entity.keyFields.map((k) => `${k}=${JSON.stringify(input[k])}`).join(', ');
}

/** The summaries an entity type's writes keep in their own EGT (the holder in the same partition). */
export function summariesOf(model: Model, write: WriteModel): SummaryModel[] {
  return [...model.summaries.values()].filter((s) => s.of === write.entity && s.scope === 'egt');
}

/** The summaries an entity type contributes to eventually, through the worker (model/contributions.ts). */
export function eventualSummariesOf(model: Model, entity: WriteModel['entity']): SummaryModel[] {
  return [...model.summaries.values()].filter((s) => s.of === entity && s.scope === 'eventual');
}

/**
 * The contribution entities (address and value) an entity's values give its eventual summaries, as one signature;
 * for a summary that finds its holder through a unique index, the index entity's address (`lookup`) stands for the
 * contribution's, which the worker finds by reading it.
 */
function contributions(
  model: Model,
  entity: WriteModel['entity'],
  primary: EntityAddress,
  values: Values | null,
): Array<{ address: EntityAddress; lookup: boolean; signature: string }> {
  return eventualSummariesOf(model, entity).flatMap((s): Array<{ address: EntityAddress; lookup: boolean; signature: string }> => {
    if (s.via.index) {
      const at = values && holderAddress(s, values);
      return at
        ? [{ address: at, lookup: true, signature: `${s.holder.name}.${s.field}\u0000${addressKey(at)}\u0000${decimalText(summaryContribution(s, values))}` }]
        : [];
    }
    const c = contributionOf(s, primary, values);
    return c ? [{ address: c.address, lookup: false, signature: `${addressKey(c.address)}\u0000${decimalText(c.value)}` }] : [];
  });
}

/**
 * Plans one mutation against the state read, as write attempt `attempt.writeId` (of move `attempt.moveId`, if a
 * step of one).
 * @throws TablegraphError from nextValues; BAD_USER_INPUT for invalid values (type, `@constraint`); NOT_FOUND
 *   (reason SummaryHolderMissing) when a summary holder (e.g. the department of a new employee) does not exist,
 *   (reason ReferenceMissing) when a reference the write sets points at nothing (check-references.ts);
 *   CONFLICT (reason HasDependents) when deleting a holder whose counts are not 0, (reason HasReferrers) when deleting an
 *   entity a RESTRICT reference points at — each after `attempt.check` (`@auth`), which may throw FORBIDDEN first
 */
export function planWrite(
  model: Model,
  write: WriteModel,
  input: Values,
  state: ReadState,
  attempt: { writeId: string; moveId?: string; check?(previous: Values | null, next: Values | null): void },
): WritePlan {
  const { writeId, moveId } = attempt;
  const { entity } = write;
  const address = addressOf(write, input);
  const values = nextValues(write, input, state.current, moveId);
  const previous = state.current ? valuesOf(entity, state.current.properties) : null;

  if (write.action === 'DELETE') refuseDeletion(model, { write, input, previous, state }, attempt.check);

  const holderDeltas = summaryDeltas(model, write, previous, values, state);
  const targets = state.references ? new Map([...state.holders, ...state.references]) : state.holders;
  checkReferences(model, write, input, values, targets);
  const refreshCopies = fillCopies(write, input, values, targets);

  const operations: TransactionOperation[] = [];
  const next = values ? entityWrites(entity, values, writeId) : undefined;
  if (next) Object.assign(next.primary.entity.properties, moveMarks(write, state.current, moveId));
  if (write.action === 'CREATE' || (write.action === 'INCREMENT' && !state.current)) operations.push({ kind: 'create', entity: next!.primary.entity });
  else if (write.action === 'INCREMENT')
    operations.push({ kind: 'update', mode: 'merge', entity: incrementMerge(write, input, values!, address, writeId), ifMatch: state.current!.etag });
  else if (next) operations.push({ kind: 'update', mode: 'replace', entity: next.primary.entity, ifMatch: state.current!.etag });
  else if (leavesTombstone(model, entity))
    operations.push({ kind: 'update', mode: 'replace', entity: tombstone(entity, address, writeId), ifMatch: state.current!.etag });
  else operations.push({ kind: 'delete', partitionKey: address.partitionKey, rowKey: address.rowKey, ifMatch: state.current!.etag });
  let wideParts: number[] | undefined;
  if (entity.wide) {
    // The guide's "Wide entities pattern": the one entity planned is written as its parts, in this one EGT.
    const split = partOperations(entity, operations.pop()!, next?.primary.entity, state.current);
    operations.push(...split.operations);
    wideParts = split.parts;
  }

  for (const index of entity.indexes.values()) {
    if (index.scope !== 'intraPartition') continue;
    const after = next?.indexes.filter((w) => w.index === index) ?? [];
    const kept = new Set(after.map((w) => w.entity.rowKey));
    for (const w of after) operations.push({ kind: 'upsertReplace', entity: w.entity });
    for (const before of previous ? indexWrites(index, previous) : []) {
      if (!kept.has(before.entity.rowKey)) operations.push({ kind: 'delete', partitionKey: before.entity.partitionKey, rowKey: before.entity.rowKey });
    }
  }

  const derivedBefore = derive(entity, previous);
  // What entityWrites derived already: the same index entities, not made again.
  const derivedAfter = next ? next.indexes.filter((w) => w.index.scope === 'interPartition') : [];
  const beforeKeys = new Set(derivedBefore.map((w) => addressKey({ table: w.table, ...w.entity })));
  const reservations = derivedAfter.filter((w) => w.index.unique && !beforeKeys.has(addressKey({ table: w.table, ...w.entity })));
  const basedOn = stateId(state.current);
  const copyOperations = sameEgtCopies(model, { entity, address, previous, values }, state);
  const plan: WritePlan = {
    address,
    operations,
    copyOperations,
    holderDeltas,
    values,
    stored: next?.primary.entity ?? null,
    previous,
    writeId,
    basedOn,
    reservations,
    ...(wideParts && { wideParts }),
  };
  const fanout = fanoutOf(model, entity, plan, { derivedBefore, derivedAfter, refreshCopies });
  if (fanout) plan.fanout = fanout;
  derivedOf.set(plan, derivedAfter);
  return plan;
}

/**
 * Whether a delete of `entity` leaves a tombstone (model/tombstones.ts): some reference to it declares `onDelete:
 * CASCADE`, whose entities the worker deletes after it, none to be taken over by an entity created there meanwhile.
 */
export function leavesTombstone(model: Model, entity: WriteModel['entity']): boolean {
  return (model.dependentsOf.get(entity.name) ?? []).some((d) => d.onDelete === 'CASCADE' && !d.join);
}

/**
 * Refuses a delete that would leave entities pointing at nothing: of a summary holder whose counts are not 0 (but
 * those of what goes with it, `onDelete: CASCADE`), or of an entity that an entity of a RESTRICT reference points at
 * (group-read.ts found it: the first such of each reference). `@auth` (`check`) decides first: a refusal tells of
 * other entities (what it counts, what points at it).
 * @throws TablegraphError CONFLICT (reason HasDependents; HasReferrers, `reference` the referring field); FORBIDDEN
 *   from `check`
 */
function refuseDeletion(
  model: Model,
  deletion: { write: WriteModel; input: Values; previous: Values | null; state: ReadState },
  check?: (previous: Values | null, next: Values | null) => void,
): void {
  const { write, input, previous, state } = deletion;
  const { entity } = write;
  if (previous) check?.(previous, null);
  const cascades = new Set((model.dependentsOf.get(entity.name) ?? []).filter((d) => d.onDelete === 'CASCADE').map((d) => d.reference));
  for (const s of model.summaries.values()) {
    // An eventual count may still lag behind: it refuses what it shows, as the holder stores it.
    if (s.holder === entity && s.count && !cascades.has(s.via) && Number(previous?.[s.field] ?? 0) > 0) {
      throw new TablegraphError(ErrorCode.CONFLICT, `${entity.name} ${describeKeys(write, input)} still has ${previous?.[s.field]} ${s.of.name} (${s.field})`, {
        reason: 'HasDependents',
      });
    }
  }
  const found = state.referrers?.get(addressKey(addressOf(write, input)));
  if (!found) return;
  const { dependent, referrer } = found;
  const type = dependent.entity;
  // Its keys only where anyone may read it: the refusal must tell nothing `@auth` would not.
  const keys = type.auth ? '' : ` (${type.keyFields.map((k) => `${k}: ${JSON.stringify(valuesOf(type, referrer.properties)[k])}`).join(', ')})`;
  throw new TablegraphError(
    ErrorCode.CONFLICT,
    `${write.entity.name} ${describeKeys(write, input)} is still pointed at by ${dependent.reference.coordinate}${keys}: delete or re-point those first (the reference is onDelete: RESTRICT)`,
    { reason: 'HasReferrers', reference: dependent.reference.coordinate },
  );
}

/**
 * The fan-out message of a planned write (src/queue/messages.ts), when the worker has anything to do after it: its
 * inter-partition index entities or contributions change, copies are to be checked or brought up to date, join
 * entities point at a deleted entity, or a holder its EGT changes is summed by other summaries. Undefined otherwise.
 * @param derived what the old and the new state derive, and whether the write sets a reference with copies
 */
function fanoutOf(
  model: Model,
  entity: WriteModel['entity'],
  plan: WritePlan,
  derived: { derivedBefore: ReturnType<typeof derive>; derivedAfter: ReturnType<typeof derive>; refreshCopies: boolean },
): WritePlan['fanout'] {
  const { address, previous, values, holderDeltas } = plan;
  // Contributions to summaries held elsewhere are derived too: the worker applies a change of one.
  const contributedBefore = contributions(model, entity, address, previous);
  const contributedAfter = contributions(model, entity, address, values);
  const sameContributions = contributedBefore.map((c) => c.signature).join('\n') === contributedAfter.map((c) => c.signature).join('\n');
  // Copies: this entity's, to check again once it commits (its target may change meanwhile); or copies of this
  // entity's fields held by others, to bring up to date.
  const copiesChange = derived.refreshCopies || copiedFieldsChanged(model, entity, previous, values);
  // A deleted entity that join entities, or references that cascade, may point at: the worker deletes them
  // (src/derived/dependent-upkeep.ts), then its tombstone.
  const joinsChange = values === null && previous !== null && (model.dependentsOf.get(entity.name) ?? []).some((d) => d.onDelete === 'CASCADE');
  // Holders this EGT changes whose values other summaries sum: the worker follows (src/derived/summary-chains.ts).
  const summaryHolders = [...holderDeltas.values()]
    .filter((d) => [...d.deltas].some(([s, delta]) => s.feeds.length > 0 && !delta.isZero()))
    .map((d) => ({ entity: [...d.deltas.keys()][0].holder.name, address: d.address }));
  if (sameDerived(derived.derivedBefore, derived.derivedAfter) && sameContributions && !copiesChange && !joinsChange && summaryHolders.length === 0)
    return undefined;
  const candidates = new Map<string, EntityAddress>();
  for (const w of [...derived.derivedBefore, ...derived.derivedAfter]) {
    const a = addressOfWrite(w);
    candidates.set(addressKey(a), a);
  }
  const lookups = new Map<string, EntityAddress>();
  for (const c of [...contributedBefore, ...contributedAfter]) (c.lookup ? lookups : candidates).set(addressKey(c.address), c.address);
  return {
    kind: 'fanout',
    v: 3,
    entity: entity.name,
    primary: address,
    writeId: plan.writeId,
    basedOn: plan.basedOn,
    deleted: values === null,
    candidates: [...candidates.values()],
    ...(lookups.size > 0 && { holderLookups: [...lookups.values()] }),
    ...(summaryHolders.length > 0 && { summaryHolders }),
  };
}

/**
 * The move marks (types.ts MOVE_ID_PROPERTY, MOVED_IN_PROPERTY) the entity keeps through a write that rewrites it
 * whole: a replace carries them along — an update of an entity whose move is requested is moved with it — and a
 * move's own create of its copy marks the copy. (An INCREMENT merges, and so keeps them anyway.)
 */
function moveMarks(write: WriteModel, current: StoredEntity | null, moveId: string | undefined): EntityToWrite['properties'] {
  const marks: EntityToWrite['properties'] = {};
  if (write.action === 'CREATE') {
    if (moveId) marks[MOVED_IN_PROPERTY] = { type: 'String', value: moveId };
    return marks;
  }
  for (const name of [MOVE_ID_PROPERTY, MOVED_IN_PROPERTY]) {
    const mark = current?.properties[name];
    if (typeof mark === 'string' && mark !== '') marks[name] = { type: 'String', value: mark };
  }
  return marks;
}

/**
 * Checks one write's own operations and derived entities against the target's limits before anything is sent
 * (docs/architecture.md, "The write plan"): its EGT operations as a transaction of their own (operations, bytes, each
 * entity), and every inter-partition index entity it derives, so that a write whose index entities the worker could
 * never store (a key over the target's limit, say) is refused now rather than poisoning the queue later ("Entity Group
 * Transactions", "Inter-partition secondary index pattern").
 * @throws TablegraphError LIMIT_EXCEEDED (a value over 64 KiB, an entity over 1 MiB, a key too long, an EGT too
 *   large) or BAD_USER_INPUT (a key character or property the service refuses), from checkTransaction/checkEntity
 */
export function checkPlan(entity: WriteModel['entity'], plan: WritePlan, target: StorageTarget): void {
  checkTransaction(plan.operations, target);
  for (const w of derivedOf.get(plan) ?? derive(entity, plan.values)) checkEntity(w.entity, target);
  checkFanoutSize(entity, plan);
}

/** Room left in a queue message for what entityMessage adds to a fan-out (its id, time and trace context), bytes. */
const MESSAGE_ENVELOPE_BYTES = 512;

/**
 * A write's fan-out message names every index entity its old and new states derive: over a list
 * (IndexModel.element), one per element. Refused before anything is written when that message cannot be queued (64 KiB).
 * @throws TablegraphError LIMIT_EXCEEDED naming the indexed list fields, their limit in bytes
 */
function checkFanoutSize(entity: WriteModel['entity'], plan: WritePlan): void {
  if (!plan.fanout) return;
  const bytes = Buffer.byteLength(JSON.stringify(plan.fanout)) + MESSAGE_ENVELOPE_BYTES;
  if (bytes <= MAX_MESSAGE_BYTES) return;
  const lists = [...new Set([...entity.indexes.values()].flatMap((i) => (i.element ? [i.element] : [])))];
  const field = lists.join(', ') || undefined;
  throw new TablegraphError(
    ErrorCode.LIMIT_EXCEEDED,
    `${entity.name}: the write derives ${plan.fanout.candidates.length} index entities (old and new), ${bytes} bytes to hand to the worker where a queue message holds ${MAX_MESSAGE_BYTES}${field ? `: fewer elements in ${field}` : ''}`,
    { ...(field && { field }), limit: MAX_MESSAGE_BYTES, bytes },
  );
}

/** The inter-partition index entities each plan's new state derives (planWrite), for checkPlan. */
const derivedOf = new WeakMap<WritePlan, TableWrite[]>();

/**
 * What the write changes in each summary holder: the new contribution minus the old, per summary, exactly.
 * @throws TablegraphError NOT_FOUND (reason SummaryHolderMissing) when a holder it changes does not exist
 */
function summaryDeltas(model: Model, write: WriteModel, previous: Values | null, values: Values | null, state: ReadState): Map<string, HolderDelta> {
  const byHolder = new Map<string, HolderDelta>();
  for (const s of summariesOf(model, write)) {
    for (const [vals, sign] of [
      [previous, -1],
      [values, 1],
    ] as const) {
      if (!vals) continue;
      const address = holderAddress(s, vals);
      if (!address) continue; // an optional reference that is null: this state counts towards no holder
      const key = addressKey(address);
      let entry = byHolder.get(key);
      if (!entry) byHolder.set(key, (entry = { address, deltas: new Map() }));
      const contribution = summaryContribution(s, vals).times(sign);
      const sum = entry.deltas.get(s);
      entry.deltas.set(s, sum ? sum.plus(contribution) : contribution);
    }
  }
  for (const [key, entry] of byHolder) {
    if ([...entry.deltas.values()].every((d) => d.isZero())) {
      byHolder.delete(key);
      continue;
    }
    const [summary] = entry.deltas.keys();
    const holder = state.holders.get(key);
    if (!holder || holder.properties[ENTITY_TYPE_PROPERTY] !== summary.holder.entityType) {
      // A delete takes its part out of holders that are there; one gone (deleted with what pointed at it) needs none.
      if (values === null) {
        byHolder.delete(key);
        continue;
      }
      const [s] = entry.deltas.keys();
      throw new TablegraphError(
        ErrorCode.NOT_FOUND,
        `${s.holder.name} ${entry.address.partitionKey} does not exist: create it before its ${s.of.name} entities`,
        {
          reason: 'SummaryHolderMissing',
          field: s.via.fieldName,
        },
      );
    }
  }
  return byHolder;
}

function sameDerived(a: TableWrite[], b: TableWrite[]): boolean {
  if (a.length !== b.length) return false;
  const signature = (w: TableWrite) =>
    JSON.stringify([w.table, w.entity.partitionKey, w.entity.rowKey, w.entity.properties], (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
  const left = new Set(a.map(signature));
  return b.every((w) => left.has(signature(w)));
}
