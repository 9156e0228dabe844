/**
 * The worker's side of summaries held in another partition (src/model/contributions.ts): brings an entity's
 * contribution entities — and with each, its holder's value — in line with the entity as it is now. For every
 * contribution entity the entity has or had, one EGT in the holder's partition writes the contribution it should
 * have (or deletes it) and merges `value + (wanted − stored)` into the holder, both conditional on the ETags read;
 * a conflict reads both again. Exact under redelivery, reordering and concurrent workers: a contribution already
 * as wanted changes nothing ("Eventually consistent transactions pattern", "Entity Group Transactions").
 */
import { ErrorCode, isTablegraphError } from '../errors';
import type { DerivedTarget } from './derived-target';
import { contributionAddress, contributionHolder, contributionOf, contributionPrefix } from '../model/contributions';
import { targetAddress } from '../model/references';
import { valuesOf } from '../model/entity-codec';
import { resolveHolder } from '../model/summaries';
import type { EntityAddress, StoredEntity } from '../storage/storage-types';
import { addressKey } from '../storage/address-key';
import { applyContribution, readOrNull } from './contribution-apply';
import { refreshSummaryChains } from './summary-chains';

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
  target: DerivedTarget,
  current: StoredEntity | null,
  candidates: Map<string, EntityAddress>,
  lookups: readonly EntityAddress[],
): Promise<number> {
  const { model, store, entity, primary, observer } = target;
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
      if (await applyContribution(store, s, address, { wanted, primary }, observer)) changed++;
      // A holder whose value others sum (a summary of a summary): its contributions to them follow its value now —
      // whether this pass changed it or an earlier delivery did before it died.
      const holder = wanted?.holder ?? contributionHolder(s, address);
      if (s.feeds.length > 0 && holder) changed += await refreshSummaryChains(model, store, s.holder, holder, observer);
    }
  }
  return changed;
}
