/**
 * An Apollo plugin that puts each request's storage cost into the response's `extensions.cost` — the worst case
 * estimated before it ran beside it, as `cost.estimate` — and says in `extensions.consistency` whether it read an
 * eventually consistent (inter-partition) index (`indexes`) or a summary the worker keeps (`summaries`, when any).
 */
import type { ApolloServerPlugin } from '@apollo/server';
import type { RequestContext } from '../resolvers/context';
import { annotateActiveSpan, tracingOn } from '../telemetry/spans';

export const costPlugin: ApolloServerPlugin<RequestContext> = {
  async requestDidStart() {
    return {
      async willSendResponse({ response, contextValue, operation, operationName }) {
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
        response.body.singleResult.extensions = {
          ...response.body.singleResult.extensions,
          cost: { ...cost, ...(contextValue.demand && { estimate: contextValue.demand }) },
          consistency: { eventual: eventual.length + summaries.length > 0, indexes: eventual, ...(summaries.length > 0 && { summaries }) },
        };
      },
    };
  },
};
