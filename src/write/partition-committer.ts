/**
 * Group commit, the doing half (docs/architecture.md, "Group commit"): one committer per table and PartitionKey with
 * writes waiting. It takes every write that arrived while the previous EGT was in flight, reads what they need in one
 * wave, plans them as one EGT (group-plan.ts), puts its writes' fan-out messages on the queue (one queue message
 * where they fit) and reserves unique
 * keys (attempt-effects.ts), and commits. One EGT of a partition is in flight at a time, so writes of one partition
 * keep their arrival order and never fail on each other's summary updates ("Entity Group Transactions"; the guide's
 * advice on a hot partition: batch its writes).
 *
 * An EGT fails whole. The operation it names blames one write, which fails alone when the failure is its own (it
 * already exists, its `ifMatch` no longer matches, a limit); its batch-mates are read again and retried in the
 * next EGT. A failure that blames a summary holder (changed by another process) retries them all. A failure with
 * no answer (a timeout) is checked by reading each entity: a write whose WriteId shows there has committed.
 *
 * Side effects of attempts that cannot commit are undone: their messages withdrawn, their reservations released
 * ("Eventually consistent transactions pattern": one fan-out message per committed write).
 */
import { isTombstone } from '../model/tombstones';
import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { ErrorCode, isTablegraphError, TablegraphError } from '../errors';
import { CHANGE, changedPartition, isChangeEntity, stampChanges } from '../model/change-log';
import type { EntityAddress, EntityToWrite, StorageObserver, StoredEntity, TransactionOperation } from '../storage/storage-types';
import { deleteUnlessDerived } from './index-settle';
import { sharedObserver } from '../storage/shared-observer';
import { addressKey } from '../storage/address-key';
import { planGroup, type GroupPlan, type GroupState, type GroupTarget } from './group-plan';
import { readEntity, readGroupState, readUniqueKeys, skipsRead } from './group-read';
import { etagAfter, writtenBy } from '../model/wide-entities';
import type { TableWrite } from '../model/entity-codec';
import { CLOCK_MARGIN_MS, heldUntilOf, leaseMs, reservationBusy, uniqueKeyTaken, type KeyState } from './reservations';
import { confirmReservations } from './reservation-batches';
import { keyState, reserveKeysOf, sendMessages, undoEffects, type Effects } from './attempt-effects';
import { captureContext, inSpan } from '../telemetry/spans';
import type { CommitContext, PendingWrite } from './commit-types';

/** Reads of a group's entities after an EGT whose outcome is not known, before it is said to be unknown (reads). */
const READ_BACK_ATTEMPTS = 4;

/** Writes one EGT holds at most (writes); the EGT's own limits (100 operations, 4 MiB) may cut it shorter. */
const MAX_GROUP = 100;

/**
 * Reservations of committed writes confirmed together at most (reservations); the confirmations of one index
 * partition go in one EGT, so a hot partition pays one call per index partition per batch, not one per write.
 */
const CONFIRM_BATCH = 100;

/** How long the first reservation waiting may wait for others before they are confirmed (ms). */
const CONFIRM_DELAY_MS = 200;

/** A committed write's reservation waiting to be confirmed; `owner`: its entity's addressKey. */
interface Unconfirmed {
  reservation: TableWrite;
  etag: string;
  owner: string;
  observer?: StorageObserver;
}

/** Commits the writes of one table and PartitionKey, one EGT at a time. */
export class PartitionCommitter {
  private readonly queue: PendingWrite[] = [];
  private arrivals = 0;
  private running = false;
  /** Whether the last group met its period's table missing and had it created again (retried once, not forever). */
  private tableRecreated = false;
  /** Summary holders as this committer last wrote them: the next EGT needs not read them again. */
  private readonly holders = new Map<string, StoredEntity | null>();
  /** Reservations of committed writes not yet confirmed: kept to be confirmed together (flushConfirmations). */
  private unconfirmed: Unconfirmed[] = [];
  /** When the first of `unconfirmed` was added (ms, performance.now()). */
  private unconfirmedSince = 0;
  /** The entities (addressKey) whose reservations are waiting or being confirmed. */
  private readonly confirmingFor = new Set<string>();
  /** The reservations being confirmed, while the next groups read, send, reserve and commit. */
  private confirming: Promise<void> = Promise.resolve();
  /** Wakes idle() when a write arrives while it waits for confirmations. */
  private arrived?: () => void;

  constructor(
    private readonly ctx: CommitContext,
    private readonly table: string,
    private readonly onIdle: () => void,
  ) {}

  /** Queues a write; it is committed with whatever else waits when the EGT in flight is done. */
  enqueue(write: Omit<PendingWrite, 'seq' | 'traceContext'>): void {
    this.queue.push({ ...write, seq: this.arrivals++, traceContext: captureContext() });
    if (!this.running) void this.run();
    else this.arrived?.();
  }

  private async run(): Promise<void> {
    this.running = true;
    try {
      for (;;) {
        if (this.queue.length === 0) await this.idle();
        if (this.queue.length === 0) break;
        const members = this.queue.splice(0, MAX_GROUP);
        let again: PendingWrite[];
        try {
          again = await this.commitGroup(members);
          this.tableRecreated = false;
        } catch (e) {
          // A period's table this process created, dropped since by `expire`: made again, once, before anything is sent.
          if (this.periodic(members) && !this.tableRecreated && isTablegraphError(e, ErrorCode.NOT_FOUND) && e.details.reason === 'TableNotFound') {
            this.tableRecreated = true;
            this.ctx.store.forgetTable(this.table);
            this.queue.unshift(...members);
            continue;
          }
          // A bug or a storage failure outside any one write's doing: every write of the group learns of it.
          members.forEach((m) => m.reject(e));
          this.holders.clear();
          continue;
        }
        const retried = again.filter((m) => m.attempts > 0);
        // Back in front of what arrived meanwhile, in arrival order: writes of a partition keep their order.
        this.queue.unshift(...again.sort((a, b) => a.seq - b.seq));
        // Writers of other processes in this partition: back off, exponentially with jitter, before trying again.
        if (retried.length > 0) await delay(Math.random() * Math.min(1000, 10 * 2 ** Math.max(...retried.map((m) => m.attempts))));
      }
    } finally {
      this.running = false;
      this.onIdle();
    }
  }

  /**
   * With no write waiting: first lets in the writes that come back at once (a client's next write, sent when the last
   * result was given), then confirms the reservations waiting, and returns when a write arrives or, with none, once
   * every confirmation is done (the committer is idle only then). A write that arrives meanwhile is taken at once, not
   * after the confirmations' round trip.
   */
  private async idle(): Promise<void> {
    await new Promise<void>((resolve) => setImmediate(resolve));
    while (this.queue.length === 0) {
      this.flushConfirmations();
      const confirming = this.confirming;
      const arrival = new Promise<void>((resolve) => (this.arrived = resolve));
      const confirmed = await Promise.race([confirming.then(() => true), arrival.then(() => false)]);
      this.arrived = undefined;
      if (confirmed && this.confirming === confirming && this.unconfirmed.length === 0) return;
    }
  }

  /** Whether the writes go to a table per period (table-template.ts), which the first write to need it creates. */
  private periodic(members: PendingWrite[]): boolean {
    return members.some((m) => m.write.entity.layout.tableTemplate !== undefined);
  }

  /**
   * One EGT for as many of `members` as fit, in a `write.commit` span under the first member's request, linked to
   * every member's. @returns the writes to try again, in order
   */
  private commitGroup(members: PendingWrite[]): Promise<PendingWrite[]> {
    const attributes = { 'db.collection.name': this.table, 'tablegraph.partition_key': members[0].address.partitionKey, 'tablegraph.writes': members.length };
    const links = members.map((m) => m.traceContext);
    return inSpan('write.commit', attributes, () => this.commitMembers(members), { parent: members[0].traceContext, links });
  }

  private async commitMembers(members: PendingWrite[]): Promise<PendingWrite[]> {
    const { model, store } = this.ctx;
    // The guide's "High volume delete pattern": a day's table is made by its first write (once per process).
    if (this.periodic(members)) await store.ensureTable(this.table);
    for (const m of members) {
      m.writeId = randomUUID();
      m.ownAttempts.add(m.writeId);
    }
    // Each storage call of a group is reported to the observer of every write in it: the group's cost is each one's.
    const observer = sharedObserver(members.map((m) => m.observer));
    const state = await readGroupState(model, store, members, this.holders, observer);
    let group = planGroup(model, members, state, this.groupTarget());
    const deferred = group.deferred;
    group.refused.forEach(({ member, error }) => member.reject(error));
    const retry: PendingWrite[] = [];

    // Unique keys: who holds them now, read before anything is sent, so a write whose value is taken sends nothing.
    // A plain create's keys are not read (skipsRead): taken to be free, as they nearly always are, their inserts are
    // refused when they are not, and reserveKey then reads and decides (the message sent meanwhile is withdrawn).
    const keys = await readUniqueKeys(
      store,
      group.planned.filter(({ member }) => !skipsRead(member)),
      observer,
    );
    group = this.without(group, state, (planned) => this.heldKey(planned, keys, retry));

    // Messages first, then reservations: a crash after either leaves a message that names what to clean up.
    const effects = new Map<PendingWrite, Effects>();
    const reservedUntil = new Date(Date.now() + leaseMs(store.timeoutMs));
    // The group's messages go out as one queue message (or a few, beyond 64 KiB); each write's reservations as soon
    // as its message is out (those of one index partition once all of theirs are).
    const sent = sendMessages(this.ctx, group.planned, effects);
    await Promise.all([...sent.values(), reserveKeysOf(this.ctx, group.planned, { keys, reservedUntil, effects, sent })]);
    const failed = group.planned.filter(({ member }) => effects.get(member)!.error !== undefined);
    await Promise.all(failed.map(({ member }) => undoEffects(this.ctx, member, effects.get(member)!)));
    group = this.without(group, state, ({ member }) => {
      const error = effects.get(member)!.error;
      if (error === undefined) return false;
      return isTablegraphError(error, ErrorCode.CONFLICT) && error.details.reason === 'ReservationBusy'
        ? this.again(member, retry, error)
        : this.fail(member, error);
    });
    if (group.planned.length === 0) return [...retry, ...deferred];

    group = await this.withinWindows(group, state, effects, reservedUntil, retry);
    if (group.planned.length === 0) return [...retry, ...deferred];

    // A write of an entity whose reservations are not yet confirmed waits for them (queueConfirmations).
    if (group.planned.some(({ member }) => this.confirmingFor.has(addressKey(member.address)))) {
      this.flushConfirmations();
      await this.confirming;
    }
    const submitted = await this.submit(group, observer);
    group = submitted.group;
    const { stamped } = submitted;
    let etags: Array<string | undefined>;
    try {
      if ('error' in submitted) throw submitted.error;
      etags = submitted.etags;
    } catch (e) {
      // A period's table dropped by `expire` since this process made it, met first by the EGT (a create reads
      // nothing before): undo, make it again, and try the writes again (each attempt counted, so not forever).
      if (this.periodic(members) && isTablegraphError(e, ErrorCode.NOT_FOUND) && e.details.reason === 'TableNotFound') {
        await Promise.all(group.planned.map(({ member }) => undoEffects(this.ctx, member, effects.get(member)!)));
        store.forgetTable(this.table);
        group.planned.forEach(({ member }) => this.again(member, retry, e));
        return [...retry, ...deferred];
      }
      const again = await this.failedEgt({ ...group, operations: stamped }, state, effects, e, observer);
      return [...again, ...retry, ...deferred];
    }
    this.committed(group, state, etags);
    this.queueConfirmations(group, effects);
    return [...retry, ...deferred];
  }

  /**
   * The reservations of committed writes become plain index entities. Until then a reservation of a create looks
   * pending whenever its entity is absent — also after a later delete — and would hold its value for its whole
   * lease. They are confirmed together, those of one index partition in one EGT (a hot partition's writes spread
   * their unique values over few index partitions): once CONFIRM_BATCH wait, CONFIRM_DELAY_MS after the first,
   * whenever the committer has nothing else to do, and before the EGT of any later write of their entity in this
   * process, which so finds them confirmed. One that fails is the worker's to confirm.
   */
  private queueConfirmations(group: GroupPlan<PendingWrite>, effects: Map<PendingWrite, Effects>): void {
    for (const { member, plan } of group.planned) {
      const owner = addressKey(member.address);
      for (const [i, h] of effects.get(member)!.held.entries()) {
        if (this.unconfirmed.length === 0) this.unconfirmedSince = performance.now();
        this.unconfirmed.push({ reservation: plan.reservations[i], etag: h.etag, owner, observer: member.observer });
        this.confirmingFor.add(owner);
      }
    }
    if (this.unconfirmed.length >= CONFIRM_BATCH || performance.now() - this.unconfirmedSince >= CONFIRM_DELAY_MS) this.flushConfirmations();
  }

  /** Confirms every reservation waiting (reservation-batches.ts confirmReservations), beside those in flight. */
  private flushConfirmations(): void {
    if (this.unconfirmed.length === 0) return;
    const batch = this.unconfirmed;
    this.unconfirmed = [];
    const done = confirmReservations(this.ctx.store, batch, sharedObserver(batch.map((u) => u.observer))).then(() => {
      // An entity with a reservation added since waits for that one's batch.
      const waiting = new Set(this.unconfirmed.map((u) => u.owner));
      for (const u of batch) if (!waiting.has(u.owner)) this.confirmingFor.delete(u.owner);
    });
    this.confirming = Promise.all([this.confirming, done]).then(() => undefined);
  }

  /**
   * Sends the group's EGT, its change entities' times taken now, not when it was planned (change-log.ts
   * stampChanges). An index entity the EGT deletes without If-Match that is not there — an index a schema change
   * added and its build has not reached yet (src/evolution/index-build.ts) — is a refusal of the whole EGT, nothing
   * applied: the EGT without that delete is what the writes mean, and is sent instead. Once it is applied, the build
   * may have inserted that index entity meanwhile, from the entity's older state: it is deleted then unless the
   * entity as it is now derives it (src/write/index-settle.ts deleteUnlessDerived).
   */
  private async submit(
    group: GroupPlan<PendingWrite>,
    observer: StorageObserver | undefined,
  ): Promise<{ group: GroupPlan<PendingWrite>; stamped: TransactionOperation[] } & ({ etags: Array<string | undefined> } | { error: unknown })> {
    const dropped: Array<{ address: EntityAddress; member: PendingWrite }> = [];
    for (;;) {
      // Its partition in the capture journal, in the bucket of now, before any change of it can be committed
      // (journal-marks.ts): each attempt, so that a late one is not under a mark the passes have stopped reading.
      const changed = this.ctx.journal && changedPartition(group.operations);
      if (changed !== undefined) await this.ctx.journal!.mark(this.table, changed, observer);
      const stamped = stampChanges(group.operations);
      let etags: Array<string | undefined>;
      try {
        etags = await this.ctx.store.submitTransaction(this.table, stamped, { observer });
      } catch (error) {
        const missing = missingPlainDelete(stamped, error);
        if (missing === undefined) return { group, stamped, error };
        const owner = group.owners[missing];
        const op = group.operations[missing];
        if ('write' in owner && op.kind === 'delete') {
          dropped.push({ address: { table: this.table, partitionKey: op.partitionKey, rowKey: op.rowKey }, member: group.planned[owner.write].member });
        }
        group = { ...group, operations: group.operations.filter((_, i) => i !== missing), owners: group.owners.filter((_, i) => i !== missing) };
        continue;
      }
      for (const { address, member } of dropped) {
        await deleteUnlessDerived(this.ctx.store, member.write.entity, address, member.address, { observer }).catch((e: unknown) =>
          this.ctx.log?.warn({ err: e, table: address.table }, 'an index entity the build may have put back was not checked: verify will show it'),
        );
      }
      return { group, stamped, etags };
    }
  }

  /**
   * The group without the writes whose EGT would now go out too late: all of them when it could be applied after
   * their reservations' lease has ended (tried again), a write of `@blob` fields past its commit window (failed: its
   * blobs' cleanup may take them once it is applied). Their effects are undone.
   */
  private async withinWindows(
    group: GroupPlan<PendingWrite>,
    state: GroupState,
    effects: Map<PendingWrite, Effects>,
    reservedUntil: Date,
    retry: PendingWrite[],
  ): Promise<GroupPlan<PendingWrite>> {
    const { store } = this.ctx;
    if (Date.now() + store.timeoutMs > reservedUntil.getTime() - CLOCK_MARGIN_MS) {
      await Promise.all(group.planned.map(({ member }) => undoEffects(this.ctx, member, effects.get(member)!)));
      return this.without(group, state, ({ member }) => this.again(member, retry));
    }
    const late = group.planned.filter(({ member }) => member.sendBy !== undefined && Date.now() + store.timeoutMs > member.sendBy);
    if (late.length === 0) return group;
    await Promise.all(late.map(({ member }) => undoEffects(this.ctx, member, effects.get(member)!)));
    const error = new TablegraphError(ErrorCode.STORAGE_UNAVAILABLE, "The write took longer than its blobs' commit window; nothing was written. Try again.", {
      reason: 'BlobCommitWindowPassed',
    });
    return this.without(group, state, (p) => late.includes(p) && this.fail(p.member, error));
  }

  /**
   * An EGT failed, and nothing of it was applied — or, with no answer, maybe all of it. Blames the write or holder
   * the failing operation belongs to; every write not failed is undone and tried again.
   * @returns the writes to try again
   */
  private async failedEgt(
    group: GroupPlan<PendingWrite>,
    state: GroupState,
    effects: Map<PendingWrite, Effects>,
    error: unknown,
    observer?: StorageObserver,
  ): Promise<PendingWrite[]> {
    const operationIndex = isTablegraphError(error) ? error.details.operationIndex : undefined;
    const index = typeof operationIndex === 'number' ? operationIndex : undefined;
    if (index === undefined || mayBeOwnAttempt(error)) {
      const settled = await this.settleByReadBack({ group, state, effects }, error, index !== undefined, observer);
      if (settled || index === undefined) return [];
    }
    return this.blame(group, effects, error, index);
  }

  /**
   * The EGT may have been applied: each write's WriteId on its entity, or its change entity, tells (readBack).
   * Applied: committed. Not applied, or not known, with no operation named (`named` false) or no way to tell: each
   * write fails; messages and reservations stay for the worker, since a late answer could still apply the EGT —
   * unless a fence decided that it never will be: then they are undone, so that a unique value it reserved is free at
   * once, not only once its lease ends.
   * @returns whether every write of the group is settled; false: known not applied, the failing operation's to blame
   */
  private async settleByReadBack(
    attempt: { group: GroupPlan<PendingWrite>; state: GroupState; effects: Map<PendingWrite, Effects> },
    error: unknown,
    named: boolean,
    observer?: StorageObserver,
  ): Promise<boolean> {
    const { group, state, effects } = attempt;
    this.holders.clear();
    let back = await this.readBack(group, observer);
    // Not applied, or not known to be: the EGT may still be applied later — unless a fence at one of its change
    // entities decides it (change-fence.ts): then it never is, or it was (and, late, is told again to subscribers).
    const fate = back.applied ? undefined : await this.ctx.fences?.decide(this.table, group.operations, 2 * this.ctx.store.timeoutMs);
    if (fate === 'fenced') back = { applied: undefined, known: true };
    else if (fate === 'applied') back = await this.readBack(group, observer);
    if (back.applied) {
      // Every write shows: the EGT was applied (it is all or nothing). Its ETags are the ones read now.
      this.committed(
        group,
        state,
        group.owners.map(() => undefined),
        back.applied,
      );
      return true;
    }
    if (named && back.known) return false;
    // Fenced off: the EGT is refused whenever it arrives, so nothing of the attempt may commit.
    if (fate === 'fenced') await Promise.all(group.planned.map(({ member }) => undoEffects(this.ctx, member, effects.get(member)!)));
    // A refusal whose cause cannot be told (a delete with `ifMatch`, its entity gone: its own attempt, or another
    // client's delete) says that the outcome is not known.
    const unknown = named
      ? new TablegraphError(
          ErrorCode.STORAGE_UNAVAILABLE,
          "The write's answer was lost and its outcome cannot be read back: read the entity before writing again.",
          {
            reason: 'OutcomeUnknown',
          },
        )
      : error;
    group.planned.forEach(({ member }) => member.reject(unknown));
    return true;
  }

  /**
   * Nothing of the EGT was applied, and operation `index` refused it: its write (or holder) is blamed; every other
   * write is undone and tried again.
   * @returns the writes to try again
   */
  private async blame(group: GroupPlan<PendingWrite>, effects: Map<PendingWrite, Effects>, error: unknown, index: number): Promise<PendingWrite[]> {
    const retry: PendingWrite[] = [];
    const owner = group.owners[index];
    if (!owner) {
      // An operation nobody planned (a bug, or a store that changed the EGT): nothing to retry with any sense.
      for (const { member } of group.planned) {
        await undoEffects(this.ctx, member, effects.get(member)!);
        member.reject(error);
      }
      return retry;
    }
    const blamed = 'write' in owner ? owner.write : -1;
    // Whether the failing operation is the blamed write's own entity (its first operation, or a wide entity's parts),
    // not an index entity.
    const first = group.owners.findIndex((o) => 'write' in o && o.write === blamed);
    const onEntity = blamed >= 0 && index >= first && index < first + (group.planned[blamed].plan.wideParts?.length ?? 1);
    if (blamed < 0) this.holders.clear(); // a holder changed or vanished in another process: read it again
    for (const [i, { member, plan }] of group.planned.entries()) {
      await undoEffects(this.ctx, member, effects.get(member)!);
      if (i !== blamed) {
        this.again(member, retry, error);
        continue;
      }
      const stale = onEntity && isTablegraphError(error, ErrorCode.CONFLICT) && error.details.reason === 'ETagMismatch';
      const vanished = onEntity && isTablegraphError(error, ErrorCode.NOT_FOUND) && plan.operations[0].kind !== 'create';
      // An INCREMENT that found nothing and created: another process created it first — add to that one.
      const raced =
        onEntity && member.write.action === 'INCREMENT' && isTablegraphError(error, ErrorCode.CONFLICT) && error.details.reason === 'EntityAlreadyExists';
      // Its entity changed or vanished since it was read: with `ifMatch` that is the client's conflict; without,
      // read it again (a vanished entity then fails NOT_FOUND, a concurrent create CONFLICT, from the planner).
      // A create that did not read its entity, refused because it exists: read it, and fail with the planner's error.
      const unread = onEntity && skipsRead(member) && isTablegraphError(error, ErrorCode.CONFLICT) && error.details.reason === 'EntityAlreadyExists';
      // A delete without If-Match of an index entity that is not there (one a build has not reached yet), met by the
      // SDK's retry of an EGT not applied: tried again, where its first attempt leaves that delete out (submit).
      const absentIndex = !onEntity && plainDeleteMissing(group.operations[index], error);
      if (absentIndex) this.again(member, retry, error);
      else if (unread) {
        member.readFirst = true;
        this.again(member, retry, error);
      } else if ((stale || vanished || raced) && typeof member.input.ifMatch !== 'string') this.again(member, retry, error);
      else this.fail(member, stale || vanished ? staleIfMatch(member) : error);
    }
    return retry;
  }

  /**
   * Whether the group's EGT was applied, all of it (an EGT is all or nothing): a write whose type a subscription
   * follows shows it by its change entity, which the EGT holds (change-log.ts); any other write by its entity read
   * back — carrying its WriteId, or for a delete, absent. A delete's absence proves nothing when the client gave an
   * `ifMatch` (another client may have deleted that version), so a group of such deletes alone is never taken for
   * applied unless a change entity shows it. A read that fails is tried again (storage that throttles), up to
   * READ_BACK_ATTEMPTS times.
   * @param group its `operations` as they were sent (the change entities' RowKeys as stamped)
   * @returns `applied`: the entities as read, one per planned write, when it was; otherwise `known`: whether some
   *   write shows it was not (else its outcome is not known)
   */
  private async readBack(
    group: GroupPlan<PendingWrite>,
    observer?: StorageObserver,
  ): Promise<{ applied: Array<StoredEntity | null>; known?: undefined } | { applied: undefined; known: boolean }> {
    const changes = group.planned.map(({ plan }) =>
      group.operations.find((op) => op.kind === 'create' && isChangeEntity(op.entity) && op.entity.properties[CHANGE.writeId]?.value === plan.writeId),
    );
    let now: Array<StoredEntity | null | undefined> = [];
    let logged: Array<StoredEntity | null | undefined> = [];
    for (let attempt = 0; attempt < READ_BACK_ATTEMPTS; attempt++) {
      if (attempt > 0) await new Promise((r) => setTimeout(r, 200 * 2 ** attempt));
      [now, logged] = await Promise.all([
        Promise.all(group.planned.map(({ member }) => readEntity(this.ctx.store, member.write.entity, member.address, observer).catch(() => undefined))),
        Promise.all(
          changes.map((op) =>
            op?.kind === 'create'
              ? this.ctx.store
                  .getEntity({ table: this.table, partitionKey: op.entity.partitionKey, rowKey: op.entity.rowKey }, { observer })
                  .catch(() => undefined)
              : null,
          ),
        ),
      ]);
      if (now.every((e) => e !== undefined) && logged.every((e) => e !== undefined)) break;
    }
    const shows = group.planned.map(({ plan, member }, i) => {
      if (changes[i]) return logged[i] === undefined ? undefined : logged[i] !== null;
      if (now[i] === undefined) return undefined;
      if (plan.values) return now[i] !== null && writtenBy(now[i]!, plan.writeId);
      // A delete that leaves a tombstone (model/tombstones.ts): the tombstone carries its write id.
      if (isTombstone(now[i])) return writtenBy(now[i]!, plan.writeId);
      if (now[i] !== null) return false; // a delete whose entity is still there
      return typeof member.input.ifMatch !== 'string' ? true : undefined;
    });
    // Applied when every write shows it, or some write proves it and none says otherwise (a delete's absence agrees).
    const proof = shows.some((x, i) => x === true && (changes[i] !== undefined || group.planned[i].plan.values !== null));
    if (shows.every((x) => x === true) || (proof && shows.every((x, i) => x === true || (x === undefined && now[i] === null)))) {
      return { applied: now as Array<StoredEntity | null> };
    }
    return { applied: undefined, known: shows.some((x) => x === false) };
  }

  /** Where this committer's EGTs go; with capture on, how their images are sealed. */
  private groupTarget(): GroupTarget {
    const { store, capture } = this.ctx;
    return { target: store.target, table: this.table, ...(capture && { seal: (e: EntityToWrite) => store.sealed(e) }) };
  }

  /** Re-plans the group without the writes `drop` returns true for (they failed or wait for the next EGT). */
  private without(
    group: GroupPlan<PendingWrite>,
    state: GroupState,
    drop: (p: GroupPlan<PendingWrite>['planned'][number]) => boolean,
  ): GroupPlan<PendingWrite> {
    const kept = group.planned.filter((p) => !drop(p));
    if (kept.length === group.planned.length) return group;
    // Same state, fewer writes: each plan stays as it was; only the holders' sums change.
    const again = planGroup(
      this.ctx.model,
      kept.map((p) => p.member),
      state,
      this.groupTarget(),
    );
    again.refused.forEach(({ member, error }) => member.reject(error));
    return { ...again, deferred: [...again.deferred, ...group.deferred] };
  }

  /**
   * Whether a write leaves the group for the unique keys it found held: another entity's fails it (saying until when,
   * when only a write not yet settled holds it); another attempt of its own entity that may still commit sends it
   * back for another attempt, and past its attempts the refusal says until when.
   */
  private heldKey({ member, plan }: GroupPlan<PendingWrite>['planned'][number], keys: Map<string, KeyState>, retry: PendingWrite[]): boolean {
    const states = plan.reservations.map((r) => keyState(keys, r));
    const name = member.write.entity.name;
    const taken = states.findIndex((k) => k.kind === 'taken');
    if (taken >= 0) return this.fail(member, uniqueKeyTaken(name, plan.reservations[taken], heldUntilOf(states[taken])));
    const busy = states.findIndex((k) => k.kind === 'busy');
    return busy >= 0 && this.again(member, retry, reservationBusy(name, plan.reservations[busy], heldUntilOf(states[busy])));
  }

  private fail(member: PendingWrite, error: unknown): true {
    member.reject(error);
    return true;
  }

  /** Puts a write back for another attempt, or fails it with `error` once it has had its attempts. */
  private again(member: PendingWrite, retry: PendingWrite[], error?: unknown): true {
    member.attempts++;
    if (member.attempts < this.ctx.maxAttempts) {
      retry.push(member);
      return true;
    }
    member.reject(
      error ??
        new TablegraphError(
          ErrorCode.STORAGE_UNAVAILABLE,
          `${member.write.entity.name}: gave up after ${member.attempts} attempts against concurrent writers`,
          {
            reason: 'Contention',
          },
        ),
    );
    return true;
  }

  /**
   * After a commit: every write learns its result; the holders' new ETags and values are kept for the next EGT.
   * @param etags the EGT's ETags, one per operation
   * @param readBack the writes' entities as read back after an EGT whose answer was lost, whose ETags are theirs
   */
  private committed(group: GroupPlan<PendingWrite>, state: GroupState, etags: Array<string | undefined>, readBack?: Array<StoredEntity | null>): void {
    group.planned.forEach(({ member, plan }, i) => {
      const first = group.owners.findIndex((o) => 'write' in o && o.write === i);
      // A write of a holder itself (a department's name) leaves its cached copy stale.
      this.holders.delete(addressKey(member.address));
      const before = state.entities.get(addressKey(member.address));
      const wide = member.write.entity.wide;
      const etag =
        readBack?.[i]?.etag ??
        (wide && plan.wideParts
          ? etagAfter(before ?? null, plan.wideParts, etags.slice(first, first + plan.wideParts.length), wide.parts.length)
          : etags[first]);
      member.resolve(
        plan.values
          ? { address: member.address, values: plan.values, etag: etag ?? '', deleted: false }
          : { address: member.address, values: plan.previous!, etag: before?.etag ?? '', deleted: true },
      );
    });
    group.holders.forEach((h) => {
      const before = state.holders.get(h.key);
      // The holder's merge is the first operation it owns (its change entity, if any, follows it).
      const etag = etags[group.owners.findIndex((o) => 'holder' in o && o.holder === h.key)];
      if (before && etag && !group.planned.some(({ member }) => addressKey(member.address) === h.key)) {
        this.holders.set(h.key, { ...before, etag, properties: { ...before.properties, ...h.fields } });
      } else {
        this.holders.delete(h.key);
      }
    });
  }
}

/** The CONFLICT of a write whose `ifMatch` was current when read, but not by the time its EGT arrived. */
function staleIfMatch(member: PendingWrite): TablegraphError {
  return new TablegraphError(
    ErrorCode.CONFLICT,
    `${member.write.entity.name} ${member.address.partitionKey}/${member.address.rowKey} changed since it was read (stale ifMatch ETag)`,
    {
      reason: 'ETagMismatch',
    },
  );
}

/**
 * The index of a delete without If-Match that the service refused because its entity is not there — on the EGT's
 * first and only attempt (after a retry, the first attempt may have applied it, and the read-back decides).
 */
function missingPlainDelete(operations: TransactionOperation[], error: unknown): number | undefined {
  if (!isTablegraphError(error)) return undefined;
  if (typeof error.details.attempts === 'number' && error.details.attempts > 1) return undefined;
  const index = error.details.operationIndex;
  if (typeof index !== 'number') return undefined;
  return plainDeleteMissing(operations[index], error) && operations.length > 1 ? index : undefined;
}

/** Whether `error` is the refusal of `op`, a delete without If-Match, because its entity is not there. */
function plainDeleteMissing(op: TransactionOperation | undefined, error: unknown): boolean {
  if (!isTablegraphError(error, ErrorCode.NOT_FOUND) || error.details.reason === 'TableNotFound') return false;
  return op?.kind === 'delete' && (op.ifMatch === undefined || op.ifMatch === '*');
}

/**
 * Whether a refusal that names an operation may be what the SDK's retry of this very EGT met (its details.attempts)
 * after its first attempt was applied with its answer lost: an insert that finds its entity, an If-Match that finds
 * its own ETag gone, a delete that finds its entity gone. A refusal of a first and only attempt is the writes' own.
 */
function mayBeOwnAttempt(error: unknown): boolean {
  const refusal = isTablegraphError(error) ? error : undefined;
  const retried = typeof refusal?.details.attempts === 'number' && refusal.details.attempts > 1;
  return retried && (refusal?.code === ErrorCode.CONFLICT || (refusal?.code === ErrorCode.NOT_FOUND && refusal.details.reason !== 'TableNotFound'));
}
