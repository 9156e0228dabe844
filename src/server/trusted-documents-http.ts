/**
 * The trusted-documents gate on the HTTP paths Express serves (trusted-documents.ts): a GET's query string and a
 * POST body Express parsed are resolved to the listed document's text before Apollo Server sees them, or refused
 * as GraphQL-over-HTTP JSON (PERSISTED_QUERY_NOT_ALLOWED, PERSISTED_QUERY_NOT_FOUND; HTTP 400). The JSON POSTs
 * served in front of Express pass through the same `TrustedDocuments.resolve` (graphql-post.ts).
 */
import type { NextFunction, Request, Response } from 'express';
import { sendHttpError } from './http-errors';
import { requestIdOf } from './request-log';
import type { GraphqlParams, TrustedDocuments, TrustedResolution } from './trusted-documents';

/** The GET parameters holding JSON (GraphQL over HTTP): decoded for the gate, encoded again for Apollo. */
const JSON_PARAMS = new Set(['variables', 'extensions']);

/**
 * Express middleware: resolves the request's document through `trusted`, rewriting `req.body` (POST) or the query
 * string of `req.url` (GET) to carry the listed text, or answers the refusal.
 */
export function trustedDocumentsMiddleware(trusted: TrustedDocuments) {
  return (req: Request, res: Response, next: NextFunction): void => {
    let resolution: TrustedResolution;
    if (req.method === 'GET' || req.method === 'HEAD') {
      const at = req.url.indexOf('?');
      const search = new URLSearchParams(at < 0 ? '' : req.url.slice(at + 1));
      const params: GraphqlParams = {};
      for (const [key, value] of search) {
        if (!JSON_PARAMS.has(key)) params[key] = value;
        else {
          try {
            params[key] = JSON.parse(value);
          } catch {
            sendHttpError(res, 400, 'BAD_REQUEST', `The "${key}" parameter is not valid JSON.`, requestIdOf(req));
            return;
          }
        }
      }
      resolution = trusted.resolve(params);
      if (resolution.ok) {
        const out = new URLSearchParams();
        for (const [key, value] of Object.entries(resolution.params)) out.set(key, JSON_PARAMS.has(key) ? JSON.stringify(value) : String(value));
        req.url = `${at < 0 ? req.url : req.url.slice(0, at)}?${out.toString()}`;
      }
    } else if (typeof req.body === 'object' && req.body !== null && !Array.isArray(req.body)) {
      resolution = trusted.resolve(req.body as GraphqlParams);
      if (resolution.ok) req.body = resolution.params;
    } else {
      // A batch, or no body: Apollo refuses both itself (batching is off), and nothing is run.
      return next();
    }
    if (!resolution.ok) {
      sendHttpError(res, resolution.status, resolution.code, resolution.message, requestIdOf(req));
      return;
    }
    next();
  };
}
