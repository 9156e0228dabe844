/**
 * The paging of a range query (the guide's "Design for querying": PartitionKey eq and a RowKey range, following
 * continuation tokens): from a service that returns ranges in RowKey order (Azure Table storage, Azurite), and from
 * one that need not (the Cosmos DB Table API). Used by TableStore.queryRange; no I/O of its own — `page` reads one
 * service page.
 */
import type { RangePosition, StoredEntity } from './storage-types';

/** Entities per round trip: the service's maximum. */
export const MAX_PAGE_SIZE = 1000;

/**
 * What one storage call cost: entities read or written and round trips made (filled in as the pages are read), and
 * `leanAttempts`, the attempts sent without the SDK before it sent the call (table-store.ts leanFirst), which count
 * among its attempts.
 */
export type CallCost = { entities: number; roundTrips: number; leanAttempts?: number };

/** What a range query returns: entities, whether more follow, and where to resume after each entity. */
export interface RangePage {
  entities: StoredEntity[];
  more: boolean;
  positions: RangePosition[];
}

/** Reads one service page of at most `maxPageSize` entities, from `continuationToken` on (absent after the last page). */
export type PageRead = (maxPageSize: number, continuationToken?: string) => Promise<{ entities: StoredEntity[]; continuationToken?: string }>;

/** A range from a service that sorts it: one entity more than `limit` read, so `more` is exact. */
export async function sortedRange(limit: number, page: PageRead, cost: CallCost): Promise<RangePage> {
  const wanted = limit + 1;
  const found: StoredEntity[] = [];
  let token: string | undefined;
  let fetched = 0;
  do {
    cost.roundTrips = fetched + 1; // a failing page request still cost a round trip
    const next = await page(Math.min(wanted - found.length, MAX_PAGE_SIZE), token);
    fetched++;
    for (const entity of next.entities) found.push(entity);
    token = next.continuationToken;
  } while (found.length < wanted && token);
  cost.roundTrips = Math.max(fetched, 1);
  const entities = found.slice(0, limit);
  return { entities, more: found.length > limit, positions: entities.map((e) => ({ rowKey: e.rowKey })) };
}

/**
 * A range from a service that need not sort it: service pages of `limit` entities (at most 1000), each put in
 * RowKey order; a position inside a page is its continuation token, its size and an offset (the page is read
 * again, at that size, to resume), the one after a page's last entity the next page's token.
 */
export async function pagedRange(
  limit: number,
  resume: { token: string; pageSize: number; skip: number } | undefined,
  page: PageRead,
  cost: CallCost,
): Promise<RangePage> {
  const size = (n: number) => Math.min(Math.max(n, 1), MAX_PAGE_SIZE);
  const entities: StoredEntity[] = [];
  const positions: RangePosition[] = [];
  let token = resume?.token || undefined;
  let skip = resume?.skip ?? 0;
  let pageSize = skip > 0 ? resume!.pageSize : size(limit);
  let fetched = 0;
  for (;;) {
    cost.roundTrips = fetched + 1;
    const next = await page(pageSize, token);
    fetched++;
    const got = next.entities.sort((a, b) => (a.rowKey < b.rowKey ? -1 : a.rowKey > b.rowKey ? 1 : 0));
    const nextToken = next.continuationToken;
    let i = skip;
    for (; i < got.length && entities.length < limit; i++) {
      entities.push(got[i]);
      const last = i + 1 === got.length;
      positions.push(last && nextToken ? { token: nextToken, pageSize, skip: 0 } : { token: token ?? '', pageSize, skip: i + 1 });
    }
    if (entities.length >= limit) {
      cost.roundTrips = fetched;
      return { entities, more: i < got.length || Boolean(nextToken), positions };
    }
    if (!nextToken) break;
    token = nextToken;
    skip = 0;
    pageSize = size(limit - entities.length);
  }
  cost.roundTrips = fetched;
  return { entities, more: false, positions };
}
