/**
 * Summary values checked against a recount, and repaired (DESIGN.md §4 item 4; the guide's "Entity Group
 * Transactions" keep summaries in step with what they count, this proves it). A summary holder and the entities
 * it counts share a partition (the compiler checks it), so one scan of the holder's table gives both; a repair
 * recounts one partition under the holder's ETag: every write that changes a contribution changes the holder in
 * the same EGT, so an unchanged ETag proves the recount current.
 *
 * Reads whole tables on purpose: maintenance commands, never a request path.
 */
import { ErrorCode, isTablegraphError, TablegraphError } from '../errors';
import { decimalText, Decimal } from '../model/decimal';
import { typedValue, valuesOf } from '../model/entity-codec';
import { summaryContribution, summaryValue } from '../model/summaries';
import { ENTITY_TYPE_PROPERTY, type Model, type SummaryModel } from '../model/types';
import type { TableStore } from '../storage/table-store';
import type { EntityAddress, StorageObserver, StoredEntity } from '../storage/types';
import { addressKey } from '../write/fanout-message';
import { holderAddress } from '../write/write-plan';
import type { ScanProgress } from './derived-state';

/** How one summary compares with a recount of what it summarises. Values as decimal text. */
export interface SummaryDiff {
  /** `Holder.field`, e.g. `Department.payroll`. */
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
      throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `Unknown summary '${n}'. Summaries: ${[...model.summaries.keys()].join(', ') || '(none)'}.`, { summary: n });
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
 * Scans each holder table once and compares every summary value with a recount of the entities in its holder's
 * partition. A snapshot of the moment each table was read: run it when no writes are in flight.
 * @throws TablegraphError BAD_USER_INPUT (unknown summary), storage errors from the scans
 */
export async function readSummaryState(opts: SummaryStateOptions): Promise<SummaryDiff[]> {
  const summaries = resolveSummaries(opts.model, opts.summaries);
  const diffs = new Map(summaries.map((s) => [s, emptyDiff(s)]));
  let scanned = 0;
  for (const table of new Set(summaries.map((s) => s.holder.layout.table))) {
    const inTable = summaries.filter((s) => s.holder.layout.table === table);
    const holders = new Map<string, { address: EntityAddress; entity: StoredEntity }>();
    const totals = new Map<string, Map<SummaryModel, Decimal>>(); // holder address → summary → recount
    try {
      for await (const page of opts.store.scan(table, { observer: opts.observer })) {
        for (const e of page) {
          const type = e.properties[ENTITY_TYPE_PROPERTY];
          for (const s of inTable) {
            if (type === s.holder.entityType) {
              const address = { table, partitionKey: e.partitionKey, rowKey: e.rowKey };
              holders.set(addressKey(address), { address, entity: e });
            }
            const at = holderKeyOf(s, e);
            if (at === undefined) continue;
            const byHolder = totals.get(at) ?? new Map<SummaryModel, Decimal>();
            byHolder.set(s, (byHolder.get(s) ?? new Decimal(0)).plus(summaryContribution(s, valuesOf(s.of, e.properties))));
            totals.set(at, byHolder);
            diffs.get(s)!.counted++;
          }
        }
        scanned += page.length;
        opts.onProgress?.({ table, scanned });
      }
    } catch (e) {
      if (!isTablegraphError(e, ErrorCode.NOT_FOUND)) throw e; // a table not created yet holds nothing
    }
    for (const s of inTable) {
      const diff = diffs.get(s)!;
      for (const [key, { address, entity }] of holders) {
        if (entity.properties[ENTITY_TYPE_PROPERTY] !== s.holder.entityType) continue;
        diff.holders++;
        const expected = totals.get(key)?.get(s) ?? new Decimal(0);
        const stored = summaryValue(entity.properties[s.field]);
        if (!stored.equals(expected)) diff.different.push({ ...address, stored: decimalText(stored), expected: decimalText(expected) });
      }
      for (const key of totals.keys()) {
        if (holders.has(key) || !totals.get(key)!.has(s)) continue;
        const [t, partitionKey, rowKey] = key.split('\u0000');
        diff.orphaned.push({ table: t, partitionKey, rowKey });
      }
    }
  }
  return [...diffs.values()];
}

function emptyDiff(s: SummaryModel): SummaryDiff {
  return { summary: `${s.holder.name}.${s.field}`, table: s.holder.layout.table, holders: 0, counted: 0, different: [], orphaned: [] };
}

/** Problems in a summary diff (entities): holders that differ plus counted entities without a holder. */
export function summaryProblems(d: SummaryDiff): number {
  return d.different.length + d.orphaned.length;
}

export interface RepairResult {
  /** Holders whose summaries were rewritten (entities). */
  repaired: EntityAddress[];
  /** Holders that kept changing under the recount, left as they were (entities): run it again. */
  busy: EntityAddress[];
}

/**
 * Rewrites every holder whose summaries differ from a recount: per holder, reads it (its ETag), recounts its
 * partition (a partition scan), and merges the exact values with If-Match — again, a bounded number of times,
 * when a write changed it meanwhile. Safe while the server serves.
 * @throws TablegraphError BAD_USER_INPUT (unknown summary), storage errors
 */
export async function repairSummaries(opts: SummaryStateOptions & { attempts?: number }): Promise<RepairResult & { diffs: SummaryDiff[] }> {
  const summaries = resolveSummaries(opts.model, opts.summaries);
  const diffs = await readSummaryState(opts);
  const result: RepairResult = { repaired: [], busy: [] };
  const todo = new Map<string, EntityAddress>();
  for (const d of diffs) for (const a of d.different) todo.set(addressKey(a), { table: a.table, partitionKey: a.partitionKey, rowKey: a.rowKey });
  for (const address of todo.values()) {
    const own = summaries.filter((s) => s.holder.layout.table === address.table);
    (await repairHolder(opts.store, own, address, opts.attempts ?? 5, opts.observer)) ? result.repaired.push(address) : result.busy.push(address);
  }
  return { ...result, diffs };
}

/**
 * Recounts one holder's summaries from its partition (a partition scan) and merges the exact values with If-Match
 * on the ETag read before the scan, again when a write changed it meanwhile.
 * @returns false when the holder kept changing for `attempts` recounts; true when written (or deleted meanwhile)
 * @throws storage errors other than a conflict
 */
export async function repairHolder(store: TableStore, summaries: SummaryModel[], address: EntityAddress, attempts: number, observer?: StorageObserver): Promise<boolean> {
  for (let attempt = 1; attempt <= attempts; attempt++) {
    const holder = await store.getEntity(address, { observer });
    if (!holder) return true; // deleted meanwhile: nothing to repair
    const mine = summaries.filter((s) => holder.properties[ENTITY_TYPE_PROPERTY] === s.holder.entityType);
    const entities: StoredEntity[] = [];
    for await (const page of store.scan(address.table, { partitionKey: address.partitionKey, observer })) entities.push(...page);
    const totals = recount(mine, entities.filter((e) => mine.some((s) => holderKeyOf(s, e) === addressKey(address))));
    const properties = Object.fromEntries(
      [...totals].map(([s, v]) => {
        const field = s.holder.fields.get(s.field)!;
        return [s.field, typedValue(field, field.graphqlType === 'Int' ? v.toNumber() : decimalText(v))];
      }),
    );
    try {
      await store.updateEntity(address.table, { partitionKey: address.partitionKey, rowKey: address.rowKey, properties }, 'merge', { observer, ifMatch: holder.etag });
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
    return addressKey(holderAddress(s, valuesOf(s.of, e.properties)));
  } catch {
    return undefined;
  }
}
