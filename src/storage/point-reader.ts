/**
 * Point queries without the Azure SDK's pipeline: on a point query (the request path's most frequent storage call)
 * the SDK's policies, serializers and deserializers cost more CPU than everything else a GraphQL request does
 * (measured: `npm run bench -- peer`, `-- point`). This is the Table service's REST call "Query Entities" for one
 * entity — `GET /<table>(PartitionKey='…',RowKey='…')?$select=…`, JSON with minimal metadata, signed with the
 * account key (Shared Key Lite, as the SDK signs it) — sent with undici. It answers only what it can tell for sure:
 * the entity (200), or no entity (404 `ResourceNotFound`). Anything else — another status, a network failure, an
 * answer it cannot read — is `undefined`: the caller sends the call again through the SDK, whose retry policy and
 * error mapping then decide.
 *
 * Used for connection strings with an account key (Azure, Azurite, the Cosmos DB Table API); a SAS or Microsoft Entra
 * ID goes through the SDK alone. See "Authorize with Shared Key" (Shared Key Lite, Table service) in the Azure
 * Storage REST reference.
 */
import { createHmac } from 'node:crypto';
import { Agent, request } from 'undici';
import { parseConnectionString, tableEndpoint } from './connection';

/** The service version the reader speaks (the SDK's). */
const SERVICE_VERSION = '2019-02-02';

/** What a point query answered: the entity's JSON (OData minimal metadata) and ETag, or null (no such entity). */
export type PointAnswer = { json: Record<string, unknown>; etag: string } | null;

export class PointReader {
  private readonly agent: Agent;
  private readonly base: URL;
  private readonly key: Buffer;
  private date = { second: 0, text: '' };
  /** Point queries asked during this turn of the event loop, not sent yet, by URL. */
  private readonly asked = new Map<string, SharedQuery>();

  private constructor(
    endpoint: string,
    private readonly account: string,
    key: string,
  ) {
    this.base = new URL(endpoint.endsWith('/') ? endpoint : `${endpoint}/`);
    this.key = Buffer.from(key, 'base64');
    // Kept-alive connections, as many as the requests in flight need.
    this.agent = new Agent({ connections: 128, keepAliveTimeout: 30_000 });
  }

  /** The reader of a connection string with an account key; undefined for one with a SAS or without a key. */
  static fromConnectionString(connectionString: string): PointReader | undefined {
    const p = parseConnectionString(connectionString);
    if (!p.accountname || !p.accountkey || p.sharedaccesssignature) return undefined;
    return new PointReader(tableEndpoint(connectionString), p.accountname, p.accountkey);
  }

  /**
   * One point query. Point queries of the same entity and `$select` asked during one turn of the event loop are
   * sent once, when the turn ends, and share the answer (each caller gets an entity of its own from it): the query
   * is sent after every one of them was asked, so the answer is as fresh as a query of each caller's own would be
   * (a write acknowledged before any of them asked is in it). Many requests reading one hot entity at once then
   * cost one query.
   * @param select the properties to return ($select; keys and ETag come anyway); absent: all
   * @returns the entity, null when it does not exist, undefined when the answer is anything else (ask the SDK)
   * @throws an AbortError when `signal` aborts first (the caller's timeout)
   */
  get(table: string, partitionKey: string, rowKey: string, select: string[] | undefined, signal: AbortSignal): Promise<PointAnswer | undefined> {
    const quote = (s: string) => encodeURIComponent(s.replaceAll("'", "''"));
    const url = new URL(`${table}(PartitionKey='${quote(partitionKey)}',RowKey='${quote(rowKey)}')`, this.base);
    if (select && select.length > 0) url.search = `$select=${encodeURIComponent(select.join(','))}`;
    let shared = this.asked.get(url.href);
    if (!shared) {
      if (this.asked.size === 0) setImmediate(() => this.sendAsked());
      shared = new SharedQuery(url);
      this.asked.set(url.href, shared);
    }
    return shared.join(signal);
  }

  /** Sends the point queries asked during the turn that ended, each once. */
  private sendAsked(): void {
    const asked = [...this.asked.values()];
    this.asked.clear();
    for (const shared of asked) shared.settle(this.send(shared.url, shared.signal));
  }

  /** The REST call. @returns as get() */
  private async send(url: URL, signal: AbortSignal): Promise<PointAnswer | undefined> {
    const date = this.now();
    const signature = createHmac('sha256', this.key).update(`${date}\n/${this.account}${url.pathname}`, 'utf8').digest('base64');
    try {
      const res = await request(url, {
        method: 'GET',
        dispatcher: this.agent,
        signal,
        headers: {
          accept: 'application/json;odata=minimalmetadata',
          'x-ms-date': date,
          'x-ms-version': SERVICE_VERSION,
          dataserviceversion: '3.0;NetFx',
          maxdataserviceversion: '3.0;NetFx',
          authorization: `SharedKeyLite ${this.account}:${signature}`,
        },
      });
      const text = await res.body.text();
      if (res.statusCode === 200) {
        const json = JSON.parse(text) as Record<string, unknown>;
        const etag = typeof res.headers.etag === 'string' ? res.headers.etag : String(json['odata.etag'] ?? '');
        return { json, etag };
      }
      if (res.statusCode === 404 && errorCode(text) === 'ResourceNotFound') return null;
      return undefined;
    } catch {
      return undefined; // each caller whose own time is up has left already (SharedQuery.join)
    }
  }

  /** Closes the kept-alive connections. */
  close(): Promise<void> {
    return this.agent.close();
  }

  /** `x-ms-date`: the time in RFC 1123 form, made once a second. */
  private now(): string {
    const second = Math.floor(Date.now() / 1000);
    if (second !== this.date.second) this.date = { second, text: new Date(second * 1000).toUTCString() };
    return this.date.text;
  }
}

/**
 * One point query and the callers waiting for it: each leaves when its own signal aborts; the query is aborted once
 * all have left.
 */
class SharedQuery {
  private readonly controller = new AbortController();
  private waiting = 0;
  private readonly answer: Promise<PointAnswer | undefined>;
  private resolve!: (answer: Promise<PointAnswer | undefined>) => void;

  constructor(readonly url: URL) {
    this.answer = new Promise((resolve) => (this.resolve = resolve));
  }

  /** What the query is sent with: aborted once every caller has left. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** The answer, to be given by settle(). */
  settle(answer: Promise<PointAnswer | undefined>): void {
    this.resolve(answer);
  }

  /** A caller's wait for the answer. @throws an AbortError when `signal` aborts first */
  join(signal: AbortSignal): Promise<PointAnswer | undefined> {
    if (signal.aborted) return Promise.reject(abortError());
    this.waiting += 1;
    return new Promise((resolve, reject) => {
      const leave = () => {
        if (--this.waiting === 0) this.controller.abort();
        reject(abortError());
      };
      signal.addEventListener('abort', leave, { once: true });
      void this.answer.then((answer) => {
        signal.removeEventListener('abort', leave);
        resolve(answer);
      });
    });
  }
}

/** What the SDK throws when a call is aborted, so that the caller maps it as it maps the SDK's (storage-errors.ts). */
function abortError(): Error {
  const e = new Error('The point query was aborted (its time was up).');
  e.name = 'AbortError';
  return e;
}

/** The service's error code in an error answer's JSON (`odata.error.code`), or undefined. */
function errorCode(text: string): string | undefined {
  try {
    const body = JSON.parse(text) as { 'odata.error'?: { code?: unknown } };
    const code = body['odata.error']?.code;
    return typeof code === 'string' ? code : undefined;
  } catch {
    return undefined;
  }
}
