/**
 * The entity whose derived entities the worker, a move or the loader brings in line: its schema, its address, and
 * what reaching storage takes. One value handed to every reconciler of this folder (reconcile-contributions.ts, copy-refresh.ts,
 * dependent-upkeep.ts), so that each is given the entity once rather than as six arguments.
 */
import type { EntityModel, Model } from '../model/types';
import type { TableStore } from '../storage/table-store';
import type { EntityAddress, StorageObserver } from '../storage/storage-types';
import type { WriteExecutor } from '../write/write-executor';

export interface DerivedTarget {
  model: Model;
  store: TableStore;
  /** The entity's type. */
  entity: EntityModel;
  /** Its address (its primary entity's table, PartitionKey and RowKey). */
  primary: EntityAddress;
  /** Told of every Table storage call made for it. */
  observer?: StorageObserver;
  /** The write path, for the derived entities written as ordinary writes (copies, join entities); without it they are left as they are. */
  writer?: WriteExecutor;
}
