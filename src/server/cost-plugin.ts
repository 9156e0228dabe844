/**
 * An Apollo plugin that puts each request's storage cost into the response's `extensions.cost` — the worst case
 * estimated before it ran beside it, as `cost.estimate` — and says in `extensions.consistency` whether it read an
 * eventually consistent (inter-partition) index (`indexes`) or a summary the worker keeps (`summaries`, when any).
 *
 * A request that reads something its caller may see only through an `@auth` scope gets the estimate alone, with
 * `withheld: "ScopedRead"`: its actual counts would tell what the scope left out (cost-visibility.ts).
 */
import type { ApolloServerPlugin } from '@apollo/server';
import type { Model } from '../model/types';
import type { RequestContext } from '../resolvers/context';
import { annotateActiveSpan, tracingOn } from '../telemetry/spans';
import { scopeMemo } from './cost-visibility';

/** @param model the compiled schema's model: which reads are decided by a scope */
export function costPlugin(model: Model): ApolloServerPlugin<RequestContext> {
  const scoped = scopeMemo(model);
  return {
    async requestDidStart() {
      return {
        async willSendResponse({ response, contextValue, operation, operationName, document, schema }) {
          if (response.body.kind !== 'single') return;
          const cost = contextValue.cost.snapshot();
          // The request's span (spans.ts) carries what the response says it cost. Built only with tracing on: every
          // request passes here.
          if (tracingOn()) {
            annotateActiveSpan({
              'graphql.operation.name': operationName ?? undefined,
              'graphql.operation.type': operation?.operation,
              ...Object.fromEntries(Object.entries(cost).map(([k, v]) => [`tablegraph.cost.${k}`, v])),
            });
          }
          const eventual = [...contextValue.eventuallyConsistent].sort();
          const summaries = [...contextValue.eventualSummaries].sort();
          const estimate = contextValue.demand && { estimate: contextValue.demand };
          const shown =
            document && scoped(schema, document, contextValue.principal)
              ? { withheld: 'ScopedRead', partitionScans: cost.partitionScans, tableScans: cost.tableScans, ...estimate }
              : { ...cost, ...estimate };
          response.body.singleResult.extensions = {
            ...response.body.singleResult.extensions,
            cost: shown,
            consistency: { eventual: eventual.length + summaries.length > 0, indexes: eventual, ...(summaries.length > 0 && { summaries }) },
          };
        },
      };
    },
  };
}
