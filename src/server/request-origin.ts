/**
 * Who may reach the server from a browser, checked on every request and WebSocket upgrade before anything of it runs:
 * - **Host**: on a server bound to loopback (the quick start), only loopback names (`localhost`, `127.x.x.x`,
 *   `[::1]`) and those in TABLEGRAPH_ALLOWED_HOSTS. A page of `attacker.example` whose name the attacker points at
 *   127.0.0.1 (DNS rebinding) is same-origin to its own requests, so CORS does not stop it; its `Host` header does.
 *   Refused: HOST_NOT_ALLOWED (HTTP 421). A server bound to another interface checks only the hosts configured.
 * - **Origin**: a request or upgrade that a browser page of another origin sends (it carries `Origin`) is served only
 *   when that origin is allowed (TABLEGRAPH_CORS_ORIGINS) or is the server's own. A WebSocket is not bound by CORS:
 *   without this check any page the developer visits could read the API over graphql-ws. Refused: ORIGIN_NOT_ALLOWED
 *   (HTTP 403). Clients that are not browsers send no `Origin` and are not concerned.
 */
import type { IncomingMessage } from 'node:http';
import { isLoopback } from './auth';
import { headerMemo } from './header-memo';

/** What the guard allows. */
export interface OriginPolicy {
  /** Host names (lowercase, no port) a request may name; undefined: any. */
  allowedHosts?: readonly string[];
  /** Origins of other sites a browser may call from (CORS). */
  corsOrigins: readonly string[];
}

/** A refusal: the HTTP status, a stable code and a message a person can act on. */
export interface OriginRefusal {
  status: 403 | 421;
  code: 'ORIGIN_NOT_ALLOWED' | 'HOST_NOT_ALLOWED';
  message: string;
}

/**
 * The policy of a server bound to `bindHost`: loopback → only loopback names and `extraHosts`; elsewhere → `extraHosts`
 * when some are given, else any host.
 * @example originPolicy('127.0.0.1', [], []) // { allowedHosts: ['localhost', '127.0.0.1', '::1'], corsOrigins: [] }
 */
export function originPolicy(bindHost: string, extraHosts: readonly string[], corsOrigins: readonly string[]): OriginPolicy {
  const extra = extraHosts.map((h) => h.toLowerCase());
  if (isLoopback(bindHost)) return { allowedHosts: ['localhost', '127.0.0.1', '::1', ...extra], corsOrigins };
  return { allowedHosts: extra.length > 0 ? extra : undefined, corsOrigins };
}

/** The host name of a `Host` header (`[::1]:4000` → `::1`), lowercase; undefined when absent or malformed. */
function hostName(header: string | undefined): string | undefined {
  return header ? parsedHostName(header) : undefined;
}

/** A `Host` header's name, parsed once per distinct header: a server is reached under a handful of names. */
const parsedHostName = headerMemo((header): string | undefined => {
  try {
    return new URL(`http://${header}`).hostname.replace(/^\[|\]$/g, '').toLowerCase();
  } catch {
    return undefined;
  }
});

function hostAllowed(policy: OriginPolicy, host: string | undefined): boolean {
  if (!policy.allowedHosts) return true;
  if (host === undefined) return false;
  // Every 127.x.x.x is loopback; a loopback-bound server lists 127.0.0.1 and so takes them all.
  return policy.allowedHosts.includes(host) || (policy.allowedHosts.includes('127.0.0.1') && isLoopback(host));
}

/**
 * @returns undefined when the request may go on, else why not
 */
export function originRefusal(req: IncomingMessage, policy: OriginPolicy): OriginRefusal | undefined {
  const host = hostName(req.headers.host);
  if (!hostAllowed(policy, host)) {
    return {
      status: 421,
      code: 'HOST_NOT_ALLOWED',
      message: `This server does not answer for the host "${host ?? ''}": use localhost or 127.0.0.1, or add the name to TABLEGRAPH_ALLOWED_HOSTS.`,
    };
  }
  const origin = req.headers.origin;
  if (origin === undefined || policy.corsOrigins.includes(origin)) return undefined;
  let sameOrigin = false;
  try {
    sameOrigin = new URL(origin).host === req.headers.host;
  } catch {
    // `null` (a sandboxed frame, a file) or garbage: another origin
  }
  if (sameOrigin) return undefined;
  return {
    status: 403,
    code: 'ORIGIN_NOT_ALLOWED',
    message: `Requests from the origin "${origin}" are not allowed: add it to TABLEGRAPH_CORS_ORIGINS to let its pages call this server.`,
  };
}
