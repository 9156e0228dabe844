/**
 * The query lane: a JSON `POST /graphql` of a query operation whose document is prepared (prepared-documents.ts) runs
 * here, on node:http, without Apollo Server's request pipeline — per request only what depends on the request: the
 * variables coerced, the context (token, rate, admission: the same function Apollo is given), the demand estimate for
 * the variables' `first` values (kept per document), the heavy queries' admission, the compiled operation run, its
 * errors logged and formatted, the cost and consistency extensions. What the lane does not take — a document that does
 * not parse or validate, a mutation, a subscription, introspection, an automatic persisted query, a request for a
 * federated trace — and every refusal before execution (a token, a rate, the demand budget, the admission) goes on to
 * Apollo, with the context the lane made or its refusal, so that each is answered as before, exactly once.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { getVariableValues, GraphQLError, type ExecutionResult, type GraphQLFormattedError } from 'graphql';
import type { Logger } from '../log';
import { ErrorCode, isTablegraphError, type TablegraphError } from '../errors';
import type { RequestContext } from '../resolvers/context';
import type { AdmissionTicket, RequestAdmission } from '../read/request-admission';
import type { DemandEstimate } from '../read/demand';
import type { TenantBudgets } from './tenant-budgets';
import { unwrapResolverError } from '@apollo/server/errors';
import type { Model } from '../model/types';
import type { PreparedDocuments, PreparedOperation } from './prepared-documents';
import { costExtensions } from './cost-extensions';
import { scopeMemo } from './cost-visibility';
import type { DemandBudget } from './demand-plugin';
import { retryAfterSeconds } from './format-error';
import { logRequestErrors } from './request-log';
import type { GraphqlParams } from './trusted-documents';

/** The header with which an Apollo gateway or router asks a subgraph for its federated trace (`extensions.ftv1`). */
const FEDERATED_TRACE_HEADER = 'apollo-federation-include-trace';

/** How the lane answers: served, or handed to Apollo with the context to use (made, or its refusal). */
export type LaneOutcome = { served: true } | { served: false; context?: () => Promise<RequestContext> };

export interface QueryLaneOptions {
  prepared: PreparedDocuments;
  model: Model;
  /** Builds each request's context, or throws its refusal (the function Apollo is given). */
  context: (args: { req: IncomingMessage; res: ServerResponse }) => Promise<RequestContext>;
  log: Logger;
  budget: DemandBudget;
  /** The heavy queries' admission (request-admission.ts); absent: none. */
  admission?: RequestAdmission;
  /** Under `@tenancy`, each tenant's budget (tenant-budgets.ts); absent: none. */
  tenants?: TenantBudgets;
  /** Apollo's `formatError` hook, as the server configures it (format-error.ts). */
  formatError(formatted: GraphQLFormattedError, error: unknown): GraphQLFormattedError;
}

/**
 * The lane for one application (one schema).
 * @returns serve(req, res, params): the request answered, or what Apollo is to answer it with
 */
export function queryLane(opts: QueryLaneOptions): (req: IncomingMessage, res: ServerResponse, params: GraphqlParams) => Promise<LaneOutcome> {
  const scoped = scopeMemo(opts.model);
  return async (req, res, params) => {
    // A federation gateway asking for a trace of the request (`ftv1`): Apollo's inline trace plugin makes it.
    if (req.headers[FEDERATED_TRACE_HEADER] === 'ftv1') return { served: false };
    const operation = preparedOf(opts, params);
    if (!operation) return { served: false };
    const variables = (params.variables ?? {}) as Record<string, unknown>;
    // Variables that do not coerce are Apollo's to refuse (its words, its status). An operation that declares none
    // ignores any given, as graphql-js does. Variables of the built-in scalar types are told without coercing them
    // (scalar-variables.ts).
    const declared = operation.operation.variableDefinitions ?? [];
    if (declared.length > 0 && !operation.variablesCoerce(variables) && 'errors' in getVariableValues(opts.prepared.schema, declared, variables)) {
      return { served: false };
    }
    let context: RequestContext;
    try {
      context = await opts.context({ req, res });
    } catch (e) {
      // A refusal at the door (no token, a rate, a tenant's budget) is answered here, as Apollo would answer it: a
      // client far over its rate then costs little more than its token's check.
      const refusal = doorRefusal(opts, e);
      if (!refusal) return { served: false, context: () => Promise.reject(e) };
      answer(res, refusal);
      return { served: true };
    }
    const handOver = { served: false as const, context: () => Promise.resolve(context) };
    const estimate = operation.estimate(variables);
    if (estimate.storageCalls > opts.budget.maxStorageCalls || estimate.nodes > opts.budget.maxNodes) return handOver;
    context.demand = estimate;
    // A tenant over its budget is refused by Apollo's path, in its words (demand-plugin.ts).
    if (!(await charged(opts.tenants, context, estimate))) return handOver;
    let ticket: AdmissionTicket | undefined;
    if (opts.admission) {
      try {
        ticket = await opts.admission.admit(estimate.storageCalls, context.deadline);
      } catch (e) {
        if (!isTablegraphError(e)) throw e;
        return handOver;
      }
    }
    try {
      const result = await operation.run(context, variables);
      answer(res, respond(opts, operation, context, result, scoped(opts.prepared.schema, operation.document, context.principal)));
    } finally {
      ticket?.release();
    }
    return { served: true };
  };
}

/** Whether the request's tenant, if any, had the budget for `estimate` (and was charged it). */
async function charged(tenants: TenantBudgets | undefined, context: RequestContext, estimate: DemandEstimate): Promise<boolean> {
  const tenant = context.principal?.tenant;
  if (!tenants || tenant === undefined) return true;
  try {
    await tenants.charge(tenant, estimate);
    return true;
  } catch {
    return false;
  }
}

function preparedOf(opts: QueryLaneOptions, params: GraphqlParams): PreparedOperation | undefined {
  const { query, operationName, variables, extensions } = params;
  if (typeof query !== 'string' || (extensions as { persistedQuery?: unknown } | undefined)?.persistedQuery !== undefined) return undefined;
  if (operationName !== undefined && operationName !== null && typeof operationName !== 'string') return undefined;
  if (variables !== undefined && variables !== null && (typeof variables !== 'object' || Array.isArray(variables))) return undefined;
  return opts.prepared.get(query, operationName ?? undefined);
}

/** The response of an operation that ran: its data, its errors (logged, formatted), its extensions, its status. */
function respond(
  opts: QueryLaneOptions,
  operation: PreparedOperation,
  context: RequestContext,
  result: ExecutionResult,
  scoped: boolean,
): { status: number; headers: Record<string, string>; body: Record<string, unknown> } {
  const errors = result.errors ?? [];
  const headers: Record<string, string> = {};
  let status = 200;
  context.outcome.operationName = operation.name;
  if (errors.length > 0) {
    logRequestErrors(opts.log, errors, { requestId: context.requestId, operationName: operation.name });
    // Storage that throttled a read says so over HTTP too (storage-busy-plugin.ts): 503, the longest wait asked.
    const busy = errors.map(unwrapResolverError).filter((e): e is TablegraphError => isTablegraphError(e, ErrorCode.STORAGE_BUSY));
    if (busy.length > 0) {
      status = 503;
      headers['retry-after'] = String(Math.max(...busy.map(retryAfterSeconds)));
    }
  }
  const formatted = errors.map((e) => opts.formatError(asApolloFormats(e), e));
  context.outcome.errorCodes = formatted.map((e) => String(e.extensions?.code ?? 'INTERNAL_SERVER_ERROR'));
  const shown = formatted.map((e) => ({ ...e, extensions: { ...e.extensions, requestId: context.requestId } }));
  const extensions = costExtensions(context, scoped, { name: operation.name, type: 'query' });
  return {
    status,
    headers,
    body: { ...(shown.length > 0 && { errors: shown }), ...(result.data !== undefined && { data: result.data }), extensions },
  };
}

/**
 * The answer Apollo gives a context that failed with a GraphQLError carrying its HTTP status (its errorResponse): the
 * error formatted, its `http` extension made the status and headers. Undefined for any other failure.
 */
function doorRefusal(opts: QueryLaneOptions, e: unknown): { status: number; headers: Record<string, string>; body: Record<string, unknown> } | undefined {
  if (!(e instanceof GraphQLError)) return undefined;
  const http = e.extensions.http as { status?: number; headers?: Map<string, string> } | undefined;
  if (typeof http?.status !== 'number') return undefined;
  const { http: _http, ...extensions } = e.extensions;
  const formatted = opts.formatError({ ...e.toJSON(), extensions: { ...extensions, code: extensions.code ?? 'INTERNAL_SERVER_ERROR' } }, e);
  return { status: http.status, headers: Object.fromEntries(http.headers ?? []), body: { errors: [formatted] } };
}

/** An error as Apollo hands it to `formatError`: its JSON form, a missing code filled in as INTERNAL_SERVER_ERROR. */
function asApolloFormats(e: GraphQLError): GraphQLFormattedError {
  const formatted = e.toJSON();
  return { ...formatted, extensions: { ...formatted.extensions, code: formatted.extensions?.code ?? 'INTERNAL_SERVER_ERROR' } };
}

function answer(res: ServerResponse, r: { status: number; headers: Record<string, string>; body: Record<string, unknown> }): void {
  const text = `${JSON.stringify(r.body)}\n`;
  // Its length said, node:http sends the answer whole, not framed as chunks.
  res.writeHead(r.status, { ...r.headers, 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
