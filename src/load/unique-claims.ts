/**
 * The unique values a load's rows claim (load-plan.ts): a unique index entity is a row's when neither an earlier row
 * of the load nor a stored entity holds it ("Index Entities Pattern", unique). A row that would take another's is
 * refused alone, as a bad row, never a stolen index entry.
 */
import { addressOfWrite } from '../model/entity-codec';
import { ErrorCode, TablegraphError } from '../errors';
import { primaryAddress, type TableWrite } from '../model/entity-codec';
import { ENTITY_TYPE_PROPERTY, type IndexModel } from '../model/types';
import { addressKey } from '../storage/address-key';
import type { EntityAddress } from '../storage/storage-types';
import type { StepStore } from './step-store';

/** The claims of one load: unique index entity addressKey → the addressKey of the entity claiming it. */
export class UniqueClaims {
  private readonly claims = new Map<string, string>();

  constructor(private readonly store: StepStore) {}

  /**
   * Claims the row's unique index entities, all or none.
   * @param indexes the row's index entities (only unique ones are claimed)
   * @param primary the row's entity
   * @throws TablegraphError CONFLICT (UniqueKeyTaken) when another entity of the load or of the store holds one
   */
  async claim(indexes: Array<TableWrite & { index: IndexModel }>, primary: EntityAddress): Promise<void> {
    const me = addressKey(primary);
    const claims: string[] = [];
    for (const w of indexes) {
      if (!w.index.unique) continue;
      const key = addressKey(addressOfWrite(w));
      const holder = this.claims.get(key) ?? (await this.storedHolder(w));
      if (holder !== undefined && holder !== me) {
        throw new TablegraphError(
          ErrorCode.CONFLICT,
          `${w.index.name}: ${w.entity.rowKey} is taken by ${w.index.entity.name} ${holder.split('\u0000').slice(1).join('/')} (UniqueKeyTaken)`,
        );
      }
      claims.push(key);
    }
    for (const key of claims) this.claims.set(key, me);
  }

  /** The addressKey of the entity a stored unique index entity points at, if there is one. */
  private async storedHolder(w: TableWrite & { index: IndexModel }): Promise<string | undefined> {
    const stored = (await this.store.partition(w.table, w.entity.partitionKey)).get(w.entity.rowKey);
    if (!stored || stored.properties[ENTITY_TYPE_PROPERTY] !== w.index.entityType) return undefined;
    return addressKey(primaryAddress(w.index.entity, stored.properties));
  }
}
