/**
 * The builds of derived access paths after a schema change, driven by the workers (docs/schema-changes.md): every
 * worker — the server's own and `npm run worker` — looks at the catalogue every `pollMs`; one of them at a time
 * holds each build's lease (a conditional write of its row) and carries the build forward in checkpointed steps:
 *
 * - an index: one page of the type's table per step (index-build.ts), its continuation token the checkpoint;
 * - a summary kept in its holders' EGTs: one page of holders per step, each recounted (holderPageStep); a summary
 *   kept by the worker, held elsewhere: its contributions and holders repaired (src/maintenance/summary-state.ts),
 *   in one step, done again from the start after a kill;
 * - a copy: one page of the copying type per step, each entity's copies compared with their targets (copyPageStep);
 * - a re-key (rekey-build.ts): one page of the old table copied per step; then, once no process of the older
 *   version is left, its switch (finishRekey) in one step, done again from the start after a kill. A path that reads
 *   or writes a type being re-keyed waits for it, and is set back to its start by its switch.
 *
 * Each step renews the lease and writes the checkpoint with If-Match (a long one renews the lease as it runs): a
 * worker that lost its lease (it stalled, and another took the build over) stops at its next step, and its last step
 * is redone. An index build taken over, and any build during which a server of an older schema version was running
 * (it does not keep the new path), ends once no such server is left with a repair pass: an index's table compared
 * whole with its entities and made equal (src/maintenance/index-rebuild.ts); a summary's or a copy's build done again
 * from its start (repair). Writes are throttled to `entitiesPerSecond`.
 */
import { ErrorCode, isTablegraphError, TablegraphError, type ReasonName } from '../errors';
import type { Logger } from '../log';
import { ENTITY_TYPE_PROPERTY, type EntityModel, type IndexModel, type Model, type SummaryModel } from '../model/types';
import { pathTypes } from '../model/derived-paths';
import type { TableStore } from '../storage/table-store';
import type { StorageObserver } from '../storage/storage-types';
import { rebuildIndex } from '../maintenance/index-rebuild';
import { repairHolder, repairSummaries } from '../maintenance/summary-state';
import { refreshCopies } from '../derived/copy-refresh';
import type { Catalogue } from './catalogue';
import type { PathRecord, ServerRecord } from './catalogue-records';
import { countEntities } from './entity-count';
import { buildIndexPage, type ScannedPage, type SettleResult } from './index-build';
import { canonicalJson, type RecordedLayout } from './layout-record';
import { STATES_REFRESH_MS } from './path-states';
import type { PresenceBoard } from './presence';
import { addressingOf } from './layout-diff';
import {
  catchUpRekey,
  cleanUpRekey,
  copyRekeyPage,
  countRekey,
  rekeyOf,
  type Collision,
  type Rekey,
  type RekeyDefinition,
  type Underivable,
} from './rekey-build';

export interface BuildRunnerOptions {
  catalogue: Catalogue;
  store: TableStore;
  model: Model;
  /** The layout this process's schema stores: it builds only the paths it holds with the same definition. */
  layout: RecordedLayout;
  /** This process's id in the catalogue: the leases it holds. */
  instance: string;
  log?: Logger;
  /** Index entities written per second at most, all builds of this process together (entities/s). 0: no limit. Default: 500. */
  entitiesPerSecond?: number;
  /** How long a lease lasts without a step renewing it (ms). Default: 30000. */
  leaseMs?: number;
  /** How often the catalogue is looked at for builds to take and servers to see (ms). Default: 5000. */
  pollMs?: number;
  /** Entities per page of an index build (at most 1000, the default). */
  pageSize?: number;
  /** EGTs in flight at once within a step. Default: 8. */
  concurrency?: number;
  /** Told of every storage call of the builds' steps (not of the catalogue's). */
  observer?: StorageObserver;
  now?: () => number;
  /** Where the running processes say which version they serve (presence.ts presenceBoard). */
  presence: PresenceBoard;
  /**
   * A test hook (TABLEGRAPH_TEST_BUILD_HOLD): after `steps` steps of build `path` in this process, it stops there —
   * holding the build, its lease left to lapse — and says so in the log, so that a test kills it at that named point
   * rather than at a time. Never set in production.
   */
  holdAfter?: { path: string; steps: number };
}

/** How long a re-key waits before its first copy (ms): every server has read its states twice meanwhile. */
const REKEY_NOTICE_MS = 2 * STATES_REFRESH_MS + 1000;

export class BuildRunner {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private stopping = false;
  private nextWriteAt = 0;
  /** The next page of the index build in hand, read while its page before was written. */
  private prefetched?: { path: string; token: string; page: Promise<ScannedPage> };
  /** The settling of the index build's last page inserted (its second read), running beside the next step. */
  private unsettled?: { path: string; token: string; settle: Promise<SettleResult> };
  /** Steps this process took of each build (the test hook `holdAfter` counts them). */
  private readonly stepsTaken = new Map<string, number>();
  /** Resolves the hold of `holdAfter` when the runner stops. */
  private release?: () => void;
  /** The servers of older versions seen last, and when (ms): looked at again every `pollMs`. */
  private older: { at: number; version: number; servers: ServerRecord[] } = { at: -Infinity, version: 0, servers: [] };
  /** The count of the total of the build this runner drives (countingOf). */
  private counting?: { path: string; total: Promise<number>; known?: number };

  constructor(private readonly opts: BuildRunnerOptions) {}

  /**
   * Entities per page of a step (at most 1000): never more than a second of the budget, so that the budget holds per
   * second, not per page — a step writes at most what its page read, then waits for its share of time (throttle).
   */
  private get pageSize(): number {
    const page = Math.min(this.opts.pageSize ?? 1000, 1000);
    const rate = this.opts.entitiesPerSecond ?? 500;
    return rate > 0 ? Math.max(1, Math.min(page, rate)) : page;
  }

  private get now(): number {
    return (this.opts.now ?? Date.now)();
  }

  /** Looks for builds every `pollMs`, and now. */
  start(): void {
    const tick = () => {
      if (this.running || this.stopping) return;
      this.running = this.runOnce()
        .catch((e: unknown) => this.opts.log?.warn({ err: e }, 'schema builds: a pass failed; trying again at the next poll'))
        .finally(() => (this.running = undefined));
    };
    this.timer = setInterval(tick, this.opts.pollMs ?? 5000);
    this.timer.unref();
    tick();
  }

  /** Stops after the step in hand (its checkpoint written). */
  async stop(): Promise<void> {
    this.stopping = true;
    clearInterval(this.timer);
    this.release?.();
    await this.running;
  }

  /**
   * One pass: every build of a path this schema holds (with the same definition) whose lease is free, carried
   * forward until it is done, fails, or its lease is lost.
   */
  async runOnce(): Promise<void> {
    const { catalogue, instance } = this.opts;
    const rows = await catalogue.paths();
    for (const row of rows) {
      if (this.stopping) return;
      if (row.state !== 'building' || !this.holds(row) || this.waitsForRekey(row, rows)) continue;
      if (row.leaseOwner && row.leaseOwner !== instance && (row.leaseUntil ?? 0) > this.now) continue;
      const leased = await this.lease(row);
      if (leased) await this.drive(leased);
    }
  }

  private holds(row: PathRecord): boolean {
    return holdsPath(this.opts.layout, row);
  }

  /**
   * Whether a path reads or writes a type being re-keyed (the type's entities are not all at their new addresses):
   * it is built once the re-key is done, which sets it back to its start (`resetAfterRekey`).
   */
  private waitsForRekey(row: PathRecord, rows: PathRecord[]): boolean {
    if (row.kind === 'rekey') return false;
    const rekeying = new Set(rows.filter((r) => r.kind === 'rekey' && r.state !== 'ready' && r.state !== 'retired').map(typeOfRekey));
    return rekeying.size > 0 && pathTypes(this.opts.model, row.id).some((t) => rekeying.has(t));
  }

  /** Takes the build's lease; an index build taken from another worker's lapsed lease must end with a repair pass. */
  private async lease(row: PathRecord): Promise<PathRecord | null> {
    const takenOver = !!row.leaseOwner && row.leaseOwner !== this.opts.instance;
    const next = await this.opts.catalogue.putPath({
      ...row,
      leaseOwner: this.opts.instance,
      leaseUntil: this.now + (this.opts.leaseMs ?? 30000),
      takeovers: row.takeovers + (takenOver ? 1 : 0),
      needsRepair: row.needsRepair || (takenOver && cutShortLeavesWork(row)),
      updatedAt: this.now,
    });
    if (next && takenOver)
      this.opts.log?.warn({ path: row.id, from: row.leaseOwner, checkpoint: row.checkpoint !== '' }, 'schema build taken over from a lapsed lease');
    return next;
  }

  /**
   * Steps until done, failed, the lease lost, the runner stopping, or the build waiting for servers of an older
   * version to stop — then the next build goes on, and this one is looked at again at the next poll (its lease,
   * renewed by the wait, still this worker's).
   */
  private async drive(start: PathRecord): Promise<void> {
    let row: PathRecord | null = start;
    this.opts.log?.info({ path: row.id, read: row.read }, row.read > 0 ? 'schema build resumed from its checkpoint' : 'schema build started');
    let waiting = false;
    while (row && row.state === 'building' && !this.stopping && !waiting) {
      const before: PathRecord = row;
      try {
        ({ row, waiting } = await this.step(before));
        await this.holdIfAsked(row);
      } catch (e) {
        // An index step cut short may have written part of its page: the build must end with a repair pass.
        const needsRepair = before.needsRepair || cutShortLeavesWork(before);
        await this.opts.catalogue.putPath({ ...before, needsRepair, updatedAt: this.now }).catch(() => undefined);
        throw e;
      }
    }
    await this.settleLeftOver(start.id, row);
    if (waiting) this.opts.log?.info({ path: start.id }, 'schema build scanned; waiting for the servers of an older version to stop');
    if (row?.state === 'ready')
      this.opts.log?.info({ path: row.id, read: row.read, written: row.written, skipped: row.skipped }, 'schema build done: path ready');
    if (row?.state === 'failed') this.opts.log?.error({ path: row.id, problem: row.problem }, 'schema build stopped');
  }

  /** The test hook `holdAfter`: after its step of its build, the runner waits until it is stopped (or killed). */
  private async holdIfAsked(row: PathRecord | null): Promise<void> {
    const hold = this.opts.holdAfter;
    if (!hold || !row || row.id !== hold.path) return;
    const taken = (this.stepsTaken.get(row.id) ?? 0) + 1;
    this.stepsTaken.set(row.id, taken);
    if (taken !== hold.steps || row.state !== 'building') return;
    this.opts.log?.warn({ path: row.id, steps: taken, read: row.read }, 'test hook: schema build held (TABLEGRAPH_TEST_BUILD_HOLD)');
    await new Promise<void>((resolve) => (this.release = resolve));
  }

  /**
   * The settling of an index page still running when its build's steps stopped here (the runner stopping, the lease
   * lost, a step failing) is waited for; one that failed, or found a unique value held twice, leaves the build to end
   * with a repair pass — its checkpoint is past the page already.
   */
  private async settleLeftOver(id: string, row: PathRecord | null): Promise<void> {
    if (this.unsettled?.path !== id) return;
    const { settle } = this.unsettled;
    this.unsettled = undefined;
    const found = await settle.catch(() => undefined);
    if (row && row.state === 'building' && (!found || found.heldTwice.length > 0)) {
      await this.opts.catalogue.putPath({ ...row, needsRepair: true, updatedAt: this.now }).catch(() => undefined);
    }
  }

  /**
   * One step of a build, its outcome written with If-Match.
   * @returns the row after it (null when the lease was lost), and whether the step was a wait for older servers
   */
  private async step(row: PathRecord): Promise<{ row: PathRecord | null; waiting: boolean }> {
    const older = await this.olderServersRunning(row.version);
    const next: PathRecord = { ...row, needsRepair: row.needsRepair || older.length > 0, updatedAt: this.now };
    const waiting = row.scanned && older.length > 0;
    // What `migrate status` and /health say it waits for, and since when.
    next.waitingSince = waiting ? (row.waitingSince ?? this.now) : undefined;
    next.waitingFor = waiting ? olderProcesses(older) : undefined;
    // Servers of an older version still write without keeping this path: it cannot be ready before they stop.
    const lease = this.keepLease(row);
    try {
      if (!row.scanned) {
        const counting = this.countingOf(row);
        Object.assign(next, await this.scanStep(row));
        // The total is recorded once counted, at the latest with the scan's last page.
        const total = counting && (next.scanned ? await counting.total : counting.known);
        if (total) next.total = total;
      } else if (!waiting && row.kind === 'rekey') {
        Object.assign(next, await this.finishRekey(row));
      } else if (!waiting) {
        const ready: Partial<PathRecord> = { state: 'ready', finishedAt: this.now, leaseOwner: undefined, leaseUntil: undefined, needsRepair: false };
        Object.assign(next, next.needsRepair ? await this.repair(row, ready) : ready);
      }
    } finally {
      next.etag = await lease.stop();
    }
    if (next.state === 'ready') Object.assign(next, { leaseOwner: undefined, leaseUntil: undefined, needsRepair: false });
    if (next.state === 'building') next.leaseUntil = this.now + (this.opts.leaseMs ?? 30000);
    const written = await this.opts.catalogue.putPath(next);
    if (!written) this.opts.log?.warn({ path: row.id }, 'schema build: lease lost to another worker; leaving the build to it');
    return { row: written, waiting };
  }

  /** One step of the scan: an index's next page, or a summary's or copy's whole recount. */
  private async scanStep(row: PathRecord): Promise<Partial<PathRecord>> {
    const [type, name] = row.id.slice(row.id.indexOf(':') + 1).split('.');
    const { store, model } = this.opts;
    if (row.kind === 'index') {
      const index = model.entities.get(type)?.indexes.get(name);
      if (!index) return { state: 'failed', problem: { reason: 'PathUnknown', message: `${row.id} is not in this schema` } };
      if (index.entity.layout.tableTemplate)
        return { state: 'failed', problem: { reason: 'TablePerPeriod', message: `${type} has a table per period: build ${name} with npm run rebuild-index` } };
      return this.indexPageStep(row, index);
    }
    if (row.kind === 'summary') {
      const summary = model.summaries.get(`${type}.${name}`);
      if (!summary) return { state: 'failed', problem: { reason: 'PathUnknown', message: `${row.id} is not in this schema` } };
      if (summary.scope === 'egt') return this.holderPageStep(row, summary);
      // Held elsewhere: its contribution entities are repaired first, from whole-table reads — one step.
      const r = await repairSummaries({ store, model, summaries: [`${type}.${name}`], observer: this.opts.observer });
      const read = r.diffs.reduce((n, d) => n + d.holders + d.counted, 0);
      return { scanned: r.busy.length === 0, read: row.read + read, written: row.written + r.repaired.length };
    }
    if (row.kind === 'copy') return this.copyPageStep(row, type);
    if (row.kind === 'rekey') return this.rekeyPageStep(row);
    return { scanned: true };
  }

  /**
   * One step of an index's build: a page read and its index entities inserted (index-build.ts), beside the settling
   * of the page before (its second read, left running when its step ended); after the last page, its own settling.
   * The checkpoint moves past a page once it is inserted: a kill before its settling ends makes the build's taker
   * end it with a repair pass (a takeover always does).
   */
  private async indexPageStep(row: PathRecord, index: IndexModel): Promise<Partial<PathRecord>> {
    const ahead = this.prefetched?.path === row.id && this.prefetched.token === row.checkpoint ? this.prefetched.page : undefined;
    this.prefetched = undefined;
    const settling = this.unsettled?.path === row.id && this.unsettled.token === row.checkpoint ? this.unsettled.settle : undefined;
    this.unsettled = undefined;
    const build = buildIndexPage({
      store: this.opts.store,
      index,
      table: index.entity.layout.table,
      token: row.checkpoint || undefined,
      page: ahead,
      pageSize: this.pageSize,
      concurrency: this.opts.concurrency,
      observer: this.opts.observer,
    });
    const [page, before] = await Promise.all([build, settling]);
    if (page.prefetch && page.next) this.prefetched = { path: row.id, token: page.next, page: page.prefetch };
    // The page's second read and settling go on beside the next step (its read, its inserts); the last page's now.
    const mine = page.settle();
    mine.catch(() => undefined); // met, and thrown, by the step that awaits it
    const last = page.next ? undefined : await mine;
    if (page.next) this.unsettled = { path: row.id, token: page.next, settle: mine };
    await this.throttle(page.written);
    const counts = {
      read: row.read + page.read,
      written: row.written + page.written,
      skipped: row.skipped + page.skipped,
      ...(page.uncertain && { needsRepair: true }),
    };
    const [type, name] = [index.entity.name, index.name];
    const heldTwice = [...(before?.heldTwice ?? []), ...page.heldTwice, ...(last?.heldTwice ?? [])];
    // A build that cannot go on says why, with up to 50 of the entities at fault, and how to go on once they change.
    const stopped = (reason: ReasonName, message: string, details: unknown[]) => {
      this.unsettled = undefined;
      return {
        ...counts,
        state: 'failed' as const,
        problem: { reason, message: `${message}, then npm run migrate -- apply --retry ${row.id}`, details: details.slice(0, 50) },
      };
    };
    if (heldTwice.length > 0) {
      const example = JSON.stringify(heldTwice[0].primaries);
      return stopped(
        'UniqueValueHeldTwice',
        `${heldTwice.length} value(s) of unique index ${type}.${name} are held by two entities, e.g. ${example}: change one of each`,
        heldTwice,
      );
    }
    if (page.underivable.length > 0) {
      const example = JSON.stringify(page.underivable[0]);
      return stopped(
        'UnderivableEntities',
        `${page.underivable.length} ${type} entities cannot form ${name}'s keys, e.g. ${example}: change them`,
        page.underivable,
      );
    }
    return { ...counts, checkpoint: page.next ?? '', scanned: !page.next };
  }

  /**
   * One step of a copy's build: a page of the copying type (its table filtered by its EntityType, from the
   * checkpoint), each entity's copies compared with their targets and rewritten where they differ (If-Match on the
   * ETag read: src/derived/copy-refresh.ts refreshCopies).
   */
  private async copyPageStep(row: PathRecord, type: string): Promise<Partial<PathRecord>> {
    const { store, model, observer } = this.opts;
    const entity = model.entities.get(type);
    if (!entity) return { state: 'failed', problem: { reason: 'PathUnknown', message: `${row.id} is not in this schema` } };
    const page = await store.scanPage(entity.layout.table, row.checkpoint || undefined, {
      entityType: entity.entityType,
      select: [ENTITY_TYPE_PROPERTY],
      pageSize: this.pageSize,
      observer,
    });
    let written = 0;
    for (const e of page.entities) {
      if (await refreshCopies(store, entity, { table: entity.layout.table, partitionKey: e.partitionKey, rowKey: e.rowKey }, observer)) written++;
    }
    await this.throttle(written);
    return {
      read: row.read + page.entities.length,
      written: row.written + written,
      checkpoint: page.continuationToken ?? '',
      scanned: !page.continuationToken,
    };
  }

  /**
   * One step of a re-key's copy: a page of the old table (rekey-build.ts copyRekeyPage). The first waits until every
   * server has read that the re-key is under way (two refreshes of its states): one that has not would show the copies
   * it meets in a range of a table both layouts use.
   */
  private async rekeyPageStep(row: PathRecord): Promise<Partial<PathRecord>> {
    const rekey = this.rekeyFor(row);
    if (!rekey) return { state: 'failed', problem: { reason: 'PathUnknown', message: `${row.id}: the type is not in this schema` } };
    if (row.checkpoint === '' && row.read === 0) await this.sleep(REKEY_NOTICE_MS);
    const page = await copyRekeyPage(this.rekeyOptions(rekey), row.checkpoint || undefined);
    await this.throttle(page.written);
    const counts = { read: row.read + page.read, written: row.written + page.written, skipped: row.skipped + page.skipped };
    const problem = rekeyProblem(row, page);
    if (problem) return { ...counts, state: 'failed', problem };
    return { ...counts, checkpoint: page.next ?? '', scanned: !page.next };
  }

  /**
   * The end of a re-key, once no process of the older version is left: the catch-up, the clean-up, and every derived
   * path reading or writing the type set back to its start (`resetAfterRekey`); then the re-key is ready. Done again
   * from the start after a kill (each part is idempotent).
   */
  private async finishRekey(row: PathRecord): Promise<Partial<PathRecord>> {
    const rekey = this.rekeyFor(row);
    if (!rekey) return { state: 'failed', problem: { reason: 'PathUnknown', message: `${row.id}: the type is not in this schema` } };
    const opts = this.rekeyOptions(rekey);
    this.opts.log?.info({ path: row.id }, 're-key: catching up with the writes made during the copy (no server serves the type meanwhile)');
    const caught = await catchUpRekey(opts);
    const problem = rekeyProblem(row, caught);
    if (problem) return { state: 'failed', problem };
    const deleted = await cleanUpRekey(opts, caught.oldRows);
    await this.resetAfterRekey(rekey.entity.name, row.version);
    this.opts.log?.info(
      { path: row.id, caughtUp: caught.written, orphans: caught.deleted, deleted, moves: Object.keys(caught.moves).length },
      're-key: switched to the new addresses',
    );
    return { state: 'ready', finishedAt: this.now, moves: caught.moves, written: row.written + caught.written, read: row.read + caught.read };
  }

  /**
   * Every derived path that reads or writes `type` set back to its start, `building`: its entities were kept by the
   * old version's writers and derived from the old addresses (contributions are keyed by them), so each is built
   * again — an index by a repair pass (rebuild-index's work), a summary or a copy by its build — and reads through it
   * are refused until then.
   */
  private async resetAfterRekey(type: string, version: number): Promise<void> {
    const { catalogue, model } = this.opts;
    for (let attempt = 1; attempt <= 10; attempt++) {
      let conflicts = 0;
      for (const row of await catalogue.paths()) {
        if (!['index', 'summary', 'copy'].includes(row.kind) || row.state === 'retired' || !this.holds(row)) continue;
        if (!pathTypes(model, row.id).includes(type)) continue;
        const atStart = row.state === 'building' && row.version >= version && row.read === 0 && !row.leaseOwner;
        if (atStart && (row.needsRepair || row.kind !== 'index')) continue; // set back already
        const fresh = row.state !== 'ready';
        const next = await catalogue.putPath({
          ...row,
          state: 'building',
          version: Math.max(row.version, version),
          checkpoint: '',
          scanned: row.kind === 'index' && !fresh,
          needsRepair: row.kind === 'index', // a summary's or a copy's build is a whole pass: it needs no second
          read: 0,
          written: 0,
          skipped: 0,
          total: 0,
          problem: undefined,
          leaseOwner: undefined,
          leaseUntil: undefined,
          startedAt: this.now,
          updatedAt: this.now,
          finishedAt: undefined,
        });
        if (!next) conflicts++;
      }
      if (conflicts === 0) return;
    }
    throw new TablegraphError(ErrorCode.STORAGE_UNAVAILABLE, `the catalogue's paths of ${type} kept changing while the re-key set them back`, {
      reason: 'CatalogueContended',
    });
  }

  private rekeyFor(row: PathRecord): Rekey | undefined {
    const entity = this.opts.model.entities.get(typeOfRekey(row));
    return entity && rekeyOf(entity, row.definition as unknown as RekeyDefinition);
  }

  private rekeyOptions(rekey: Rekey) {
    return { store: this.opts.store, rekey, pageSize: this.pageSize, concurrency: this.opts.concurrency, observer: this.opts.observer };
  }

  /**
   * Renews the lease of the build in hand every third of its length while a long step runs (a re-key's catch-up, a
   * repair pass), so that no other worker takes it over meanwhile. @returns stop(): the row's ETag after the last renewal
   */
  private keepLease(row: PathRecord): { stop(): Promise<string | undefined> } {
    const leaseMs = this.opts.leaseMs ?? 30000;
    let current: PathRecord | null = row;
    let renewing: Promise<unknown> = Promise.resolve();
    const timer = setInterval(() => {
      renewing = renewing.then(async () => {
        if (!current) return;
        current = await this.opts.catalogue.putPath({ ...current, leaseUntil: this.now + leaseMs, updatedAt: this.now }).catch(() => current);
      });
    }, leaseMs / 3);
    timer.unref();
    return {
      async stop() {
        clearInterval(timer);
        await renewing;
        return current?.etag ?? undefined;
      },
    };
  }

  /**
   * One step of a summary kept in its holders' EGTs: a page of holders (the holder type's table filtered by its
   * EntityType, from the checkpoint), each recounted from its partition and merged If-Match on the ETag read
   * before the recount (src/maintenance/summary-state.ts repairHolder). A holder that kept changing under its
   * recount leaves the checkpoint where it was: the page is done again.
   */
  private async holderPageStep(row: PathRecord, summary: SummaryModel): Promise<Partial<PathRecord>> {
    const { store, observer } = this.opts;
    const { holder } = summary;
    const page = await store.scanPage(holder.layout.table, row.checkpoint || undefined, {
      entityType: holder.entityType,
      select: [ENTITY_TYPE_PROPERTY],
      pageSize: this.pageSize,
      observer,
    });
    let written = 0;
    let busy = false;
    for (const e of page.entities) {
      const address = { table: holder.layout.table, partitionKey: e.partitionKey, rowKey: e.rowKey };
      if (await repairHolder(store, [summary], address, 5, observer)) written++;
      else busy = true;
    }
    await this.throttle(written);
    const counts = { read: row.read + page.entities.length, written: row.written + written };
    if (busy) return counts;
    return { ...counts, checkpoint: page.continuationToken ?? '', scanned: !page.continuationToken };
  }

  /**
   * The repair pass, once no server of an older version is left. An index: its table compared whole with its
   * entities and made equal (conditional writes), then `ready`. A summary or a copy: its build again from its start
   * — the older servers wrote without keeping it (an entity summed in after its holder's page was recounted, a
   * target changed after its copies' page was compared), and only a whole pass finds every such value.
   * @returns the row's next fields
   */
  private async repair(row: PathRecord, ready: Partial<PathRecord>): Promise<Partial<PathRecord>> {
    if (row.kind === 'summary' || row.kind === 'copy') {
      this.opts.log?.info({ path: row.id }, 'schema build: a second pass (a server of an older version wrote during the first)');
      return { checkpoint: '', scanned: false, needsRepair: false };
    }
    if (row.kind !== 'index') return ready;
    const [type, name] = row.id.slice(row.id.indexOf(':') + 1).split('.');
    this.opts.log?.info({ path: row.id }, 'schema build: repair pass (a step was cut short, or an older version wrote meanwhile)');
    const r = await rebuildIndex({
      store: this.opts.store,
      model: this.opts.model,
      type,
      index: name,
      concurrency: this.opts.concurrency,
      observer: this.opts.observer,
      // Under the build's budget too, batch by batch.
      pace: (entities) => this.throttle(entities),
    });
    // What the pass wrote is the build's too: `migrate status` counts it.
    return { ...ready, written: row.written + r.upserted + r.deleted };
  }

  /** Servers and workers of an older version running now (presence.ts; read again at most every `pollMs`). */
  private async olderServersRunning(version: number): Promise<ServerRecord[]> {
    if (this.older.version === version && this.now - this.older.at < (this.opts.pollMs ?? 5000)) return this.older.servers;
    try {
      const servers = (await this.opts.presence.servers()).filter((s) => s.version < version);
      this.older = { at: this.now, version, servers };
      return servers;
    } catch (e) {
      if (isTablegraphError(e, ErrorCode.NOT_FOUND)) return [];
      throw e;
    }
  }

  /**
   * The count of a build's total, started beside its first page (not before it: on a build without a budget the
   * count would lengthen it by a tenth), once per build and runner; undefined when the row has its total.
   */
  private countingOf(row: PathRecord): { total: Promise<number>; known?: number } | undefined {
    if (row.total > 0) return undefined;
    if (this.counting?.path === row.id) return this.counting;
    const counting: { path: string; total: Promise<number>; known?: number } = {
      path: row.id,
      total: this.totalOf(row).then(
        (n) => (counting.known = n),
        (e: unknown) => {
          // Progress without a percentage, not a failed build.
          this.opts.log?.warn({ path: row.id, err: e }, 'schema build: its total could not be counted; its progress shows no percentage');
          return 0;
        },
      ),
    };
    this.counting = counting;
    return counting;
  }

  /**
   * The entities a build reads in all, counted as `migrate plan` counts them (keys-only reads of the type it scans):
   * an index's or a copy's entities, a summary's holders (and the entities it counts, when kept elsewhere), a re-key's
   * old rows. 0 when there is nothing to count it by (the path is not in this schema).
   */
  private async totalOf(row: PathRecord): Promise<number> {
    const [type, name] = row.id.slice(row.id.indexOf(':') + 1).split('.');
    const { store, model, observer } = this.opts;
    const count = async (e: EntityModel) => (await countEntities(store, e.layout.table, e.entityType, observer)).count;
    if (row.kind === 'index') {
      const index = model.entities.get(type)?.indexes.get(name);
      return index && !index.entity.layout.tableTemplate ? count(index.entity) : 0;
    }
    if (row.kind === 'summary') {
      const summary = model.summaries.get(`${type}.${name}`);
      if (!summary) return 0;
      return summary.scope === 'egt' ? count(summary.holder) : (await count(summary.holder)) + (await count(summary.of));
    }
    if (row.kind === 'copy') {
      const entity = model.entities.get(type);
      return entity ? count(entity) : 0;
    }
    const rekey = row.kind === 'rekey' ? this.rekeyFor(row) : undefined;
    return rekey ? (await countRekey(store, rekey, observer)).rows : 0;
  }

  /** Waits so that this runner writes at most `entitiesPerSecond`. */
  private async throttle(written: number): Promise<void> {
    const rate = this.opts.entitiesPerSecond ?? 500;
    if (rate <= 0 || written === 0) return;
    const at = Math.max(this.nextWriteAt, this.now);
    this.nextWriteAt = at + (1000 * written) / rate;
    const wait = this.nextWriteAt - this.now - 1000; // a second's worth may go at once
    if (wait > 0) await this.sleep(wait);
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => setTimeout(resolve, ms).unref());
  }
}

/**
 * Whether a schema's layout holds a path as its catalogue row defines it — for a re-key, whether it stores the type at
 * the new addresses: the paths a process of that schema builds.
 */
export function holdsPath(layout: RecordedLayout, row: PathRecord): boolean {
  if (row.kind !== 'rekey') return canonicalJson(layout.paths[row.id]?.definition) === canonicalJson(row.definition);
  const type = layout.types[typeOfRekey(row)];
  return !!type && canonicalJson(addressingOf(type)) === canonicalJson((row.definition as unknown as RekeyDefinition).to);
}

/** The processes a build waits for, as `migrate status` says them: `2 processes of version 1 (host-12-ab, host-13-cd)`. */
function olderProcesses(older: ServerRecord[]): string {
  const versions = [...new Set(older.map((s) => s.version))].sort((a, b) => a - b).join(', ');
  const names = older.slice(0, 3).map((s) => s.instance);
  const more = older.length > 3 ? `, and ${older.length - 3} more` : '';
  return `${older.length} process${older.length === 1 ? '' : 'es'} of version ${versions} (${names.join(', ')}${more})`;
}

/**
 * Whether a step cut short (a kill, a lost lease, a failure) leaves work only a repair pass finds: an index page's
 * settling runs past its checkpoint. A summary's or a copy's page is redone from its checkpoint, each value written
 * If-Match on what was read, and a re-key's switch is done again whole.
 */
function cutShortLeavesWork(row: PathRecord): boolean {
  return row.kind === 'index';
}

/** The type a `rekey:<Type>` row re-keys. */
function typeOfRekey(row: PathRecord): string {
  return row.id.slice(row.id.indexOf(':') + 1);
}

/** A re-key step's findings that stop it: entities its new keys put at one address, or whose values cannot form them. */
function rekeyProblem(row: PathRecord, found: { collisions: Collision[]; underivable: Underivable[] }): PathRecord['problem'] {
  const type = typeOfRekey(row);
  if (found.collisions.length > 0) {
    const first = found.collisions[0];
    return {
      reason: 'RekeyCollision',
      message: `${found.collisions.length} address(es) of ${type}'s new keys would hold two entities, e.g. ${JSON.stringify(first)}: change one of each (the old servers still serve ${type}), then npm run migrate -- apply --retry ${row.id}`,
      details: found.collisions.slice(0, 50),
    };
  }
  if (found.underivable.length > 0) {
    return {
      reason: 'UnderivableEntities',
      message: `${found.underivable.length} ${type} entities cannot form the new keys, e.g. ${JSON.stringify(found.underivable[0])}: change them, then npm run migrate -- apply --retry ${row.id}`,
      details: found.underivable.slice(0, 50),
    };
  }
  return undefined;
}
