/**
 * Demand control at the door (DESIGN.md §3): once an operation is parsed and validated, its worst case is computed
 * from the access paths (src/read/demand.ts) and compared with the budgets; over one, the request is refused with
 * QUERY_TOO_COSTLY and the figures, before any resolver runs — so before any storage call. The estimate is also
 * put beside the actual cost in `extensions.cost.estimate` (cost-plugin.ts).
 */
import type { ApolloServerPlugin } from '@apollo/server';
import { GraphQLError } from 'graphql';
import type { Model } from '../model/types';
import { estimateDemand, type DemandEstimate } from '../read/demand';
import type { RequestContext } from '../resolvers/context';

/** The budgets of one request: storage calls (calls) and response nodes (objects). */
export interface DemandBudget {
  maxStorageCalls: number;
  maxNodes: number;
}

/** Defaults: every query of the README passes, a query that multiplies connections three deep does not. */
export const DEFAULT_DEMAND_BUDGET: DemandBudget = { maxStorageCalls: 1000, maxNodes: 10_000 };

/** The stable code of a refused operation. */
export const QUERY_TOO_COSTLY = 'QUERY_TOO_COSTLY';

/**
 * The Apollo plugin: estimates each operation once it is resolved (after validation, before execution), puts the
 * estimate in the context, and refuses an operation over `budget`.
 * @throws (to Apollo, answered as HTTP 400) GraphQLError QUERY_TOO_COSTLY with extensions { estimate, budget }
 */
export function demandPlugin(model: Model, budget: DemandBudget): ApolloServerPlugin<RequestContext> {
  return {
    async requestDidStart() {
      return {
        async didResolveOperation({ schema, operation, document, request, contextValue }) {
          if (!operation) return; // Apollo refuses a document without a resolvable operation itself
          const fragments = Object.fromEntries(
            document.definitions.flatMap((d) => (d.kind === 'FragmentDefinition' ? [[d.name.value, d]] : [])),
          );
          const estimate: DemandEstimate = estimateDemand(schema, model, operation, fragments, request.variables ?? {});
          contextValue.demand = estimate;
          const over = [
            estimate.storageCalls > budget.maxStorageCalls && `${estimate.storageCalls} storage calls (at most ${budget.maxStorageCalls})`,
            estimate.nodes > budget.maxNodes && `${estimate.nodes} response nodes (at most ${budget.maxNodes})`,
          ].filter((x): x is string => typeof x === 'string');
          if (over.length === 0) return;
          throw new GraphQLError(`The operation could cost ${over.join(' and ')} in the worst case: ask for smaller pages or fewer nested lists.`, {
            extensions: { code: QUERY_TOO_COSTLY, estimate, budget, http: { status: 400 } },
          });
        },
      };
    },
  };
}
