/**
 * Reads the change log (src/model/change-log.ts) for the subscriptions of this server: every watched partition
 * (table, PartitionKey) is polled with one range query per interval, shared by all its subscribers, and each change
 * that some subscriber is to get has its entity read once (a point query), shared too. No broker: any number of
 * servers poll what their own subscribers watch.
 *
 * A poll reads the changes made in the last `overlapMs` (not only since the last poll): a change's time is taken
 * when its write is planned, and its EGT may commit up to a storage timeout later, or on a server whose clock is
 * a little behind. Each subscriber remembers the changes it got within that window, so it gets each once.
 *
 * Guide sections: "Log tail pattern" (range queries newest first), "Entity Group Transactions" (a change exists
 * exactly when its write committed).
 */
import pLimit from 'p-limit';
import { CHANGE_ROW_KEY_PREFIX, changesSinceBound, readChange, type Change } from '../../model/change-log';
import type { Logger } from '../../log';
import type { TableStore } from '../../storage/table-store';
import type { StoredEntity } from '../../storage/types';

/** One change and its entity as read after it (null: deleted, or not read because no subscriber wanted it). */
export interface ChangeEvent {
  change: Change;
  stored: StoredEntity | null;
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
  log?: Logger;
}

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

interface Watched {
  table: string;
  partitionKey: string;
  listeners: Map<ChangeListener, Map<string, number>>;
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
   * @param alreadySeen changes the listener got otherwise (a resume's catch-up): not delivered again
   * @returns a function that stops it
   */
  watch(table: string, partitionKey: string, listener: ChangeListener, alreadySeen: Change[] = []): () => void {
    const key = `${table}\u0000${partitionKey}`;
    let w = this.watched.get(key);
    if (!w) {
      w = { table, partitionKey, listeners: new Map() };
      this.watched.set(key, w);
    }
    w.listeners.set(listener, new Map(alreadySeen.map((c) => [c.changeKey, c.at])));
    this.schedule(0);
    return () => {
      w.listeners.delete(listener);
      if (w.listeners.size === 0 && this.watched.get(key) === w) this.watched.delete(key);
    };
  }

  /**
   * The changes of a partition made since `since` (ms), oldest first, each entity read once: a resuming
   * subscriber's catch-up, one range query (and its continuation pages) for it alone.
   * @throws storage errors
   */
  async changesSince(table: string, partitionKey: string, since: number, wanted: (c: Change) => boolean): Promise<ChangeEvent[]> {
    const changes = (await this.readLog(table, partitionKey, since)).filter(wanted);
    return this.withEntities(changes);
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
    let changes: Change[];
    try {
      changes = await this.readLog(w.table, w.partitionKey, now - this.opts.overlapMs);
    } catch (err) {
      this.stats_.failures++;
      this.opts.log?.warn({ err, table: w.table, partitionKey: w.partitionKey }, 'subscriptions: a change log poll failed; the next one reads the same window');
      return;
    }
    // Who gets what: a change a listener has not had, made after it started, that it wants.
    const due = new Map<ChangeListener, Change[]>();
    for (const [listener, seen] of w.listeners) {
      for (const [k, at] of seen) if (at < now - 2 * this.opts.overlapMs) seen.delete(k);
      const mine = changes.filter((c) => c.at >= listener.since && !seen.has(c.changeKey) && listener.wants(c));
      if (mine.length > 0) due.set(listener, mine);
    }
    if (due.size === 0) return;
    const needed = [...new Map([...due.values()].flat().map((c) => [c.changeKey, c])).values()];
    let events: Map<string, ChangeEvent>;
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
    for (const [listener, mine] of due) {
      const seen = w.listeners.get(listener);
      if (!seen) continue; // unsubscribed meanwhile
      mine.forEach((c) => seen.set(c.changeKey, c.at));
      const allowed = mine.map((c) => events.get(c.changeKey)!).filter((e) => listener.allows(e));
      if (allowed.length === 0) continue;
      this.stats_.delivered += allowed.length;
      listener.deliver(allowed);
    }
  }

  /** The changes made since `since` (ms), oldest first: one range query, its continuation pages followed. */
  private async readLog(table: string, partitionKey: string, since: number): Promise<Change[]> {
    this.stats_.polls++;
    const page = await this.opts.store.queryRange({
      table,
      partitionKey,
      rowKeyFrom: CHANGE_ROW_KEY_PREFIX,
      rowKeyTo: changesSinceBound(since),
      limit: 100_000,
    });
    return page.entities
      .map((e) => readChange(table, e))
      .filter((c): c is Change => c !== undefined && c.at >= since)
      .sort((a, b) => a.at - b.at || (a.changeKey < b.changeKey ? 1 : -1));
  }

  /** Each change with its entity as it is now, read once per entity (a deleted one: not read). */
  private async withEntities(changes: Change[]): Promise<ChangeEvent[]> {
    const reads = new Map<string, Promise<StoredEntity | null>>();
    for (const c of changes) {
      if (c.kind === 'DELETED') continue;
      const key = c.address.rowKey;
      if (!reads.has(key)) {
        this.stats_.reads++;
        reads.set(key, this.opts.store.getEntity(c.address));
      }
    }
    return Promise.all(changes.map(async (change) => ({ change, stored: change.kind === 'DELETED' ? null : await reads.get(change.address.rowKey)! })));
  }
}
