/**
 * Runs mutations (docs/architecture.md, "Writes"). A write is checked first — its keys, every value it gives against
 * its type, `@constraint` and the target's size limits — and refused before anything is read or sent when it cannot
 * succeed. Then it joins the writes of its partition: a PartitionCommitter per table and PartitionKey commits them
 * together, one EGT at a time ("group commit", partition-committer.ts), so concurrent writers of one partition share an
 * EGT instead of failing on each other's summary updates. A client gets CONFLICT only for its own entity's ETag, an
 * entity that already exists, or a unique value that is taken.
 *
 * Guide sections: "Entity Group Transactions", "Eventually consistent transactions pattern", "Merge or replace".
 */
import { ErrorCode, isTablegraphError, TablegraphError } from '../errors';
import { TransactionRunner } from './transaction-runner';
import { itemError, type TransactionItem } from './transaction-plan';
import { indexKeys, typedValue } from '../model/entity-codec';
import type { Model, WriteModel } from '../model/types';
import { checkEntity, checkKey } from '../storage/limits';
import type { TableStore } from '../storage/table-store';
import type { EntityAddress, EntityToWrite, StorageObserver } from '../storage/storage-types';
import { requestMove } from './move';
import { PartitionCommitter } from './partition-committer';
import type { WriteResult } from './commit-types';
import type { WorkQueueSender } from '../queue/sender';
import type { GroupMember } from './group-plan';
import type { Values } from './plan-types';
import { addressOf, checkIncrement } from './write-plan';
import { partAddresses, partProperties } from '../model/wide-entities';
import { ChangeLogTrimmer } from './change-log-trim';
import { JournalMarks } from './journal-marks';
import { ChangeFences } from './change-fence';
import type { Logger } from '../log';
import { applyBlobs, planBlobs, type BlobPlan, type BlobWriting } from './blob-writes';
import type { PathGate } from '../read/path-gate';
import { typesTouchedBy } from './touched-types';

export interface WriteExecutorOptions {
  model: Model;
  store: TableStore;
  workQueue: WorkQueueSender;
  /** Attempts when writers of other processes keep changing what was read (attempts; default 8). */
  maxAttempts?: number;
  /**
   * Blob storage of `@blob` fields. Without it a write that gives one fails with CONFIG_INVALID, and deletes and
   * replaces send no blob cleanup: for processes that never write blobs. The server and the worker always have it.
   */
  blobs?: BlobWriting;
  /**
   * How long change entities of types a subscription follows are kept (ms; default 3600000): after a write to such a
   * type, its partition's older ones are deleted now and then (change-log-trim.ts).
   */
  changeRetentionMs?: number;
  /**
   * Continuous backup captures writes (docs/backup.md): every write of every type adds its change entity, with the
   * entity's image, to its EGT; the capture pass (src/backup/capture-pass.ts) deletes them once copied, so the writers
   * trim none. Default false.
   */
  capture?: boolean;
  /** The deployment's table prefix: with capture on, it names the capture journal's table (required then). */
  tablePrefix?: string;
  /** Where a failed trim of the change log, or a failed check after a write (it never fails the write), is said. */
  log?: Logger;
  /**
   * Which entity types this process serves now (src/read/path-gate.ts): a write touching one it does not — one being
   * re-keyed — is refused before anything is read or sent. Absent: every type.
   */
  gate?: Pick<PathGate, 'assertServed'>;
}

/** Default: change entities are kept an hour. */
export const DEFAULT_CHANGE_RETENTION_MS = 3_600_000;

/** What a step of a move (worker/carry-out-move.ts) tells the write path; see WriteExecutor.execute. */
export type MoveStep = Pick<GroupMember, 'takeOverFrom' | 'moveId'>;

/** One write as execute() received it, on its way to its partition's committer. */
interface Submission {
  write: WriteModel;
  input: Values;
  address: EntityAddress;
  observer: StorageObserver | undefined;
  check: GroupMember['check'];
  step: MoveStep;
  /** A `@blob` write's deadline for its cleanup message (ms since 1970; blob-writes.ts). */
  sendBy?: number;
}

/** Runs mutations. One instance serves every request of a process. */
export class WriteExecutor {
  private readonly committers = new Map<string, PartitionCommitter>();
  private readonly transactions: TransactionRunner;
  /** Trims the change log of partitions written (absent: no type is followed by a subscription, or capture is on). */
  readonly changeLog?: ChangeLogTrimmer;
  /** Fences the change entities of EGTs whose answer was lost (change-fence.ts; absent: likewise). */
  readonly changeFences?: ChangeFences;
  /** Entity types whose writes add change entities: their own, or their summary holders' in the same EGT. */
  private readonly logged = new Set<string>();
  /** With capture on: the partitions written, marked in the capture journal before their changes (journal-marks.ts). */
  private readonly journal?: JournalMarks;

  constructor(private readonly opts: WriteExecutorOptions) {
    // A mark in another deployment's journal would leave the write out of this one's backup: no default.
    if (opts.capture && opts.tablePrefix === undefined) throw new Error('WriteExecutor: capture on needs the tablePrefix its capture journal is named for');
    this.journal = opts.capture ? new JournalMarks(opts.store, opts.tablePrefix!) : undefined;
    this.transactions = new TransactionRunner({
      ...opts,
      maxAttempts: opts.maxAttempts ?? 8,
      journal: this.journal,
      committed: (table, partitionKey) => this.changeLog?.touched(table, partitionKey),
    });
    for (const e of opts.model.entities.values()) if (e.changeLogged || opts.capture) this.logged.add(e.name);
    for (const s of opts.model.summaries.values()) if (s.holder.changeLogged && s.scope === 'egt') this.logged.add(s.of.name);
    if (this.logged.size > 0) {
      if (!opts.capture)
        this.changeLog = new ChangeLogTrimmer({ store: opts.store, retentionMs: opts.changeRetentionMs ?? DEFAULT_CHANGE_RETENTION_MS, log: opts.log });
      // A change committed later than its EGT's own timeout after its time is one no reader looks back to.
      this.changeFences = new ChangeFences({ store: opts.store, lateAfterMs: opts.store.timeoutMs, journal: this.journal, log: opts.log });
    }
  }

  /**
   * @param input the mutation's input (field name → value, plus `ifMatch`)
   * @param observer told of every storage call made for this write (calls shared with other writes of the same
   *   EGT are told to each of them)
   * @param check decides on the entity as read and as it would be written whether the caller may (`@auth`);
   *   throwing refuses the write alone, before anything of it is sent
   * @param options.takeOverFrom a move's create (worker/carry-out-move.ts): the entity's old address, whose unique keys it takes
   *   over
   * @param options.moveId the move (worker/carry-out-move.ts) this write is a step of: a create marks its copy with it, and
   *   only its steps may change that copy (others: CONFLICT, reason MovePending)
   * A MOVE is checked and queued (move.ts): its result is the entity as it is, at its old address. A write of `@blob`
   * fields uploads first (blob-writes.ts); its result holds the upload URLs of blobs the client uploads.
   * @throws TablegraphError CONFLICT (reason EntityAlreadyExists, ETagMismatch, UniqueKeyTaken, HasDependents),
   *   FORBIDDEN,
   *   NOT_FOUND, BAD_USER_INPUT and LIMIT_EXCEEDED (before anything is read or sent), STORAGE_UNAVAILABLE;
   *   ACCESS_PATH_BUILDING (reason TypeRekeying or PathRetired) when the write touches a type this process does not
   *   serve now (touched-types.ts), before anything is read or sent
   */
  execute(write: WriteModel, input: Values, observer?: StorageObserver, check?: GroupMember['check'], options: MoveStep = {}): Promise<WriteResult> {
    if (this.opts.gate) for (const type of typesTouchedBy(this.opts.model, write)) this.opts.gate.assertServed(type, write.coordinate);
    if (write.action === 'MOVE')
      return requestMove({ model: this.opts.model, store: this.opts.store, workQueue: this.opts.workQueue }, write, input, observer, check);
    const address = addressOf(write, input);
    const blobs = planBlobs(write, input, address);
    checkInput(write, blobs?.input ?? input, address, this.opts.store);
    const submission: Submission = { write, input, address, observer, check, step: options };
    return blobs ? this.withBlobs(blobs, submission) : this.enqueue(submission);
  }

  /**
   * A transaction (`@transaction`, transaction-runner.ts): every item written in one EGT, or none. Each item is checked
   * as execute() checks a write, before anything is read or sent.
   * @param items the writes in order, their inputs complete (the partition's keys, the tenant)
   * @returns each item's result, in order
   * @throws TablegraphError with `itemIndex` naming the item: BAD_USER_INPUT (a value, a key, an entity written twice,
   *   another partition), LIMIT_EXCEEDED, ACCESS_PATH_BUILDING, and what TransactionRunner.run throws
   */
  executeTransaction(items: TransactionItem[], observer?: StorageObserver): Promise<WriteResult[]> {
    const seen = new Map<string, number>();
    let partition: string | undefined;
    items.forEach((item, i) => {
      try {
        if (this.opts.gate) for (const type of typesTouchedBy(this.opts.model, item.write)) this.opts.gate.assertServed(type, item.write.coordinate);
        const address = addressOf(item.write, item.input);
        checkInput(item.write, item.input, address, this.opts.store);
        const key = `${address.table}\u0000${address.partitionKey}`;
        partition ??= key;
        if (key !== partition) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, "its PartitionKey is not the transaction's: one EGT writes one partition");
        const entity = `${address.partitionKey}\u0000${address.rowKey}`;
        if (seen.has(entity))
          throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `it writes the entity writes[${seen.get(entity)}] writes: an EGT writes each entity once`);
        seen.set(entity, i);
      } catch (e) {
        throw isTablegraphError(e) ? itemError(i, e) : e;
      }
    });
    return this.transactions.run(items, observer);
  }

  /** A write of `@blob` fields: its blobs first (blob-writes.ts), then its entity, within the commit window. */
  private async withBlobs(blobs: BlobPlan, submission: Submission): Promise<WriteResult> {
    const { write, address } = submission;
    const applied = await applyBlobs(blobs, write, address, this.opts.workQueue, this.opts.blobs);
    const result = await this.enqueue({ ...submission, input: applied.input, sendBy: applied.sendBy });
    return { ...result, uploadUrls: applied.uploadUrls };
  }

  /** The write handed to its partition's committer (partition-committer.ts), one per table and PartitionKey. */
  private enqueue(submission: Submission): Promise<WriteResult> {
    const { write, input, address, observer, check, step, sendBy } = submission;
    const key = `${address.table}\u0000${address.partitionKey}`;
    let committer = this.committers.get(key);
    if (!committer) {
      const ctx = {
        model: this.opts.model,
        store: this.opts.store,
        workQueue: this.opts.workQueue,
        maxAttempts: this.opts.maxAttempts ?? 8,
        blobCleanupDelaySeconds: this.opts.blobs?.cleanupDelaySeconds,
        log: this.opts.log,
        fences: this.changeFences,
        capture: this.opts.capture,
        journal: this.journal,
      };
      committer = new PartitionCommitter(ctx, address.table, () => this.committers.delete(key));
      this.committers.set(key, committer);
    }
    const queued = committer;
    const result = new Promise<WriteResult>((resolve, reject) =>
      queued.enqueue({ write, input, writeId: '', address, observer, attempts: 0, ownAttempts: new Set(), resolve, reject, check, ...step, sendBy }),
    );
    if (!this.changeLog || !this.logged.has(write.entity.name)) return result;
    // Its change entities (its own, a holder's) are in this partition: keep the log there from growing without end.
    return result.then((r) => {
      this.changeLog!.touched(address.table, address.partitionKey);
      return r;
    });
  }
}

/**
 * What can be known of a write without reading anything: its keys, and the keys of every index entity whose key
 * fields it gives, fit the target; each value it gives has the field's type and keeps its `@constraint`; and
 * together they fit in one entity (a wide entity: in the entities it is stored as).
 * @throws TablegraphError BAD_USER_INPUT or LIMIT_EXCEEDED naming the field or key
 */
function checkInput(write: WriteModel, input: Values, address: { table: string; partitionKey: string; rowKey: string }, store: TableStore): void {
  checkKey('PartitionKey', address.partitionKey, store.target, { ...address });
  checkKey('RowKey', address.rowKey, store.target, { ...address });
  for (const index of write.entity.indexes.values()) {
    // Those whose key fields the input gives all; over a list, one per element.
    for (const k of indexKeys(index, input)) {
      const keys = { table: index.layout.table, ...k };
      checkKey('PartitionKey', keys.partitionKey, store.target, keys);
      checkKey('RowKey', keys.rowKey, store.target, keys);
    }
  }
  const properties: EntityToWrite['properties'] = {};
  for (const name of write.inputFields) {
    if (input[name] === undefined) continue;
    const field = write.entity.fields.get(name)!;
    if (field.series) {
      if (input[name] !== null) checkIncrement(field, input[name]);
      continue;
    }
    if (input[name] === null && field.nonNull && !write.entity.keyFields.includes(name)) {
      throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${name} is required`, { field: name });
    }
    properties[name] = typedValue(field, input[name]);
  }
  // A wide entity's properties are checked as its entities will hold them (the guide's "Wide entities pattern").
  const wide = write.entity.wide;
  if (!wide) checkEntity({ ...address, properties }, store.target);
  else partAddresses(wide, address).forEach((a, i) => checkEntity({ ...a, properties: partProperties(write.entity, i, properties) }, store.target));
}
