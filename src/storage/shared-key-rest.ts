/**
 * A GET or POST of the Table service's REST API without the Azure SDK's pipeline: signed with the account key (Shared Key
 * Lite, as the SDK signs it), JSON with minimal metadata, sent with undici over kept-alive connections. On the request
 * path's reads the SDK's policies, serializers and deserializers cost more CPU than everything else a GraphQL request
 * does (measured: `npm run bench -- peer`); point-reader.ts and range-reader.ts read through this instead, and
 * lean-writes.ts sends inserts and EGTs through it (`npm run bench -- partition`). See
 * "Authorize with Shared Key" (Shared Key Lite, Table service) in the Azure Storage REST reference.
 *
 * It answers with the status, headers and body as they came, or undefined for a network failure: the callers tell
 * what they can be sure of, and leave everything else to the SDK, whose retry policy and error mapping then decide.
 */
import { createHmac } from 'node:crypto';
import { Pool, type Dispatcher } from 'undici';
import { parseConnectionString, tableEndpoint } from './connection';
import type { Abortable } from './abort-latch';

/** The service version spoken (the SDK's). */
const SERVICE_VERSION = '2019-02-02';

/** An answer: its status, the headers the readers use (ANSWER_HEADERS, by lower-case name) and its body text. */
export interface RestAnswer {
  status: number;
  headers: Partial<Record<AnswerHeader, string>>;
  text: string;
}

/**
 * The headers an answer keeps: the entity's ETag, a range query's continuation (the next keys), and how long a
 * throttled write is to wait before it is sent again.
 */
const ANSWER_HEADERS = ['etag', 'x-ms-continuation-nextpartitionkey', 'x-ms-continuation-nextrowkey', 'x-ms-retry-after-ms', 'retry-after'] as const;
type AnswerHeader = (typeof ANSWER_HEADERS)[number];
const KEPT = new Set<string>(ANSWER_HEADERS);

/** The headers of a GET besides the date, version and signature: JSON with minimal metadata. */
const GET_HEADERS = ['accept', 'application/json;odata=minimalmetadata', 'dataserviceversion', '3.0;NetFx', 'maxdataserviceversion', '3.0;NetFx'];

export class SharedKeyRest {
  /** Kept-alive connections to the endpoint's origin: a Pool, not an Agent, as there is one origin (no URL parsed per call). */
  private readonly pool: Pool;
  private readonly key: Buffer;
  /** The endpoint's path, as the canonicalized resource begins: `/devstoreaccount1` on Azurite, '' on Azure. */
  private readonly basePath: string;
  private date = { second: 0, text: '' };

  private constructor(
    endpoint: string,
    private readonly account: string,
    key: string,
  ) {
    // The endpoint `http://127.0.0.1:10002/devstoreaccount1`: the origin the pool connects to, and the path after it.
    const url = new URL(endpoint);
    this.basePath = url.pathname.replace(/\/+$/, '');
    this.key = Buffer.from(key, 'base64');
    // Kept-alive connections, as many as the requests in flight need.
    this.pool = new Pool(url.origin, { connections: 128, keepAliveTimeout: 30_000 });
  }

  /** The client of a connection string with an account key; undefined for one with a SAS or without a key. */
  static fromConnectionString(connectionString: string): SharedKeyRest | undefined {
    const p = parseConnectionString(connectionString);
    if (!p.accountname || !p.accountkey || p.sharedaccesssignature) return undefined;
    return new SharedKeyRest(tableEndpoint(connectionString), p.accountname, p.accountkey);
  }

  /**
   * GET `resource` (already URI-encoded, e.g. `Employees(PartitionKey='a',RowKey='b')` or `Employees()`) with `query`
   * (encoded, without `?`; '' for none).
   * @param abort aborts the call: the answer is then undefined
   * @returns the answer, or undefined when none came (a network failure, an abort)
   */
  get(resource: string, query: string, abort: Abortable): Promise<RestAnswer | undefined> {
    return this.send({ method: 'GET', path: `${resource}${query ? `?${query}` : ''}`, resource, headers: GET_HEADERS }, abort);
  }

  /**
   * POST `body` to `resource` (already URI-encoded: a table's name, to insert an entity; `$batch`, for an EGT).
   * @param headers the request's own headers (Content-Type, Accept, Prefer…) as a flat list of names and values
   * @param abort aborts the call: the answer is then undefined, and the request may or may not have been applied
   * @returns the answer, or undefined when none came (a network failure, an abort)
   */
  post(resource: string, body: string, headers: string[], abort: Abortable): Promise<RestAnswer | undefined> {
    return this.send({ method: 'POST', path: resource, resource, headers, body }, abort);
  }

  /** One request, signed: Shared Key Lite signs the date and the canonicalized resource (the path, no query). */
  private send(
    request: { method: 'GET' | 'POST'; path: string; resource: string; headers: string[]; body?: string },
    abort: Abortable,
  ): Promise<RestAnswer | undefined> {
    const date = this.now();
    const signature = createHmac('sha256', this.key).update(`${date}\n/${this.account}${this.basePath}/${request.resource}`, 'utf8').digest('base64');
    return new Promise((resolve) => {
      // Headers as a flat list of names and values: undici takes it as it is, where an object is converted per call.
      const options: Dispatcher.DispatchOptions = {
        path: `${this.basePath}/${request.path}`,
        method: request.method,
        body: request.body,
        headers: [...request.headers, 'x-ms-date', date, 'x-ms-version', SERVICE_VERSION, 'authorization', `SharedKeyLite ${this.account}:${signature}`],
      };
      this.pool.dispatch(options, new AnswerHandler(abort, resolve));
    });
  }

  /** Closes the kept-alive connections. */
  close(): Promise<void> {
    return this.pool.close();
  }

  /** `x-ms-date`: the time in RFC 1123 form, made once a second. */
  private now(): string {
    const second = Math.floor(Date.now() / 1000);
    if (second !== this.date.second) this.date = { second, text: new Date(second * 1000).toUTCString() };
    return this.date.text;
  }
}

/**
 * Collects one answer for undici's `dispatch` (its handler interface): the status, the headers kept, the body as one
 * text. `request` would make a readable stream, an object of every header and a handler of its own for each call; on
 * a point query that is a tenth of the call's CPU. Resolves undefined when no answer came (a network failure, an
 * abort by `abort`).
 */
class AnswerHandler implements Dispatcher.DispatchHandler {
  private status = 0;
  private readonly headers: RestAnswer['headers'] = {};
  private readonly chunks: Buffer[] = [];
  private stop?: () => void;

  constructor(
    private readonly abort: Abortable,
    private readonly resolve: (answer: RestAnswer | undefined) => void,
  ) {}

  onConnect(abort: (err?: Error) => void): void {
    this.stop = this.abort.onAbort(() => abort(new Error('The read was aborted (its time was up).')));
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[]): boolean {
    this.status = statusCode;
    for (let i = 0; i < rawHeaders.length; i += 2) {
      const name = rawHeaders[i].toString('latin1').toLowerCase();
      if (KEPT.has(name)) this.headers[name as AnswerHeader] = rawHeaders[i + 1].toString('latin1');
    }
    return true;
  }

  onData(chunk: Buffer): boolean {
    this.chunks.push(chunk);
    return true;
  }

  onComplete(): void {
    this.stop?.();
    const text = this.chunks.length === 1 ? this.chunks[0].toString('utf8') : Buffer.concat(this.chunks).toString('utf8');
    this.resolve({ status: this.status, headers: this.headers, text });
  }

  onError(): void {
    this.stop?.();
    this.resolve(undefined);
  }
}

/** The service's error code in an error answer's JSON (`odata.error.code`), or undefined. */
export function errorCode(text: string): string | undefined {
  try {
    const body = JSON.parse(text) as { 'odata.error'?: { code?: unknown } };
    const code = body['odata.error']?.code;
    return typeof code === 'string' ? code : undefined;
  } catch {
    return undefined;
  }
}
