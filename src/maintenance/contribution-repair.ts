/**
 * Repairs a summary held in another partition (model/contributions.ts): first every contribution entity `verify`
 * found amiss is made what its entity derives (or removed), each in one EGT with its holder, as the worker would;
 * then every holder whose value still differs from the sum of its contribution entities is set to that sum, with
 * If-Match on the ETag read before the sum — again when a write came between. Safe while the server serves.
 */
import { ErrorCode, isTablegraphError } from '../errors';
import { CONTRIBUTION, contributionOf, contributionPrefix, isContribution } from '../model/contributions';
import { Decimal, decimalText } from '../model/decimal';
import { prefixUpperBound } from '../model/key-template';
import { typedValue, valuesOf } from '../model/entity-codec';
import { resolveHolder, summaryValue } from '../model/summaries';
import type { SummaryModel } from '../model/types';
import { escapeKeyValue, unescapeKeyValue } from '../storage/key-escape';
import type { TableStore } from '../storage/table-store';
import type { EntityAddress, StorageObserver } from '../storage/storage-types';
import { applyContribution } from '../derived/contribution-apply';
import { addressKey } from '../storage/address-key';

/** The entity a contribution entity's RowKey names (`<prefix><holder RowKey>_<PartitionKey>_<RowKey>`, each escaped). */
function primaryOf(s: SummaryModel, contribution: EntityAddress): EntityAddress | null {
  const parts = contribution.rowKey.slice(contributionPrefix(s).length).split('_');
  if (parts.length !== 3) return null;
  try {
    return { table: s.of.layout.table, partitionKey: unescapeKeyValue(parts[1]), rowKey: unescapeKeyValue(parts[2]) };
  } catch {
    return null;
  }
}

/**
 * Makes the contribution entities at `addresses` what their entities derive now.
 * @returns contribution entities written or removed (entities)
 */
export async function repairContributions(store: TableStore, s: SummaryModel, addresses: EntityAddress[], observer?: StorageObserver): Promise<number> {
  let changed = 0;
  for (const address of addresses) {
    const primary = primaryOf(s, address);
    if (!primary) continue;
    const entity = await store.getEntity(primary, { observer });
    const values = entity ? valuesOf(s.of, entity.properties) : null;
    const resolved = s.via.index && values ? await resolveHolder(s, values, (a) => store.getEntity(a, { observer })) : undefined;
    const want = contributionOf(s, primary, values, resolved);
    const wanted = want && addressKey(want.address) === addressKey(address) ? want : null;
    if (await applyContribution(store, s, address, { wanted, primary }, observer)) changed++;
  }
  return changed;
}

/**
 * Sets a holder's value to the sum of its contribution entities (one range query over them), conditional on the
 * holder's ETag read before the sum.
 * @returns 'written'; 'same' when it held the sum already, or is gone; 'busy' when it kept changing for `attempts` sums
 */
export async function resumHolder(
  store: TableStore,
  s: SummaryModel,
  holder: EntityAddress,
  attempts: number,
  observer?: StorageObserver,
): Promise<'written' | 'same' | 'busy'> {
  const prefix = `${contributionPrefix(s)}${escapeKeyValue(holder.rowKey)}_`;
  for (let attempt = 1; attempt <= attempts; attempt++) {
    const stored = await store.getEntity(holder, { observer });
    if (!stored) return 'same';
    const range = await store.queryRange(
      { table: holder.table, partitionKey: holder.partitionKey, rowKeyFrom: prefix, rowKeyTo: prefixUpperBound(prefix), limit: Number.MAX_SAFE_INTEGER - 1 },
      { observer },
    );
    const sum = range.entities
      .filter((e) => isContribution(s, e))
      .reduce((n, e) => n.plus(new Decimal(String(e.properties[CONTRIBUTION.value]))), new Decimal(0));
    if (summaryValue(stored.properties[s.field]).equals(sum)) return 'same';
    const field = s.holder.fields.get(s.field)!;
    const value = typedValue(field, field.graphqlType === 'Int' ? sum.toNumber() : decimalText(sum));
    try {
      await store.updateEntity(holder.table, { partitionKey: holder.partitionKey, rowKey: holder.rowKey, properties: { [s.field]: value } }, 'merge', {
        observer,
        ifMatch: stored.etag,
      });
      return 'written';
    } catch (e) {
      if (!isTablegraphError(e, ErrorCode.CONFLICT) && !isTablegraphError(e, ErrorCode.NOT_FOUND)) throw e;
    }
  }
  return 'busy';
}
