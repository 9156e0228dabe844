/**
 * The storage design of a schema, as `npm run explain` shows it: for each field that reads storage, its access
 * path (point or range query, table, PartitionKey and RowKey templates and where each placeholder's value comes
 * from, the index it reads) and the waves of storage calls it costs ("Design for querying"); each summary value
 * and how it is kept; each reference and whether writes check it; each mutation and what it writes in its EGT
 * and what eventually. Structured data (for `--json`), and a text rendering of it for people.
 */
import { blobFields } from '../model/blob-fields';
import type { AccessPath, BoundTemplate, EntityModel, Model, PointPath, WriteAction } from '../model/types';

/** A key template and where each placeholder's value comes from. */
export interface KeyPlan {
  template: string;
  bindings: Array<{ placeholder: string; source: 'argument' | 'parent' | 'tenant'; name: string; optional: boolean }>;
}

/** The RowKey side of an access path. */
export type RowKeyPlan =
  | ({ kind: 'exact' } & KeyPlan)
  | ({ kind: 'prefix' } & KeyPlan)
  | { kind: 'bounds'; from: KeyPlan | null; to: KeyPlan | null; fromInclusive: boolean; toInclusive: boolean };

/** One storage-reading field's plan. */
export interface FieldPlan {
  coordinate: string;
  kind: 'point' | 'range';
  table: string;
  /** A table per period (the guide's "High volume delete pattern"): the template naming the table read. */
  tableTemplate: KeyPlan | null;
  partitionKey: KeyPlan;
  rowKey: RowKeyPlan;
  index: { name: string; scope: 'intraPartition' | 'interPartition'; projection: string[] } | null;
  /** A many-to-many connection: the join type it ranges over, and the reference that gives each node. */
  through: { entity: string; reference: string } | null;
  /** Waves of storage calls when the selection is covered by what the path reads (calls in sequence). */
  waves: number;
  /** Waves when the selection needs fields an index entity does not hold (the entity is read in one more wave). */
  maxWaves: number;
  /** Entities per page, for range queries: default and maximum `first`. */
  pageSize: { default: number; max: number } | null;
  /** Whether what it reads may lag behind the writes (an inter-partition index, kept by the message worker). */
  consistency: 'strong' | 'eventual';
  /** A wide entity (the guide's "Wide entities pattern"): the entities it is stored as, one point query each, in one wave. */
  parts: number | null;
}

/** A summary value (`@summary`). */
export interface SummaryPlan {
  coordinate: string;
  of: string;
  /** The `of` entity's reference to the holder. */
  via: string;
  kind: 'count' | 'sum';
  /** For a sum: each term as a product of fields and constants. */
  terms: string[];
  /** `egt`: in the same EGT as the write of an `of` entity; `eventual`: by the worker, through contribution entities. */
  keptIn: 'egt' | 'eventual';
}

/** A reference: a `@point` field of an entity type whose keys come from the entity's own fields. */
export interface ReferencePlan {
  coordinate: string;
  target: string;
  /** The stored fields that give the target's keys. */
  fields: string[];
  /** Null (with no storage call) while a key field is null. */
  optional: boolean;
  /** A write setting `fields` reads the target first and is refused (NOT_FOUND) when it does not exist. */
  checkOnWrite: boolean;
}

/** A mutation (`@write`) and what it writes. */
export interface MutationPlan {
  coordinate: string;
  entity: string;
  action: WriteAction;
  /** Stored fields the input may set. */
  inputFields: string[];
  /**
   * Written in the entity's EGT: the entity, its intra-partition index entities, the summaries it contributes to,
   * and (`change`) a change entity when a subscription follows the type.
   */
  egt: { indexes: string[]; summaries: string[]; change: boolean };
  /** Kept eventually through the work queue: inter-partition index entities, summaries held elsewhere. */
  eventual: { indexes: string[]; summaries: string[] };
  /** References read before the write (checkOnWrite). */
  checksReferences: string[];
  /** A wide entity: the entities it is stored as, all read before the write and written in its EGT as needed. */
  parts: number | null;
  /** `@blob` fields the input may set: uploaded (or given an upload URL) before the EGT, cleaned up through the queue. */
  blobs: string[];
}

/** A `@blob` field: its container and read URL lifetime (the guide's "Large entities pattern"). */
export interface BlobPlan {
  coordinate: string;
  container: string;
  maxBytes: number;
  contentTypes: string[];
  /** How long a read URL is valid (s). */
  expiresInSeconds: number;
}

/** A copy (`@copy`) of a referenced entity's field. */
export interface CopyPlan {
  coordinate: string;
  /** The reference whose target is copied from. */
  reference: string;
  /** The target's field, e.g. `Customer.name`. */
  copies: string;
  /** The target type's range through which the worker finds the copies. */
  foundThrough: string;
}

/**
 * A hot partition: one partition that every write of a type (or of a group of its entities) touches, so its write
 * rate is bounded by one partition's scalability target (2,000 entities/s on Azure Table storage).
 */
export interface HotPartition {
  /** What lives there: `<Type>` (its entities) or `<Type>@index(<name>)` (its index entities). */
  coordinate: string;
  table: string;
  partitionKey: string;
  /** Which writes land there, in words. */
  why: string;
}

/** A subscription (`@subscribe`): what it follows, and how servers read it. */
export interface SubscriptionPlan {
  coordinate: string;
  entity: string;
  /** One partition, or one entity of it (the arguments give the RowKey too). */
  follows: 'partition' | 'entity';
  /** The PartitionKey template the arguments render (each server polls it once per interval while watched). */
  partitionKey: string;
  /** The argument a client resumes with (a change's cursor), if any. */
  after: string | null;
}

/** A `@transaction` mutation: what its one EGT writes, and what the worker keeps after it (each item's eventual part). */
export interface TransactionPlan {
  coordinate: string;
  /** The `@write` mutations an item may be, by name. */
  items: string[];
  table: string;
  partitionKey: string;
  /** Written atomically, in the one EGT: the entity types, their intra-partition indexes, change entities, summaries held there. */
  atomic: string[];
  /** Kept eventually through the work queue, after the EGT: inter-partition index entities, summaries held elsewhere. */
  eventual: string[];
  /** The unique indexes whose values are reserved before the EGT (confirmed after it), by name. */
  reserved: string[];
}

export interface Explanation {
  hotPartitions: HotPartition[];
  fields: FieldPlan[];
  summaries: SummaryPlan[];
  references: ReferencePlan[];
  copies: CopyPlan[];
  blobs: BlobPlan[];
  mutations: MutationPlan[];
  transactions: TransactionPlan[];
  subscriptions: SubscriptionPlan[];
}

function keyPlan(bound: BoundTemplate): KeyPlan {
  return {
    template: bound.template.source,
    bindings: [...bound.bindings].map(([placeholder, b]) => ({ placeholder, source: b.source, name: b.name, optional: b.optional === true })),
  };
}

function rowKeyPlan(path: AccessPath): RowKeyPlan {
  if (path.kind === 'point') return { kind: 'exact', ...keyPlan(path.rowKey) };
  if (path.rowKeyPrefix) return { kind: 'prefix', ...keyPlan(path.rowKeyPrefix) };
  return {
    kind: 'bounds',
    from: path.rowKeyFrom ? keyPlan(path.rowKeyFrom) : null,
    to: path.rowKeyTo ? keyPlan(path.rowKeyTo) : null,
    fromInclusive: path.fromInclusive !== false,
    toInclusive: path.toInclusive === true,
  };
}

const byCoordinate = <T extends { coordinate: string }>(a: T, b: T) => a.coordinate.localeCompare(b.coordinate);

/**
 * The whole design: fields (root Query fields first, then by coordinate), summaries, references, mutations.
 * @param opts.capture continuous backup is on (docs/backup.md): every mutation's EGT holds a change entity
 */
export function explainModel(model: Model, opts: { capture?: boolean } = {}): Explanation {
  return {
    hotPartitions: hotPartitions(model),
    fields: fieldPlans(model),
    summaries: summaryPlans(model),
    references: referencePlans(model),
    copies: copyPlans(model),
    blobs: blobPlans(model),
    mutations: mutationPlans(model, opts.capture === true),
    transactions: transactionPlans(model, opts.capture === true),
    subscriptions: subscriptionPlans(model),
  };
}

/** Each `@transaction`: the union of its items' EGT parts and of their eventual parts (mutationPlans). */
function transactionPlans(model: Model, capture: boolean): TransactionPlan[] {
  const mutations = new Map(mutationPlans(model, capture).map((m) => [m.coordinate, m]));
  return [...model.transactions.values()]
    .map((t): TransactionPlan => {
      const plans = [...t.items.values()].map((w) => mutations.get(w.coordinate)!);
      const unique = (xs: string[]) => [...new Set(xs)];
      return {
        coordinate: t.coordinate,
        items: [...t.items.keys()],
        table: t.table,
        partitionKey: t.partitionKey.source,
        atomic: unique([
          ...plans.map((m) => m.entity),
          ...plans.flatMap((m) => m.egt.indexes.map((i) => `index ${i}`)),
          ...(plans.some((m) => m.egt.change) ? ['change entity'] : []),
          ...plans.flatMap((m) => m.egt.summaries),
        ]),
        eventual: unique([...plans.flatMap((m) => m.eventual.indexes.map((i) => `index ${i}`)), ...plans.flatMap((m) => m.eventual.summaries)]),
        reserved: unique([...t.items.values()].flatMap((w) => [...w.entity.indexes.values()].filter((i) => i.unique).map((i) => i.name))),
      };
    })
    .sort(byCoordinate);
}

/** Each field served by an access path: root Query fields first, then by coordinate. */
function fieldPlans(model: Model): FieldPlan[] {
  const fields = [...model.accessPaths.values()].map((path): FieldPlan => ({
    coordinate: path.coordinate,
    kind: path.kind,
    table: path.table,
    tableTemplate: path.tableTemplate ? keyPlan(path.tableTemplate) : null,
    partitionKey: keyPlan(path.partitionKey),
    rowKey: rowKeyPlan(path),
    index: path.index ? { name: path.index.name, scope: path.index.scope, projection: [...path.index.projection] } : null,
    through: path.kind === 'range' && path.join ? { entity: path.join.entity.name, reference: path.join.reference.coordinate } : null,
    // A many-to-many page: the join entities, then their targets — through a unique index, its entities first.
    waves: path.kind === 'range' && path.join ? (path.join.reference.index ? 3 : 2) : 1,
    maxWaves: path.kind === 'range' && path.join ? (path.join.reference.index ? 3 : 2) : path.index ? 2 : 1,
    pageSize: path.kind === 'range' ? { default: path.pageSize, max: path.maxPageSize } : null,
    consistency: path.index?.scope === 'interPartition' ? 'eventual' : 'strong',
    parts: !path.index && path.kind === 'point' ? (path.target.wide?.parts.length ?? null) : null,
  }));
  const rank = (p: FieldPlan) => (p.coordinate.startsWith('Query.') ? 0 : 1);
  fields.sort((a, b) => rank(a) - rank(b) || byCoordinate(a, b));
  return fields;
}

/** Each summary: what it counts or sums, through which reference, kept where. */
function summaryPlans(model: Model): SummaryPlan[] {
  const summaries = [...model.summaries].map(([coordinate, s]): SummaryPlan => ({
    coordinate,
    of: s.of.name,
    via: s.via.coordinate,
    kind: s.count ? 'count' : 'sum',
    terms: s.terms.map((t) => t.map((f) => ('field' in f ? f.field : String(f.constant))).join(' * ')),
    keptIn: s.scope,
  }));
  return summaries;
}

/** Each reference between entity types, by coordinate. */
function referencePlans(model: Model): ReferencePlan[] {
  const references = [...model.accessPaths.values()]
    .filter((p): p is PointPath => p.kind === 'point' && model.entities.has(p.parentType))
    .map((p) => ({ path: p, bindings: [...p.partitionKey.bindings.values(), ...p.rowKey.bindings.values()] }))
    .filter(({ bindings }) => bindings.every((b) => b.source === 'parent'))
    .map(({ path, bindings }): ReferencePlan => ({
      coordinate: path.coordinate,
      target: path.target.name,
      fields: [...new Set(bindings.map((b) => b.name))],
      optional: bindings.some((b) => b.optional === true),
      checkOnWrite: path.checkOnWrite,
    }))
    .sort(byCoordinate);
  return references;
}

/** Each mutation: what its EGT writes (a change entity when a subscription follows the type, or capture is on) and what the worker does after it. */
function mutationPlans(model: Model, capture: boolean): MutationPlan[] {
  const mutations = [...model.writes].map(([coordinate, w]): MutationPlan => {
    const indexes = [...w.entity.indexes.values()];
    return {
      coordinate,
      entity: w.entity.name,
      action: w.action,
      inputFields: [...w.inputFields],
      egt: {
        indexes: indexes.filter((i) => i.scope === 'intraPartition').map((i) => i.name),
        summaries: [...model.summaries].filter(([, s]) => s.of === w.entity && s.scope === 'egt').map(([name]) => name),
        change: Boolean(w.entity.changeLogged) || capture,
      },
      eventual: {
        indexes: indexes.filter((i) => i.scope === 'interPartition').map((i) => (i.element ? `${i.name} (one per element of ${i.element})` : i.name)),
        summaries: eventualSummaries(model, w.entity),
      },
      checksReferences: w.action === 'DELETE' ? [] : (model.references.get(w.entity.name) ?? []).map((p) => p.coordinate),
      parts: w.entity.wide?.parts.length ?? null,
      blobs: [...w.inputFields].filter((f) => w.entity.fields.get(f)?.blob),
    };
  });
  return mutations;
}

/**
 * The summaries a write of `entity` changes eventually: those of it held elsewhere, and every summary of a summary
 * above any summary of it — in the EGT or not (`Customer.totalSpent` over `Invoice.total`, changed by a write of a
 * line) — which the worker brings up to date after the lower value changes (src/derived/summary-chains.ts).
 */
function eventualSummaries(model: Model, entity: EntityModel): string[] {
  const nameOf = new Map([...model.summaries].map(([name, s]) => [s, name]));
  const own = [...model.summaries.values()].filter((s) => s.of === entity);
  const names = own.filter((s) => s.scope === 'eventual').map((s) => nameOf.get(s)!);
  const seen = new Set(own);
  const above = own.flatMap((s) => s.feeds);
  while (above.length > 0) {
    const s = above.shift()!;
    if (seen.has(s)) continue;
    seen.add(s);
    names.push(nameOf.get(s)!);
    above.push(...s.feeds);
  }
  return names;
}

/** Each `@blob` field, by coordinate. */
function blobPlans(model: Model): BlobPlan[] {
  const blobs = [...model.entities.values()]
    .flatMap((e) =>
      blobFields(e).map(({ name, blob }): BlobPlan => ({
        coordinate: `${e.name}.${name}`,
        container: blob.container,
        maxBytes: blob.maxBytes,
        contentTypes: blob.contentTypes,
        expiresInSeconds: blob.expiresInSeconds,
      })),
    )
    .sort(byCoordinate);
  return blobs;
}

/** Each copied field (`@copy`), by coordinate. */
function copyPlans(model: Model): CopyPlan[] {
  const copies = [...model.copiesOf.values()]
    .flat()
    .map((c): CopyPlan => ({
      coordinate: `${c.entity.name}.${c.field}`,
      reference: c.reference.coordinate,
      copies: `${c.reference.target.name}.${c.targetField}`,
      foundThrough: c.reverse.coordinate,
    }))
    .sort(byCoordinate);
  return copies;
}

/** Each `@subscribe` field, by coordinate. */
function subscriptionPlans(model: Model): SubscriptionPlan[] {
  const subscriptions = [...model.subscriptions.values()]
    .map((sub): SubscriptionPlan => ({
      coordinate: sub.coordinate,
      entity: sub.entity.name,
      follows: sub.oneEntity ? 'entity' : 'partition',
      partitionKey: sub.entity.layout.partitionKey.source,
      after: sub.after ?? null,
    }))
    .sort(byCoordinate);
  return subscriptions;
}

/**
 * The partitions whose PartitionKey template has no placeholder: every entity or index entity of the type is there,
 * so every write of the type that changes it lands in one partition; and the holders of summaries kept in the EGT,
 * where every contributing write of a group lands.
 */
function hotPartitions(model: Model): HotPartition[] {
  const hot: HotPartition[] = [];
  for (const e of model.entities.values()) {
    if (e.layout.partitionKey.fields.length === 0) {
      const why = `every ${e.name} is stored in this one partition: all its writes share it`;
      hot.push({ coordinate: e.name, table: e.layout.table, partitionKey: e.layout.partitionKey.source, why });
    }
    for (const index of e.indexes.values()) {
      if (index.layout.partitionKey.fields.length > 0) continue;
      const why = `every ${e.name} has its index entity here: each create, delete and change of its index keys writes it`;
      hot.push({ coordinate: `${e.name}@index(${index.name})`, table: index.layout.table, partitionKey: index.layout.partitionKey.source, why });
    }
  }
  return hot.sort(byCoordinate);
}

function describeKey(k: KeyPlan | null): string {
  if (!k) return '';
  const source = (b: KeyPlan['bindings'][number]) =>
    b.source === 'argument' ? `$${b.name}` : b.source === 'tenant' ? "the token's tenant" : `parent.${b.name}`;
  const from = k.bindings.map((b) => `${b.placeholder} ← ${source(b)}${b.optional ? ' (optional)' : ''}`);
  return from.length ? `"${k.template}" (${from.join(', ')})` : `"${k.template}"`;
}

function describeRowKey(r: RowKeyPlan): string {
  if (r.kind === 'exact') return describeKey(r);
  if (r.kind === 'prefix') return `prefix ${describeKey(r)}`;
  const from = r.from ? `${describeKey(r.from)} ${r.fromInclusive ? 'inclusive' : 'exclusive'}` : 'the start';
  const to = r.to ? `${describeKey(r.to)} ${r.toInclusive ? 'inclusive' : 'exclusive'}` : 'the end';
  return `from ${from} to ${to}`;
}

/** The explanation as text for people: one block per field, then summaries, references and mutations. */
export function formatExplanation(e: Explanation): string {
  const lines: string[] = [];
  if (e.hotPartitions.length) {
    lines.push('Hot partitions (one partition takes these writes: at most 2,000 entities/s on Azure Table storage)');
    for (const h of e.hotPartitions) lines.push(`  ${h.coordinate}: table ${h.table}, PartitionKey "${h.partitionKey}": ${h.why}`);
    lines.push('');
  }
  for (const p of e.fields) {
    lines.push(p.coordinate);
    const table = p.tableTemplate ? `per period ${describeKey(p.tableTemplate)}` : p.table;
    lines.push(`  ${p.kind} query on table ${table}${p.consistency === 'eventual' ? ' (eventually consistent)' : ''}`);
    lines.push(`    PartitionKey ${describeKey(p.partitionKey)}`);
    lines.push(`    RowKey       ${describeRowKey(p.rowKey)}`);
    if (p.index) lines.push(`    via ${p.index.scope} index "${p.index.name}" holding ${p.index.projection.join(', ')}`);
    if (p.through) {
      const waves = p.waves === 3 ? 'two batched waves: the index entities, then the targets' : 'one batched wave';
      lines.push(`    through ${p.through.entity} join entities, each node read by ${p.through.reference} (${waves})`);
    }
    if (p.parts) lines.push(`    wide entity: ${p.parts} entities (RowKey, then RowKey + "_part2" …), one point query each, in one wave`);
    if (p.pageSize) lines.push(`    page size    ${p.pageSize.default} entities by default, at most ${p.pageSize.max}`);
    lines.push(p.maxWaves > p.waves ? `  waves: ${p.waves}; ${p.maxWaves} when the selection needs a field the index does not hold` : `  waves: ${p.waves}`);
  }
  if (e.summaries.length) lines.push('', 'Summaries');
  for (const s of e.summaries) {
    const kept = s.keptIn === 'egt' ? 'kept in the EGT of every write' : 'kept eventually by the worker';
    lines.push(
      `  ${s.coordinate} = ${s.kind === 'count' ? `count of ${s.of}` : `sum over ${s.of} of ${s.terms.join(' + ')}`}, reached through ${s.via}, ${kept}`,
    );
  }
  if (e.references.length) lines.push('', 'References');
  for (const r of e.references) {
    lines.push(
      `  ${r.coordinate} → ${r.target} by ${r.fields.join(', ')}${r.optional ? ', optional' : ''}${r.checkOnWrite ? ', checked on write' : ', not checked on write'}`,
    );
  }
  if (e.copies.length) lines.push('', 'Copies (set by the writer, kept in step by the worker)');
  for (const c of e.copies) lines.push(`  ${c.coordinate} = ${c.copies} through ${c.reference}; found through ${c.foundThrough} when it changes`);
  if (e.blobs.length) lines.push('', 'Blobs (the entity holds the name; the field reads as a SAS URL, no storage call)');
  for (const b of e.blobs) {
    lines.push(
      `  ${b.coordinate} in container ${b.container}: uploads of at most ${b.maxBytes} bytes${b.contentTypes.length ? ` (${b.contentTypes.join(', ')})` : ''}; read URLs valid ${b.expiresInSeconds} s`,
    );
  }
  if (e.mutations.length) lines.push('', 'Mutations');
  for (const m of e.mutations) {
    const egt = [
      m.parts ? `${m.entity} (${m.parts} entities)` : m.entity,
      ...m.egt.indexes.map((i) => `index ${i}`),
      ...(m.egt.change ? ['change entity'] : []),
      ...m.egt.summaries,
    ].join(', ');
    const eventual = [...m.eventual.indexes.map((i) => `index ${i}`), ...m.eventual.summaries];
    lines.push(`  ${m.coordinate}: ${m.action} ${m.entity}; EGT: ${egt}${eventual.length ? `; eventually: ${eventual.join(', ')}` : ''}`);
    if (m.checksReferences.length) lines.push(`    checks that ${m.checksReferences.join(', ')} point at existing entities`);
    if (m.blobs.length) lines.push(`    before the EGT: a cleanup message (delayed), then the upload of ${m.blobs.join(', ')} (one Put Blob each)`);
  }
  if (e.transactions.length) lines.push('', 'Transactions (one EGT each, all or nothing; then the worker, through the queue)');
  for (const t of e.transactions) {
    const eventual = t.eventual.length ? `; eventually: ${t.eventual.join(', ')}` : '';
    lines.push(
      `  ${t.coordinate}: transaction of ${t.items.join(', ')} in one EGT on table ${t.table}, PartitionKey "${t.partitionKey}": ${t.atomic.join(', ')}${eventual}`,
    );
    if (t.reserved.length) lines.push(`    before the EGT: reserves the values of unique index ${t.reserved.join(', ')} (confirmed after it)`);
  }
  if (e.subscriptions.length) {
    lines.push('', 'Subscriptions (each write adds a change entity to its EGT; each server polls a watched partition once per interval)');
  }
  for (const sub of e.subscriptions) {
    const what = sub.follows === 'entity' ? `one ${sub.entity}` : `the ${sub.entity} entities of one partition`;
    const resume = sub.after ? `; resumes after $${sub.after}` : '';
    lines.push(`  ${sub.coordinate}: ${what}, PartitionKey "${sub.partitionKey}": one range query per poll, shared, and one point query per change${resume}`);
  }
  return lines.join('\n');
}
