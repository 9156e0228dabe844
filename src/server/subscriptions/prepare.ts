/**
 * What a subscription request meets before it runs, over either transport (transports.ts) — the same checks a
 * query meets in Apollo Server: the trusted documents (when a manifest is configured), parsing with the token
 * limit, validation with the document limits, demand control on what each event reads below `node`. Only
 * subscription operations are taken here; queries and mutations go to `POST /graphql`.
 */
import { getOperationAST, GraphQLError, parse, specifiedRules, validate, type DocumentNode, type GraphQLSchema, type ValidationRule } from 'graphql';
import type { Model } from '../../model/types';
import { estimateDemand } from '../../read/demand';
import type { DemandBudget } from '../demand-plugin';
import { QUERY_TOO_COSTLY } from '../demand-plugin';
import type { TrustedDocuments } from '../trusted-documents';

export interface PrepareOptions {
  schema: GraphQLSchema;
  model: Model;
  validationRules: readonly ValidationRule[];
  parseOptions: { maxTokens: number };
  budget: DemandBudget;
  trusted?: TrustedDocuments;
}

/** A subscription ready to run, or why not (with the HTTP status an SSE request is answered). */
export type Prepared =
  { ok: true; document: DocumentNode; variables: Record<string, unknown>; operationName?: string } | { ok: false; status: number; errors: GraphQLError[] };

/** Checks one request's parameters (`query` or a trusted `documentId`, `variables`, `operationName`). */
export function prepareSubscription(options: PrepareOptions, params: Record<string, unknown>): Prepared {
  const refuse = (status: number, code: string, message: string, extensions: Record<string, unknown> = {}): Prepared => ({
    ok: false,
    status,
    errors: [new GraphQLError(message, { extensions: { code, ...extensions } })],
  });
  if (options.trusted) {
    const resolution = options.trusted.resolve(params);
    if (!resolution.ok) return refuse(resolution.status, resolution.code, resolution.message);
    params = resolution.params;
  }
  if (typeof params.query !== 'string' || params.query === '') return refuse(400, 'BAD_REQUEST', 'A subscription request needs a `query`.');
  let document: DocumentNode;
  try {
    document = parse(params.query, options.parseOptions);
  } catch (e) {
    return refuse(400, 'GRAPHQL_PARSE_FAILED', (e as Error).message);
  }
  const problems = validate(options.schema, document, [...specifiedRules, ...options.validationRules]);
  if (problems.length > 0) {
    return {
      ok: false,
      status: 400,
      errors: problems.map((p) => new GraphQLError(p.message, { nodes: p.nodes, extensions: { code: 'GRAPHQL_VALIDATION_FAILED' } })),
    };
  }
  const operationName = typeof params.operationName === 'string' ? params.operationName : undefined;
  const operation = getOperationAST(document, operationName);
  if (!operation) return refuse(400, 'BAD_REQUEST', 'The document has no operation of that name, or several and no operationName.');
  if (operation.operation !== 'subscription') {
    return refuse(400, 'BAD_REQUEST', `This endpoint takes subscriptions: send a ${operation.operation} to POST /graphql.`);
  }
  const variables = typeof params.variables === 'object' && params.variables !== null ? (params.variables as Record<string, unknown>) : {};
  const fragments = Object.fromEntries(document.definitions.flatMap((d) => (d.kind === 'FragmentDefinition' ? [[d.name.value, d]] : [])));
  // Per event: what is read below the change's node (the node itself is read once per change, for every subscriber).
  const estimate = estimateDemand(options.schema, options.model, operation, fragments, variables);
  if (estimate.storageCalls > options.budget.maxStorageCalls || estimate.nodes > options.budget.maxNodes) {
    return refuse(400, QUERY_TOO_COSTLY, 'Each event of this subscription could cost more than the budget: ask for smaller pages or fewer nested lists.', {
      estimate,
      budget: options.budget,
    });
  }
  return { ok: true, document, variables, operationName };
}
