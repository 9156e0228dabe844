/**
 * The summary holders' merges of a load step (load-plan.ts): for each holder the rows contribute to, the file's
 * totals plus what the stored entities of the type that the file does not rewrite contribute — exact totals, as
 * stored, so a second load of the same rows leaves every holder as it is. Guide section: "Entity Group Transactions"
 * (the merges are written in the holder's partition's last EGT, or alone).
 */
import type { Decimal } from '../model/decimal';
import { decimalText } from '../model/decimal';
import { typedValue, valuesOf } from '../model/entity-codec';
import { holderAddress, summaryContribution } from '../model/summaries';
import type { EntityModel, SummaryModel } from '../model/types';
import { addressKey } from '../storage/address-key';
import type { EntityAddress, StoredEntity, TypedValue } from '../storage/storage-types';
import { storedAs } from './step-store';

/** A merge of a summary holder's fields: their exact totals, as stored. */
export interface HolderMerge {
  address: EntityAddress;
  /** The holder's type. */
  holder: EntityModel;
  properties: Record<string, TypedValue | null>;
  /** The holder already stores these values: nothing to write. */
  unchanged: boolean;
}

/** How the merges read what is stored (the step's reads: each partition once). */
export interface HolderMergeReads {
  /** The stored partition of the step's entity type with this PartitionKey, by RowKey. */
  stored(partitionKey: string): Promise<Map<string, StoredEntity>>;
  /** The RowKeys the file writes in this partition (their line), if any. */
  rewritten(partitionKey: string): Map<string, number> | undefined;
  /** A holder's stored partition, by RowKey. */
  holderPartition(table: string, partitionKey: string): Promise<Map<string, StoredEntity>>;
}

/**
 * One merge per holder in `totals` (addressKey → the file rows' contributions per summary).
 * @returns the merges, each with its values as stored and whether the holder already stores them
 * @throws storage errors of the reads
 */
export async function holderMergesOf(
  entity: EntityModel,
  totals: Map<string, { address: EntityAddress; sums: Map<SummaryModel, Decimal> }>,
  reads: HolderMergeReads,
): Promise<HolderMerge[]> {
  const merges: HolderMerge[] = [];
  for (const [key, { address, sums }] of totals) {
    const all = new Map(sums);
    const stored = await reads.stored(address.partitionKey);
    const rewritten = reads.rewritten(address.partitionKey);
    for (const [rowKey, e] of stored) {
      if (rewritten?.has(rowKey)) continue;
      const values = valuesOf(entity, e.properties);
      for (const s of all.keys()) {
        let points: string | undefined;
        try {
          const holder = holderAddress(s, values);
          if (!holder) continue;
          points = addressKey(holder);
        } catch {
          continue;
        }
        if (points === key) all.set(s, all.get(s)!.plus(summaryContribution(s, values)));
      }
    }
    const properties = Object.fromEntries(
      [...all].map(([s, v]) => {
        const field = s.holder.fields.get(s.field)!;
        return [s.field, typedValue(field, field.graphqlType === 'Int' ? v.toNumber() : decimalText(v))];
      }),
    );
    const holder = (await reads.holderPartition(address.table, address.partitionKey)).get(address.rowKey);
    const unchanged = holder !== undefined && Object.entries(properties).every(([k, v]) => storedAs({ [k]: v }, { [k]: holder.properties[k] }));
    merges.push({ address, holder: [...sums.keys()][0].holder, properties, unchanged });
  }
  return merges;
}
