/**
 * Compiles `@summary` fields: summary values that every write of the summarised entities keeps — in the same EGT
 * where holder and summarised entities share a partition (the guide's "Entity Group Transactions"), eventually
 * through the work queue and contribution entities where they do not. What each entity contributes, at run
 * time, is src/model/summaries.ts.
 */
import { isObjectType, type GraphQLSchema } from 'graphql';
import { readSummary, type SummaryDirective } from './directives';
import { notAReference } from './reference-checks';
import type { SchemaProblems } from './schema-errors';
import type { AccessPath, EntityModel, SummaryFactor, SummaryModel } from '../model/types';

const NUMERIC = new Set(['Int', 'Float', 'Decimal']);

/**
 * Parses `"unitPrice * quantity"` into factors; undefined (with a problem) when malformed. A factor may be a summary
 * of `of` itself (a summary of a summary: `Customer.totalSpent` summing `Invoice.total`): such a sum is kept by the
 * worker (linkSummaryChains).
 */
function parseTerm(term: string, of: EntityModel, coordinate: string, problems: SchemaProblems, node: SummaryModelNode): SummaryFactor[] | undefined {
  const factors: SummaryFactor[] = [];
  for (const raw of term.split('*').map((f) => f.trim())) {
    if (/^-?\d+(\.\d+)?$/.test(raw)) {
      factors.push({ constant: Number(raw) });
    } else if (NUMERIC.has(of.fields.get(raw)?.graphqlType ?? '') && !of.fields.get(raw)?.series && !of.fields.get(raw)?.list) {
      factors.push({ field: raw });
    } else {
      problems.add(coordinate, `sum term "${term}": "${raw}" is neither a number nor an Int, Float or Decimal field of ${of.name}`, node);
      return undefined;
    }
  }
  return factors;
}

type SummaryModelNode = Parameters<SchemaProblems['add']>[2];

/**
 * Reads every `@summary` field. Marks them in the holder's `summaryFields` (clients never write them).
 * @param accessPaths the compiled access paths (the `via` field's path is looked up there)
 */
export function buildSummaries(
  schema: GraphQLSchema,
  entities: Map<string, EntityModel>,
  accessPaths: Map<string, AccessPath>,
  problems: SchemaProblems,
): Map<string, SummaryModel> {
  const summaries = new Map<string, SummaryModel>();
  const types = Object.values(schema.getTypeMap()).filter((t) => isObjectType(t) && !t.name.startsWith('__'));
  const nodes = new Map<string, SummaryModelNode>();
  for (const type of types) {
    if (!isObjectType(type) || type.name.startsWith('__')) continue;
    for (const field of Object.values(type.getFields())) {
      const d = readSummary(schema, field.astNode);
      if (!d) continue;
      const summary = buildSummary({ entities, accessPaths, problems }, { typeName: type.name, fieldName: field.name }, d);
      if (!summary) continue;
      summaries.set(`${type.name}.${field.name}`, summary);
      nodes.set(`${type.name}.${field.name}`, d.node);
    }
  }
  linkSummaryChains(summaries, nodes, problems);
  return summaries;
}

/** One `@summary` field, checked; undefined (with problems) when it cannot be one. */
function buildSummary(
  compiled: { entities: Map<string, EntityModel>; accessPaths: Map<string, AccessPath>; problems: SchemaProblems },
  field: { typeName: string; fieldName: string },
  d: SummaryDirective,
): SummaryModel | undefined {
  const { entities, accessPaths, problems } = compiled;
  const { typeName, fieldName } = field;
  const coordinate = `${typeName}.${fieldName}`;
  const holder = entities.get(typeName);
  const stored = holder?.fields.get(fieldName);
  if (!holder || !stored) {
    problems.add(coordinate, '@summary goes on a stored field of an @entity type', d.node);
    return undefined;
  }
  // A summary field is never an input, even one refused below (its own problem says why, not a second one).
  holder.summaryFields.add(fieldName);
  const of = entities.get(d.of);
  if (!of) {
    problems.add(coordinate, `@summary(of: "${d.of}"): no @entity type of that name`, d.node);
    return undefined;
  }
  if (d.count === d.sum.length > 0) {
    problems.add(coordinate, '@summary needs either count: true or a sum, not both', d.node);
    return undefined;
  }
  // A running sum must be exact, so that a write and its inverse cancel out: Decimal, or Int over Int terms.
  // A Float would drift (1e20 added and taken away leaves 112).
  const holds = d.count ? ['Int'] : ['Int', 'Decimal'];
  if (!holds.includes(stored.graphqlType) || !stored.nonNull || stored.series || stored.list) {
    problems.add(
      coordinate,
      `a ${d.count ? 'count' : 'sum'} is held in a non-null ${d.count ? 'Int' : 'Decimal (or Int)'} field, so that it stays exact`,
      d.node,
    );
    return undefined;
  }
  const via = accessPaths.get(`${of.name}.${d.via}`);
  if (!via || via.kind !== 'point' || via.target !== holder) {
    problems.add(coordinate, `@summary(via: "${d.via}"): ${of.name}.${d.via} must be a @point field reaching ${holder.name}`, d.node);
    return undefined;
  }
  const why = notAReference(via, of.name);
  if (why) {
    problems.add(coordinate, `@summary(via: "${d.via}"): ${why}`, d.node);
    return undefined;
  }
  // A holder in the counted entity's partition is kept in its EGT; anywhere else, eventually, by the worker —
  // and always so through a unique index, where only a read of the index entity tells the holder's partition.
  const scope = !via.index && samePartition(via, of) ? 'egt' : 'eventual';
  const terms = d.sum.map((t) => parseTerm(t, of, coordinate, problems, d.node));
  if (terms.some((t) => t === undefined)) return undefined;
  const inexact = (terms as SummaryFactor[][])
    .flat()
    .find((f) => ('field' in f ? of.fields.get(f.field)!.graphqlType !== 'Int' : !Number.isInteger(f.constant)));
  if (stored.graphqlType === 'Int' && inexact) {
    problems.add(
      coordinate,
      `an Int sum adds up Int fields and whole constants only; hold it in a Decimal field to add ${'field' in inexact ? inexact.field : inexact.constant}`,
      d.node,
    );
    return undefined;
  }
  for (const index of holder.indexes.values()) {
    if (index.projection.has(fieldName)) {
      problems.add(
        `${holder.name}@index(${index.name})`,
        `includes "${fieldName}", a summary value kept on the entity only: its copy on the index entities would never change; remove it from include`,
        index.node,
      );
    }
  }
  return { holder, field: fieldName, of, via, count: d.count, terms: terms as SummaryFactor[][], scope, feeds: [] };
}

/**
 * Links each summary to the summaries that sum its value (`feeds`): `Customer.totalSpent @summary(of: "Invoice", sum:
 * ["total"])` over `Invoice.total @summary(of: "Line", …)`. A write of a line changes an invoice's total without a
 * write of the invoice, so the sum over it is kept by the worker — a summary of a summary is `eventual` whatever its
 * holder's partition: after each change of `Invoice.total`, the worker brings the invoice's contribution to its
 * customer's total up to date (src/derived/summary-chains.ts). A chain that comes back to itself is refused.
 */
function linkSummaryChains(summaries: Map<string, SummaryModel>, nodes: Map<string, SummaryModelNode>, problems: SchemaProblems): void {
  for (const upper of summaries.values()) {
    const summed = new Set(upper.terms.flat().flatMap((f) => ('field' in f ? [f.field] : [])));
    for (const lower of summaries.values()) {
      if (lower.holder !== upper.of || !summed.has(lower.field)) continue;
      lower.feeds.push(upper);
      upper.scope = 'eventual';
    }
  }
  for (const [coordinate, start] of summaries) {
    const seen = new Set<SummaryModel>();
    const walk = (s: SummaryModel): boolean => s.feeds.some((u) => u === start || (!seen.has(u) && (seen.add(u), walk(u))));
    if (walk(start)) {
      problems.add(
        coordinate,
        `${coordinate} is summed, through other summaries, into itself: a summary of a summary may not come back to where it started`,
        nodes.get(coordinate),
      );
    }
  }
}

/** The `via` path's PartitionKey is the `of` entity's own: same template, each placeholder from the same field. */
function samePartition(via: AccessPath, of: EntityModel): boolean {
  if (via.table !== of.layout.table) return false;
  const a = via.partitionKey.template.segments;
  const b = of.layout.partitionKey.segments;
  if (a.length !== b.length) return false;
  return a.every((seg, i) => {
    const other = b[i];
    if (seg.kind === 'literal' || other.kind === 'literal') return seg.kind === 'literal' && other.kind === 'literal' && seg.text === other.text;
    const binding = via.partitionKey.bindings.get(seg.name);
    return binding?.source === 'parent' && binding.name === other.name && seg.format.kind === other.format.kind;
  });
}
