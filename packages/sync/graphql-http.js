/**
 * One GraphQL request over HTTP POST, and the errors a caller of tablegraph tells apart: a GraphQL error with its
 * `extensions.code` (GraphQLRequestError), and a request whose answer never came (NetworkError: offline, the
 * connection lost — the outcome of a mutation sent is then unknown).
 */

/** The server answered with errors; `code` and `reason` are the first error's `extensions.code` and `.reason`. */
export class GraphQLRequestError extends Error {
  /** @param {Array<{ message: string, extensions?: Record<string, unknown> }>} errors */
  constructor(errors) {
    super(errors.map((e) => `${e.extensions?.code ?? 'ERROR'}: ${e.message}`).join('; '));
    this.name = 'GraphQLRequestError';
    this.errors = errors;
    this.code = /** @type {string | undefined} */ (errors[0]?.extensions?.code);
    this.reason = /** @type {string | undefined} */ (errors[0]?.extensions?.reason);
  }
}

/** No answer came: the browser is offline, or the connection was lost (a mutation's outcome is unknown). */
export class NetworkError extends Error {
  /** @param {unknown} cause */
  constructor(cause) {
    super(`no answer from the API: ${cause instanceof Error ? cause.message : String(cause)}`);
    this.name = 'NetworkError';
    this.cause = cause;
  }
}

/**
 * Sends one operation.
 * @param {{ url: string, headers?: () => Record<string, string> }} api the endpoint, and the headers of each request (a token)
 * @param {string} query
 * @param {Record<string, unknown>} [variables]
 * @returns {Promise<any>} the answer's `data`
 * @throws {GraphQLRequestError} the answer holds errors
 * @throws {NetworkError} no answer, or one that is not GraphQL (a proxy's page, a 502)
 */
export async function graphqlRequest(api, query, variables) {
  let res;
  try {
    res = await fetch(api.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...api.headers?.() },
      body: JSON.stringify({ query, variables }),
    });
  } catch (e) {
    throw new NetworkError(e);
  }
  let body;
  try {
    body = await res.json();
  } catch (e) {
    throw new NetworkError(e);
  }
  if (body.errors?.length) throw new GraphQLRequestError(body.errors);
  if (!body.data) throw new NetworkError(new Error(`HTTP ${res.status} without data`));
  return body.data;
}

/**
 * Why requests to the API get no answer, as far as a page can tell: `offline` (the browser says so), `origin-refused`
 * (the API answers, but not to this page's origin: CORS — its own `ORIGIN_NOT_ALLOWED` is not readable here, only
 * that a no-cors request gets through where a CORS one does not), `unreachable` (nothing answers at the address), or
 * `reachable`. Two GET requests at most, without credentials or a body.
 * @param {string} url the GraphQL endpoint
 * @returns {Promise<'offline' | 'origin-refused' | 'unreachable' | 'reachable'>}
 */
export async function reachability(url) {
  if (globalThis.navigator?.onLine === false) return 'offline';
  try {
    await fetch(url, { method: 'GET', mode: 'cors', credentials: 'omit' });
    return 'reachable';
  } catch {
    // A CORS refusal and an unreachable host fail alike; an opaque (no-cors) request tells them apart.
  }
  try {
    await fetch(url, { method: 'GET', mode: 'no-cors', credentials: 'omit' });
    return 'origin-refused';
  } catch {
    return globalThis.navigator?.onLine === false ? 'offline' : 'unreachable';
  }
}
