/**
 * Point queries without the Azure SDK's pipeline: on a point query (the request path's most frequent storage call)
 * the SDK's policies, serializers and deserializers cost more CPU than everything else a GraphQL request does
 * (measured: `npm run bench -- peer`, `-- point`). This is the Table service's REST call "Query Entities" for one
 * entity — `GET /<table>(PartitionKey='…',RowKey='…')?$select=…` — sent through shared-key-rest.ts. It answers only
 * what it can tell for sure: the entity (200), or no entity (404 `ResourceNotFound`). Anything else — another status,
 * a network failure, an answer it cannot read — is `undefined`: the caller sends the call again through the SDK, whose
 * retry policy and error mapping then decide.
 *
 * Used for connection strings with an account key (Azure, Azurite, the Cosmos DB Table API); a SAS or Microsoft Entra
 * ID goes through the SDK alone.
 */
import { errorCode, type SharedKeyRest } from './shared-key-rest';
import { TurnQueries } from './turn-queries';
import type { Abortable } from './abort-latch';

/** What a point query answered: the entity's JSON (OData minimal metadata) and ETag, or null (no such entity). */
export type PointAnswer = { json: Record<string, unknown>; etag: string } | null;

export class PointReader {
  /** Point queries asked during this turn of the event loop (turn-queries.ts). */
  private readonly asked = new TurnQueries<{ resource: string; query: string }, PointAnswer | undefined>((q, abort) => this.send(q.resource, q.query, abort));

  constructor(private readonly rest: SharedKeyRest) {}

  /**
   * One point query. Point queries of the same entity and `$select` asked during one turn of the event loop are
   * sent once, when the turn ends, and share the answer (each caller gets an entity of its own from it): the query
   * is sent after every one of them was asked, so the answer is as fresh as a query of each caller's own would be
   * (a write acknowledged before any of them asked is in it). Many requests reading one hot entity at once then
   * cost one query.
   * @param select the properties to return ($select; keys and ETag come anyway); absent: all
   * @returns the entity, null when it does not exist, undefined when the answer is anything else (ask the SDK)
   * @throws an AbortError when `abort` aborts first (the caller's timeout)
   */
  get(table: string, partitionKey: string, rowKey: string, select: string[] | undefined, abort: Abortable): Promise<PointAnswer | undefined> {
    const quote = (s: string) => encodeURIComponent(s.replaceAll("'", "''"));
    const resource = `${table}(PartitionKey='${quote(partitionKey)}',RowKey='${quote(rowKey)}')`;
    const query = select && select.length > 0 ? `$select=${encodeURIComponent(select.join(','))}` : '';
    return this.asked.ask(`${resource}?${query}`, { resource, query }, abort);
  }

  /** The REST call. @returns as get() */
  private async send(resource: string, query: string, abort: Abortable): Promise<PointAnswer | undefined> {
    const answer = await this.rest.get(resource, query, abort);
    if (!answer) return undefined; // each caller whose own time is up has left already (turn-queries.ts)
    try {
      if (answer.status === 200) {
        const json = JSON.parse(answer.text) as Record<string, unknown>;
        const etag = typeof answer.headers.etag === 'string' ? answer.headers.etag : String(json['odata.etag'] ?? '');
        return { json, etag };
      }
    } catch {
      return undefined;
    }
    if (answer.status === 404 && errorCode(answer.text) === 'ResourceNotFound') return null;
    return undefined;
  }
}
