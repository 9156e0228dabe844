/**
 * The last part of a load step (load-entities.ts): the holders of summaries kept eventually, through contribution
 * entities in their partitions (src/model/contributions.ts). Each holder's sums after the step are known without a
 * read — the step read the holder's partition before it wrote there (load-plan.ts holderAfter) — so a holder is
 * written only where a sum differs from what it holds: loading the same files again writes none. One merge per
 * holder, conditional on its ETag as the step read it; a holder changed since (by another process) is summed again
 * from the store (contribution-repair.ts resumHolder).
 */
import pLimit from 'p-limit';
import { ErrorCode, isTablegraphError } from '../errors';
import { decimalText } from '../model/decimal';
import { typedValue } from '../model/entity-codec';
import { summaryValue } from '../model/summaries';
import type { SummaryModel } from '../model/types';
import { resumHolder } from '../maintenance/contribution-repair';
import type { TableStore } from '../storage/table-store';
import type { EntityAddress, StorageObserver, TypedValue } from '../storage/storage-types';
import { addressKey } from '../storage/address-key';
import type { LoadPlan } from './load-plan';

/**
 * @param opts.concurrency holders written at once (calls)
 * @param opts.failedPartitions PartitionKeys whose EGT failed: a holder folded into one is summed here
 * @param opts.retrying sends a call again after a failure to answer (the step's back-off)
 * @param opts.onWrite called for each holder written (an entity)
 * @returns holders written (entities)
 * @throws storage errors other than a conflict (which is summed again)
 */
export async function writeEventualHolders(
  plan: LoadPlan,
  store: TableStore,
  opts: {
    attempts: number;
    concurrency: number;
    failedPartitions: ReadonlySet<string>;
    observer?: StorageObserver;
    retrying<T>(call: () => Promise<T>): Promise<T>;
    onWrite(): void;
  },
): Promise<number> {
  const byHolder = new Map<string, { address: EntityAddress; summaries: SummaryModel[] }>();
  for (const { summary, address } of plan.eventualHolders.values()) {
    // Written in its partition's last EGT (load-plan.ts), unless that EGT failed: then summed again here.
    if (plan.folded.has(addressKey(address)) && !opts.failedPartitions.has(address.partitionKey)) continue;
    const entry = byHolder.get(addressKey(address)) ?? { address, summaries: [] };
    entry.summaries.push(summary);
    byHolder.set(addressKey(address), entry);
  }
  let written = 0;
  const limit = pLimit(opts.concurrency);
  await Promise.all(
    [...byHolder.values()].map(({ address, summaries }) =>
      limit(async () => {
        const properties: Record<string, TypedValue | null> = {};
        let etag: string | undefined;
        for (const summary of summaries) {
          const { sum, holder } = await plan.holderAfter(summary, address);
          if (!holder) continue; // gone: nothing to set
          etag = holder.etag;
          if (summaryValue(holder.properties[summary.field]).equals(sum)) continue;
          const field = summary.holder.fields.get(summary.field)!;
          properties[summary.field] = typedValue(field, field.graphqlType === 'Int' ? sum.toNumber() : decimalText(sum));
        }
        if (Object.keys(properties).length === 0) return;
        const merge = { partitionKey: address.partitionKey, rowKey: address.rowKey, properties };
        const merged = await opts
          .retrying(() => store.updateEntity(address.table, merge, 'merge', { observer: opts.observer, ifMatch: etag }))
          .then(
            () => true,
            (e: unknown) => (isTablegraphError(e, ErrorCode.CONFLICT) ? false : Promise.reject(e)),
          );
        if (!merged) for (const summary of summaries) await resumHolder(store, summary, address, opts.attempts, opts.observer);
        opts.onWrite();
        written++;
      }),
    ),
  );
  return written;
}
