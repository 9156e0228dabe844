/**
 * An Apollo plugin that puts each request's storage cost into the response's extensions (cost-extensions.ts):
 * `extensions.cost`, the estimate beside it, and `extensions.consistency`.
 */
import type { ApolloServerPlugin } from '@apollo/server';
import type { Model } from '../model/types';
import type { RequestContext } from '../resolvers/context';
import { costExtensions } from './cost-extensions';
import { scopeMemo } from './cost-visibility';

/** @param model the compiled schema's model: which reads are decided by a scope */
export function costPlugin(model: Model): ApolloServerPlugin<RequestContext> {
  const scoped = scopeMemo(model);
  return {
    async requestDidStart() {
      return {
        async willSendResponse({ response, contextValue, operation, operationName, document, schema }) {
          if (response.body.kind !== 'single') return;
          const isScoped = !!document && scoped(schema, document, contextValue.principal);
          response.body.singleResult.extensions = {
            ...response.body.singleResult.extensions,
            ...costExtensions(contextValue, isScoped, { name: operationName, type: operation?.operation }),
          };
        },
      };
    },
  };
}
