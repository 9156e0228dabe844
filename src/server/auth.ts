/**
 * Authentication: bearer JWTs, verified with `jose`. In production, against an OpenID Connect provider's keys
 * (Microsoft Entra ID or any other): `TABLEGRAPH_JWKS_URL` with `TABLEGRAPH_JWT_ISSUER` and
 * `TABLEGRAPH_JWT_AUDIENCE`, every one of them checked. For development and tests, a shared secret (HS256,
 * `TABLEGRAPH_JWT_SECRET`). A request without a valid token is refused with UNAUTHENTICATED (HTTP 401) before
 * anything runs. The verified token becomes the request's Principal: its subject, its roles (the `roles` claim, or
 * the one TABLEGRAPH_JWT_ROLES_CLAIM names) and all its claims. A token that verified is honoured for up to a minute
 * (and never past its `exp`) without a new check (verified-tokens.ts).
 */
import { GraphQLError } from 'graphql';
import { createRemoteJWKSet, errors as joseErrors, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import { ErrorCode, TablegraphError } from '../errors';
import type { Principal } from '../model/authorization';
import { tenantOfClaims } from '../model/tenancy';
import { VerifiedTokens } from './verified-tokens';
import { createSecretKey, type KeyObject } from 'node:crypto';

/** How tokens are verified (from the configuration). */
export interface AuthSettings {
  jwksUrl?: string;
  issuer?: string;
  audience?: string;
  /** HS256 key (development and tests). */
  secret?: string;
  /** The claim holding the roles (default `roles`). */
  rolesClaim?: string;
  /** Whether a token must carry `exp` (default true): a token without one would be valid for ever. */
  requireExp?: boolean;
  /** Under `@tenancy`: the claim naming the caller's tenant; a token without a valid one is refused. */
  tenantClaim?: string;
  /** Under `@tenancy`: whether a tenant is closed (being deleted, or deleted): its tokens are refused. */
  tenantClosed?: (tenant: string) => boolean;
  /**
   * Under `@tenancy`: called before a tenant's request is served (src/evolution/tenant-directory.ts admit), to give it
   * a row and reach its place; its TablegraphError refuses the request (FORBIDDEN, STORAGE_BUSY, STORAGE_UNAVAILABLE).
   */
  admitTenant?: (tenant: string) => Promise<void>;
}

/** Verifies a request's `Authorization` header; resolves to its Principal. */
export type Authenticator = (authorization: string | undefined) => Promise<Principal>;

/** The stable code of a request without a valid token. */
export const UNAUTHENTICATED = 'UNAUTHENTICATED';

/** Whether `host` is a loopback interface: a server bound there is reachable from this machine only. */
export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/** Whether `settings` name a way to verify tokens. */
export function authConfigured(settings: AuthSettings): boolean {
  return Boolean(settings.jwksUrl || settings.secret);
}

/** A tenant's admission refused, as the GraphQL error the request is answered with (403, or 503 with `Retry-After`). */
function admissionRefused(e: unknown): GraphQLError {
  if (!(e instanceof TablegraphError))
    return new GraphQLError('The tenant could not be admitted.', { extensions: { code: ErrorCode.STORAGE_UNAVAILABLE, http: { status: 503 } } });
  const forbidden = e.code === ErrorCode.FORBIDDEN;
  const code = forbidden || e.code === ErrorCode.STORAGE_BUSY ? e.code : ErrorCode.STORAGE_UNAVAILABLE;
  const retryAfterSeconds = Math.max(1, Math.ceil(Number(e.details.retryAfterMs ?? 1000) / 1000));
  const headers = new Map([['retry-after', String(retryAfterSeconds)]]);
  return new GraphQLError(e.message, {
    extensions: {
      code,
      ...(e.details.reason && { reason: e.details.reason }),
      ...(!forbidden && { retryAfterSeconds }),
      http: forbidden ? { status: 403 } : { status: 503, headers },
    },
  });
}

function unauthenticated(why: string): GraphQLError {
  return new GraphQLError(`Authentication required: ${why}. Send "Authorization: Bearer <token>".`, {
    extensions: { code: UNAUTHENTICATED, http: { status: 401, headers: new Map([['www-authenticate', 'Bearer']]) } },
  });
}

/**
 * @throws TablegraphError CONFIG_INVALID when neither a JWKS URL nor a secret is given, or a JWKS URL without
 *   issuer and audience
 */
export function createAuthenticator(settings: AuthSettings): Authenticator {
  if (!authConfigured(settings)) throw new TablegraphError(ErrorCode.CONFIG_INVALID, 'Authentication needs TABLEGRAPH_JWKS_URL or TABLEGRAPH_JWT_SECRET.');
  if (settings.jwksUrl && (!settings.issuer || !settings.audience)) {
    throw new TablegraphError(
      ErrorCode.CONFIG_INVALID,
      'TABLEGRAPH_JWKS_URL needs TABLEGRAPH_JWT_ISSUER and TABLEGRAPH_JWT_AUDIENCE: a token from any issuer or for any audience would pass.',
    );
  }
  // A secret made a key once: jose would make one from the bytes at every check.
  const key: JWTVerifyGetKey | KeyObject = settings.jwksUrl
    ? createRemoteJWKSet(new URL(settings.jwksUrl))
    : createSecretKey(Buffer.from(settings.secret!, 'utf8'));
  const verified = new VerifiedTokens();
  const options = {
    issuer: settings.issuer,
    audience: settings.audience,
    algorithms: settings.jwksUrl ? ['RS256', 'RS384', 'RS512', 'PS256', 'ES256', 'ES384', 'EdDSA'] : ['HS256'],
    requiredClaims: settings.requireExp === false ? [] : ['exp'],
  };
  const rolesClaim = settings.rolesClaim ?? 'roles';
  /** The principal, unless its tenant is closed: FORBIDDEN (reason TenantClosed, HTTP 403) then. */
  const open = async (principal: Principal): Promise<Principal> => {
    if (principal.tenant === undefined) return principal;
    if (settings.tenantClosed?.(principal.tenant)) {
      throw new GraphQLError(`The tenant ${principal.tenant} is closed: it is being deleted, or was.`, {
        extensions: { code: ErrorCode.FORBIDDEN, reason: 'TenantClosed', http: { status: 403 } },
      });
    }
    await settings.admitTenant?.(principal.tenant).catch((e: unknown) => Promise.reject(admissionRefused(e)));
    return principal;
  };
  return async (authorization) => {
    const match = /^Bearer\s+([A-Za-z0-9._~+/-]+=*)$/i.exec(authorization ?? '');
    if (!match) throw unauthenticated(authorization ? 'the Authorization header is not a bearer token' : 'no token');
    const known = verified.get(match[1]);
    if (known) return open(known);
    let payload: JWTPayload;
    try {
      ({ payload } = await (typeof key === 'function' ? jwtVerify(match[1], key, options) : jwtVerify(match[1], key, options)));
    } catch (e) {
      const why =
        e instanceof joseErrors.JWTExpired
          ? 'the token has expired'
          : e instanceof joseErrors.JWTClaimValidationFailed
            ? e.reason === 'missing'
              ? `the token has no ${e.claim} claim`
              : `the token's ${e.claim} is not accepted`
            : 'the token is not valid';
      throw unauthenticated(why);
    }
    if (typeof payload.sub !== 'string' || payload.sub === '') throw unauthenticated('the token has no subject');
    const roles = payload[rolesClaim];
    const tenancy = settings.tenantClaim === undefined ? undefined : tenantOfClaims(payload, settings.tenantClaim);
    if (tenancy && 'why' in tenancy) throw unauthenticated(tenancy.why);
    const principal: Principal = {
      ...(tenancy && { tenant: tenancy.tenant }),
      subject: payload.sub,
      roles: Array.isArray(roles) ? roles.filter((r): r is string => typeof r === 'string') : typeof roles === 'string' ? [roles] : [],
      claims: payload,
    };
    verified.set(match[1], principal, payload.exp);
    return open(principal);
  };
}
