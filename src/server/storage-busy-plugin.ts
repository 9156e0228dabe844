/**
 * An answer that storage throttled says so over HTTP too: when any error of a request is STORAGE_BUSY (storage
 * throttled it through all the SDK's retries: src/storage/storage-errors.ts), the answer is HTTP 503 with
 * `Retry-After` — the longest wait any of them asked for (s) — so that a client, a proxy or a load balancer backs off
 * rather than sending again at once. Nothing that answered STORAGE_BUSY was written.
 */
import type { ApolloServerPlugin } from '@apollo/server';
import { unwrapResolverError } from '@apollo/server/errors';
import { ErrorCode, isTablegraphError } from '../errors';
import type { RequestContext } from '../resolvers/context';
import { retryAfterSeconds } from './format-error';

export const storageBusyPlugin: ApolloServerPlugin<RequestContext> = {
  async requestDidStart() {
    let waitSeconds = 0;
    return {
      async didEncounterErrors({ errors }) {
        for (const e of errors) {
          const original = unwrapResolverError(e);
          if (isTablegraphError(original, ErrorCode.STORAGE_BUSY)) waitSeconds = Math.max(waitSeconds, retryAfterSeconds(original));
        }
      },
      async willSendResponse({ response }) {
        if (waitSeconds === 0) return;
        response.http.status = 503;
        response.http.headers.set('retry-after', String(waitSeconds));
      },
    };
  },
};
