/**
 * Compiles the Mutation type's `@transaction` fields (docs/reads-and-writes.md, "Transactions"): a list of writes
 * that land together in one entity-group transaction ("Entity Group Transactions" in the guide). The compiler proves,
 * from the key templates alone, that every write of the list — its entity, its index entities, the summaries it
 * changes there and its change entity — falls in the one partition the field's arguments name, and that `maxItems`
 * of the costliest write fit the EGT's limits (100 operations, 4 MiB). What the worker keeps (inter-partition index
 * entities, summaries held elsewhere, copies, a delete's dependents) follows the EGT eventually, through the queue; a
 * unique value is reserved before the EGT, as a single mutation reserves it (src/write/transaction-reservations.ts).
 */
import { getNamedType, isInputObjectType, isListType, isNonNullType, isObjectType, isUnionType, type GraphQLField, type GraphQLSchema } from 'graphql';
import { readTransaction } from './directives';
import type { SchemaProblems } from './schema-errors';
import type { EntityModel, Model, TransactionModel, WriteModel } from '../model/types';
import { TENANT_FIELD } from '../model/tenancy';
import { limitsFor } from '../storage/limits';
import type { KeyTemplate } from '../model/key-template';

/** The largest String an entity property holds (bytes, UTF-16): a String field without `maxLength` may be that long. */
const MAX_STRING_BYTES = 64 * 1024;

/** Bytes of a property other than a string (a number, a date, a Boolean) in the worst case, name included. */
const SCALAR_PROPERTY_BYTES = 64;

/** Bytes an entity adds beside its properties: keys, EntityType, WriteId, timestamps, the EGT's framing (bytes). */
const ENTITY_OVERHEAD_BYTES = 2048;

/**
 * @returns the transaction fields by `Mutation.field`; the problems of the others recorded
 */
export function buildTransactions(
  schema: GraphQLSchema,
  model: Pick<Model, 'writes' | 'summaries' | 'copiesOf' | 'dependentsOf'>,
  problems: SchemaProblems,
): Map<string, TransactionModel> {
  const transactions = new Map<string, TransactionModel>();
  const mutation = schema.getMutationType();
  for (const field of Object.values(mutation?.getFields() ?? {})) {
    const d = readTransaction(schema, field.astNode);
    if (!d) continue;
    const coordinate = `${mutation!.name}.${field.name}`;
    const at = (message: string) => problems.add(coordinate, message, d.node);
    if (d.maxItems < 1) {
      at(`@transaction(maxItems: ${d.maxItems}): a transaction holds at least one write`);
      continue;
    }
    const shape = fieldShape(field, mutation!.name, model.writes);
    if (typeof shape === 'string') {
      at(shape);
      continue;
    }
    const partitionFields = partitionFieldsOf(shape.items, shape.partitionArguments);
    if (typeof partitionFields === 'string') {
      at(partitionFields);
      continue;
    }
    const why = notResult(field, shape.items);
    if (why) {
      at(why);
      continue;
    }
    const over = overLimits(shape.items, model, d.maxItems);
    if (over) {
      at(over);
      continue;
    }
    const first = [...shape.items.values()][0].entity.layout;
    transactions.set(coordinate, { coordinate, ...shape, partitionFields, maxItems: d.maxItems, table: first.table, partitionKey: first.partitionKey });
  }
  return transactions;
}

/**
 * The field's arguments: the partition's (non-null scalars) and one `[<Item>!]!` whose fields are `@write` mutations
 * by name, with their input types.
 * @returns its shape, or what is wrong with it
 */
function fieldShape(
  field: GraphQLField<unknown, unknown>,
  mutation: string,
  writes: Map<string, WriteModel>,
): Pick<TransactionModel, 'items' | 'listArgument' | 'partitionArguments'> | string {
  const lists = field.args.filter((a) => isListType(isNonNullType(a.type) ? a.type.ofType : a.type));
  if (lists.length !== 1) return "takes exactly one list argument, `writes: [<Item>!]!`, beside the partition's key fields";
  const list = lists[0];
  const itemType = getNamedType(list.type);
  const wellFormed = isNonNullType(list.type) && isListType(list.type.ofType) && isNonNullType(list.type.ofType.ofType) && isInputObjectType(itemType);
  if (!wellFormed || !isInputObjectType(itemType)) return `${list.name} must be a non-null list of non-null input objects, [<Item>!]!`;
  const items = new Map<string, WriteModel>();
  for (const f of Object.values(itemType.getFields())) {
    const write = writes.get(`${mutation}.${f.name}`);
    if (!write) return `${itemType.name}.${f.name} names no @write mutation: each field of an item is one of the schema's @write fields, by name`;
    const input = write.inputType;
    if (isNonNullType(f.type) || getNamedType(f.type).name !== input)
      return `${itemType.name}.${f.name} must be a nullable ${input}, the input of ${write.coordinate}`;
    if (write.action === 'MOVE') return `${itemType.name}.${f.name}: a MOVE is carried out by the worker, across partitions: it cannot be part of one EGT`;
    if (write.uploadFields || [...write.inputFields].some((n) => write.entity.fields.get(n)?.blob)) {
      return `${itemType.name}.${f.name}: a write of @blob fields uploads to Blob storage first, outside any EGT`;
    }
    items.set(f.name, write);
  }
  if (items.size === 0) return `${itemType.name} has no field: name the @write mutations an item may be`;
  const partitionArguments = field.args.filter((a) => a !== list).map((a) => a.name);
  for (const a of field.args) {
    if (a !== list && !(isNonNullType(a.type) && !isListType(a.type.ofType))) return `${a.name}: a partition argument is a non-null scalar`;
  }
  return { items, listArgument: list.name, partitionArguments };
}

/**
 * Each item's fields that the partition arguments give, by argument (`{ invoiceId: "id" }` for an invoice keyed
 * `invoice_{id}` beside lines keyed `invoice_{invoiceId}`), or why the writes could reach more than one partition:
 * another table, a PartitionKey template that is not the same key but for its fields' names (the same text and the
 * same formats in the same places, so that the same values render the same key), arguments that are not the fields of
 * one of those templates.
 */
function partitionFieldsOf(items: Map<string, WriteModel>, partitionArguments: string[]): Map<string, Record<string, string>> | string {
  const [first, ...rest] = [...items.values()];
  const { layout } = first.entity;
  for (const w of [first, ...rest]) {
    const l = w.entity.layout;
    if (l.tableTemplate) return `${w.entity.name} has a table per period: its writes may go to several tables`;
    if (w.entity.wide) return `${w.entity.name} is a wide entity: not yet writable in a transaction`;
    if (l.table !== layout.table)
      return `${w.entity.name} is stored at ${l.table} PartitionKey "${l.partitionKey.source}", ${first.entity.name} at ${layout.table} "${layout.partitionKey.source}": one EGT writes one table's partition`;
    if (keyShape(l.partitionKey) !== keyShape(layout.partitionKey))
      return `${w.entity.name}'s PartitionKey "${l.partitionKey.source}" and ${first.entity.name}'s "${layout.partitionKey.source}" are not one key with other field names (the same text and formats in the same places): their writes could go to two partitions, and one EGT writes one`;
  }
  const named = [...items.values()].map((w) => keyFieldsOf(w.entity.layout.partitionKey));
  const chosen = named.find((fields) => sameSet(fields, partitionArguments));
  if (!chosen) {
    const options = [...new Set(named.map((f) => f.join(', ')))];
    const fields = named[0];
    const missing = fields.filter((f) => !partitionArguments.includes(f));
    const extra = partitionArguments.filter((a) => !fields.includes(a));
    const detail =
      options.length > 1 ? '' : `${missing.length ? `: missing ${missing.join(', ')}` : ''}${extra.length ? `: not key fields ${extra.join(', ')}` : ''}`;
    return `the arguments beside the list must be the PartitionKey's fields (${options.join('; or ')}), which every write shares${detail}`;
  }
  const out = new Map<string, Record<string, string>>();
  for (const [name, w] of items) {
    const own = keyFieldsOf(w.entity.layout.partitionKey);
    const fields: Record<string, string> = {};
    for (const [i, arg] of chosen.entries()) {
      if (fields[arg] !== undefined && fields[arg] !== own[i])
        return `${w.entity.name}'s PartitionKey "${w.entity.layout.partitionKey.source}" names two fields where one argument goes`;
      fields[arg] = own[i];
    }
    out.set(name, fields);
  }
  return out;
}

/** A template as a key, whatever its fields are named: its text and each placeholder's format, in order. */
function keyShape(t: KeyTemplate): string {
  return JSON.stringify(t.segments.map((seg) => (seg.kind === 'literal' ? seg.text : seg.name === TENANT_FIELD ? { tenant: true } : seg.format)));
}

/** A PartitionKey template's fields but the tenant's, in order. */
function keyFieldsOf(t: KeyTemplate): string[] {
  return t.segments.flatMap((seg) => (seg.kind === 'placeholder' && seg.name !== TENANT_FIELD ? [seg.name] : []));
}

function sameSet(a: string[], b: string[]): boolean {
  return new Set(a).size === new Set(b).size && a.every((x) => b.includes(x));
}

/** Why the field's type is not `[<Result>]!`, Result the one entity type written or a union of exactly them. */
function notResult(field: GraphQLField<unknown, unknown>, items: Map<string, WriteModel>): string | undefined {
  const types = new Set([...items.values()].map((w) => w.entity.name));
  const t = field.type;
  const named = getNamedType(t);
  const listOf = isNonNullType(t) && isListType(t.ofType) && !isNonNullType(t.ofType.ofType);
  const members = isUnionType(named) ? named.getTypes().map((m) => m.name) : isObjectType(named) ? [named.name] : [];
  if (listOf && members.length === types.size && members.every((m) => types.has(m))) return undefined;
  return `returns ${String(t)}: a transaction returns [<Result>]!, one item per write (null for a delete), where <Result> is ${types.size === 1 ? [...types][0] : `a union of ${[...types].join(', ')}`}`;
}

/**
 * Why `maxItems` of the costliest write could exceed one EGT: its operations (the entity, two per intra-partition
 * index when the indexed value changes, its change entity, and per summary holder a merge and its change entity) or
 * their bytes (each entity at its largest: a String without `@constraint(maxLength:)` counts 64 KiB).
 */
function overLimits(items: Map<string, WriteModel>, model: Pick<Model, 'summaries'>, maxItems: number): string | undefined {
  let operations = 0;
  let bytes = 0;
  let costliest = '';
  for (const w of items.values()) {
    // In the EGT: the entity, its intra-partition index entities and the holders of summaries kept there; the rest is
    // the worker's, after it.
    const holders = [...model.summaries.values()].filter((s) => s.of === w.entity && s.scope === 'egt').map((s) => s.holder);
    const holderTypes = [...new Set(holders)];
    const intra = [...w.entity.indexes.values()].filter((i) => i.scope === 'intraPartition').length;
    const ops = 2 + 2 * intra + 2 * holderTypes.length;
    const size = 2 * entityBytes(w.entity) + 2 * intra * entityBytes(w.entity) + holderTypes.reduce((n, h) => n + 2 * entityBytes(h), 0);
    if (ops > operations) costliest = w.coordinate;
    operations = Math.max(operations, ops);
    bytes = Math.max(bytes, size);
  }
  // Azure's limits; the Cosmos DB Table API's smaller EGT (2 MiB) is checked at run time, before anything is sent.
  const limits = limitsFor('azure');
  if (operations * maxItems > limits.maxTransactionOperations) {
    return `maxItems: ${maxItems} writes may need ${operations * maxItems} operations (${costliest}: ${operations} each, with its index entities, change entity and summary holders); one EGT holds ${limits.maxTransactionOperations}: at most maxItems: ${Math.floor(limits.maxTransactionOperations / operations)}`;
  }
  if (bytes * maxItems > limits.maxTransactionBytes) {
    return `maxItems: ${maxItems} writes may be ${bytes * maxItems} bytes at their largest; one EGT holds ${limits.maxTransactionBytes}: give the String fields a @constraint(maxLength:), or lower maxItems`;
  }
  return undefined;
}

/** An entity's largest size: every property at its largest (bytes). */
function entityBytes(entity: EntityModel): number {
  let bytes = ENTITY_OVERHEAD_BYTES;
  for (const f of entity.fields.values()) {
    const text = f.edm === 'String' && f.graphqlType !== 'Decimal';
    // The tenant's id is at most 63 characters (src/model/tenancy.ts TENANT_ID).
    const max = f.name === TENANT_FIELD ? 63 : f.constraint?.maxLength;
    const one = text ? 2 * f.name.length + (max !== undefined ? Math.min(4 * max, MAX_STRING_BYTES) : MAX_STRING_BYTES) : SCALAR_PROPERTY_BYTES;
    bytes += one * (f.series?.length ?? 1);
  }
  return bytes;
}
