/**
 * Demand control at the door (docs/architecture.md, "Reads"): once an operation is parsed and validated, its worst case
 * is computed from the access paths (src/read/demand.ts) and compared with the budgets; over one, the request is
 * refused with QUERY_TOO_COSTLY and the figures, before any resolver runs — so before any storage call. The estimate is
 * also put beside the actual cost in `extensions.cost.estimate` (cost-plugin.ts).
 */
import type { ApolloServerPlugin } from '@apollo/server';
import { GraphQLError } from 'graphql';
import type { Model } from '../model/types';
import { estimateDemand, type DemandEstimate } from '../read/demand';
import type { RequestContext } from '../resolvers/context';
import { isTablegraphError } from '../errors';
import type { AdmissionTicket, RequestAdmission } from '../read/request-admission';
import type { TenantBudgets } from './tenant-budgets';

/** The budgets of one request: storage calls (calls) and response nodes (objects). */
export interface DemandBudget {
  maxStorageCalls: number;
  maxNodes: number;
}

/** Defaults: every query of the docs passes, a query that multiplies connections three deep does not. */
export const DEFAULT_DEMAND_BUDGET: DemandBudget = { maxStorageCalls: 1000, maxNodes: 10_000 };

/** The stable code of a refused operation. */
export const QUERY_TOO_COSTLY = 'QUERY_TOO_COSTLY';

/**
 * The Apollo plugin: estimates each operation once it is resolved (after validation, before execution), puts the
 * estimate in the context, and refuses an operation over `budget`. With `admission`, a query estimated heavy then
 * waits for its turn among the heavy ones (request-admission.ts), or is refused at once when it could not finish
 * before its deadline; its turn ends when its response is sent.
 * With `tenants` (under `@tenancy`), the operation is then charged to its tenant's budget (tenant-budgets.ts).
 * @throws (to Apollo) GraphQLError QUERY_TOO_COSTLY with extensions { estimate, budget } (HTTP 400); RATE_LIMITED
 *   with extensions { reason: 'TenantBudget', retryAfterSeconds } (HTTP 429, `Retry-After`); OVERLOADED
 *   with extensions { reason: 'HeavyRequestsQueued', retryAfterSeconds } (HTTP 503, `Retry-After`)
 */
export function demandPlugin(model: Model, budget: DemandBudget, admission?: RequestAdmission, tenants?: TenantBudgets): ApolloServerPlugin<RequestContext> {
  return {
    async requestDidStart() {
      let ticket: AdmissionTicket | undefined;
      return {
        async willSendResponse() {
          ticket?.release();
        },
        async didResolveOperation({ schema, operation, document, request, contextValue }) {
          if (!operation) return; // Apollo refuses a document without a resolvable operation itself
          const fragments = Object.fromEntries(document.definitions.flatMap((d) => (d.kind === 'FragmentDefinition' ? [[d.name.value, d]] : [])));
          const estimate: DemandEstimate = estimateDemand(schema, model, operation, fragments, request.variables ?? {});
          contextValue.demand = estimate;
          const over = [
            estimate.storageCalls > budget.maxStorageCalls && `${estimate.storageCalls} storage calls (at most ${budget.maxStorageCalls})`,
            estimate.nodes > budget.maxNodes && `${estimate.nodes} response nodes (at most ${budget.maxNodes})`,
          ].filter((x): x is string => typeof x === 'string');
          if (over.length === 0) {
            const tenant = contextValue.principal?.tenant;
            if (tenants && tenant !== undefined) await tenants.charge(tenant, estimate);
            if (admission && operation.operation === 'query') ticket = await admitted(admission, estimate, contextValue.deadline);
            return;
          }
          throw new GraphQLError(`The operation could cost ${over.join(' and ')} in the worst case: ask for smaller pages or fewer nested lists.`, {
            extensions: { code: QUERY_TOO_COSTLY, estimate, budget, http: { status: 400 } },
          });
        },
      };
    },
  };
}

/** The admission's ticket, or its refusal as the GraphQL error Apollo answers with (503, `Retry-After`). */
async function admitted(admission: RequestAdmission, estimate: DemandEstimate, deadline: number | undefined): Promise<AdmissionTicket> {
  try {
    return await admission.admit(estimate.storageCalls, deadline);
  } catch (e) {
    if (!isTablegraphError(e)) throw e;
    const retryAfter = String(e.details.retryAfterSeconds ?? 1);
    throw new GraphQLError(e.message, { extensions: { code: e.code, ...e.details, http: { status: 503, headers: new Map([['retry-after', retryAfter]]) } } });
  }
}
