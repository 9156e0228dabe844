/**
 * Group commit, the reading (partition-committer.ts): what a group of writes must know before it is planned — each
 * write's entity and the summary holders they contribute to, in as few waves as the keys allow (a holder whose
 * address the write's key fields give is read beside the entity), the targets of the references it sets
 * (check-references.ts), and the entities of its own partition holding copies of fields it changes (`@copy`) — and, once
 * planned, who holds each unique key a write wants (reservations.ts), read before anything is sent.
 */
import { addressOfWrite, primaryAddress, valuesOf } from '../model/entity-codec';
import { prefixUpperBound, renderKey, renderKeyPrefix } from '../model/key-template';
import { ENTITY_TYPE_PROPERTY, type CopyModel, type DependentModel, type EntityModel, type Model, type WriteModel } from '../model/types';
import { mergeParts, partAddresses } from '../model/wide-entities';
import type { TableStore } from '../storage/table-store';
import type { EntityAddress, StorageObserver, StoredEntity } from '../storage/storage-types';
import { addressKey } from '../storage/address-key';
import type { GroupState } from './group-plan';
import { readKeyState, type KeyState } from './reservations';
import { referenceAddress, REFERRERS_LISTED } from '../model/references';
import { referencesToCheck } from './check-references';
import { copyKeysSummary, holderAddress } from '../model/summaries';
import { changedCopies, copyListKey } from './copy-plan';
import type { Referrer, Values, WritePlan } from './plan-types';
import { nextValues, summariesOf } from './write-plan';

/** Copies changed in one EGT at most (entities); more are left to the worker. */
const MAX_COPIES_PER_EGT = 50;

/** A write as the reads need it: what it writes, where, and the ids of its attempts. */
interface Reader {
  write: WriteModel;
  input: Values;
  address: EntityAddress;
  ownAttempts: ReadonlySet<string>;
  takeOverFrom?: EntityAddress;
  moveId?: string;
  readFirst?: boolean;
}

/**
 * Whether a write goes without reading its entity: a plain create, whose EGT insert is refused anyway when the
 * entity exists (the committer then reads it and fails the write with the planner's error). A move's create, and
 * a create already refused once, read it.
 */
export function skipsRead(m: Reader): boolean {
  return m.write.action === 'CREATE' && !m.readFirst && m.moveId === undefined && m.takeOverFrom === undefined;
}

/**
 * Reads every write's entity, the summary holders `cached` lacks, and the targets of the references each write
 * sets: what the input's fields address in the same wave as the entities, what only the entity's stored values
 * address (an update's summary holder, a reference whose fields it gives only in part) in a second.
 * @param cached holders as the committer last wrote them (not read again); a holder read, fresh or cached, also
 *   answers a reference to the same address
 */
export async function readGroupState(
  model: Model,
  store: TableStore,
  members: Reader[],
  cached: ReadonlyMap<string, StoredEntity | null>,
  observer?: StorageObserver,
): Promise<GroupState> {
  const reader = new GroupStateReader(model, store, cached, observer);
  await reader.firstWave(members);
  await reader.secondWave(members);
  await Promise.all([reader.readCopyLists(), reader.readReferrers(members)]);
  const { entities, holders, references, copyHolders, referrers } = reader;
  return { entities, holders, references, copyHolders, ...(referrers.size > 0 && { referrers }) };
}

/** The reads of one group, in waves: what each wave finds names what the next one reads. */
class GroupStateReader {
  readonly entities = new Map<string, StoredEntity | null>();
  readonly holders: Map<string, StoredEntity | null>;
  readonly references = new Map<string, StoredEntity | null>();
  readonly copyHolders = new Map<string, EntityAddress[]>();
  readonly referrers = new Map<string, Referrer>();
  private readonly copyLists = new Map<
    string,
    { copy: CopyModel; type: string; range: { table: string; partitionKey: string; rowKeyFrom: string; rowKeyTo?: string } }
  >();
  /** The addresses the next read() reads. */
  private readonly wave = { holders: new Map<string, EntityAddress>(), references: new Map<string, EntityAddress>() };

  constructor(
    private readonly model: Model,
    private readonly store: TableStore,
    cached: ReadonlyMap<string, StoredEntity | null>,
    private readonly observer?: StorageObserver,
  ) {
    this.holders = new Map(cached);
  }

  /** The entities written, and the holders and references their keys and input alone name. */
  async firstWave(members: Reader[]): Promise<void> {
    for (const m of members) {
      for (const s of summariesOf(this.model, m.write)) {
        const keyed = [...s.via.partitionKey.bindings.values(), ...s.via.rowKey.bindings.values()].every((b) => m.write.entity.keyFields.includes(b.name));
        const holder = keyed ? holderAddress(s, m.input) : undefined;
        if (holder) this.wantHolder(holder);
      }
      // A create or replace gives every field (those it leaves out become null), so its references are known now.
      if (m.write.action === 'CREATE' || m.write.action === 'REPLACE') {
        this.wantReferences(m, Object.fromEntries([...m.write.entity.fields.keys()].map((f) => [f, m.input[f] ?? null])));
      }
    }
    await this.read(new Map(members.filter((m) => !skipsRead(m)).map((m) => [addressKey(m.address), m])));
  }

  /** What only the entity's current or next values name: holders, references, copy lists. */
  async secondWave(members: Reader[]): Promise<void> {
    const { model } = this;
    for (const m of members) {
      const current = this.entities.get(addressKey(m.address)) ?? null;
      let next: Values | null;
      try {
        next = nextValues(m.write, m.input, current, m.moveId);
      } catch {
        continue; // planGroup refuses it with the same error
      }
      for (const vals of [current ? valuesOf(m.write.entity, current.properties) : null, next]) {
        if (!vals) continue;
        for (const s of summariesOf(model, m.write)) {
          try {
            const holder = holderAddress(s, vals);
            if (holder) this.wantHolder(holder);
          } catch {
            // a value that cannot form the holder's key: planGroup refuses the write
          }
        }
      }
      this.wantReferences(m, next);
      if (current) {
        // A copy that keys a summary's reference moves a contribution when it changes: the worker's, through the write
        // path (src/derived/copy-refresh.ts), not a merge in this EGT.
        const copies = changedCopies(model, m.write.entity, valuesOf(m.write.entity, current.properties), next).filter((c) => !copyKeysSummary(model, c));
        for (const copy of copies) this.wantCopies(m, copy, next!);
      }
    }
    await this.read(new Map());
  }

  /** The copy lists wanted: their holders, when all live in the written entity's partition and fit one EGT. */
  async readCopyLists(): Promise<void> {
    await Promise.all(
      [...this.copyLists].map(async ([key, q]) => {
        const { entities: listed } = await this.store.queryRange({ ...q.range, limit: MAX_COPIES_PER_EGT + 1 }, { observer: this.observer });
        if (listed.length > MAX_COPIES_PER_EGT) return; // more than one EGT takes: the worker's
        const addresses = listed.filter((e) => e.properties[ENTITY_TYPE_PROPERTY] === q.type).map((e) => primaryAddress(q.copy.entity, e.properties));
        if (addresses.every((a) => a.table === q.range.table && a.partitionKey === q.range.partitionKey)) this.copyHolders.set(key, addresses);
      }),
    );
  }

  /**
   * For each delete, an entity of each `onDelete: RESTRICT` reference to its type that still points at it (found
   * through the reference's range over the target, write-plan.ts refusing the delete), if any: one range query per
   * reference, and a point query of each entity listed (an index entity's) until one points at it.
   */
  async readReferrers(members: Reader[]): Promise<void> {
    const reads: Array<Promise<void>> = [];
    for (const m of members) {
      const current = m.write.action === 'DELETE' ? this.entities.get(addressKey(m.address)) : undefined;
      if (!current || current.properties[ENTITY_TYPE_PROPERTY] !== m.write.entity.entityType) continue;
      const values = valuesOf(m.write.entity, current.properties);
      for (const dependent of this.model.dependentsOf.get(m.write.entity.name) ?? []) {
        if (dependent.onDelete !== 'RESTRICT') continue;
        reads.push(
          this.referrerOf(dependent, values, m.address).then((referrer) => {
            if (referrer && !this.referrers.has(addressKey(m.address))) this.referrers.set(addressKey(m.address), { dependent, referrer });
          }),
        );
      }
    }
    await Promise.all(reads);
  }

  /** An entity of `dependent` pointing at the entity at `address` (its values `values`), or null. */
  private async referrerOf(dependent: DependentModel, values: Values, address: EntityAddress): Promise<StoredEntity | null> {
    const path = dependent.reverse;
    const args = (bound: NonNullable<typeof path.rowKeyPrefix>) =>
      Object.fromEntries([...bound.bindings].map(([placeholder, b]) => [placeholder, values[b.name]]));
    const partitionKey = renderKey(path.partitionKey.template, args(path.partitionKey));
    const rowKeyFrom = renderKeyPrefix(path.rowKeyPrefix!.template, args(path.rowKeyPrefix!));
    const range = { table: path.table, partitionKey, rowKeyFrom, rowKeyTo: prefixUpperBound(rowKeyFrom), limit: REFERRERS_LISTED };
    const listed = path.index ? path.index.entityType : dependent.entity.entityType;
    for (let after: string | undefined; ;) {
      const page = await this.store.queryRange({ ...range, rowKeyAfter: after }, { observer: this.observer });
      for (const e of page.entities) {
        if (e.properties[ENTITY_TYPE_PROPERTY] !== listed) continue;
        const stored = path.index ? await this.store.getEntity(primaryAddress(dependent.entity, e.properties), { observer: this.observer }) : e;
        if (!stored || stored.properties[ENTITY_TYPE_PROPERTY] !== dependent.entity.entityType) continue;
        const at = referenceAddress(dependent.reference, valuesOf(dependent.entity, stored.properties));
        if (dependent.reference.index || (at && addressKey(at) === addressKey(address))) return stored;
      }
      if (!page.more || page.entities.length === 0) return null;
      after = page.entities[page.entities.length - 1].rowKey;
    }
  }

  private wantHolder(a: EntityAddress): void {
    if (!this.holders.has(addressKey(a))) this.wave.holders.set(addressKey(a), a);
  }

  private wantReferences(m: Reader, values: Values | null): void {
    for (const path of referencesToCheck(this.model, m.write, m.input, values)) {
      try {
        const a = referenceAddress(path, values!);
        if (a && !this.references.has(addressKey(a))) this.wave.references.set(addressKey(a), a);
      } catch {
        // a value that cannot form the target's key: planGroup refuses the write
      }
    }
  }

  /** Reads the wave's holders and references, and `entitiesToo`, at once. */
  private async read(entitiesToo: Map<string, Reader>): Promise<void> {
    const { store, observer, wave } = this;
    const referenceOnly = [...wave.references].filter(([key]) => !wave.holders.has(key) && !this.holders.has(key));
    await Promise.all([
      ...[...entitiesToo].map(async ([key, m]) => this.entities.set(key, await readEntity(store, m.write.entity, m.address, observer))),
      ...[...wave.holders].map(async ([key, a]) => this.holders.set(key, await store.getEntity(a, { observer }))),
      ...referenceOnly.map(async ([key, a]) => this.references.set(key, await store.getEntity(a, { observer }))),
    ]);
    wave.holders.clear();
    wave.references.clear();
  }

  /** Lists the holders of a changed copy when they live in the written entity's own partition. */
  private wantCopies(m: Reader, copy: CopyModel, values: Values): void {
    const path = copy.reverse;
    const args = (bound: NonNullable<typeof path.rowKeyPrefix>) =>
      Object.fromEntries([...bound.bindings].map(([placeholder, b]) => [placeholder, values[b.name]]));
    try {
      const partitionKey = renderKey(path.partitionKey.template, args(path.partitionKey));
      if (path.table !== m.address.table || partitionKey !== m.address.partitionKey) return;
      const rowKeyFrom = renderKeyPrefix(path.rowKeyPrefix!.template, args(path.rowKeyPrefix!));
      const listed = path.join?.entity ?? path.index?.entity ?? path.target;
      this.copyLists.set(copyListKey(m.address, copy), {
        copy,
        type: path.index ? path.index.entityType : listed.entityType,
        range: { table: path.table, partitionKey, rowKeyFrom, rowKeyTo: prefixUpperBound(rowKeyFrom) },
      });
    } catch {
      // values that cannot form the range: the worker's
    }
  }
}

/**
 * An entity as its write reads it: one point query, or for a wide entity one per part, in parallel, merged (the
 * guide's "Wide entities pattern", wide-entities.ts).
 */
export async function readEntity(store: TableStore, entity: EntityModel, address: EntityAddress, observer?: StorageObserver): Promise<StoredEntity | null> {
  if (!entity.wide) return store.getEntity(address, { observer });
  return mergeParts(await Promise.all(partAddresses(entity.wide, address).map((a) => store.getEntity(a, { observer }))));
}

/**
 * What is stored at every unique key a planned write wants, classified for that write (free, its own, busy with
 * another attempt of the same entity, or taken). Whether a reservation of the same entity is still pending depends
 * on the entity's state read after it, so the entity is read again then.
 */
export async function readUniqueKeys(
  store: TableStore,
  planned: Array<{ member: Reader; plan: WritePlan }>,
  observer?: StorageObserver,
): Promise<Map<string, KeyState>> {
  const states = new Map<string, KeyState>();
  await Promise.all(
    planned.flatMap(({ member, plan }) =>
      plan.reservations.map(async (r) => {
        const address = addressOfWrite(r);
        await store.ensureTable(r.table);
        const existing = await store.getEntity(address, { observer });
        const claimant = {
          entity: member.write.entity,
          index: r.index,
          primary: member.address,
          ownAttempts: member.ownAttempts,
          takeOverFrom: member.takeOverFrom,
        };
        states.set(addressKey(address), await readKeyState(store, claimant, existing, observer));
      }),
    ),
  );
  return states;
}
