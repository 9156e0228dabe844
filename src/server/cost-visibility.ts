/**
 * Whether a request's actual storage cost may be shown to its caller. A caller whose access to something it reads
 * is decided by a scope (an `@auth` rule with `scope`, the only kind that lets it through) would learn from the
 * counts what its scope left out: a point query through a unique index reads the index entity and then the entity
 * (2 round trips, 2 entities) when the value exists out of its scope, 1 and 0 when it does not; a range's entities
 * read exceed the edges it got by those filtered out. For such a request `extensions.cost` keeps only the estimate
 * (cost-plugin.ts). The decision depends on the document and the caller's roles only — never on what was read, which
 * would make the withholding itself the oracle.
 */
import type { DocumentNode, GraphQLSchema } from 'graphql';
import { decide, type Principal } from '../model/authorization';
import type { AuthPolicy, Model } from '../model/types';
import { forEachReadField } from './document-reads';

/** Whether `principal` passes `policy` only through a scope: no rule without one lets its roles through. */
function scopedFor(policy: AuthPolicy | undefined, principal: Principal): boolean {
  return policy !== undefined && decide(policy, principal, () => undefined) !== 'allow';
}

/**
 * @returns true when `document` reads, for `principal`, an entity type, field or access path that lets it through
 *   only by a scope; false without a principal (no authentication)
 */
export function readsThroughScope(schema: GraphQLSchema, model: Model, document: DocumentNode, principal: Principal | undefined): boolean {
  if (!principal) return false;
  let scoped = false;
  forEachReadField(schema, model, document, ({ path, entity, field }) => {
    scoped =
      (path !== undefined && (scopedFor(path.auth, principal) || scopedFor(path.target.auth, principal))) ||
      (entity !== undefined && (scopedFor(entity.auth, principal) || scopedFor(field?.auth, principal)));
    return scoped;
  });
  return scoped;
}

/**
 * readsThroughScope, memoised per parsed document (Apollo's document store hands the same object back) and set of
 * roles (all the decision depends on).
 */
export function scopeMemo(model: Model): (schema: GraphQLSchema, document: DocumentNode, principal: Principal | undefined) => boolean {
  const memo = new WeakMap<DocumentNode, Map<string, boolean>>();
  return (schema, document, principal) => {
    if (!principal) return false;
    const key = [...principal.roles].sort().join('\u0000');
    let byRoles = memo.get(document);
    if (!byRoles) memo.set(document, (byRoles = new Map()));
    let scoped = byRoles.get(key);
    if (scoped === undefined) byRoles.set(key, (scoped = readsThroughScope(schema, model, document, principal)));
    return scoped;
  };
}
