/**
 * The worker's side of summaries held in another partition (src/model/contributions.ts): brings an entity's
 * contribution entities — and with each, its holder's value — in line with the entity as it is now. For every
 * contribution entity the entity has or had, one EGT in the holder's partition writes the contribution it should
 * have (or deletes it) and merges `value + (wanted − stored)` into the holder, both conditional on the ETags read;
 * a conflict reads both again. Exact under redelivery, reordering and concurrent workers: a contribution already
 * as wanted changes nothing ("Eventually consistent transactions pattern", "Entity Group Transactions").
 */
import { ErrorCode, isTablegraphError, TablegraphError } from '../errors';
import { CONTRIBUTION, contributionAddress, contributionEntity, contributionOf, contributionPrefix, isContribution } from '../model/contributions';
import { targetAddress } from '../model/references';
import { Decimal, decimalText } from '../model/decimal';
import { typedValue, valuesOf } from '../model/entity-codec';
import { resolveHolder, summaryValue } from '../model/summaries';
import { ENTITY_TYPE_PROPERTY, type EntityModel, type Model, type SummaryModel } from '../model/types';
import type { TableStore } from '../storage/table-store';
import type { EntityAddress, StorageObserver, StoredEntity, TransactionOperation } from '../storage/types';
import { addressKey } from '../storage/address-key';

/** Attempts at one contribution when other workers keep changing its holder (attempts). */
const ATTEMPTS = 10;

/**
 * Reconciles the contributions of the entity at `primary`, now `current` (null: deleted), to every summary held
 * in another partition, given the contribution addresses a message names (`candidates`, old ones included; the
 * addresses wanted now are added to it, so that a later pass over a newer state removes them if they go). A
 * summary that finds its holder through a unique index finds it by reading the index entity: at the address the
 * entity's values give now, and at those the message names (`lookups`, the old state's).
 * @param lookups index entity addresses through which the message's states found their holders
 * @returns contribution entities changed (entities)
 * @throws TablegraphError STORAGE_UNAVAILABLE when a holder kept changing; storage errors
 */
export async function reconcileContributions(
  model: Model,
  store: TableStore,
  entity: EntityModel,
  primary: EntityAddress,
  current: StoredEntity | null,
  candidates: Map<string, EntityAddress>,
  lookups: readonly EntityAddress[],
  observer?: StorageObserver,
): Promise<number> {
  let changed = 0;
  const values = current ? valuesOf(entity, current.properties) : null;
  const reads = new Map<string, Promise<StoredEntity | null>>();
  const get = (a: EntityAddress) => {
    if (!reads.has(addressKey(a))) reads.set(addressKey(a), readOrNull(store, a, { observer }));
    return reads.get(addressKey(a))!;
  };
  for (const s of model.summaries.values()) {
    if (s.of !== entity || s.scope !== 'eventual') continue;
    let want: ReturnType<typeof contributionOf>;
    try {
      want = contributionOf(s, primary, values, s.via.index && values ? await resolveHolder(s, values, get) : undefined);
    } catch (e) {
      // a value that cannot form the holder's key contributes nowhere (the write path refuses such writes)
      if (!isTablegraphError(e, ErrorCode.BAD_USER_INPUT)) throw e;
      want = null;
    }
    const addresses = new Map<string, EntityAddress>();
    for (const a of candidates.values()) if (a.table === s.via.table && a.rowKey.startsWith(contributionPrefix(s))) addresses.set(addressKey(a), a);
    if (s.via.index) {
      // The old state's holders, each read through its index entity: where its contributions were.
      for (const at of lookups) {
        const holder = at.table === s.via.table ? targetAddress(s.via, at, await get(at)) : null;
        if (holder) addresses.set(addressKey(contributionAddress(s, holder, primary)), contributionAddress(s, holder, primary));
      }
    }
    if (want) {
      addresses.set(addressKey(want.address), want.address);
      candidates.set(addressKey(want.address), want.address);
    }
    for (const [key, address] of addresses) {
      const wanted = want && addressKey(want.address) === key ? want : null;
      if (await applyContribution(store, s, address, wanted, primary, observer)) changed++;
    }
  }
  return changed;
}

/**
 * Makes one contribution entity what it should be (`wanted`, or absent) and its holder's value follow, in one EGT.
 * @returns whether anything was written
 */
export async function applyContribution(
  store: TableStore,
  s: SummaryModel,
  address: EntityAddress,
  wanted: { holder: EntityAddress; value: Decimal } | null,
  primary: EntityAddress,
  observer?: StorageObserver,
): Promise<boolean> {
  const call = { observer };
  for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
    const stored = await readOrNull(store, address, call);
    const existing = stored && isContribution(s, stored) ? stored : null;
    const had = existing ? new Decimal(String(existing.properties[CONTRIBUTION.value])) : null;
    if (wanted && had && had.equals(wanted.value)) return false;
    if (!wanted && !existing) return false;
    const holderRowKey = wanted?.holder.rowKey ?? String(existing!.properties[CONTRIBUTION.holderRowKey]);
    const holderAddress = { table: address.table, partitionKey: address.partitionKey, rowKey: holderRowKey };
    const holder = await readOrNull(store, holderAddress, call);
    const operations: TransactionOperation[] = [];
    if (wanted) {
      const entity = contributionEntity(s, { address, holder: wanted.holder, value: wanted.value }, primary);
      operations.push(existing ? { kind: 'update', mode: 'replace', entity, ifMatch: existing.etag } : { kind: 'create', entity });
    } else {
      operations.push({ kind: 'delete', partitionKey: address.partitionKey, rowKey: address.rowKey, ifMatch: existing!.etag });
    }
    if (holder && holder.properties[ENTITY_TYPE_PROPERTY] === s.holder.entityType) {
      const field = s.holder.fields.get(s.field)!;
      const next = summaryValue(holder.properties[s.field])
        .plus(wanted?.value ?? 0)
        .minus(had ?? 0);
      const value = typedValue(field, field.graphqlType === 'Int' ? next.toNumber() : decimalText(next));
      operations.push({
        kind: 'update',
        mode: 'merge',
        ifMatch: holder.etag,
        entity: { partitionKey: address.partitionKey, rowKey: holderRowKey, properties: { [s.field]: value } },
      });
    } else if (wanted) {
      // No holder (deleted, or never created): nothing to count into. A holder created later starts from what its
      // contributions then say (`repair-summaries`).
      return false;
    }
    try {
      await store.submitTransaction(address.table, operations, call);
      return true;
    } catch (e) {
      // The contribution or the holder changed since they were read: read both again.
      if (!isTablegraphError(e, ErrorCode.CONFLICT) && !isTablegraphError(e, ErrorCode.NOT_FOUND)) throw e;
    }
  }
  throw new TablegraphError(
    ErrorCode.STORAGE_UNAVAILABLE,
    `${s.holder.name}.${s.field}: the holder of ${address.partitionKey}/${address.rowKey} kept changing`,
    { reason: 'Contention' },
  );
}

async function readOrNull(store: TableStore, address: EntityAddress, call: { observer?: StorageObserver }): Promise<StoredEntity | null> {
  try {
    return await store.getEntity(address, call);
  } catch (e) {
    if (isTablegraphError(e, ErrorCode.NOT_FOUND)) return null; // the table does not exist yet
    throw e;
  }
}
