/**
 * Enforcing `@auth` on reads (src/model/authorization.ts): from keys before a storage call where the keys tell,
 * and on every entity a read returns. A denied point query is refused with FORBIDDEN before it is sent; an
 * entity out of scope in a list is left out of it.
 */
import { decide, forbidden, type Principal } from '../model/authorization';
import type { AuthPolicy, EntityModel, Layout } from '../model/types';
import { parseKey } from '../model/key-template';

/** Field values a pair of keys gives away, by the layout that rendered them (a hash bucket gives nothing). */
export function keyValues(layout: Layout, partitionKey: string, rowKey?: string): Record<string, string> {
  return { ...(parseKey(layout.partitionKey, partitionKey) ?? {}), ...(rowKey === undefined ? {} : (parseKey(layout.rowKey, rowKey) ?? {})) };
}

/**
 * Before a read: refuses it when the values known so far already deny every rule of a policy.
 * @returns whether the entities read must still be checked one by one (some rule depends on unread fields)
 * @throws TablegraphError FORBIDDEN
 */
export function authorizeBefore(
  policies: Array<AuthPolicy | undefined>,
  principal: Principal | undefined,
  known: Record<string, unknown>,
  what: string,
): boolean {
  let later = false;
  for (const policy of policies) {
    const d = decide(policy, principal, (f) => known[f]);
    if (d === 'deny') throw forbidden(what, principal!);
    if (d === 'unknown') later = true;
  }
  return later;
}

/** After a read: whether every policy allows the entity with these stored properties. */
export function allowsEntity(policies: Array<AuthPolicy | undefined>, principal: Principal | undefined, properties: Record<string, unknown>): boolean {
  return policies.every((p) => decide(p, principal, (f) => properties[f] ?? null) === 'allow');
}

/**
 * Before a read of entity type `target`: its `@auth`, as authorizeBefore. An interface (the guide's "Inheritance
 * relationships") has no policy of its own: the read is refused when the known values deny every implementation's
 * (a token with no role included), so it is refused before the read as a concrete type's would be.
 * @returns whether the entities read must still be checked one by one
 * @throws TablegraphError FORBIDDEN
 */
export function authorizeTypeBefore(target: EntityModel, principal: Principal | undefined, known: Record<string, unknown>, what: string): boolean {
  if (!target.implementations) return authorizeBefore([target.auth], principal, known, what);
  const decisions = target.implementations.map((i) => decide(i.auth, principal, (f) => known[f]));
  if (decisions.length > 0 && decisions.every((d) => d === 'deny')) throw forbidden(what, principal!);
  return decisions.some((d) => d !== 'allow');
}
