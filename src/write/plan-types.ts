/**
 * The shapes the write planner works with (write-plan.ts): a write's values, the state its group read, what it
 * changes in summary holders, and the plan it becomes.
 */
import type { Decimal } from '../model/decimal';
import type { TableWrite } from '../model/entity-codec';
import type { DependentModel, IndexModel, SummaryModel } from '../model/types';
import type { EntityMessageDraft } from '../queue/messages';
import type { EntityAddress, EntityToWrite, StoredEntity, TransactionOperation } from '../storage/storage-types';

/** Field values of an entity (field name → value). */
export type Values = Record<string, unknown>;

/** What the planner needs that was read: the entity and its summary holders, with their ETags. */
export interface ReadState {
  current: StoredEntity | null;
  /** Holder entities by addressKey (null: the holder does not exist). */
  holders: Map<string, StoredEntity | null>;
  /** What is stored where the write's references point (check-references.ts), by addressKey, beside `holders`. */
  references?: ReadonlyMap<string, StoredEntity | null>;
  /** The entities in the write's partition holding copies of its fields, by copyListKey (group-plan.ts GroupState). */
  copyHolders?: ReadonlyMap<string, EntityAddress[]>;
  /** For a delete: an entity that a RESTRICT reference points at it from, by the deleted entity's addressKey. */
  referrers?: ReadonlyMap<string, Referrer>;
}

/** An entity found pointing at an entity being deleted, through a RESTRICT reference (group-read.ts). */
export interface Referrer {
  dependent: DependentModel;
  referrer: StoredEntity;
}

/** What one write adds to the summaries of one holder: summary → delta, in the summary's unit. */
export interface HolderDelta {
  address: EntityAddress;
  deltas: Map<SummaryModel, Decimal>;
}

export interface WritePlan {
  address: EntityAddress;
  /** This write's EGT operations: the entity first (a wide entity: the parts it writes), then its intra-partition index entities. */
  operations: TransactionOperation[];
  /** A wide entity's write (model/wide-entities.ts): the part each of `operations` writes. */
  wideParts?: number[];
  /** Merges of copies (`@copy`) of this entity's fields held by entities of its own partition, in the same EGT. */
  copyOperations: TransactionOperation[];
  /** Summary deltas by holder addressKey; holders whose deltas are all 0 are left out. */
  holderDeltas: Map<string, HolderDelta>;
  /** The entity's values after the write (null after a delete). */
  values: Values | null;
  /** The entity after the write as its primary write gives it, whole (an increment's too), with its move marks; null after a delete. */
  stored: EntityToWrite | null;
  /** The entity's values before the write (null before a create). */
  previous: Values | null;
  /** This attempt's id: the entity's `WriteId` once it commits (src/queue/messages.ts). */
  writeId: string;
  /** The state id the write read and is conditional on (null: the entity was absent). */
  basedOn: string | null;
  /** Unique inter-partition index entities to reserve before the EGT (the new state's, not the old one's). */
  reservations: Array<TableWrite & { index: IndexModel }>;
  /** The fan-out message (without id and enqueuedAt), when what the entity derives changes. */
  fanout?: EntityMessageDraft;
}
