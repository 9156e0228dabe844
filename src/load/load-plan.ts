/**
 * The plan of one load step (load-entities.ts runs it): the rows of one entity type become the entity, its
 * intra-partition index entities and what `derive` gives — the same writes the worker converges to — grouped into
 * EGTs of upsert-replace per table and partition ("Entity Group Transactions"), yielded as soon as a partition
 * fills one; then one merge per summary holder with its exact totals.
 *
 * A load meets what is stored. The plan reads each partition it writes to, whole, once, before it writes there:
 * so that
 * - an entity (or index entity) stored exactly as the load would write it is not written again: a second load of
 *   the same rows writes nothing;
 * - an entity the file rewrites whose stored state derived other index entities leaves those listed as stale, to
 *   be deleted once the new state is written (only while they still point at it, as the worker deletes);
 * - an entity the file gives with its stored values keeps its `WriteId` (a write id names a state, and the state
 *   has not changed);
 * - a summary holder's totals count the stored entities the file does not rewrite;
 * - a unique value stored for another entity, or given twice in the file, is a bad row, not a stolen index entry.
 * A row is refused alone, with its line and reason: bad values, a duplicate of an earlier row, a key or entity over
 * the target's limits, a reference or summary holder that neither this load nor the store holds (reason
 * ReferenceMissing), a taken unique value.
 *
 * The load assumes no concurrent writers to the partitions it loads (run `verify` after it). Guide sections:
 * "Entity Group Transactions", "Index Entities Pattern", "Eventually consistent transactions pattern".
 */
import { randomUUID } from 'node:crypto';
import { ErrorCode, isTablegraphError, isTransientStorageError, TablegraphError } from '../errors';
import { Decimal, decimalText } from '../model/decimal';
import { addressOfWrite, entityWrites, primaryAddress, valuesOf, type TableWrite } from '../model/entity-codec';
import { CONTRIBUTION, contributionEntity, contributionOf, contributionPrefix, isContribution } from '../model/contributions';
import { holderAddress, resolveHolder, summaryContribution, summaryValue } from '../model/summaries';
import { escapeKeyValue } from '../storage/key-escape';
import { WRITE_ID_PROPERTY, type EntityModel, type Model, type SummaryModel } from '../model/types';
import { checkEntity, limitsFor } from '../storage/limits';
import type { EntityAddress, StorageTarget, StoredEntity } from '../storage/storage-types';
import { planEgtBatches, type EgtBatch } from '../write/egt-batches';
import { addressKey } from '../storage/address-key';
import { readReferenced, referenceAddress } from '../model/references';
import type { LoadRow } from './load-rows';
import { StepStore, type LoadReads } from './step-store';
import { holderMergesOf, type HolderMerge } from './holder-merges';
import { sameValues, staleIndexAddresses } from './stored-state';
import { UniqueClaims } from './unique-claims';

/** A row the load skipped: its line and why. */
export interface SkippedRow {
  line: number;
  reason: string;
}

/** Index entities an entity's stored state derived that its new state does not: to delete after the write. */
export interface StaleDerived {
  primary: EntityAddress;
  addresses: EntityAddress[];
}

export interface LoadPlanOptions {
  model: Model;
  entity: EntityModel;
  target: StorageTarget;
  /** How the step reads the store (step-store.ts). */
  reads: LoadReads;
  /** addressKeys of the entities this load wrote in earlier steps (and this one adds its own): references to them need no read. */
  written: Set<string>;
  /** An entity already stored: replaced (default) or kept as it is. */
  existing?: 'replace' | 'keep';
}

/** One load step's plan. Counters, `stale`, `lines` and `holderMerges()` are final once `batches()` is exhausted. */
export class LoadPlan {
  rowsRead = 0;
  /** Rows planned for writing. */
  loaded = 0;
  /** Rows whose entity was stored with the same values (written again unchanged, WriteId kept). */
  unchanged = 0;
  /** Rows whose entity was stored and kept as it is (`existing: 'keep'`). */
  kept = 0;
  readonly skipped: SkippedRow[] = [];
  readonly stale: StaleDerived[] = [];
  /** The file line each write came from. */
  readonly lines = new WeakMap<TableWrite, number>();
  /** The writes of each row (by line) not yet committed. */
  private readonly uncommitted = new Map<number, number>();
  /** Rows read whose entities are all stored, or that need none (skipped, unchanged): what a progress bar counts. */
  rowsStored = 0;
  /** Entities the rows read so far are to write (summary holders in their partition's last EGT included): entities. */
  writesPlanned = 0;
  private readonly entity: EntityModel;
  private readonly summaries: SummaryModel[];
  /** Summaries of the type held in other partitions: kept through contribution entities (model/contributions.ts). */
  private readonly eventual: SummaryModel[];
  /** The holders of `eventual` summaries the rows contribute to, or did: each is set to the sum of its contributions. */
  readonly eventualHolders = new Map<string, { summary: SummaryModel; address: EntityAddress }>();
  /** Holders (addressKey) written in the last EGT of their partition (batches): no merge of their own after it. */
  readonly folded = new Set<string>();
  /** The contribution entities this step's rows give: their values, by table and PartitionKey, then RowKey. */
  private readonly contributed = new Map<string, Map<string, Decimal>>();
  /** Contribution entities of rewritten entities' earlier states that their new state does not have: to delete. */
  readonly staleContributions: EntityAddress[] = [];
  /** The store as this step reads it: whole partitions and single entities, each once. */
  private readonly store: StepStore;
  /** Per partition: RowKey → line of the row that writes it. */
  private readonly rows = new Map<string, Map<string, number>>();
  /** The unique index entities this load's rows claim. */
  private readonly uniqueClaims: UniqueClaims;
  /** File rows' contributions per holder addressKey. */
  private readonly totals = new Map<string, { address: EntityAddress; sums: Map<SummaryModel, Decimal> }>();

  constructor(private readonly opts: LoadPlanOptions) {
    this.entity = opts.entity;
    this.store = new StepStore(opts.reads, opts.written);
    this.uniqueClaims = new UniqueClaims(this.store);
    this.summaries = [...opts.model.summaries.values()].filter((s) => s.of === opts.entity && s.scope === 'egt');
    this.eventual = [...opts.model.summaries.values()].filter((s) => s.of === opts.entity && s.scope === 'eventual');
  }

  /**
   * Yields EGT batches as partitions fill an EGT, the remaining ones at the end of the rows. A row that cannot be
   * written is skipped (see `skipped`), so that no EGT fails on one bad row.
   * @throws storage errors of the reads (STORAGE_UNAVAILABLE, …); what `rows` throws (a bad header)
   */
  async *batches(rows: AsyncIterable<LoadRow>): AsyncGenerator<EgtBatch[]> {
    const pending = new Map<string, TableWrite[]>();
    const full = limitsFor(this.opts.target).maxTransactionOperations;
    for await (const row of rows) {
      this.rowsRead++;
      if (row.reason !== undefined) {
        this.skipped.push({ line: row.line, reason: row.reason });
        this.rowsStored++;
        continue;
      }
      let writes: TableWrite[] | undefined;
      try {
        writes = await this.plan(row.line, row.values);
      } catch (e) {
        if (!isTablegraphError(e)) throw e;
        if (isTransientStorageError(e)) throw e;
        this.skipped.push({ line: row.line, reason: e.message });
        this.rowsStored++;
        continue;
      }
      if (!writes || writes.length === 0) {
        this.rowsStored++;
        continue;
      }
      this.uncommitted.set(row.line, (this.uncommitted.get(row.line) ?? 0) + writes.length);
      this.writesPlanned += writes.length;
      const filled: TableWrite[] = [];
      for (const w of writes) {
        this.lines.set(w, row.line);
        const key = `${w.table}\u0000${w.entity.partitionKey}`;
        const list = pending.get(key) ?? [];
        list.push(w);
        pending.set(key, list);
        if (list.length >= full) {
          filled.push(...list);
          pending.delete(key);
        }
      }
      if (filled.length > 0) yield planEgtBatches(filled, this.opts.target);
    }
    // A summary holder whose values change rides in the last EGT of its partition, where it has room: one round
    // trip fewer per holder (load-entities.ts writes the others after the batches).
    for (const w of await this.holderWrites()) {
      const list = pending.get(`${w.table}\u0000${w.entity.partitionKey}`);
      if (!list || list.length >= full) continue;
      list.push(w);
      this.writesPlanned++;
      this.folded.add(addressKey(addressOfWrite(w)));
    }
    if (pending.size > 0) yield planEgtBatches([...pending.values()].flat(), this.opts.target);
  }

  /** Counts `writes` (one committed EGT's) as stored: a row whose last write they are counts in `rowsStored`. */
  committed(writes: readonly TableWrite[]): void {
    for (const w of writes) {
      const line = this.lines.get(w);
      const left = line === undefined ? undefined : this.uncommitted.get(line);
      if (left === undefined) continue; // a summary holder's write: of no one row
      if (left > 1) this.uncommitted.set(line!, left - 1);
      else {
        this.uncommitted.delete(line!);
        this.rowsStored++;
      }
    }
  }

  /**
   * The summary holders whose values this step changes — of summaries kept in the EGT (holderMerges) and of those
   * kept eventually (holderAfter) — each as its whole entity with the new values, its WriteId kept (the values are
   * not a write of the holder). A holder this step itself writes is left to the merges.
   */
  private async holderWrites(): Promise<TableWrite[]> {
    const changes = new Map<string, { address: EntityAddress; holder: EntityModel; values: Record<string, unknown> }>();
    const change = (address: EntityAddress, holder: EntityModel, field: string, value: unknown) => {
      const entry = changes.get(addressKey(address)) ?? { address, holder, values: {} };
      entry.values[field] = value;
      changes.set(addressKey(address), entry);
    };
    for (const merge of await this.holderMerges()) {
      if (merge.unchanged) continue;
      for (const [field, typed] of Object.entries(merge.properties)) change(merge.address, merge.holder, field, typed?.value ?? null);
    }
    for (const { summary, address } of this.eventualHolders.values()) {
      const { sum, holder } = await this.holderAfter(summary, address);
      if (holder && !summaryValue(holder.properties[summary.field]).equals(sum))
        change(address, summary.holder, summary.field, summary.holder.fields.get(summary.field)!.graphqlType === 'Int' ? sum.toNumber() : decimalText(sum));
    }
    const writes: TableWrite[] = [];
    for (const { address, holder, values } of changes.values()) {
      if (this.opts.written.has(addressKey(address)) && holder === this.entity) continue;
      const stored = (await this.store.partition(address.table, address.partitionKey)).get(address.rowKey);
      if (!stored) continue;
      const writeId = stored.properties[WRITE_ID_PROPERTY];
      writes.push(entityWrites(holder, { ...valuesOf(holder, stored.properties), ...values }, typeof writeId === 'string' ? writeId : randomUUID()).primary);
    }
    return writes;
  }

  /**
   * The writes of one row, or undefined when it is kept as stored; every check made.
   * @throws TablegraphError for a row to skip (BAD_USER_INPUT, LIMIT_EXCEEDED, NOT_FOUND, CONFLICT), or a storage error
   */
  private async plan(line: number, given: Record<string, unknown>): Promise<TableWrite[] | undefined> {
    const entity = this.entity;
    const values: Record<string, unknown> = Object.fromEntries([...entity.fields.keys()].map((f) => [f, given[f] ?? null]));
    const address = primaryAddress(entity, values);
    const stored = (await this.partition(address.partitionKey)).get(address.rowKey);
    const mine = this.rowsOf(address.partitionKey);
    const earlier = mine.get(address.rowKey);
    if (earlier !== undefined) throw skip(ErrorCode.BAD_USER_INPUT, `the same ${entity.name} as line ${earlier}`);
    if (stored && this.opts.existing === 'keep') {
      mine.set(address.rowKey, line);
      this.opts.written.add(addressKey(address));
      this.kept++;
      return undefined;
    }
    const before = stored ? valuesOf(entity, stored.properties) : null;
    // Summaries this type holds are kept from what is stored: the load of what they summarise updates them.
    for (const field of entity.summaryFields) values[field] = before ? before[field] : 0;
    // Copies (@copy) are taken from their targets as stored (loaded by earlier steps, or before).
    for (const copy of entity.copies.values()) {
      const target = await readReferenced(copy.reference, values, (a) => this.store.read(a));
      values[copy.field] = target ? (target.properties[copy.targetField] ?? null) : null;
    }
    const unchanged = before !== null && sameValues(entity, before, values);
    const written = entityWrites(entity, values, unchanged ? String(stored!.properties[WRITE_ID_PROPERTY] ?? randomUUID()) : randomUUID());
    const writes = [written.primary, ...written.indexes];
    const contributed = await this.contributions(address, values, before);
    writes.push(...contributed.writes.map((c) => c.write));
    for (const w of writes) checkEntity(w.entity, this.opts.target);
    await this.checkReferences(values);
    const holders = await this.holdersOf(values);
    await this.uniqueClaims.claim(written.indexes, address);
    this.staleContributions.push(...contributed.stale);
    const out = await this.changed(writes);
    for (const h of contributed.holders) this.eventualHolders.set(`${h.summary.holder.name}.${h.summary.field}\u0000${addressKey(h.address)}`, h);

    mine.set(address.rowKey, line);
    this.opts.written.add(addressKey(address));
    for (const { address: holder, sums } of holders) {
      const key = addressKey(holder);
      let entry = this.totals.get(key);
      if (!entry) this.totals.set(key, (entry = { address: holder, sums: new Map() }));
      for (const [s, v] of sums) entry.sums.set(s, (entry.sums.get(s) ?? new Decimal(0)).plus(v));
    }
    if (before) this.noteStale(address, before, writes);
    if (unchanged) this.unchanged++;
    this.loaded++;
    return out;
  }

  /**
   * An eventual summary's holder after this step, known without a read (the step read the holder's partition
   * before writing there): its sum — the contribution entities the partition held, with those this step wrote or
   * took back — and the holder as read, or null when it is gone.
   */
  async holderAfter(summary: SummaryModel, address: EntityAddress): Promise<{ sum: Decimal; holder: StoredEntity | null }> {
    const partition = await this.store.partition(address.table, address.partitionKey);
    const prefix = `${contributionPrefix(summary)}${escapeKeyValue(address.rowKey)}_`;
    const values = new Map<string, Decimal>();
    for (const [rowKey, e] of partition)
      if (rowKey.startsWith(prefix) && isContribution(summary, e)) values.set(rowKey, new Decimal(String(e.properties[CONTRIBUTION.value])));
    for (const [rowKey, value] of this.contributed.get(`${address.table}\u0000${address.partitionKey}`) ?? [])
      if (rowKey.startsWith(prefix)) values.set(rowKey, value);
    for (const a of this.staleContributions)
      if (a.table === address.table && a.partitionKey === address.partitionKey && a.rowKey.startsWith(prefix)) values.delete(a.rowKey);
    const sum = [...values.values()].reduce((n, v) => n.plus(v), new Decimal(0));
    return { sum, holder: partition.get(address.rowKey) ?? null };
  }

  /**
   * The row's contribution entities to summaries held in other partitions, those of its stored state it no longer
   * has, and the holders concerned.
   * @throws TablegraphError NOT_FOUND when a holder does not exist
   */
  private async contributions(primary: EntityAddress, values: Record<string, unknown>, before: Record<string, unknown> | null) {
    const writes: Array<{ write: TableWrite }> = [];
    const stale: EntityAddress[] = [];
    const holders: Array<{ summary: SummaryModel; address: EntityAddress }> = [];
    const read = (a: EntityAddress) => this.store.read(a);
    for (const s of this.eventual) {
      // Through a unique index, the holder is where its index entity says; none there: no such holder.
      const resolved = s.via.index ? await resolveHolder(s, values, read) : undefined;
      if (resolved === null) {
        const at = holderAddress(s, values)!;
        throw skip(
          ErrorCode.NOT_FOUND,
          `${s.via.fieldName}: no ${s.holder.name} at ${at.partitionKey}/${at.rowKey} to hold ${s.holder.name}.${s.field}, neither stored nor loaded before (ReferenceMissing)`,
        );
      }
      // Null with an optional reference that is null: the row counts towards no holder.
      const c = contributionOf(s, primary, values, resolved);
      if (c && !(await this.store.exists(c.holder, s.holder.entityType))) {
        throw skip(
          ErrorCode.NOT_FOUND,
          `${s.via.fieldName}: no ${s.holder.name} at ${c.holder.partitionKey}/${c.holder.rowKey} to hold ${s.holder.name}.${s.field}, neither stored nor loaded before (ReferenceMissing)`,
        );
      }
      if (c) {
        const write = { table: c.address.table, entity: contributionEntity(s, c, primary) };
        writes.push({ write });
        holders.push({ summary: s, address: c.holder });
        const partition = `${c.address.table}\u0000${c.address.partitionKey}`;
        this.contributed.set(partition, (this.contributed.get(partition) ?? new Map()).set(c.address.rowKey, c.value));
      }
      const old = before && contributionOf(s, primary, before, s.via.index ? await resolveHolder(s, before, read) : undefined);
      if (old && (!c || addressKey(old.address) !== addressKey(c.address))) {
        stale.push(old.address);
        holders.push({ summary: s, address: old.holder });
      }
    }
    return { writes, stale, holders };
  }

  private rowsOf(partitionKey: string): Map<string, number> {
    let rows = this.rows.get(partitionKey);
    if (!rows) this.rows.set(partitionKey, (rows = new Map()));
    return rows;
  }

  /** The type's stored entities of a partition. */
  private partition(partitionKey: string): Promise<Map<string, StoredEntity>> {
    return this.store.ofEntityType(this.entity.layout.table, partitionKey, this.entity.entityType);
  }

  /** The writes whose entity is not stored exactly so: an unchanged entity is not written again. */
  private async changed(writes: TableWrite[]): Promise<TableWrite[]> {
    const out: TableWrite[] = [];
    for (const w of writes) if (!(await this.store.storedAs(w.table, w.entity))) out.push(w);
    return out;
  }

  /** @throws TablegraphError NOT_FOUND (ReferenceMissing) naming the reference whose target does not exist */
  private async checkReferences(values: Record<string, unknown>): Promise<void> {
    for (const path of this.opts.model.references.get(this.entity.name) ?? []) {
      const address = referenceAddress(path, values);
      if (!address) continue;
      if (!(await this.store.exists(address, path.index ? path.index.entityType : path.target.entityType))) {
        throw skip(
          ErrorCode.NOT_FOUND,
          `${path.fieldName}: no ${path.target.name} at ${address.partitionKey}/${address.rowKey}, neither stored nor loaded before (ReferenceMissing)`,
        );
      }
    }
  }

  /** Each summary holder the row contributes to, with its contributions. @throws NOT_FOUND when a holder does not exist */
  private async holdersOf(values: Record<string, unknown>): Promise<Array<{ address: EntityAddress; sums: Map<SummaryModel, Decimal> }>> {
    const out = new Map<string, { address: EntityAddress; sums: Map<SummaryModel, Decimal> }>();
    for (const s of this.summaries) {
      const address = holderAddress(s, values);
      if (!address) continue; // an optional reference that is null: it counts towards no holder
      if (!(await this.store.exists(address, s.holder.entityType))) {
        throw skip(
          ErrorCode.NOT_FOUND,
          `${s.via.fieldName}: no ${s.holder.name} at ${address.partitionKey}/${address.rowKey} to hold ${s.holder.name}.${s.field}, neither stored nor loaded before (ReferenceMissing)`,
        );
      }
      const key = addressKey(address);
      let entry = out.get(key);
      if (!entry) out.set(key, (entry = { address, sums: new Map() }));
      entry.sums.set(s, summaryContribution(s, values));
    }
    return [...out.values()];
  }

  /** Lists the index entities the stored state derived that the new writes do not. */
  private noteStale(primary: EntityAddress, before: Record<string, unknown>, writes: TableWrite[]): void {
    const stale = staleIndexAddresses(this.entity, before, writes);
    if (stale.length > 0) this.stale.push({ primary, addresses: stale });
  }

  /**
   * One merge per summary holder the rows contribute to: the file's totals plus what the stored entities of the
   * type the file does not rewrite contribute. Call after `batches()` is exhausted; computed once (batches() needs
   * them first, to write holders in their partition's last EGT).
   */
  holderMerges(): Promise<HolderMerge[]> {
    this.merges ??= this.computeHolderMerges();
    return this.merges;
  }

  private merges?: Promise<HolderMerge[]>;

  private computeHolderMerges(): Promise<HolderMerge[]> {
    return holderMergesOf(this.entity, this.totals, {
      stored: (partitionKey) => this.partition(partitionKey),
      rewritten: (partitionKey) => this.rows.get(partitionKey),
      holderPartition: (table, partitionKey) => this.store.partition(table, partitionKey),
    });
  }
}

/** A row's refusal: the load skips the row and reports `message` with its line. */
function skip(code: ErrorCode, message: string): TablegraphError {
  return new TablegraphError(code, message);
}
