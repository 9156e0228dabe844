/**
 * A transaction's plan (docs/reads-and-writes.md, "Transactions"): the writes of one `@transaction` call as one EGT,
 * all or nothing. Each item is planned (write-plan.ts) on the state read, as the items before it leave it: an entity
 * an earlier item creates is there for a later item's summary or reference (an order, then its lines). Summary
 * deltas for a holder the transaction itself writes go into that write's own operation (one operation per entity in an
 * EGT); the other holders get one merge each, conditional on the ETag read. Pure: no I/O.
 */
import { ErrorCode, isTablegraphError, TablegraphError } from '../errors';
import { decimalText } from '../model/decimal';
import { typedValue } from '../model/entity-codec';
import { summaryValue } from '../model/summaries';
import { ENTITY_TYPE_PROPERTY, type WriteModel, type Model } from '../model/types';
import { checkTransaction } from '../storage/limits';
import { addressKey } from '../storage/address-key';
import type { EntityToWrite, StoredEntity, TransactionOperation } from '../storage/storage-types';
import { changeOperations, holderOperations, mergeDeltas, type GroupState, type GroupTarget, type OperationOwner } from './group-plan';
import type { HolderDelta, Values, WritePlan } from './plan-types';
import { addressOf, checkPlan, planWrite } from './write-plan';

/** One item of a transaction: a write, its input (the partition's keys set), and its `@auth` check. */
export interface TransactionItem {
  write: WriteModel;
  input: Values;
  check?(previous: Values | null, next: Values | null): void;
}

/** The EGT of a transaction: its operations, who each belongs to, and each item's plan. */
export interface TransactionPlan {
  plans: WritePlan[];
  operations: TransactionOperation[];
  /** For each operation: the item (`write`: its index) or the summary holder it belongs to. */
  owners: OperationOwner[];
}

/**
 * An error of item `index`, as the client gets it: the item's own code and reason, `extensions.itemIndex` naming it.
 */
export function itemError(index: number, e: TablegraphError): TablegraphError {
  return new TablegraphError(e.code, `writes[${index}]: ${e.message}`, { ...e.details, itemIndex: index }, { cause: e });
}

/**
 * @param state what was read for the items (group-read.ts readGroupState); not changed
 * @param writeIds the attempt's write id of each item
 * @throws TablegraphError of the first item that cannot be written, with `itemIndex` (itemError): the planner's
 *   (CONFLICT for a stale `ifMatch` or an entity that exists, NOT_FOUND, BAD_USER_INPUT, FORBIDDEN from its check;
 *   BAD_USER_INPUT for a unique value an earlier item gives too); LIMIT_EXCEEDED when the whole does not fit one EGT
 *   of `where.target`
 */
export function planTransaction(model: Model, items: TransactionItem[], state: GroupState, where: GroupTarget & { writeIds: string[] }): TransactionPlan {
  // The state each item is planned on: what was read, with what the items before it write.
  const holders = new Map(state.holders);
  const references = new Map(state.references);
  const entities = new Map(state.entities);
  const plans = items.map((item, i) => {
    const key = addressKey(addressOf(item.write, item.input));
    let plan: WritePlan;
    try {
      plan = planWrite(
        model,
        item.write,
        item.input,
        { ...state, holders, references, current: entities.get(key) ?? null },
        { writeId: where.writeIds[i], check: item.check },
      );
      checkPlan(item.write.entity, plan, where.target);
    } catch (e) {
      throw isTablegraphError(e) ? itemError(i, e) : e;
    }
    const written = plan.stored ? asStored(plan.stored, item.write.entity.entityType) : null;
    for (const m of [holders, references, entities]) m.set(key, written);
    return plan;
  });
  checkDistinctKeys(plans);
  const deltas = new Map<string, HolderDelta>();
  for (const plan of plans) mergeDeltas(deltas, plan.holderDeltas);
  foldOwnHolders(items, plans, deltas);
  const operations: TransactionOperation[] = [];
  const owners: OperationOwner[] = [];
  plans.forEach((plan, i) => {
    const own = [...plan.operations, ...changeOperations(items[i].write.entity, plan, where), ...plan.copyOperations];
    operations.push(...own);
    owners.push(...own.map(() => ({ write: i })));
  });
  const merges = holderOperations(deltas, state);
  operations.push(...merges.operations);
  owners.push(...merges.owners);
  checkTransaction(operations, where.target);
  return { plans, operations, owners };
}

/** An entity as a write leaves it, as a later item of the same transaction reads it (raw values, its EntityType). */
function asStored(entity: EntityToWrite, entityType: string): StoredEntity {
  const properties: Record<string, unknown> = { [ENTITY_TYPE_PROPERTY]: entityType };
  for (const [k, v] of Object.entries(entity.properties)) properties[k] = v?.value ?? null;
  return { partitionKey: entity.partitionKey, rowKey: entity.rowKey, etag: '', properties };
}

/**
 * Moves the deltas of each holder an item itself writes into that item's operation, its values and its image: an EGT
 * has one operation per entity. The item's write is conditional (an insert, or a replace on the ETag read), so the
 * sums it writes cannot overwrite a concurrent change. `deltas` keeps only the holders no item writes.
 * @throws TablegraphError CONFLICT (reason HasDependents, itemIndex) when the item deletes the holder others add to
 */
function foldOwnHolders(items: TransactionItem[], plans: WritePlan[], deltas: Map<string, HolderDelta>): void {
  for (const [key, holder] of [...deltas]) {
    const i = plans.findIndex((p) => addressKey(p.address) === key);
    if (i < 0) continue;
    deltas.delete(key);
    const plan = plans[i];
    const op = plan.operations[0];
    if (!plan.values || op.kind === 'delete') {
      const e = new TablegraphError(ErrorCode.CONFLICT, `${items[i].write.entity.name} is deleted while other writes of the transaction add to its summaries`, {
        reason: 'HasDependents',
      });
      throw itemError(i, e);
    }
    for (const [s, delta] of holder.deltas) {
      const field = s.holder.fields.get(s.field)!;
      const value = summaryValue(plan.values[s.field]).plus(delta);
      const typed = typedValue(field, field.graphqlType === 'Int' ? value.toNumber() : decimalText(value));
      plan.values[s.field] = typed?.value ?? null;
      op.entity.properties[s.field] = typed;
      if (plan.stored && plan.stored !== op.entity) plan.stored.properties[s.field] = typed;
    }
  }
}

/**
 * Refuses two items that give one unique value (a unique index holds one entity per value): a client's own input.
 * @throws TablegraphError BAD_USER_INPUT with the later item's `itemIndex` and the `index`
 */
function checkDistinctKeys(plans: WritePlan[]): void {
  const first = new Map<string, number>();
  plans.forEach((plan, i) => {
    for (const r of plan.reservations) {
      const key = addressKey({ table: r.table, ...r.entity });
      const j = first.get(key);
      if (j === undefined) {
        first.set(key, i);
        continue;
      }
      const e = new TablegraphError(
        ErrorCode.BAD_USER_INPUT,
        `gives the value of unique index ${r.index.name} that writes[${j}] gives: it holds one entity per value`,
        {
          index: r.index.name,
        },
      );
      throw itemError(i, e);
    }
  });
}
