/**
 * `@summary` values at run time (compiled by src/compiler/build-summaries.ts): summary values (a count, a payroll) that every
 * write of the summarised entities keeps in the same EGT where holder and summarised entities share a partition (the
 * guide: "Entity Group Transactions", and its advice to keep aggregates beside the data they count), and eventually,
 * through the work queue and contribution entities, where they do not (src/model/contributions.ts).
 */
import { Decimal, storedDecimal } from './decimal';
import type { EntityAddress, StoredEntity } from '../storage/storage-types';
import { renderKey } from './key-template';
import { referenceFields, targetAddress } from './references';
import type { CopyModel, EntityModel, Model, SummaryModel } from './types';

/**
 * The holder an entity with `values` contributes to: the summary's `via` reference rendered from its values —
 * through a unique index, the index entity's address, where `resolveHolder` finds the holder's; undefined when
 * `via` is an optional reference whose key fields are null — such an entity counts towards no holder (a product
 * without a category), and one whose reference changes from null to a value, or back, moves its contribution.
 * @throws TablegraphError BAD_USER_INPUT when a value cannot form the holder's key (from renderKey)
 */
export function holderAddress(summary: SummaryModel, values: Record<string, unknown>): EntityAddress | undefined {
  for (const b of [...summary.via.partitionKey.bindings.values(), ...summary.via.rowKey.bindings.values()]) {
    if (b.optional && (values[b.name] === null || values[b.name] === undefined)) return undefined;
  }
  const render = (which: 'partitionKey' | 'rowKey') =>
    renderKey(summary.via[which].template, Object.fromEntries([...summary.via[which].bindings].map(([placeholder, b]) => [placeholder, values[b.name]])));
  return { table: summary.via.table, partitionKey: render('partitionKey'), rowKey: render('rowKey') };
}

/**
 * The holder an entity with `values` contributes to, read through `via`'s unique index when it has one (`get`
 * reads the index entity; one point query). Undefined when the reference is null; null when the index entity is
 * not there (no holder has that key: the entity counts towards none).
 * @throws TablegraphError BAD_USER_INPUT when a value cannot form the key; what `get` throws
 */
export async function resolveHolder(
  summary: SummaryModel,
  values: Record<string, unknown>,
  get: (a: EntityAddress) => Promise<StoredEntity | null>,
): Promise<EntityAddress | null | undefined> {
  const at = holderAddress(summary, values);
  if (!at || !summary.via.index) return at;
  return targetAddress(summary.via, at, await get(at));
}

/**
 * The contribution of one entity's values to a summary, exactly: 1 for a count, else the sum of the products of
 * its terms (a term with a null factor adds 0), in decimal arithmetic — a Float factor counts as the shortest
 * decimal that reads back as it. In the summary's own unit (entities, or e.g. USD).
 */
export function summaryContribution(summary: SummaryModel, values: Record<string, unknown> | null): Decimal {
  if (!values) return new Decimal(0);
  if (summary.count) return new Decimal(1);
  let total = new Decimal(0);
  for (const term of summary.terms) {
    let product = new Decimal(1);
    for (const f of term) {
      const v = 'constant' in f ? f.constant : values[f.field];
      if (v === null || v === undefined) {
        product = new Decimal(0);
        break;
      }
      product = product.times(storedDecimal(typeof v === 'bigint' ? v.toString() : v));
    }
    total = total.plus(product);
  }
  return total;
}

/** A summary value as the holder's property holds it (absent: 0). */
export function summaryValue(stored: unknown): Decimal {
  return storedDecimal(typeof stored === 'bigint' ? stored.toString() : stored);
}

/** The fields of `entity` that key a reference some summary counts it through (`@summary(via:)`). */
export function summaryKeyFields(model: Model, entity: EntityModel): Set<string> {
  const out = new Set<string>();
  for (const s of model.summaries.values()) if (s.of === entity) referenceFields(s.via).forEach((f) => out.add(f));
  return out;
}

/**
 * Whether a copy keys a summary's reference: when it changes, its entity's contribution moves, so the worker writes
 * it through the write path (src/derived/copy-refresh.ts), never the target's EGT beside it.
 */
export function copyKeysSummary(model: Model, copy: CopyModel): boolean {
  return summaryKeyFields(model, copy.entity).has(copy.field);
}
