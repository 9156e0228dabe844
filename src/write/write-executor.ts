/**
 * Carries out a write plan (DESIGN.md §4): read the entity and its summary holders with their ETags, plan, put
 * the fan-out message on the queue, reserve unique keys, then commit the EGT. A concurrent write that changes
 * what was read makes the EGT fail with 412; the executor then reads again and re-plans, a bounded number of
 * times. A client that named the ETag it read (`ifMatch`) gets CONFLICT when the entity itself changed (the
 * re-plan finds its ETag stale), not when only a summary holder did (another employee of the department).
 *
 * Order matters: the message is on the queue before the EGT commits, so a crash between the two loses nothing
 * (the worker reconciles against whatever is there); a reservation is made before the EGT, so two writers can
 * never both own a unique key ("Eventually consistent transactions pattern", "Inter-partition secondary index
 * pattern").
 */
import { randomUUID } from 'node:crypto';
import { ErrorCode, TablegraphError, isTablegraphError } from '../errors';
import { valuesOf, type TableWrite } from '../model/entity-codec';
import { VERSION_PROPERTY, type IndexModel, type Model, type WriteModel } from '../model/types';
import type { TableStore } from '../storage/table-store';
import type { EntityAddress, EntityToWrite, StorageObserver, StoredEntity } from '../storage/types';
import { addressKey, encodeFanout } from './fanout-message';
import { addressOf, checkPlan, holderAddress, nextValues, planWrite, summariesOf, type Values } from './write-plan';

/** Where fan-out messages go (the queue adapter, or anything with the same method). */
export interface FanoutSender {
  send(text: string): Promise<void>;
}

export interface WriteExecutorOptions {
  model: Model;
  store: TableStore;
  fanout: FanoutSender;
  /** Attempts when a concurrent write changed what was read (attempts; default 8). */
  maxAttempts?: number;
}

/** The outcome of a write: the entity as it now is (or was, for a delete). */
export interface WriteResult {
  address: EntityAddress;
  /** Values after the write; for a delete, the values it had. */
  values: Values;
  /** The entity's new ETag; for a delete, the ETag it had. */
  etag: string;
  deleted: boolean;
}

/** A reservation this write inserted, with the ETag its insert returned. */
type Reservation = TableWrite & { etag: string };

/** Runs mutations. One instance serves every request. */
export class WriteExecutor {
  private readonly maxAttempts: number;

  constructor(private readonly opts: WriteExecutorOptions) {
    this.maxAttempts = opts.maxAttempts ?? 8;
  }

  /**
   * @param input the mutation's input (field name → value, plus `ifMatch`)
   * @throws TablegraphError CONFLICT (exists, stale ETag, unique key taken, still has dependents), NOT_FOUND,
   *   BAD_USER_INPUT, LIMIT_EXCEEDED (checked before sending), STORAGE_UNAVAILABLE
   */
  async execute(write: WriteModel, input: Values, observer?: StorageObserver): Promise<WriteResult> {
    const { store } = this.opts;
    const call = { observer };
    for (let attempt = 1; ; attempt++) {
      const address = addressOf(write, input);
      // When the summary holders follow from the key fields alone (a department from an employee's departmentId),
      // they are read beside the entity, in one wave; otherwise after it, from its current values.
      const early = this.holdersFromKeys(write, input);
      const [current, earlyHolders] = await Promise.all([store.getEntity(address, call), early && this.readAll(early, observer)]);
      const holders = earlyHolders ?? (await this.readHolders(write, input, current, observer));
      const plan = planWrite(this.opts.model, write, input, { current, holders });
      checkPlan(write.entity, plan, store.target); // nothing is sent for a write that cannot succeed
      if (plan.fanout) await this.opts.fanout.send(encodeFanout({ ...plan.fanout, id: randomUUID(), enqueuedAt: Date.now() }));
      const reserved = await this.reserve(write, plan.reservations, address, plan.version, observer);
      try {
        const etags = await store.submitTransaction(plan.table, plan.operations, call);
        return plan.values
          ? { address, values: plan.values, etag: etags[0]!, deleted: false }
          : { address, values: plan.previous!, etag: current!.etag, deleted: true };
      } catch (e) {
        await this.release(reserved, observer);
        const stale = isTablegraphError(e, ErrorCode.CONFLICT) && e.details.reason === 'ETagMismatch';
        if (!stale || attempt >= this.maxAttempts) throw e;
        // Someone wrote the entity or a summary holder since it was read: read again and re-plan, with jitter so
        // that writers contending for one department do not retry in lockstep. A client's `ifMatch` is checked
        // against the entity read again (nextValues), so it still gets CONFLICT when the entity itself changed,
        // but not when only a summary holder did (another employee of the same department was written).
        await new Promise((r) => setTimeout(r, Math.random() * 10 * attempt));
      }
    }
  }

  private async readHolders(write: WriteModel, input: Values, current: StoredEntity | null, observer?: StorageObserver): Promise<Map<string, StoredEntity | null>> {
    const holders = new Map<string, StoredEntity | null>();
    const summaries = summariesOf(this.opts.model, write);
    if (summaries.length === 0) return holders;
    let next: Values | null = null;
    try {
      next = nextValues(write, input, current);
    } catch {
      return holders; // planWrite raises the same error with the whole picture
    }
    const addresses = new Map<string, EntityAddress>();
    for (const vals of [current ? valuesOf(write.entity, current.properties) : null, next]) {
      if (!vals) continue;
      for (const s of summaries) {
        const a = holderAddress(s, vals);
        addresses.set(addressKey(a), a);
      }
    }
    return this.readAll(addresses, observer);
  }

  /**
   * The holder addresses when every summary's `via` binds only key fields of the entity: keys never change, so
   * the input alone gives them. Undefined otherwise (or when the input cannot form them: planWrite reports that).
   */
  private holdersFromKeys(write: WriteModel, input: Values): Map<string, EntityAddress> | undefined {
    const summaries = summariesOf(this.opts.model, write);
    const keyed = summaries.every((s) =>
      [...s.via.partitionKey.bindings.values(), ...s.via.rowKey.bindings.values()].every((b) => write.entity.keyFields.includes(b.name)),
    );
    if (!keyed) return undefined;
    try {
      return new Map(summaries.map((s) => holderAddress(s, input)).map((a) => [addressKey(a), a]));
    } catch {
      return undefined;
    }
  }

  private async readAll(addresses: Map<string, EntityAddress>, observer?: StorageObserver): Promise<Map<string, StoredEntity | null>> {
    const holders = new Map<string, StoredEntity | null>();
    await Promise.all([...addresses].map(async ([key, a]) => holders.set(key, await this.opts.store.getEntity(a, { observer }))));
    return holders;
  }

  /**
   * Conditional inserts of unique index entities. An entity already there that points at this same entity (a
   * retry, or a concurrent write of the same entity) is ours: it is rewritten with If-Match on the ETag read, so
   * that a concurrent writer's release of it (a delete conditional on the ETag its insert returned) fails and the
   * key stays reserved for the write that commits. One that points elsewhere means the key is taken.
   * @returns the reservations made by this call, with the ETag of each insert (to release if the EGT fails)
   */
  private async reserve(
    write: WriteModel,
    derived: Array<TableWrite & { index: IndexModel }>,
    address: EntityAddress,
    version: number,
    observer?: StorageObserver,
  ): Promise<Reservation[]> {
    const made: Reservation[] = [];
    // A reservation carries the version of the write it is for: until the entity reaches that version, the worker
    // treats it as pending and leaves it alone (reconciler.ts), however stale its own read of the entity.
    const reservations = derived.map((r) => {
      const properties: EntityToWrite['properties'] = { ...r.entity.properties, [VERSION_PROPERTY]: { type: 'Int32', value: version } };
      return { ...r, entity: { ...r.entity, properties } };
    });
    for (const r of reservations) {
      const at = { table: r.table, partitionKey: r.entity.partitionKey, rowKey: r.entity.rowKey };
      for (let attempt = 1; ; attempt++) {
        try {
          made.push({ ...r, etag: await this.opts.store.createEntity(r.table, r.entity, { observer }) });
          break;
        } catch (e) {
          if (!isTablegraphError(e, ErrorCode.CONFLICT)) throw e;
        }
        const existing = await this.opts.store.getEntity(at, { observer });
        const ours = existing && pointsAt(write, existing, address);
        if (ours) {
          const touched = await this.opts.store.updateEntity(r.table, r.entity, 'replace', { observer, ifMatch: existing.etag }).then(
            () => true,
            (e: unknown) => (isTablegraphError(e, ErrorCode.CONFLICT) || isTablegraphError(e, ErrorCode.NOT_FOUND) ? false : Promise.reject(e)),
          );
          if (touched) break;
        }
        // Released or rewritten since it was read: look again, a bounded number of times.
        if ((ours || !existing) && attempt < 5) continue;
        await this.release(made, observer);
        const fields = [...new Set([...r.index.layout.partitionKey.fields, ...r.index.layout.rowKey.fields])];
        const taken = fields.map((f) => `${f} ${JSON.stringify(String(r.entity.properties[f]?.value))}`).join(', ');
        throw new TablegraphError(ErrorCode.CONFLICT, `${write.entity.name}: ${taken} is already taken (unique index ${r.index.name})`, {
          reason: 'UniqueKeyTaken',
          index: r.index.name,
          fields,
        });
      }
    }
    return made;
  }

  /**
   * Best-effort removal of reservations this write made, each only if unchanged since its insert: one rewritten
   * since belongs to a concurrent write of the same entity that relies on it. The worker removes any this misses.
   */
  private async release(made: Reservation[], observer?: StorageObserver): Promise<void> {
    for (const r of made) {
      try {
        await this.opts.store.deleteEntity({ table: r.table, partitionKey: r.entity.partitionKey, rowKey: r.entity.rowKey }, { observer, ifMatch: r.etag });
      } catch {
        // Rewritten since (kept on purpose), or not deleted: the fan-out message names this key, and the worker
        // deletes it if it still points at this entity without being derived from it.
      }
    }
  }
}

/** Whether a derived entity's key fields name the entity at `address`. */
export function pointsAt(write: Pick<WriteModel, 'entity'>, derived: StoredEntity, address: EntityAddress): boolean {
  try {
    const { table, partitionKey, rowKey } = addressOf(write as WriteModel, derived.properties);
    return table === address.table && partitionKey === address.partitionKey && rowKey === address.rowKey;
  } catch {
    return false;
  }
}
