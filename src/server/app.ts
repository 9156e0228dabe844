/**
 * The HTTP application: Apollo Server on `/graphql` (with the storage cost plugin, error formatting and a
 * query depth limit) and `/health`, which says whether storage answers.
 */
import { ApolloServer } from '@apollo/server';
import { expressMiddleware } from '@as-integrations/express5';
import express from 'express';
import depthLimit from 'graphql-depth-limit';
import type { GraphQLSchema } from 'graphql';
import type { Logger } from '../log';
import { createRequestContext, type ContextDeps, type RequestContext } from '../resolvers/context';
import type { QueueStore } from '../storage/queue-store';
import type { QueueWorker } from '../worker/queue-worker';
import { costPlugin } from './cost-plugin';
import { createFormatError } from './format-error';

/** Deepest query accepted (selection-set nesting levels); deeper ones fail validation before any storage call. */
export const MAX_QUERY_DEPTH = 12;

export interface AppDeps extends ContextDeps {
  /** The compiled schema with resolvers attached. */
  schema: GraphQLSchema;
  log: Logger;
  /** Shown by /health. */
  storageTarget: string;
  /** For /health: the fan-out queue's depth and its poison queue's. */
  queues?: QueueStore;
  queueNames?: { queue: string; poison: string };
  /** For /health: the worker running in this process, if any (a function: it is created after the app). */
  worker?: () => QueueWorker | undefined;
}

export interface GraphqlApp {
  app: express.Express;
  apollo: ApolloServer<RequestContext>;
}

/** Builds and starts (in the Apollo sense) the application; the caller listens and stops. */
export async function createGraphqlApp(deps: AppDeps): Promise<GraphqlApp> {
  const apollo = new ApolloServer<RequestContext>({
    schema: deps.schema,
    plugins: [costPlugin],
    formatError: createFormatError(deps.log),
    validationRules: [depthLimit(MAX_QUERY_DEPTH)],
    includeStacktraceInErrorResponses: false,
  });
  await apollo.start();
  const app = express();
  app.disable('x-powered-by');
  app.get('/health', async (_req, res) => {
    try {
      const latencyMs = await deps.store.ping({ timeoutMs: 3000 });
      res.json({
        status: 'ok',
        storage: { target: deps.storageTarget, answers: true, latencyMs: Math.round(latencyMs * 10) / 10 },
        fanout: await fanoutHealth(deps),
      });
    } catch (e) {
      res.status(503).json({ status: 'unavailable', storage: { target: deps.storageTarget, answers: false, error: (e as Error).message } });
    }
  });
  app.use('/graphql', express.json({ limit: '1mb' }), expressMiddleware(apollo, { context: async () => createRequestContext(deps) }));
  return { app, apollo };
}

/**
 * The eventual-consistency side of /health: fan-out queue depth and poison count (messages, approximate, as the
 * service reports them), and the in-process worker's counters and enqueue-to-reconcile lag (ms).
 */
async function fanoutHealth(deps: AppDeps): Promise<Record<string, unknown> | undefined> {
  if (!deps.queues || !deps.queueNames) return undefined;
  const [queueDepth, poisonCount] = await Promise.all([
    deps.queues.approximateDepth(deps.queueNames.queue),
    deps.queues.approximateDepth(deps.queueNames.poison),
  ]);
  const worker = deps.worker?.();
  return { queueDepth, poisonCount, worker: worker ? worker.stats() : 'not in this process' };
}
