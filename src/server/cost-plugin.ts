/**
 * An Apollo plugin that puts each request's storage cost into the response's `extensions.cost`, and says in
 * `extensions.consistency` whether it read an eventually consistent (inter-partition) index.
 */
import type { ApolloServerPlugin } from '@apollo/server';
import type { RequestContext } from '../resolvers/context';

export const costPlugin: ApolloServerPlugin<RequestContext> = {
  async requestDidStart() {
    return {
      async willSendResponse({ response, contextValue }) {
        if (response.body.kind !== 'single') return;
        const eventual = [...contextValue.eventuallyConsistent].sort();
        response.body.singleResult.extensions = {
          ...response.body.singleResult.extensions,
          cost: contextValue.cost.snapshot(),
          consistency: { eventual: eventual.length > 0, indexes: eventual },
        };
      },
    };
  },
};
