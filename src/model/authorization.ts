/**
 * Authorization declared in the schema (`@auth`): who may read an entity type, a field, and who may run a mutation —
 * by role (the token's roles claim), and by scope: an entity field bound to a claim (a reader's `department`
 * claim to a department's id), so that a caller reaches only entities whose field equals its claim. Rules are
 * OR-ed; the roles, scopes and fields of one rule are AND-ed, as written. Compiled by src/compiler/build-authorization.ts;
 * decided here.
 *
 * A scope is decided from keys where it can be — before any storage call, from a point query's or a range query's
 * keys — and otherwise on every entity a read returns. Without a principal (a server running without
 * authentication) nothing is enforced: authorization needs authentication.
 */
import { ErrorCode, TablegraphError } from '../errors';
import type { AuthPolicy } from './types';

/** Who a request acts for, from its verified token. */
export interface Principal {
  /** The token's `sub`. */
  subject: string;
  roles: string[];
  /** Every claim of the token (`sub` included). */
  claims: Record<string, unknown>;
  /** Under `@tenancy`: the tenant id the token's claim names (src/model/tenancy.ts), checked when the token was. */
  tenant?: string;
}

/** What is known of a decision: allowed, denied, or depending on fields not known yet (read them, then decide). */
export type Decision = 'allow' | 'deny' | 'unknown';

/** A claim's value as text, or undefined when the token does not carry it as a string or number. */
function claimText(principal: Principal, claim: string): string | undefined {
  const v = claim === 'sub' ? principal.subject : principal.claims[claim];
  return typeof v === 'string' || typeof v === 'number' ? String(v) : undefined;
}

/**
 * Decides `policy` for `principal` on an entity whose field values `value` gives (undefined: not known yet).
 * @param given on a mutation: the input fields the caller gives (checked against each rule's `fields`)
 */
export function decide(policy: AuthPolicy | undefined, principal: Principal | undefined, value: (field: string) => unknown, given?: string[]): Decision {
  if (!policy || !principal) return 'allow';
  let unknown = false;
  for (const rule of policy.rules) {
    if (rule.roles && !rule.roles.some((r) => principal.roles.includes(r))) continue;
    if (rule.fields && given && given.some((f) => !rule.fields!.includes(f))) continue;
    let outcome: Decision = 'allow';
    for (const { field, claim } of rule.scope) {
      const want = claimText(principal, claim);
      const have = value(field);
      if (want === undefined || have === null || (have !== undefined && String(have) !== want)) {
        outcome = 'deny';
        break;
      }
      if (have === undefined) outcome = 'unknown';
    }
    if (outcome === 'allow') return 'allow';
    if (outcome === 'unknown') unknown = true;
  }
  return unknown ? 'unknown' : 'deny';
}

/** The FORBIDDEN a denied caller gets. */
export function forbidden(what: string, principal: Principal): TablegraphError {
  return new TablegraphError(ErrorCode.FORBIDDEN, `${principal.subject} may not ${what}.`);
}
