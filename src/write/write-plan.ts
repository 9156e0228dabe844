/**
 * The write planner (DESIGN.md §4): a mutation and the state it read become a write plan. Same-partition
 * effects — the entity, its intra-partition index entities, the summary values it contributes to — form one
 * entity-group transaction; cross-partition effects — inter-partition index entities — become a fan-out message
 * and, for unique indexes, reservations made before the EGT. Pure: no I/O, so every plan can be tested.
 *
 * Guide sections: "Entity Group Transactions", "Intra-partition secondary index pattern", "Inter-partition
 * secondary index pattern", "Eventually consistent transactions pattern", "Merge or replace".
 */
import { ErrorCode, TablegraphError } from '../errors';
import { derive, entityWrites, indexWrite, primaryAddress, typedValue, valuesOf, type TableWrite } from '../model/entity-codec';
import { renderKey } from '../model/key-template';
import { summaryContribution } from '../model/summaries';
import { VERSION_PROPERTY, type Model, type SummaryModel, type WriteModel } from '../model/types';
import { checkEntity, checkTransaction } from '../storage/limits';
import type { EntityAddress, StorageTarget, StoredEntity, TransactionOperation } from '../storage/types';
import { addressKey, type FanoutMessage } from './fanout-message';

/** Field values of an entity (field name → value). */
export type Values = Record<string, unknown>;

/** What the planner needs that the executor read: the entity and its summary holders, with their ETags. */
export interface ReadState {
  current: StoredEntity | null;
  /** Holder entities by addressKey (null: the holder does not exist). */
  holders: Map<string, StoredEntity | null>;
}

export interface WritePlan {
  table: string;
  partitionKey: string;
  /** The EGT: the entity first, then its intra-partition index entities, then summary holders. */
  operations: TransactionOperation[];
  /** The entity's values after the write (null after a delete). */
  values: Values | null;
  /** The entity's values before the write (null before a create). */
  previous: Values | null;
  version: number;
  /** Unique inter-partition index entities to reserve with a conditional insert before the EGT. */
  reservations: ReturnType<typeof derive>;
  /** The fan-out message (without id and enqueuedAt), when what the entity derives changes. */
  fanout?: Omit<FanoutMessage, 'id' | 'enqueuedAt'>;
}

/** The address of the entity a mutation input names (its key fields). */
export function addressOf(write: WriteModel, input: Values): EntityAddress {
  return primaryAddress(write.entity, input);
}

/**
 * The entity's values after the write, from the input and the current values ("Merge or replace").
 * @throws TablegraphError CONFLICT when creating an existing entity; NOT_FOUND when changing a missing one;
 *   CONFLICT (reason ETagMismatch) when `input.ifMatch` is not the current ETag
 */
export function nextValues(write: WriteModel, input: Values, current: StoredEntity | null): Values | null {
  const { entity, action } = write;
  if (action === 'CREATE') {
    if (current) throw new TablegraphError(ErrorCode.CONFLICT, `${entity.name} ${describeKeys(write, input)} already exists`, { reason: 'EntityAlreadyExists' });
  } else {
    if (!current) throw new TablegraphError(ErrorCode.NOT_FOUND, `${entity.name} ${describeKeys(write, input)} does not exist`);
    const ifMatch = input.ifMatch;
    if (typeof ifMatch === 'string' && ifMatch !== current.etag) {
      throw new TablegraphError(ErrorCode.CONFLICT, `${entity.name} ${describeKeys(write, input)} changed since it was read (stale ifMatch ETag)`, {
        reason: 'ETagMismatch',
        currentEtag: current.etag,
      });
    }
  }
  if (action === 'DELETE') return null;
  const old = current ? valuesOf(entity, current.properties) : null;
  const next: Values = {};
  for (const name of entity.fields.keys()) {
    // Key fields keep their stored spelling: `id: "012"` addresses the entity stored as "12" (same padded RowKey).
    if (old && entity.keyFields.includes(name)) next[name] = old[name];
    else if (entity.summaryFields.has(name)) next[name] = old ? old[name] : 0;
    else if (action === 'UPDATE' && input[name] === undefined) next[name] = old![name];
    else next[name] = input[name] ?? null;
  }
  return next;
}

function describeKeys(write: WriteModel, input: Values): string {
  return write.entity.keyFields.map((k) => `${k}=${JSON.stringify(input[k])}`).join(', ');
}

/** The summaries an entity type contributes to. */
export function summariesOf(model: Model, write: WriteModel): SummaryModel[] {
  return [...model.summaries.values()].filter((s) => s.of === write.entity);
}

/** The holder an entity with `values` contributes to (the `via` point path rendered from its values). */
export function holderAddress(summary: SummaryModel, values: Values): EntityAddress {
  return {
    table: summary.via.table,
    partitionKey: renderKey(summary.via.partitionKey.template, bindingValues(summary, values, 'partitionKey')),
    rowKey: renderKey(summary.via.rowKey.template, bindingValues(summary, values, 'rowKey')),
  };
}

function bindingValues(summary: SummaryModel, values: Values, which: 'partitionKey' | 'rowKey'): Values {
  const out: Values = {};
  for (const [placeholder, b] of summary.via[which].bindings) out[placeholder] = values[b.name];
  return out;
}

/** Rounds away binary noise from sums of money (6 decimal places). */
function roundSum(n: number): number {
  return Math.round(n * 1e6) / 1e6;
}

/**
 * Plans one mutation against the state read.
 * @throws TablegraphError from nextValues; BAD_USER_INPUT for invalid values; NOT_FOUND when a summary holder
 *   (e.g. the department of a new employee) does not exist; CONFLICT when deleting a holder whose counts are not 0
 */
export function planWrite(model: Model, write: WriteModel, input: Values, state: ReadState): WritePlan {
  const { entity } = write;
  const address = addressOf(write, input);
  const values = nextValues(write, input, state.current);
  const previous = state.current ? valuesOf(entity, state.current.properties) : null;
  const version = Number(state.current?.properties[VERSION_PROPERTY] ?? 0) + 1;

  if (write.action === 'DELETE') {
    for (const s of model.summaries.values()) {
      if (s.holder === entity && s.count && Number(previous?.[s.field] ?? 0) > 0) {
        throw new TablegraphError(ErrorCode.CONFLICT, `${entity.name} ${describeKeys(write, input)} still has ${previous?.[s.field]} ${s.of.name} (${s.field})`, {
          reason: 'HasDependents',
        });
      }
    }
  }

  const operations: TransactionOperation[] = [];
  const next = values ? entityWrites(entity, values, version) : undefined;
  if (write.action === 'CREATE') operations.push({ kind: 'create', entity: next!.primary.entity });
  else if (next) operations.push({ kind: 'update', mode: 'replace', entity: next.primary.entity, ifMatch: state.current!.etag });
  else operations.push({ kind: 'delete', partitionKey: address.partitionKey, rowKey: address.rowKey, ifMatch: state.current!.etag });

  for (const index of entity.indexes.values()) {
    if (index.scope !== 'intraPartition') continue;
    const before = previous && indexWrite(index, previous);
    const after = values && indexWrite(index, values);
    if (after) operations.push({ kind: 'upsertReplace', entity: after.entity });
    if (before && (!after || before.entity.rowKey !== after.entity.rowKey)) {
      operations.push({ kind: 'delete', partitionKey: before.entity.partitionKey, rowKey: before.entity.rowKey });
    }
  }

  operations.push(...summaryOperations(model, write, previous, values, state));

  const derivedBefore = derive(entity, previous);
  const derivedAfter = derive(entity, values);
  const beforeKeys = new Set(derivedBefore.map((w) => addressKey({ table: w.table, ...w.entity })));
  const reservations = derivedAfter.filter((w) => w.index.unique && !beforeKeys.has(addressKey({ table: w.table, ...w.entity })));
  const plan: WritePlan = { table: address.table, partitionKey: address.partitionKey, operations, values, previous, version, reservations };
  if (!sameDerived(derivedBefore, derivedAfter)) {
    const candidates = new Map<string, EntityAddress>();
    for (const w of [...derivedBefore, ...derivedAfter]) {
      const a = { table: w.table, partitionKey: w.entity.partitionKey, rowKey: w.entity.rowKey };
      candidates.set(addressKey(a), a);
    }
    plan.fanout = { v: 1, entity: entity.name, primary: address, version, deleted: values === null, candidates: [...candidates.values()] };
  }
  return plan;
}

/**
 * Checks a plan against the target's limits before anything is sent — the fan-out message, the reservations,
 * the EGT (DESIGN.md §4.1: "the plan checks those limits before sending"): the EGT as a whole (operations,
 * bytes, each entity), and every inter-partition index entity the write derives, so that a write whose index
 * entities the worker could never store (a key over the target's limit, say) is refused now rather than
 * poisoning the queue later ("Entity Group Transactions", "Inter-partition secondary index pattern").
 * @throws TablegraphError LIMIT_EXCEEDED (a value over 64 KiB, an entity over 1 MiB, a key too long, an EGT too
 *   large) or BAD_USER_INPUT (a key character or property the service refuses), from checkTransaction/checkEntity
 */
export function checkPlan(entity: WriteModel['entity'], plan: WritePlan, target: StorageTarget): void {
  checkTransaction(plan.operations, target);
  for (const w of derive(entity, plan.values)) checkEntity(w.entity, target);
}

/** One merge per summary holder, with If-Match on the holder's ETag; deltas of old and new contributions. */
function summaryOperations(model: Model, write: WriteModel, previous: Values | null, values: Values | null, state: ReadState): TransactionOperation[] {
  const byHolder = new Map<string, { address: EntityAddress; holder: StoredEntity | null; fields: Map<SummaryModel, number> }>();
  for (const s of summariesOf(model, write)) {
    for (const [vals, sign] of [[previous, -1], [values, 1]] as const) {
      if (!vals) continue;
      const address = holderAddress(s, vals);
      const key = addressKey(address);
      let entry = byHolder.get(key);
      if (!entry) byHolder.set(key, (entry = { address, holder: state.holders.get(key) ?? null, fields: new Map() }));
      entry.fields.set(s, (entry.fields.get(s) ?? 0) + sign * summaryContribution(s, vals));
    }
  }
  const operations: TransactionOperation[] = [];
  for (const { address, holder, fields } of byHolder.values()) {
    if ([...fields.values()].every((d) => d === 0)) continue;
    if (!holder) {
      const [s] = fields.keys();
      throw new TablegraphError(ErrorCode.NOT_FOUND, `${s.holder.name} ${address.partitionKey} does not exist: create it before its ${s.of.name} entities`, {
        reason: 'SummaryHolderMissing',
      });
    }
    const properties: Record<string, ReturnType<typeof typedValue>> = {};
    for (const [s, delta] of fields) {
      const stored = s.holder.fields.get(s.field)!;
      properties[s.field] = typedValue(stored, roundSum(Number(holder.properties[s.field] ?? 0) + delta));
    }
    operations.push({ kind: 'update', mode: 'merge', ifMatch: holder.etag, entity: { partitionKey: address.partitionKey, rowKey: address.rowKey, properties } });
  }
  return operations;
}

function sameDerived(a: TableWrite[], b: TableWrite[]): boolean {
  if (a.length !== b.length) return false;
  const signature = (w: TableWrite) =>
    JSON.stringify([w.table, w.entity.partitionKey, w.entity.rowKey, w.entity.properties], (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
  const left = new Set(a.map(signature));
  return b.every((w) => left.has(signature(w)));
}
