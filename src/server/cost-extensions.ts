/**
 * What a response says of its own cost (docs/security.md, "Demand control"): `extensions.cost` — the storage calls,
 * entities and money of the request, beside the worst case estimated before it ran (`cost.estimate`) — and
 * `extensions.consistency`: whether it read an eventually consistent (inter-partition) index (`indexes`) or a
 * summary the worker keeps (`summaries`, when any). A request that reads something its caller may see only through an
 * `@auth` scope gets the estimate alone, with `withheld: "ScopedRead"` (cost-visibility.ts). Built for Apollo's answers
 * (cost-plugin.ts) and the query lane's (query-lane.ts) alike.
 */
import type { RequestContext } from '../resolvers/context';
import { annotateActiveSpan, tracingOn } from '../telemetry/spans';

/**
 * The `cost` and `consistency` extensions of a request that ran, and — with tracing on — the same figures on its span.
 * @param scoped whether the operation reads through an `@auth` scope for its caller (cost-visibility.ts)
 * @param operation the operation's name and type, for the span
 */
export function costExtensions(
  context: RequestContext,
  scoped: boolean,
  operation: { name?: string | null; type?: string },
): { cost: object; consistency: Record<string, unknown> } {
  const cost = context.cost.snapshot();
  // The request's span (spans.ts) carries what the response says it cost. Built only with tracing on.
  if (tracingOn()) {
    annotateActiveSpan({
      'graphql.operation.name': operation.name ?? undefined,
      'graphql.operation.type': operation.type,
      ...Object.fromEntries(Object.entries(cost).map(([k, v]) => [`tablegraph.cost.${k}`, v])),
    });
  }
  const estimate = context.demand && { estimate: context.demand };
  // The snapshot is this request's own copy: the estimate goes in it rather than in one more copy.
  const shown = scoped
    ? { withheld: 'ScopedRead', partitionScans: cost.partitionScans, tableScans: cost.tableScans, ...estimate }
    : Object.assign(cost, estimate);
  return { cost: shown, consistency: consistencyOf(context) };
}

/** `extensions.consistency`: the eventually consistent indexes and summaries the request read, sorted by name. */
function consistencyOf(context: RequestContext): Record<string, unknown> {
  const { eventuallyConsistent, eventualSummaries } = context;
  // Most requests read neither: their answer is made without building a list.
  if (eventuallyConsistent.size === 0 && eventualSummaries.size === 0) return { eventual: false, indexes: [] };
  const indexes = [...eventuallyConsistent].sort();
  return { eventual: true, indexes, ...(eventualSummaries.size > 0 && { summaries: [...eventualSummaries].sort() }) };
}
