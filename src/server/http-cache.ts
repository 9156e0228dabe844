/**
 * HTTP caching of GET queries: `Cache-Control` derived from the schema, and an ETag of the answer's data, so a
 * browser or a CDN keeps a query's result and a conditional GET (`If-None-Match`) is answered 304 with no body
 * (Express's freshness check, on the ETag set here).
 *
 * The policy of an operation is read from what it selects, once per parsed document:
 * - `no-store` when it selects private data: anything under an `@auth` rule with a `scope` (an entity type, a field
 *   or an access path whose answer depends on the caller's claims), a `@sas` field or a `@blob` field (signed URLs
 *   that expire); and when it is not a query (mutations, subscriptions), or its answer has errors. A rule of roles
 *   alone lets a caller see all or nothing: such answers are kept, `private`;
 * - otherwise `max-age` = the short age (`TABLEGRAPH_CACHE_MAX_AGE`) when it selects an entity type a write can
 *   change — a mutation writes or moves it, or it holds a summary or a copy of another type's fields, which writes
 *   of others change — and the long age (`TABLEGRAPH_CACHE_MAX_AGE_UNWRITTEN`) when all it reads is loaded only in
 *   bulk (`npm run load`);
 * - `public` on a server without authentication, `private` (the browser's cache only, never a shared one) on a
 *   server that requires a token, so a CDN never hands an answer to a caller who has none; such an answer also says
 *   `Vary: Authorization`, so a browser whose token changes (another user signs in) does not reuse it.
 *
 * Every other answer — a POST's, a refusal, an answer with errors — says `no-store`. This plugin is the only one that
 * writes the header: Apollo's own cache-control plugin is kept from writing it (app.ts).
 */
import { createHash } from 'node:crypto';
import type { ApolloServerPlugin } from '@apollo/server';
import type { DocumentNode, GraphQLSchema } from 'graphql';
import type { AuthPolicy, EntityModel, Model } from '../model/types';
import type { RequestContext } from '../resolvers/context';
import { forEachReadField } from './document-reads';

/** The ages of cached answers (s). */
export interface HttpCacheOptions {
  /** max-age of an answer that reads an entity type a write can change (s; default 5; 0: no-store). */
  maxAgeSeconds: number;
  /** max-age of an answer that reads only types no write changes (s; default 60; 0: no-store). */
  unwrittenMaxAgeSeconds: number;
  /** Whether the server requires a token: answers are then `private`. */
  authenticated: boolean;
}

/** Defaults: a few seconds for what writes change, a minute for what only bulk loads change. */
export const DEFAULT_HTTP_CACHE: Omit<HttpCacheOptions, 'authenticated'> = { maxAgeSeconds: 5, unwrittenMaxAgeSeconds: 60 };

/** What a document's answers may be kept for. */
export type CachePolicy = { store: false } | { store: true; maxAgeSeconds: number };

/**
 * The policy of `document` (all its operations and fragments) on `model`'s schema.
 * @returns `{ store: false }` when any selected field is under a scoped `@auth` rule, a `@sas` or a `@blob` field; otherwise the
 *   shortest max-age of the entity types it reads (s)
 */
export function cachePolicyOf(schema: GraphQLSchema, model: Model, document: DocumentNode, options: Omit<HttpCacheOptions, 'authenticated'>): CachePolicy {
  const changeable = changeableEntities(model);
  let store = true;
  let changes = false;
  forEachReadField(schema, model, document, ({ coordinate, path, entity, field }) => {
    // A list or point of a scoped type differs per caller even when it selects none of its fields (its cursors,
    // its page info: what the caller's scope left in).
    if (scoped(path?.auth) || scoped(path?.target.auth) || model.sasFields.has(coordinate)) store = false;
    if (path && changeable.has(path.target.name)) changes = true;
    if (!entity) return;
    if (scoped(entity.auth) || scoped(field?.auth) || field?.blob) store = false;
    if (changeable.has(entity.name)) changes = true;
  });
  const maxAgeSeconds = changes ? options.maxAgeSeconds : options.unwrittenMaxAgeSeconds;
  return store && maxAgeSeconds > 0 ? { store: true, maxAgeSeconds } : { store: false };
}

/** Whether a policy lets a caller see only what its claims name: its answers differ from caller to caller. */
function scoped(policy: AuthPolicy | undefined): boolean {
  return policy !== undefined && policy.rules.some((rule) => rule.scope.length > 0);
}

/** Entity types (and interfaces) whose stored state a mutation can change, directly or through derived fields. */
function changeableEntities(model: Model): Set<string> {
  const out = new Set<string>();
  for (const write of model.writes.values()) {
    out.add(write.entity.name);
    if (write.moveTarget) out.add(write.moveTarget.name);
  }
  const all: EntityModel[] = [...model.entities.values(), ...model.interfaces.values()];
  for (const e of all) if (e.summaryFields.size > 0 || e.copies.size > 0) out.add(e.name);
  // An interface reads as its implementations: changeable when one of them is, and they when it is.
  for (const i of model.interfaces.values()) {
    const members = i.implementations ?? [];
    if (members.some((m) => out.has(m.name))) out.add(i.name);
    if (out.has(i.name)) for (const m of members) out.add(m.name);
  }
  return out;
}

/**
 * A weak ETag of an answer's data (and errors): SHA-256, base64url. Weak, since `extensions` (the storage cost of
 * this very request) may differ between two answers of equal data.
 */
export function dataEtag(result: { data?: unknown; errors?: unknown }): string {
  const hash = createHash('sha256')
    .update(JSON.stringify([result.data ?? null, result.errors ?? null]))
    .digest('base64url');
  return `W/"${hash}"`;
}

/**
 * The Apollo plugin: on a GET query's answer without errors, `Cache-Control` by `cachePolicyOf` (memoised per
 * parsed document: Apollo's document store hands the same object back) and an ETag of its data; `no-store` on any
 * other answer.
 */
export function httpCachePlugin(model: Model, options: HttpCacheOptions): ApolloServerPlugin<RequestContext> {
  const policies = new WeakMap<DocumentNode, CachePolicy>();
  const scope = options.authenticated ? 'private' : 'public';
  return {
    async requestDidStart({ request }) {
      const get = request.http?.method === 'GET';
      return {
        async willSendResponse({ response, document, operation, schema }) {
          const headers = response.http.headers;
          const body = response.body;
          let policy: CachePolicy = { store: false };
          if (get && document && operation?.operation === 'query' && body.kind === 'single' && !body.singleResult.errors) {
            policy = policies.get(document) ?? cachePolicyOf(schema, model, document, options);
            policies.set(document, policy);
            if (policy.store) headers.set('etag', dataEtag(body.singleResult));
            if (policy.store && options.authenticated) headers.set('vary', 'Authorization');
          }
          headers.set('cache-control', policy.store ? `${scope}, max-age=${policy.maxAgeSeconds}` : 'no-store');
        },
      };
    },
  };
}
