/**
 * One contribution entity of a summary held in another partition (src/model/contributions.ts) made what it should be,
 * and its holder's value with it, in one EGT conditional on both ETags read ("Entity Group Transactions"): the delta
 * is the new contribution minus the stored one, so a redelivered message never counts twice.
 */
import { ErrorCode, isTablegraphError, TablegraphError } from '../errors';
import { CONTRIBUTION, contributionEntity, isContribution } from '../model/contributions';
import { Decimal, decimalText } from '../model/decimal';
import { typedValue } from '../model/entity-codec';
import { summaryValue } from '../model/summaries';
import { ENTITY_TYPE_PROPERTY, type SummaryModel } from '../model/types';
import type { TableStore } from '../storage/table-store';
import type { EntityAddress, StorageObserver, StoredEntity, TransactionOperation } from '../storage/storage-types';

/** Attempts at one contribution when other workers keep changing its holder (attempts). */
const ATTEMPTS = 10;

/** What a contribution entity should be: its holder and value (`wanted`, or null: absent), and whose it is. */
export interface ContributionChange {
  wanted: { holder: EntityAddress; value: Decimal } | null;
  /** The address of the entity that contributes. */
  primary: EntityAddress;
  /**
   * Change the value of a contribution entity that exists, never create one (a summary of a summary's refresh:
   * where a contribution lies is its entity's own messages' business). Default: false.
   */
  onlyExisting?: boolean;
}

/**
 * Makes one contribution entity, at `address`, what `change` says and its holder's value follow, in one EGT.
 * @returns whether anything was written
 */
export async function applyContribution(
  store: TableStore,
  s: SummaryModel,
  address: EntityAddress,
  change: ContributionChange,
  observer?: StorageObserver,
): Promise<boolean> {
  const { wanted, primary, onlyExisting = false } = change;
  const call = { observer };
  for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
    const stored = await readOrNull(store, address, call);
    const existing = stored && isContribution(s, stored) ? stored : null;
    const had = existing ? new Decimal(String(existing.properties[CONTRIBUTION.value])) : null;
    if (wanted && had && had.equals(wanted.value)) return false;
    if (!wanted && !existing) return false;
    if (onlyExisting && !existing) return false;
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

/** An entity, or null where it (or its table) does not exist. */
export async function readOrNull(store: TableStore, address: EntityAddress, call: { observer?: StorageObserver }): Promise<StoredEntity | null> {
  try {
    return await store.getEntity(address, call);
  } catch (e) {
    if (isTablegraphError(e, ErrorCode.NOT_FOUND)) return null; // the table does not exist yet
    throw e;
  }
}
