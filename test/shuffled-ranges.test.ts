/**
 * The pagination and connection tests again, over a Table service that returns every query answer's entities in a
 * random order — as the Cosmos DB Table API may, since it does not sort results (test/support/shuffling-proxy.ts)
 * — with the `cosmos` target: cursors then hold the service's continuation token and an offset into the page
 * (TableStore.queryRange), and every connection must still return each entity exactly once, in RowKey order.
 * The same test files run here, unchanged, in the `shuffled` range mode (harness.rangeMode).
 */
process.env.TABLEGRAPH_TEST_RANGES = 'shuffled';
/* eslint-disable @typescript-eslint/no-require-imports */
require('./pagination.test');
require('./read-path.test');

import { TableStore } from '../src/storage/table-store';
import type { RangePosition } from '../src/storage/storage-types';
import { connectionString, uniquePrefix } from './support/harness';
import { startShufflingProxy } from './support/shuffling-proxy';

test('the store pages an unsorted range by continuation token: each entity exactly once, each page in RowKey order', async () => {
  const proxy = await startShufflingProxy(connectionString(), 7);
  const store = new TableStore({ connectionString: proxy.connectionString, target: 'cosmos', timeoutMs: 30_000 });
  const table = `${uniquePrefix()}Shuffled`;
  try {
    await store.ensureTable(table);
    const rowKeys = Array.from({ length: 57 }, (_, i) => `row${String((i * 37) % 101).padStart(3, '0')}`);
    for (let i = 0; i < rowKeys.length; i += 50) {
      await store.submitTransaction(
        table,
        rowKeys.slice(i, i + 50).map((rowKey) => ({ kind: 'upsertReplace' as const, entity: { partitionKey: 'p', rowKey, properties: {} } })),
      );
    }
    const seen: string[] = [];
    let after: RangePosition | undefined;
    for (let page = 0; page < 20; page++) {
      const r = await store.queryRange({ table, partitionKey: 'p', after, limit: 5 + (page % 3) });
      const keys = r.entities.map((e) => e.rowKey);
      expect(keys).toEqual([...keys].sort());
      seen.push(...keys);
      if (!r.more) break;
      after = r.positions.at(-1);
      // Resuming from an edge in the middle of a page works too: the next read starts right after it.
      if (page === 2) {
        const mid = await store.queryRange({ table, partitionKey: 'p', after: r.positions[1], limit: 2 });
        expect(mid.entities.map((e) => e.rowKey)).toEqual(keys.slice(2, 4));
      }
    }
    expect(seen).toEqual([...rowKeys].sort());
    expect(proxy.shuffled()).toBeGreaterThan(0);
  } finally {
    await store.deleteTable(table).catch(() => undefined);
    await proxy.close();
  }
});
