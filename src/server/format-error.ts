/**
 * Turns any error a resolver threw into the GraphQL error the client sees: a TablegraphError keeps its message
 * and gets its stable code in `extensions.code` with its details beside it; anything unexpected is logged and
 * shown as INTERNAL_SERVER_ERROR without internals.
 */
import type { GraphQLFormattedError } from 'graphql';
import { unwrapResolverError } from '@apollo/server/errors';
import { TablegraphError } from '../errors';
import type { Logger } from '../log';

/** An Apollo `formatError` hook. */
export function createFormatError(log: Logger): (formatted: GraphQLFormattedError, error: unknown) => GraphQLFormattedError {
  return (formatted, error) => {
    const original = unwrapResolverError(error);
    if (original instanceof TablegraphError) {
      return { ...formatted, message: original.message, extensions: { ...original.details, code: original.code } };
    }
    if (formatted.extensions?.code && formatted.extensions.code !== 'INTERNAL_SERVER_ERROR') return formatted;
    log.error({ err: original, path: formatted.path }, 'unexpected error in a resolver');
    return { message: 'Internal server error', locations: formatted.locations, path: formatted.path, extensions: { code: 'INTERNAL_SERVER_ERROR' } };
  };
}
