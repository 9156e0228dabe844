/**
 * Group commit, the planning half (docs/architecture.md, "Group commit"): writes of one partition that arrive together
 * become one entity-group transaction. Each write is planned against the state read for the group (write-plan.ts);
 * their operations are concatenated in arrival order, and every summary holder gets one merge with the sum of all the
 * group's deltas, conditional on the ETag read — so concurrent writers of one department no longer fail on each other's
 * summary updates ("Entity Group Transactions": at most 100 operations, 4 MiB, one operation per entity). Pure: no I/O.
 */
import { ErrorCode, isTablegraphError, TablegraphError } from '../errors';
import { decimalText, type Decimal } from '../model/decimal';
import { typedValue } from '../model/entity-codec';
import { summaryValue } from '../model/summaries';
import type { EntityModel, Model, SummaryModel, WriteModel } from '../model/types';
import { changeEntity, nextChangeTime } from '../model/change-log';
import { randomUUID } from 'node:crypto';
import { checkTransaction, limitsFor, operationBytes } from '../storage/limits';
import type { EntityAddress, EntityToWrite, StorageTarget, StoredEntity, TransactionOperation } from '../storage/storage-types';
import { storedRows } from '../model/entity-rows';
import { addressKey } from '../storage/address-key';
import { addressOf, checkPlan, planWrite } from './write-plan';
import type { HolderDelta, Referrer, Values, WritePlan } from './plan-types';

/** One write waiting to be committed: what it writes, and the id of its current attempt. */
export interface GroupMember {
  write: WriteModel;
  input: Values;
  /** A fresh UUID per attempt (src/queue/messages.ts: never reused). */
  writeId: string;
  /**
   * Decides, on the entity as read and as it would be written, whether the caller may make this write (`@auth`).
   * @throws TablegraphError FORBIDDEN: the write is refused alone, nothing of it sent
   */
  check?(previous: Values | null, next: Values | null): void;
  /**
   * A move's create (worker/carry-out-move.ts): the unique keys the entity holds at this, its old address, are taken over
   * rather than refused as taken.
   */
  takeOverFrom?: EntityAddress;
  /** The move (worker/carry-out-move.ts) this write is a step of: its id, which marks its copy (write-plan.ts moveMarks). */
  moveId?: string;
}

/** What was read for the group: entities and summary holders by addressKey (null: absent). */
export interface GroupState {
  entities: Map<string, StoredEntity | null>;
  holders: Map<string, StoredEntity | null>;
  /** What is stored where the writes' references point (check-references.ts), read fresh for every group. */
  references: Map<string, StoredEntity | null>;
  /**
   * The entities holding copies (`@copy`) of a written entity in its own partition, by `copyListKey`: their copies
   * change in the same EGT. Absent: none such, or too many for one EGT (the worker brings them up to date).
   */
  copyHolders?: Map<string, EntityAddress[]>;
  /** For deletes: an entity that a RESTRICT reference points at each from (write-plan.ts refuses it), by addressKey. */
  referrers?: Map<string, Referrer>;
}

/** The owner of an EGT operation: the index of a planned write in `planned`, or a summary holder. */
export type OperationOwner = { write: number } | { holder: string };

export interface GroupPlan<M extends GroupMember> {
  /** Writes in the EGT, in arrival order, with their plans. */
  planned: Array<{ member: M; plan: WritePlan }>;
  /** Writes refused while planning (each alone): stale ifMatch, missing entity, limits, invalid values… */
  refused: Array<{ member: M; error: TablegraphError }>;
  /** Writes left for the next EGT: the first write that could not join (an entity already in this EGT, or
   *  the limits reached) and every write after it, so that writes of one partition keep their arrival order. */
  deferred: M[];
  /** The EGT: every planned write's operations, then one merge per summary holder. */
  operations: TransactionOperation[];
  /** For each operation, who it belongs to (to blame the one write that made an EGT fail). */
  owners: OperationOwner[];
  /** Summary holders the EGT merges into, with the values it writes (field → value as stored). */
  holders: Array<{ key: string; address: EntityAddress; fields: Record<string, unknown> }>;
}

/** Where a group's EGT goes, and whether it captures images for continuous backup. */
export interface GroupTarget {
  /** The storage's limits. */
  target: StorageTarget;
  table: string;
  /**
   * Present when continuous backup captures writes (src/backup/): every write then adds its change entity, with the
   * entity's image sealed by this function as the table stores it (TableStore.sealed).
   */
  seal?(entity: EntityToWrite): EntityToWrite;
}

function operationKey(table: string, op: TransactionOperation): string {
  return op.kind === 'delete' ? addressKey({ table, partitionKey: op.partitionKey, rowKey: op.rowKey }) : addressKey({ table, ...op.entity });
}

/**
 * Plans `members` (all of one table and partition, in arrival order) as one EGT. A write whose planning throws a
 * TablegraphError is refused alone; a write that would put a second operation on an entity already in the EGT —
 * its own entity written twice, a holder it is also the entity of, a unique key another write reserves — or push
 * the EGT over the target's limits closes the group: it and the writes after it are deferred.
 * @throws what planWrite throws that is not a TablegraphError (a bug)
 */
export function planGroup<M extends GroupMember>(model: Model, members: M[], state: GroupState, where: GroupTarget): GroupPlan<M> {
  const { target, table } = where;
  const planned: GroupPlan<M>['planned'] = [];
  const refused: GroupPlan<M>['refused'] = [];
  const touched = new Set<string>(); // addresses of entity operations in the EGT
  const reserved = new Set<string>();
  const deltas = new Map<string, HolderDelta>();
  const operations: TransactionOperation[] = [];
  const owners: OperationOwner[] = [];
  const limits = limitsFor(target);
  let bytes = 0; // of `operations` (operationBytes)
  const changeSizes = new Map<string, number>();
  for (let i = 0; i < members.length; i++) {
    const member = members[i];
    let plan: WritePlan;
    let address: string;
    let ownChanges: TransactionOperation[];
    try {
      address = addressKey(addressOf(member.write, member.input));
      plan = planWrite(model, member.write, member.input, { ...state, current: state.entities.get(address) ?? null }, member);
      checkPlan(member.write.entity, plan, target);
      member.check?.(plan.previous, plan.values);
      // Its holders' merges checked without their change entities, which the store checks with the whole EGT.
      checkTransaction(
        [...plan.operations, ...plan.copyOperations, ...holderOperations(mergeDeltas(new Map(), plan.holderDeltas), state, false).operations],
        target,
      );
      ownChanges = changeOperations(member.write.entity, plan, where, member.takeOverFrom);
    } catch (e) {
      if (!isTablegraphError(e)) throw e;
      refused.push({ member, error: e });
      continue;
    }
    // The entity's own address too: writes of one wide entity touching different parts still wait for each other,
    // each planned on what the one before it wrote (its payload and ETag).
    const keys = [address, ...[...plan.operations, ...plan.copyOperations].map((op) => operationKey(table, op))];
    const reservations = plan.reservations.map((r) => addressKey({ table: r.table, ...r.entity }));
    const collides =
      keys.some((k) => touched.has(k) || deltas.has(k)) ||
      [...plan.holderDeltas.keys()].some((k) => touched.has(k)) ||
      reservations.some((k) => reserved.has(k));
    // Each write's own operations passed checkTransaction above; the group adds only count and bytes.
    const nextDeltas = mergeDeltas(new Map(deltas), plan.holderDeltas);
    const holdersCost = holderCost(nextDeltas, state, changeSizes);
    const ownBytes = [...plan.operations, ...plan.copyOperations, ...ownChanges].reduce((n, op) => n + operationBytes(op), 0);
    const count = operations.length + plan.operations.length + plan.copyOperations.length + ownChanges.length + holdersCost.operations;
    const size = bytes + ownBytes + holdersCost.bytes;
    const over = count > limits.maxTransactionOperations || size > limits.maxTransactionBytes;
    if (over && planned.length === 0 && !collides) {
      // Alone it does not fit one EGT: only its change entity's image can make it so (its own operations were checked).
      refused.push({ member, error: imageTooLarge(size, limits.maxTransactionBytes) });
      continue;
    }
    if (collides || over) return finish(members.slice(i));
    planned.push({ member, plan });
    keys.forEach((k) => touched.add(k));
    reservations.forEach((k) => reserved.add(k));
    deltas.clear();
    nextDeltas.forEach((v, k) => deltas.set(k, v));
    operations.push(...plan.operations, ...ownChanges, ...plan.copyOperations);
    owners.push(...[...plan.operations, ...ownChanges].map(() => ({ write: planned.length - 1 })));
    // A copy that fails (its entity deleted meanwhile by another process) is no fault of the write: like a holder
    // that changed, it makes the group read again and retry.
    owners.push(...plan.copyOperations.map((op) => ({ holder: `copy:${operationKey(table, op)}` })));
    bytes += ownBytes;
  }
  return finish([]);

  function finish(deferred: M[]): GroupPlan<M> {
    const h = holderOperations(deltas, state);
    return {
      planned,
      refused,
      deferred,
      operations: [...operations, ...h.operations],
      owners: [...owners, ...h.owners],
      holders: h.holders,
    };
  }
}

/** A write that fits one EGT without its change entity's image, and not with it (bytes: the EGT's with it). */
function imageTooLarge(bytes: number, max: number): TablegraphError {
  return new TablegraphError(
    ErrorCode.LIMIT_EXCEEDED,
    `The write with its change entity (continuous backup keeps the entity's image) is about ${bytes} bytes; one EGT holds at most ${max}.`,
    { reason: 'ChangeImageTooLarge', bytes },
  );
}

/** `into` plus `add`, holder by holder and summary by summary. */
export function mergeDeltas(into: Map<string, HolderDelta>, add: Map<string, HolderDelta>): Map<string, HolderDelta> {
  for (const [key, d] of add) {
    const entry = into.get(key) ?? { address: d.address, deltas: new Map<SummaryModel, Decimal>() };
    const merged = new Map(entry.deltas);
    for (const [s, v] of d.deltas) merged.set(s, merged.has(s) ? merged.get(s)!.plus(v) : v);
    into.set(key, { address: entry.address, deltas: merged });
  }
  return into;
}

/**
 * One merge per holder whose summed deltas are not all 0: the stored value plus the delta, exactly, with
 * If-Match on the holder's ETag as read (a concurrent writer in another process makes the EGT fail with 412).
 */
/**
 * The change entity of a planned write of `entity`, when a subscription follows the type or continuous backup
 * captures writes (with the entity's image, sealed); none otherwise.
 * @throws TablegraphError LIMIT_EXCEEDED (reason ChangeImageTooLarge) from imageProperties
 */
export function changeOperations(entity: EntityModel, plan: WritePlan, where: GroupTarget, movedFrom?: EntityAddress): TransactionOperation[] {
  if (!entity.changeLogged && !where.seal) return [];
  const kind = plan.previous === null ? 'CREATED' : plan.values === null ? 'DELETED' : 'UPDATED';
  // A delete keeps what `@auth` scopes decide on: the entity will not be there to read.
  const scope: Record<string, string> = {};
  if (kind === 'DELETED') {
    for (const f of entity.authFields) {
      const v = plan.previous?.[f];
      if (v !== null && v !== undefined && !entity.fields.get(f)?.encrypted) scope[f] = String(v);
    }
  }
  const { seal } = where;
  const image = seal && plan.stored ? storedRows(entity, plan.stored, plan.address.table).map((row) => seal(row)) : undefined;
  const change = { entityType: entity.entityType, kind, writeId: plan.writeId, at: nextChangeTime(), scope, image, movedFrom } as const;
  return [{ kind: 'create', entity: changeEntity(plan.address, change) }];
}

/**
 * The operations and bytes (operationBytes) the holders' merges for `deltas` add to an EGT — only counted and
 * measured: the merges without their change entities, each of which is measured once per group and holder
 * (`changeSizes`), its size not depending on the writes.
 */
function holderCost(deltas: Map<string, HolderDelta>, state: GroupState, changeSizes: Map<string, number>): { operations: number; bytes: number } {
  const merges = holderOperations(deltas, state, false);
  let bytes = merges.operations.reduce((n, op) => n + operationBytes(op), 0);
  let operations = merges.operations.length;
  for (const { key } of merges.holders) {
    const delta = deltas.get(key)!;
    if (!changeLoggedHolder(delta)) continue;
    let n = changeSizes.get(key);
    if (n === undefined) changeSizes.set(key, (n = operationBytes(holderChange(delta))));
    operations += 1;
    bytes += n;
  }
  return { operations, bytes };
}

/** Whether a holder's type is followed by a subscription: its merge then has a change entity beside it. */
function changeLoggedHolder(delta: HolderDelta): boolean {
  return [...delta.deltas.keys()][0].holder.changeLogged === true;
}

/** The change entity of a holder's merge (model/change-log.ts): an UPDATED change, never blamed on a write. */
function holderChange({ address, deltas }: HolderDelta): TransactionOperation {
  const type = [...deltas.keys()][0].holder;
  return { kind: 'create', entity: changeEntity(address, { entityType: type.entityType, kind: 'UPDATED', writeId: randomUUID(), at: nextChangeTime() }) };
}

/**
 * @param withChanges false: the merges alone, without the change entities of holders a subscription follows
 */
export function holderOperations(
  deltas: Map<string, HolderDelta>,
  state: GroupState,
  withChanges = true,
): { operations: TransactionOperation[]; owners: OperationOwner[]; holders: GroupPlan<GroupMember>['holders'] } {
  const operations: TransactionOperation[] = [];
  const owners: OperationOwner[] = [];
  const holders: GroupPlan<GroupMember>['holders'] = [];
  for (const [key, { address, deltas: fields }] of deltas) {
    if ([...fields.values()].every((d) => d.isZero())) continue;
    const holder = state.holders.get(key)!; // planWrite refused any write whose holder is missing
    const properties: Record<string, ReturnType<typeof typedValue>> = {};
    const written: Record<string, unknown> = {};
    for (const [s, delta] of fields) {
      if (delta.isZero()) continue; // merge only what changes
      const stored = s.holder.fields.get(s.field)!;
      const value = summaryValue(holder.properties[s.field]).plus(delta);
      const typed = typedValue(stored, stored.graphqlType === 'Int' ? value.toNumber() : decimalText(value));
      properties[s.field] = typed;
      written[s.field] = typed?.value;
    }
    operations.push({
      kind: 'update',
      mode: 'merge',
      ifMatch: holder.etag,
      entity: { partitionKey: address.partitionKey, rowKey: address.rowKey, properties },
    });
    holders.push({ key, address, fields: written });
    owners.push({ holder: key });
    // A holder a subscription follows changes too: its change entity, in the same EGT (never blamed on a write).
    if (withChanges && changeLoggedHolder({ address, deltas: fields })) {
      operations.push(holderChange({ address, deltas: fields }));
      owners.push({ holder: key });
    }
  }
  return { operations, owners, holders };
}
