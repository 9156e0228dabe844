/**
 * The shapes of group commit (partition-committer.ts): what a write waiting in a committer carries, what it
 * resolves with, and what the committer is given. Types only.
 */
import type { ChangeFences } from './change-fence';
import type { JournalMarks } from './journal-marks';
import type { Context } from '@opentelemetry/api';
import type { Model } from '../model/types';
import type { Logger } from '../log';
import type { TableStore } from '../storage/table-store';
import type { EntityAddress, StorageObserver } from '../storage/storage-types';
import type { WorkQueueSender } from '../queue/sender';
import type { GroupMember } from './group-plan';
import type { Values } from './plan-types';

/** The outcome of a write: the entity as it now is (or was, for a delete). */
export interface WriteResult {
  address: EntityAddress;
  /** Values after the write; for a delete, the values it had. */
  values: Values;
  /** The entity's new ETag; for a delete, the ETag it had. */
  etag: string;
  deleted: boolean;
  /** Write-only SAS URLs for the `@blob` fields the client uploads itself, by field (blob-writes.ts). */
  uploadUrls?: Record<string, string>;
}

/** A write waiting in a committer's queue. */
export interface PendingWrite extends GroupMember {
  address: EntityAddress;
  observer?: StorageObserver;
  /** Attempts made so far (attempts). */
  attempts: number;
  /**
   * A write of `@blob` fields: the time by which its EGT must be applied (ms since the epoch), or it fails — its
   * blobs' cleanup may then take them (blob-cleanup-send.ts).
   */
  sendBy?: number;
  /** Arrival order in its committer. */
  seq: number;
  /** The tracing context of the request that made the write (spans.ts): its group commit's span is linked to it. */
  traceContext?: Context;
  /** Ids of this write's attempts: reservations they made are this write's own. */
  ownAttempts: Set<string>;
  /**
   * Set once a create that skipped reading its entity (group-read.ts, `skipsRead`) met it already stored: its next
   * attempt reads it, so it fails with the planner's error (or, deleted meanwhile, creates).
   */
  readFirst?: boolean;
  resolve(result: WriteResult): void;
  reject(error: unknown): void;
}

export interface CommitContext {
  model: Model;
  store: TableStore;
  workQueue: WorkQueueSender;
  /** Attempts before a write that keeps meeting concurrent writers of other processes fails (default 8). */
  maxAttempts: number;
  /** The blob cleanup delay (s; blob-writes.ts): absent, a write that drops a blob sends no cleanup message. */
  blobCleanupDelaySeconds?: number;
  /** Where what fails after a write is applied is said (it never fails the write). */
  log?: Logger;
  /** Fences the change entities of an EGT whose answer was lost (change-fence.ts); absent: no type has them. */
  fences?: ChangeFences;
  /** Continuous backup captures writes: each adds its change entity with the entity's image (group-plan.ts GroupTarget). */
  capture?: boolean;
  /** With capture on: the capture journal's marks, made before an EGT with change entities is sent (journal-marks.ts). */
  journal?: JournalMarks;
}
