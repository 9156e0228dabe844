/**
 * Summary values checked against a recount, and repaired (docs/architecture.md, "Maintenance"; the guide's "Entity
 * Group Transactions" keep summaries in step with what they count, this proves it). Where a summary holder and the
 * entities it counts share a partition, a repair recounts one partition under the holder's ETag: every write that
 * changes a contribution changes the holder in the same EGT, so an unchanged ETag proves the recount current. A summary
 * held in another partition is repaired through its contribution entities (contribution-repair.ts).
 *
 * Reads whole tables on purpose: maintenance commands, never a request path.
 */
import { ErrorCode, isTablegraphError, TablegraphError } from '../errors';
import { decimalText, Decimal } from '../model/decimal';
import { typedValue, valuesOf } from '../model/entity-codec';
import { CONTRIBUTION, contributionOf, isContribution } from '../model/contributions';
import { holderAddress, resolveHolder, summaryContribution, summaryValue } from '../model/summaries';
import { ENTITY_TYPE_PROPERTY, type Model, type SummaryModel } from '../model/types';
import type { TableStore } from '../storage/table-store';
import type { EntityAddress, StorageObserver, StoredEntity } from '../storage/storage-types';
import { addressKey } from '../storage/address-key';
import { repairContributions, resumHolder } from './contribution-repair';
import type { ScanProgress } from './index-state';

/** How one summary compares with a recount of what it summarises. Values as decimal text. */
export interface SummaryDiff {
  /** `Holder.field`, e.g. `Customer.spent`. */
  summary: string;
  table: string;
  /** Holder entities read (entities). */
  holders: number;
  /** Entities counted (entities). */
  counted: number;
  /** Holders whose stored value differs from the recount. */
  different: Array<EntityAddress & { stored: string; expected: string }>;
  /** Counted entities whose holder does not exist. */
  orphaned: EntityAddress[];
  /** For a summary held in another partition: contribution entities missing, different or left over (entities). */
  contributions: EntityAddress[];
}

export interface SummaryStateOptions {
  store: TableStore;
  model: Model;
  /** `Holder.field` coordinates to check (default: every summary). */
  summaries?: string[];
  onProgress?(p: ScanProgress): void;
  observer?: StorageObserver;
}

/**
 * The summaries named (all by default).
 * @throws TablegraphError BAD_USER_INPUT for an unknown coordinate, listing the known ones
 */
export function resolveSummaries(model: Model, names?: string[]): SummaryModel[] {
  if (!names || names.length === 0) return [...model.summaries.values()];
  return names.map((n) => {
    const s = model.summaries.get(n);
    if (!s) {
      throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `Unknown summary '${n}'. Summaries: ${[...model.summaries.keys()].join(', ') || '(none)'}.`, {
        summary: n,
      });
    }
    return s;
  });
}

/** What one holder's summaries should be: the exact sum of its entities' contributions. */
function recount(summaries: SummaryModel[], entities: Iterable<StoredEntity>): Map<SummaryModel, Decimal> {
  const totals = new Map(summaries.map((s) => [s, new Decimal(0)]));
  for (const e of entities) {
    for (const s of summaries) {
      if (e.properties[ENTITY_TYPE_PROPERTY] !== s.of.entityType) continue;
      totals.set(s, totals.get(s)!.plus(summaryContribution(s, valuesOf(s.of, e.properties))));
    }
  }
  return totals;
}

/**
 * Scans each table holding holders or what they summarise once, and compares every summary value with a recount
 * of the entities it summarises — in its holder's partition, or anywhere for a summary held in another partition
 * (whose contribution entities are checked against what each entity derives, too). A snapshot of the moment each
 * table was read: run it when no writes are in flight and the work queue has drained.
 * @throws TablegraphError BAD_USER_INPUT (unknown summary), storage errors from the scans
 */
export async function readSummaryState(opts: SummaryStateOptions): Promise<SummaryDiff[]> {
  const summaries = resolveSummaries(opts.model, opts.summaries);
  const diffs = new Map(summaries.map((s) => [s, emptyDiff(s)]));
  const holders = new Map<SummaryModel, Map<string, { address: EntityAddress; entity: StoredEntity }>>(summaries.map((s) => [s, new Map()]));
  const totals = new Map<SummaryModel, Map<string, Decimal>>(summaries.map((s) => [s, new Map()])); // summary → holder address → recount
  const contributions = new Map<SummaryModel, Map<string, StoredEntity>>(summaries.map((s) => [s, new Map()])); // stored, by address
  const derived = new Map<SummaryModel, Map<string, string>>(summaries.map((s) => [s, new Map()])); // wanted: address → value
  let scanned = 0;
  const indexEntities = new Map<string, Promise<StoredEntity | null>>();
  const lookup = (a: EntityAddress) => {
    if (!indexEntities.has(addressKey(a))) indexEntities.set(addressKey(a), opts.store.getEntity(a, { observer: opts.observer }).catch(absentTable));
    return indexEntities.get(addressKey(a))!;
  };
  for (const table of new Set(summaries.flatMap((s) => [s.holder.layout.table, s.of.layout.table]))) {
    try {
      for await (const page of opts.store.scan(table, { observer: opts.observer })) {
        for (const e of page) {
          const type = e.properties[ENTITY_TYPE_PROPERTY];
          const address = { table, partitionKey: e.partitionKey, rowKey: e.rowKey };
          for (const s of summaries) {
            if (type === s.holder.entityType && table === s.holder.layout.table) holders.get(s)!.set(addressKey(address), { address, entity: e });
            if (s.scope === 'eventual' && table === s.holder.layout.table && isContribution(s, e)) contributions.get(s)!.set(addressKey(address), e);
            if (type !== s.of.entityType || table !== s.of.layout.table) continue;
            const values = valuesOf(s.of, e.properties);
            let at: string;
            let holder: EntityAddress | null | undefined;
            try {
              // Through a unique index: where the index entity says (each read once); none there counts as orphaned.
              holder = s.via.index ? await resolveHolder(s, values, lookup) : holderAddress(s, values);
              if (holder === undefined) continue; // an optional reference that is null: counted towards no holder
              at = addressKey(holder ?? holderAddress(s, values)!); // no index entity: orphaned, at the index's address
            } catch (err) {
              if (!isTablegraphError(err, ErrorCode.BAD_USER_INPUT)) throw err;
              continue;
            }
            const byHolder = totals.get(s)!;
            byHolder.set(at, (byHolder.get(at) ?? new Decimal(0)).plus(summaryContribution(s, values)));
            diffs.get(s)!.counted++;
            if (s.scope === 'eventual' && holder) {
              const c = contributionOf(s, address, values, s.via.index ? holder : undefined)!;
              derived.get(s)!.set(addressKey(c.address), decimalText(c.value));
            }
          }
        }
        scanned += page.length;
        opts.onProgress?.({ table, scanned });
      }
    } catch (e) {
      if (!isTablegraphError(e, ErrorCode.NOT_FOUND)) throw e; // a table not created yet holds nothing
    }
  }
  for (const s of summaries) {
    const diff = diffs.get(s)!;
    for (const [key, { address, entity }] of holders.get(s)!) {
      diff.holders++;
      const expected = totals.get(s)!.get(key) ?? new Decimal(0);
      const stored = summaryValue(entity.properties[s.field]);
      if (!stored.equals(expected)) diff.different.push({ ...address, stored: decimalText(stored), expected: decimalText(expected) });
    }
    for (const key of totals.get(s)!.keys()) {
      if (holders.get(s)!.has(key)) continue;
      const [t, partitionKey, rowKey] = key.split('\u0000');
      diff.orphaned.push({ table: t, partitionKey, rowKey });
    }
    // A summary held elsewhere: every contribution entity as its entity derives it, no more, no fewer.
    const wanted = derived.get(s)!;
    const stored = contributions.get(s)!;
    for (const [key, value] of wanted) {
      const e = stored.get(key);
      if (!e || String(e.properties[CONTRIBUTION.value]) !== value) diff.contributions.push(addressOfKey(key));
    }
    for (const key of stored.keys()) if (!wanted.has(key)) diff.contributions.push(addressOfKey(key));
  }
  return [...diffs.values()];
}

/** A table not created yet holds nothing. */
function absentTable(e: unknown): null {
  if (isTablegraphError(e, ErrorCode.NOT_FOUND)) return null;
  throw e;
}

function addressOfKey(key: string): EntityAddress {
  const [table, partitionKey, rowKey] = key.split('\u0000');
  return { table, partitionKey, rowKey };
}

function emptyDiff(s: SummaryModel): SummaryDiff {
  return { summary: `${s.holder.name}.${s.field}`, table: s.holder.layout.table, holders: 0, counted: 0, different: [], orphaned: [], contributions: [] };
}

/** Problems in a summary diff (entities): holders that differ, counted entities without a holder, contributions amiss. */
export function summaryProblems(d: SummaryDiff): number {
  return d.different.length + d.orphaned.length + d.contributions.length;
}

export interface RepairResult {
  /** Holders whose summaries were rewritten (entities). */
  repaired: EntityAddress[];
  /** Holders that kept changing under the recount, left as they were (entities): run it again. */
  busy: EntityAddress[];
  /** Contribution entities written or deleted to match what they stand for (entities; summaries held elsewhere). */
  contributions: number;
}

/**
 * Rewrites every holder whose summaries differ from a recount: per holder, reads it (its ETag), recounts its
 * partition (a partition scan), and merges the exact values with If-Match — again, a bounded number of times,
 * when a write changed it meanwhile. Safe while the server serves. A summary of a summary is repaired after the
 * summaries it sums (summaryLevels), from their repaired values.
 * @throws TablegraphError BAD_USER_INPUT (unknown summary), storage errors
 */
export async function repairSummaries(opts: SummaryStateOptions & { attempts?: number }): Promise<RepairResult & { diffs: SummaryDiff[] }> {
  const out: RepairResult & { diffs: SummaryDiff[] } = { repaired: [], busy: [], contributions: 0, diffs: [] };
  for (const level of summaryLevels(resolveSummaries(opts.model, opts.summaries))) {
    const r = await repairLevel({ ...opts, summaries: level.map((s) => `${s.holder.name}.${s.field}`) });
    out.repaired.push(...r.repaired);
    out.busy.push(...r.busy);
    out.contributions += r.contributions;
    out.diffs.push(...r.diffs);
  }
  return out;
}

/**
 * `summaries` in the order a repair takes them: first those that sum no other summary, then each summary of a
 * summary after every summary it sums (src/compiler/build-summaries.ts linkSummaryChains refuses a cycle).
 * @returns the levels, lowest first; each non-empty
 */
export function summaryLevels(summaries: SummaryModel[]): SummaryModel[][] {
  const level = new Map<SummaryModel, number>();
  const all = [...summaries];
  const of = (s: SummaryModel, depth = 0): number => {
    if (level.has(s)) return level.get(s)!;
    const lower = all.filter((l) => l.feeds.includes(s));
    const n = depth > all.length ? 0 : lower.length === 0 ? 0 : 1 + Math.max(...lower.map((l) => of(l, depth + 1)));
    level.set(s, n);
    return n;
  };
  const levels: SummaryModel[][] = [];
  for (const s of all) (levels[of(s)] ??= []).push(s);
  return levels.filter((l) => l && l.length > 0);
}

/** repairSummaries over summaries none of which sums another of them. */
async function repairLevel(opts: SummaryStateOptions & { attempts?: number }): Promise<RepairResult & { diffs: SummaryDiff[] }> {
  const summaries = resolveSummaries(opts.model, opts.summaries);
  let diffs = await readSummaryState(opts);
  const result: RepairResult = { repaired: [], busy: [], contributions: 0 };
  const attempts = opts.attempts ?? 5;
  // Summaries held elsewhere: their contribution entities first, then each holder from the sum of its own.
  const eventual = summaries.filter((s) => s.scope === 'eventual');
  let fixed = 0;
  for (const s of eventual)
    fixed += await repairContributions(opts.store, s, diffs.find((d) => d.summary === `${s.holder.name}.${s.field}`)!.contributions, opts.observer);
  const reported = diffs;
  result.contributions = fixed;
  if (fixed > 0) diffs = await readSummaryState(opts);
  const todo = new Map<string, EntityAddress>();
  for (const d of diffs) {
    const s = summaries.find((x) => `${x.holder.name}.${x.field}` === d.summary)!;
    for (const a of d.different) {
      const address = { table: a.table, partitionKey: a.partitionKey, rowKey: a.rowKey };
      if (s.scope !== 'eventual') todo.set(addressKey(address), address);
      else if ((await resumHolder(opts.store, s, address, attempts, opts.observer)) !== 'busy') result.repaired.push(address);
      else result.busy.push(address);
    }
  }
  for (const address of todo.values()) {
    const own = summaries.filter((s) => s.scope === 'egt' && s.holder.layout.table === address.table);
    if (await repairHolder(opts.store, own, address, attempts, opts.observer)) result.repaired.push(address);
    else result.busy.push(address);
  }
  return { ...result, diffs: reported };
}

/**
 * Recounts one holder's summaries from its partition (a partition scan) and merges the exact values with If-Match
 * on the ETag read before the scan, again when a write changed it meanwhile.
 * @returns false when the holder kept changing for `attempts` recounts; true when written (or deleted meanwhile)
 * @throws storage errors other than a conflict
 */
export async function repairHolder(
  store: TableStore,
  summaries: SummaryModel[],
  address: EntityAddress,
  attempts: number,
  observer?: StorageObserver,
): Promise<boolean> {
  for (let attempt = 1; attempt <= attempts; attempt++) {
    const holder = await store.getEntity(address, { observer });
    if (!holder) return true; // deleted meanwhile: nothing to repair
    const mine = summaries.filter((s) => holder.properties[ENTITY_TYPE_PROPERTY] === s.holder.entityType);
    const entities: StoredEntity[] = [];
    for await (const page of store.scan(address.table, { partitionKey: address.partitionKey, observer })) entities.push(...page);
    const totals = recount(
      mine,
      entities.filter((e) => mine.some((s) => holderKeyOf(s, e) === addressKey(address))),
    );
    const properties = Object.fromEntries(
      [...totals].map(([s, v]) => {
        const field = s.holder.fields.get(s.field)!;
        return [s.field, typedValue(field, field.graphqlType === 'Int' ? v.toNumber() : decimalText(v))];
      }),
    );
    try {
      await store.updateEntity(address.table, { partitionKey: address.partitionKey, rowKey: address.rowKey, properties }, 'merge', {
        observer,
        ifMatch: holder.etag,
      });
      return true;
    } catch (e) {
      if (!isTablegraphError(e, ErrorCode.CONFLICT) && !isTablegraphError(e, ErrorCode.NOT_FOUND)) throw e;
    }
  }
  return false;
}

function holderKeyOf(s: SummaryModel, e: StoredEntity): string | undefined {
  if (e.properties[ENTITY_TYPE_PROPERTY] !== s.of.entityType) return undefined;
  try {
    const holder = holderAddress(s, valuesOf(s.of, e.properties));
    return holder && addressKey(holder);
  } catch {
    return undefined;
  }
}
