/**
 * Reads the change log (src/model/change-log.ts) for the subscriptions of this server: every watched partition
 * (table, PartitionKey) is polled with one range query per interval, shared by all its subscribers, and each change
 * that some subscriber is to get has its entity read once (a point query), shared too. No broker: any number of
 * servers poll what their own subscribers watch.
 *
 * A poll reads the changes made since `overlapMs` before the last poll that succeeded (not only since that poll): a
 * change's time is taken right before its EGT is sent (change-log.ts stampChanges), and the EGT may be applied up to a
 * storage timeout later, or on a server whose clock is a little behind. Each subscriber remembers the changes it got
 * within that window, so it gets each once; a poll that fails, or a server that stalls, widens the next window rather
 * than losing what committed meanwhile.
 *
 * Each delivery says what the subscriber has had by then, for its cursor: the snapshot (change-log.ts ChangeSnapshot:
 * the newest commit Timestamp read) of the poll that delivered it and of the subscriber's poll before. A client that
 * resumes from an event's cursor (resume) gets exactly what came after that event: the changes the same poll
 * delivered after it, and those committed after that poll.
 *
 * A change committed later than the readers look back — its EGT held by a busy service past its timeout — is told
 * again by a relay (src/write/change-fence.ts); a change and its relay are one change to a subscriber, live or resumed.
 *
 * Guide sections: "Log tail pattern" (range queries newest first), "Entity Group Transactions" (a change exists
 * exactly when its write committed).
 */
import pLimit from 'p-limit';
import { changeTime as changeTimeOf } from '../model/change-log';
import {
  CHANGE_ROW_KEY_PREFIX,
  changeIdentity,
  changeOrder,
  changesSinceBound,
  readChange,
  sawChange,
  snapshotOf,
  type Change,
  type ChangeSnapshot,
} from '../model/change-log';
import type { Logger } from '../log';
import type { StorageAdmission } from './admission';
import type { TableStore } from '../storage/table-store';
import type { StoredEntity } from '../storage/storage-types';

/** Where a delivered change stands in what its subscriber has had: the snapshots its cursor carries. */
export interface DeliveryRound {
  /** The snapshot of the read that delivered the change. */
  seen: ChangeSnapshot;
  /** The snapshot of the subscriber's read before it (undefined: its first). */
  before?: ChangeSnapshot;
}

/** One change and its entity as read after it (null: deleted, or not read because no subscriber wanted it). */
export interface ChangeEvent {
  change: Change;
  stored: StoredEntity | null;
  /** The round that delivered it (set for each subscriber as it is delivered). */
  round?: DeliveryRound;
}

/** Where a client resumes: right after the change `changeKey`, delivered in `round`. */
export interface ResumePoint {
  changeKey: string;
  round: DeliveryRound;
}

/** A subscriber of one partition: what it wants, and where its changes go. */
export interface ChangeListener {
  /** Changes made before this (ms since the epoch) are not for it. */
  since: number;
  /** Whether it wants this change (its entity type, its entity, its `@auth`, decided on the keys). */
  wants(change: Change): boolean;
  /** Whether it may see the change with the entity as read (its `@auth`, decided on the entity). */
  allows(event: ChangeEvent): boolean;
  /** The changes for it, oldest first. */
  deliver(events: ChangeEvent[]): void;
}

export interface ChangePollerOptions {
  store: TableStore;
  /** Time between two polls of a partition (ms; default 500). */
  intervalMs?: number;
  /** How far back each poll reads (ms): at least the longest a write's EGT may take, plus clock skew. */
  overlapMs: number;
  /** Partitions polled at once (range queries in flight; default 16). */
  concurrency?: number;
  /** The server's storage admission: the polls and their reads take turns with requests, in one lane of their own. */
  admission?: StorageAdmission;
  log?: Logger;
}

/** The admission lane of the subscriptions' storage calls. */
const ADMISSION_LANE = 'subscriptions';

/** What the poller has done since it started (for /metrics). */
export interface ChangePollerStats {
  /** Partitions watched now. */
  partitions: number;
  /** Subscribers now, all partitions together. */
  listeners: number;
  /** Range queries sent (calls). */
  polls: number;
  /** Point queries sent for changed entities (calls). */
  reads: number;
  /** Changes delivered, one per subscriber that got it (events). */
  delivered: number;
  /** Polls that failed (calls). */
  failures: number;
}

/** What a subscriber of a watched partition has had: the changes of the window, and the last snapshot it was told. */
interface ListenerState {
  seen: Map<string, number>;
  snapshot?: ChangeSnapshot;
}

interface Watched {
  table: string;
  partitionKey: string;
  listeners: Map<ChangeListener, ListenerState>;
  /** When the last poll that succeeded started (ms since the epoch); the next reads from `overlapMs` before it. */
  polledAt?: number;
  /** The newest snapshot any poll of the partition read. */
  snapshot?: ChangeSnapshot;
}

/**
 * The changes with one of each identity (change-log.ts changeIdentity): a change and its relay (a change committed
 * late, told again: src/write/change-fence.ts) are one change, told once — the first of them in `changes`' order.
 */
function onePerChange(changes: Change[]): Change[] {
  const told = new Set<string>();
  return changes.filter((c) => {
    const id = changeIdentity(c);
    if (told.has(id)) return false;
    told.add(id);
    return true;
  });
}

/** Default time between two polls of a partition (ms). */
export const DEFAULT_POLL_INTERVAL_MS = 500;

/** Polls the watched partitions' change logs and hands each subscriber its changes. One per server. */
export class ChangePoller {
  private readonly watched = new Map<string, Watched>();
  private readonly stats_: Omit<ChangePollerStats, 'partitions' | 'listeners'> = { polls: 0, reads: 0, delivered: 0, failures: 0 };
  private timer?: NodeJS.Timeout;
  private round?: Promise<void>;
  private closed = false;
  private readonly intervalMs: number;
  private readonly limit: ReturnType<typeof pLimit>;

  constructor(private readonly opts: ChangePollerOptions) {
    this.intervalMs = opts.intervalMs ?? DEFAULT_POLL_INTERVAL_MS;
    this.limit = pLimit(opts.concurrency ?? 16);
  }

  /**
   * Starts delivering the changes of a partition to `listener`; the first poll of a partition not yet watched
   * starts at once.
   * @param alreadySeen changes the listener had otherwise (a resume's catch-up), and the snapshot of that read: not
   *   delivered again
   * @returns a function that stops it
   */
  watch(
    table: string,
    partitionKey: string,
    listener: ChangeListener,
    alreadySeen: { changes: Change[]; snapshot?: ChangeSnapshot } = { changes: [] },
  ): () => void {
    const key = `${table}\u0000${partitionKey}`;
    let w = this.watched.get(key);
    if (!w) {
      w = { table, partitionKey, listeners: new Map() };
      this.watched.set(key, w);
    }
    w.listeners.set(listener, { seen: new Map(alreadySeen.changes.map((c) => [changeIdentity(c), c.at])), snapshot: alreadySeen.snapshot });
    this.schedule(0);
    return () => {
      w.listeners.delete(listener);
      if (w.listeners.size === 0 && this.watched.get(key) === w) this.watched.delete(key);
    };
  }

  /**
   * A resuming subscriber's catch-up: every change it wants that came after `from` — those its poll delivered
   * after it, then those committed since that poll — each entity read once, each event with its round; and every
   * change of the window read (delivered before or now), for `watch`'s `alreadySeen`. One range query (and its
   * continuation pages) for it alone, from `overlapMs` before the resumed change.
   * @param maxReads the entities the catch-up may read (point queries); past it, nothing is read
   * @returns undefined when more than `maxReads` entities were to be read
   * @throws storage errors
   */
  async resume(
    table: string,
    partitionKey: string,
    from: ResumePoint,
    wanted: (c: Change) => boolean,
    maxReads: number,
  ): Promise<{ events: ChangeEvent[]; read: Change[]; snapshot?: ChangeSnapshot } | undefined> {
    const at = changeTimeOf(from.changeKey);
    const read = await this.readLog(table, partitionKey, at - this.opts.overlapMs);
    const snapshot = snapshotOf(read, from.round.seen);
    const resumed = { at, changeKey: from.changeKey };
    // Delivered in the same round as the resumed change, after it: again, in that round.
    const sameRound = read.filter((c) => !sawChange(from.round.before, c) && sawChange(from.round.seen, c) && changeOrder(c, resumed) > 0);
    // Committed after that round's read: in a round of their own.
    const later = read.filter((c) => !sawChange(from.round.seen, c));
    // A relay of a change the resumed round had seen was told already; of one not seen, it is told once for both.
    const seenRelayed = new Set(read.filter((c) => sawChange(from.round.seen, c)).map((c) => c.changeKey));
    const due = onePerChange([...sameRound, ...later].filter((c) => !(c.relays && seenRelayed.has(c.relays)))).filter(wanted);
    if (new Set(due.filter((c) => c.kind !== 'DELETED').map((c) => c.address.rowKey)).size > maxReads) return undefined;
    const events = await this.withEntities(due);
    const rounds = new Map<Change, DeliveryRound>([
      ...sameRound.map((c): [Change, DeliveryRound] => [c, from.round]),
      ...later.map((c): [Change, DeliveryRound] => [c, { seen: snapshot!, before: from.round.seen }]),
    ]);
    for (const e of events) e.round = rounds.get(e.change);
    return { events, read, snapshot };
  }

  stats(): ChangePollerStats {
    let listeners = 0;
    for (const w of this.watched.values()) listeners += w.listeners.size;
    return { partitions: this.watched.size, listeners, ...this.stats_ };
  }

  /** Stops polling; waits for the poll under way. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    await this.round;
  }

  private schedule(delayMs: number): void {
    if (this.closed || this.round || (this.timer && delayMs > 0)) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const started = Date.now();
      this.round = this.pollAll().finally(() => {
        this.round = undefined;
        if (this.watched.size > 0) this.schedule(Math.max(1, this.intervalMs - (Date.now() - started)));
      });
    }, delayMs);
    this.timer.unref?.();
  }

  private async pollAll(): Promise<void> {
    await Promise.all([...this.watched.values()].map((w) => this.limit(() => this.poll(w))));
  }

  private async poll(w: Watched): Promise<void> {
    if (w.listeners.size === 0) return;
    const now = Date.now();
    // From the overlap before the last poll that succeeded: a failed or stalled poll widens this one.
    const from = Math.min(now, w.polledAt ?? now) - this.opts.overlapMs;
    let changes: Change[];
    try {
      changes = await this.readLog(w.table, w.partitionKey, from);
    } catch (err) {
      this.stats_.failures++;
      this.opts.log?.warn({ err, table: w.table, partitionKey: w.partitionKey }, 'subscriptions: a change log poll failed; the next one reads the same window');
      return;
    }
    const snapshot = snapshotOf(changes, w.snapshot);
    // Who gets what: a change a listener has not had, made after it started, that it wants.
    const due = new Map<ChangeListener, Change[]>();
    const rounds = new Map<ChangeListener, DeliveryRound>();
    const served = [...w.listeners.values()];
    for (const [listener, state] of w.listeners) {
      for (const [k, at] of state.seen) if (at < from) state.seen.delete(k);
      const mine = onePerChange(changes.filter((c) => c.at >= listener.since && !state.seen.has(changeIdentity(c)) && listener.wants(c)));
      if (mine.length > 0 && snapshot) {
        due.set(listener, mine);
        rounds.set(listener, { seen: snapshot, before: state.snapshot });
      }
    }
    let events = new Map<string, ChangeEvent>();
    if (due.size > 0) {
      const needed = [...new Map([...due.values()].flat().map((c) => [c.changeKey, c])).values()];
      try {
        events = new Map((await this.withEntities(needed)).map((e) => [e.change.changeKey, e]));
      } catch (err) {
        this.stats_.failures++;
        this.opts.log?.warn(
          { err, table: w.table, partitionKey: w.partitionKey },
          'subscriptions: changed entities could not be read; the next poll tries again',
        );
        return;
      }
    }
    // Only a poll that succeeded moves the window and the snapshots on: one that failed is read again, whole.
    w.polledAt = now;
    w.snapshot = snapshot;
    // What this read saw, every listener it served has had (delivered now or before, or not for it); one that
    // joined while it read gets it from the next.
    if (snapshot) for (const state of served) state.snapshot = snapshot;
    for (const [listener, mine] of due) {
      const state = w.listeners.get(listener);
      if (!state) continue; // unsubscribed meanwhile
      mine.forEach((c) => state.seen.set(changeIdentity(c), c.at));
      const round = rounds.get(listener)!;
      const allowed = mine.map((c) => ({ ...events.get(c.changeKey)!, round })).filter((e) => listener.allows(e));
      if (allowed.length === 0) continue;
      this.stats_.delivered += allowed.length;
      listener.deliver(allowed);
    }
  }

  /** The changes made since `since` (ms), oldest first: one range query, its continuation pages followed. */
  private async readLog(table: string, partitionKey: string, since: number): Promise<Change[]> {
    this.stats_.polls++;
    const page = await this.admitted(() =>
      this.opts.store.queryRange({
        table,
        partitionKey,
        rowKeyFrom: CHANGE_ROW_KEY_PREFIX,
        rowKeyTo: changesSinceBound(since),
        limit: 100_000,
      }),
    );
    return page.entities
      .map((e) => readChange(table, e))
      .filter((c): c is Change => c !== undefined && c.at >= since)
      .sort(changeOrder);
  }

  /** A storage call through the server's admission, when there is one (its OVERLOADED: the poll tries again). */
  private admitted<T>(call: () => Promise<T>): Promise<T> {
    return this.opts.admission ? this.opts.admission.run(ADMISSION_LANE, call) : call();
  }

  /** Each change with its entity as it is now, read once per entity (a deleted one: not read). */
  private async withEntities(changes: Change[]): Promise<ChangeEvent[]> {
    const reads = new Map<string, Promise<StoredEntity | null>>();
    for (const c of changes) {
      if (c.kind === 'DELETED') continue;
      const key = c.address.rowKey;
      if (!reads.has(key)) {
        this.stats_.reads++;
        reads.set(
          key,
          this.admitted(() => this.opts.store.getEntity(c.address)),
        );
      }
    }
    return Promise.all(changes.map(async (change) => ({ change, stored: change.kind === 'DELETED' ? null : await reads.get(change.address.rowKey)! })));
  }
}
