/**
 * The worker's side of a summary of a summary (`Customer.totalSpent @summary(of: "Invoice", sum: ["total"])` over
 * `Invoice.total @summary(of: "Line", …)`, src/compiler/build-summaries.ts linkSummaryChains). A write of a line changes
 * an invoice's total without a write of the invoice, so nothing of the invoice's own would tell its customer. After
 * each change of such a value — in the line's EGT (its message names the holder: `summaryHolders`) or by the worker
 * (reconcile-contributions.ts) — the holder's contributions to the summaries that sum it are brought to its value now, each in
 * one EGT with their holder's value, and so on up the chain.
 *
 * A refresh changes the value of a contribution entity that exists, and never creates or deletes one: where an
 * invoice's contribution lies (which customer) is decided by the invoice's own writes and their messages, which
 * read the invoice as it is then and so count its total too. So a refresh that read the invoice before it moved to
 * another customer cannot leave a contribution behind at the old one. It reads the holder again after it and goes
 * again if it changed meanwhile; a refresh cut short by a killed worker is done again by the redelivered message,
 * which refreshes whether or not its own step changed anything ("Eventually consistent transactions pattern").
 */
import { ErrorCode, isTablegraphError, TablegraphError } from '../errors';
import { contributionOf } from '../model/contributions';
import { valuesOf } from '../model/entity-codec';
import { resolveHolder } from '../model/summaries';
import { ENTITY_TYPE_PROPERTY, type EntityModel, type Model, type SummaryModel } from '../model/types';
import type { TableStore } from '../storage/table-store';
import type { EntityAddress, StorageObserver } from '../storage/storage-types';
import { applyContribution, readOrNull } from './contribution-apply';

/** Passes over one holder while it keeps changing (passes). */
const ATTEMPTS = 10;

/** The summaries that sum a value `holder` holds (its summaries' `feeds`), each once. */
export function fedSummaries(model: Model, holder: EntityModel): SummaryModel[] {
  const out = new Set<SummaryModel>();
  for (const s of model.summaries.values()) if (s.holder === holder) s.feeds.forEach((u) => out.add(u));
  return [...out];
}

/**
 * Brings the contributions of the holder at `address` (an entity of `holder`) to the summaries that sum its values
 * up to date, then those of their holders, up the chain.
 * @returns contribution entities changed (entities)
 * @throws TablegraphError STORAGE_UNAVAILABLE (reason Contention) when the holder kept changing; storage errors
 */
export async function refreshSummaryChains(
  model: Model,
  store: TableStore,
  holder: EntityModel,
  address: EntityAddress,
  observer?: StorageObserver,
): Promise<number> {
  const uppers = fedSummaries(model, holder);
  if (uppers.length === 0) return 0;
  const call = { observer };
  let changed = 0;
  const next = new Map<string, { entity: EntityModel; address: EntityAddress }>();
  let current = await readOrNull(store, address, call);
  for (let pass = 1; pass <= ATTEMPTS; pass++) {
    if (!current || current.properties[ENTITY_TYPE_PROPERTY] !== holder.entityType) return changed;
    const values = valuesOf(holder, current.properties);
    for (const upper of uppers) {
      let want: ReturnType<typeof contributionOf>;
      try {
        const resolved = upper.via.index ? await resolveHolder(upper, values, (a) => readOrNull(store, a, call)) : undefined;
        want = contributionOf(upper, address, values, resolved);
      } catch (e) {
        if (!isTablegraphError(e, ErrorCode.BAD_USER_INPUT)) throw e;
        want = null; // a value that cannot form the holder's key counts nowhere
      }
      if (!want) continue;
      if (await applyContribution(store, upper, want.address, { wanted: want, primary: address, onlyExisting: true }, observer)) changed++;
      next.set(`${upper.holder.name}\u0000${want.holder.partitionKey}\u0000${want.holder.rowKey}`, { entity: upper.holder, address: want.holder });
    }
    const again = await readOrNull(store, address, call);
    if ((again?.etag ?? null) === current.etag) {
      for (const n of next.values()) changed += await refreshSummaryChains(model, store, n.entity, n.address, observer);
      return changed;
    }
    current = again;
  }
  throw new TablegraphError(
    ErrorCode.STORAGE_UNAVAILABLE,
    `${holder.name} ${address.partitionKey}/${address.rowKey} kept changing while the summaries over it were brought up to date`,
    {
      reason: 'Contention',
    },
  );
}
