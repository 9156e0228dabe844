/**
 * Contribution entities: how a summary whose holder lives in another partition than what it counts ("employees
 * per title", "items per category": `@summary` with scope `eventual`) stays exact when kept eventually. Each counted
 * entity has one contribution entity per such summary, in the holder's partition, holding what it adds to the
 * holder's value. The worker changes a contribution entity and the holder's value together, in one EGT, each
 * conditional on the ETag it read: the delta it applies is the new contribution minus the stored one, so a
 * redelivered message, or two workers on the same entity, can never count twice ("Entity Group Transactions",
 * "Eventually consistent transactions pattern"). The holder's value is always the sum of the contributions in its
 * partition, which `verify` checks and `repair-summaries` restores.
 */
import { escapeKeyValue, unescapeKeyValue } from '../storage/key-escape';
import type { EntityAddress, EntityToWrite, StoredEntity } from '../storage/storage-types';
import { decimalText, type Decimal } from './decimal';
import { holderAddress, summaryContribution } from './summaries';
import { ENTITY_TYPE_PROPERTY, type SummaryModel } from './types';

/** Properties of a contribution entity beside EntityType. */
export const CONTRIBUTION = { value: 'Value', holderRowKey: 'HolderRowKey', ofPartitionKey: 'OfPartitionKey', ofRowKey: 'OfRowKey' } as const;

/** The EntityType of a summary's contribution entities, e.g. `~Contribution:Category.itemCount`. */
export function contributionType(s: SummaryModel): string {
  return `~Contribution:${s.holder.name}.${s.field}`;
}

/** The RowKey prefix of every contribution entity: `~` sorts after letters and digits, away from other types' ranges. */
export const CONTRIBUTION_ROW_KEY_PREFIX = '~contribution_';

/** The RowKey prefix of a summary's contribution entities in a holder's partition. */
export function contributionPrefix(s: SummaryModel): string {
  return `${CONTRIBUTION_ROW_KEY_PREFIX}${s.holder.name}.${s.field}_`;
}

/**
 * The address of the contribution entity of the `of` entity at `primary` to the holder at `holder`: in the holder's
 * partition, its RowKey naming the holder and the entity (each key escaped, so `_` separates them unambiguously).
 */
export function contributionAddress(s: SummaryModel, holder: EntityAddress, primary: EntityAddress): EntityAddress {
  const rowKey = `${contributionPrefix(s)}${escapeKeyValue(holder.rowKey)}_${escapeKeyValue(primary.partitionKey)}_${escapeKeyValue(primary.rowKey)}`;
  return { table: holder.table, partitionKey: holder.partitionKey, rowKey };
}

/**
 * The holder a contribution entity at `address` counts into: the holder's RowKey is the first of the escaped keys
 * its RowKey names (contributionAddress); undefined for an address that is not one of `s`'s contributions.
 */
export function contributionHolder(s: SummaryModel, address: EntityAddress): EntityAddress | undefined {
  const prefix = contributionPrefix(s);
  if (!address.rowKey.startsWith(prefix)) return undefined;
  const [holderRowKey] = address.rowKey.slice(prefix.length).split('_');
  try {
    return { table: address.table, partitionKey: address.partitionKey, rowKey: unescapeKeyValue(holderRowKey) };
  } catch {
    return undefined; // not of this form: nothing to say of it
  }
}

/**
 * What an `of` entity with `values` at `primary` contributes: where, and how much (null values: nothing).
 * @param resolved the holder's address as read through `via`'s unique index (summaries.ts resolveHolder); needed
 *   when `via` has one, since only the index entity tells where the holder is
 */
export function contributionOf(
  s: SummaryModel,
  primary: EntityAddress,
  values: Record<string, unknown> | null,
  resolved?: EntityAddress | null,
): { address: EntityAddress; holder: EntityAddress; value: Decimal } | null {
  if (!values) return null;
  const at = holderAddress(s, values);
  if (!at) return null; // an optional reference that is null: no holder
  if (s.via.index && resolved === undefined) throw new Error(`${s.holder.name}.${s.field}: its holder is found through an index; resolve it first`);
  const holder = s.via.index ? resolved : at;
  if (!holder) return null; // through an index, naming no holder
  return { address: contributionAddress(s, holder, primary), holder, value: summaryContribution(s, values) };
}

/** The contribution entity to store. */
export function contributionEntity(
  s: SummaryModel,
  c: { address: EntityAddress; holder: EntityAddress; value: Decimal },
  primary: EntityAddress,
): EntityToWrite {
  return {
    partitionKey: c.address.partitionKey,
    rowKey: c.address.rowKey,
    properties: {
      [ENTITY_TYPE_PROPERTY]: { type: 'String', value: contributionType(s) },
      [CONTRIBUTION.value]: { type: 'String', value: decimalText(c.value) },
      [CONTRIBUTION.holderRowKey]: { type: 'String', value: c.holder.rowKey },
      [CONTRIBUTION.ofPartitionKey]: { type: 'String', value: primary.partitionKey },
      [CONTRIBUTION.ofRowKey]: { type: 'String', value: primary.rowKey },
    },
  };
}

/** Whether a stored entity is a contribution entity of this summary. */
export function isContribution(s: SummaryModel, e: StoredEntity): boolean {
  return e.properties[ENTITY_TYPE_PROPERTY] === contributionType(s);
}
