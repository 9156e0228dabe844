/**
 * Range queries without the Azure SDK's pipeline, as point-reader.ts sends point queries: one service page of the
 * Table service's REST call "Query Entities" — `GET /<table>()?$filter=…&$top=…&$select=…` and the continuation
 * (`NextPartitionKey`, `NextRowKey`) — sent through shared-key-rest.ts. Its continuation tokens are the SDK's (base64
 * of `{"nextPartitionKey","nextRowKey"}`), so that a position saved in a cursor from either reads on in the other.
 * It answers only a page it could read (200, JSON with a `value` list). Anything else is `undefined`: the caller
 * reads the page again through the SDK, whose retry policy and error mapping then decide.
 */
import type { SharedKeyRest } from './shared-key-rest';
import { TurnQueries } from './turn-queries';
import type { Abortable } from './abort-latch';

/** One service page: its entities as the REST API returns them (OData minimal metadata), and the next page's token. */
export interface WirePage {
  entities: Array<Record<string, unknown>>;
  continuationToken?: string;
}

/** A page query: an OData filter, the properties to return, at most `top` entities, from `continuationToken` on. */
export interface PageQuery {
  table: string;
  filter: string;
  select?: string[];
  /** Entities at most (1–1000). */
  top: number;
  continuationToken?: string;
}

export class RangeReader {
  /** Pages asked during this turn of the event loop (turn-queries.ts). */
  private readonly asked = new TurnQueries<{ resource: string; query: string }, WirePage | undefined>((q, abort) => this.send(q.resource, q.query, abort));

  constructor(private readonly rest: SharedKeyRest) {}

  /**
   * One page of `q`. Pages of the same query (table, filter, `$select`, `$top` and continuation token) asked during
   * one turn of the event loop are read once, when the turn ends, and share the answer, as point-reader.ts does for
   * point queries: many requests reading one hot page at once then cost one range query.
   * @returns the page (its entities shared: the caller must not change them), or undefined when the answer is
   *   anything else (ask the SDK)
   * @throws an AbortError when `abort` aborts first (the caller's timeout)
   */
  page(q: PageQuery, abort: Abortable): Promise<WirePage | undefined> {
    const params = [`$filter=${encodeURIComponent(q.filter)}`, `$top=${q.top}`];
    if (q.select && q.select.length > 0) params.push(`$select=${encodeURIComponent(q.select.join(','))}`);
    if (q.continuationToken) {
      const next = decodeToken(q.continuationToken);
      if (!next) return Promise.resolve(undefined);
      params.push(`NextPartitionKey=${encodeURIComponent(next.nextPartitionKey)}`);
      if (next.nextRowKey) params.push(`NextRowKey=${encodeURIComponent(next.nextRowKey)}`);
    }
    const resource = `${q.table}()`;
    const query = params.join('&');
    return this.asked.ask(`${resource}?${query}`, { resource, query }, abort);
  }

  /** The REST call. @returns as page() */
  private async send(resource: string, query: string, abort: Abortable): Promise<WirePage | undefined> {
    const answer = await this.rest.get(resource, query, abort);
    if (answer?.status !== 200) return undefined;
    let body: { value?: unknown };
    try {
      body = JSON.parse(answer.text) as { value?: unknown };
    } catch {
      return undefined;
    }
    if (!Array.isArray(body.value)) return undefined;
    const header = (name: keyof typeof answer.headers) => {
      const v = answer.headers[name];
      return typeof v === 'string' && v !== '' ? v : undefined;
    };
    const token = encodeToken(header('x-ms-continuation-nextpartitionkey'), header('x-ms-continuation-nextrowkey'));
    return { entities: body.value as WirePage['entities'], ...(token && { continuationToken: token }) };
  }
}

/** The SDK's continuation token (@azure/data-tables utils/continuationToken): base64 of the JSON of the next keys. */
function encodeToken(nextPartitionKey: string | undefined, nextRowKey: string | undefined): string | undefined {
  if (!nextPartitionKey) return undefined;
  return Buffer.from(JSON.stringify({ nextPartitionKey, ...(nextRowKey && { nextRowKey }) })).toString('base64');
}

/** A token encodeToken (or the SDK) made, read as the SDK reads it (each byte a character); undefined if it is not one. */
function decodeToken(token: string): { nextPartitionKey: string; nextRowKey?: string } | undefined {
  try {
    const json = JSON.parse(Buffer.from(token, 'base64').toString('latin1')) as { nextPartitionKey?: unknown; nextRowKey?: unknown };
    if (typeof json.nextPartitionKey !== 'string') return undefined;
    if (json.nextRowKey !== undefined && typeof json.nextRowKey !== 'string') return undefined;
    return { nextPartitionKey: json.nextPartitionKey, ...(typeof json.nextRowKey === 'string' && { nextRowKey: json.nextRowKey }) };
  } catch {
    return undefined;
  }
}
