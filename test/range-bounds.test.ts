/**
 * Range bounds inclusive or exclusive as declared (`@range(fromInclusive, toInclusive)`), over the guide's "Log
 * tail pattern": entries keyed by inverted ticks (newest first). The closed window [from, to] — SQL's BETWEEN —
 * is `rowKeyFrom` at `to`'s ticks and `rowKeyTo` at `from`'s, with `toInclusive: true`; the default bounds
 * (from inclusive, to exclusive) leave out the entry at `from`. Checked against a filter over the same entries,
 * page by page. A bound is a prefix: on a key that goes on after it (`inv_{date}_{id}`), an inclusive end takes every
 * entity whose key starts with it, an exclusive one leaves them all out.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { compileSchema } from '../src/compiler/compile';
import { entityWrites } from '../src/model/entity-codec';
import { loadSchemaSources } from '../src/compiler/load-schema';
import { planEgtBatches, writeEgtBatches } from '../src/write/egt-batches';
import { DIRECTIVES_FILE, startTestServer, type TestServer } from './support/harness';

const SDL = `
type Entry @entity(table: "Entries", partitionKey: "{stream}", rowKey: "e_{at:invertedTicks}") { stream: ID! at: DateTime! note: String }
type PageInfo { hasNextPage: Boolean! hasPreviousPage: Boolean! startCursor: String endCursor: String }
type EntryEdge { cursor: String! node: Entry! }
type EntryConnection { edges: [EntryEdge!]! pageInfo: PageInfo! }
type Invoice @entity(table: "Invoices", partitionKey: "{customer}", rowKey: "inv_{date:invertedTicks}_{id:08}") { customer: ID! date: DateTime! id: ID! note: String }
type InvoiceEdge { cursor: String! node: Invoice! }
type InvoiceConnection { edges: [InvoiceEdge!]! pageInfo: PageInfo! }
type Query {
  "A closed window on a key that goes on after the bound: every invoice of both end days in."
  invoicesBetween(customer: ID!, from: DateTime!, to: DateTime!, first: Int, after: String): InvoiceConnection!
    @range(partitionKey: "{customer}", rowKeyFrom: "inv_{to:invertedTicks}", rowKeyTo: "inv_{from:invertedTicks}", toInclusive: true)
  "Both end days out."
  invoicesInside(customer: ID!, from: DateTime!, to: DateTime!, first: Int, after: String): InvoiceConnection!
    @range(partitionKey: "{customer}", rowKeyFrom: "inv_{to:invertedTicks}", rowKeyTo: "inv_{from:invertedTicks}", fromInclusive: false)
  "SQL's BETWEEN: both ends in."
  between(stream: ID!, from: DateTime!, to: DateTime!, first: Int, after: String): EntryConnection!
    @range(partitionKey: "{stream}", rowKeyFrom: "e_{to:invertedTicks}", rowKeyTo: "e_{from:invertedTicks}", toInclusive: true)
  "The default bounds: the entry at from (the range's upper RowKey) left out."
  halfOpen(stream: ID!, from: DateTime!, to: DateTime!, first: Int, after: String): EntryConnection!
    @range(partitionKey: "{stream}", rowKeyFrom: "e_{to:invertedTicks}", rowKeyTo: "e_{from:invertedTicks}")
  "Both ends out."
  open(stream: ID!, from: DateTime!, to: DateTime!, first: Int, after: String): EntryConnection!
    @range(partitionKey: "{stream}", rowKeyFrom: "e_{to:invertedTicks}", rowKeyTo: "e_{from:invertedTicks}", fromInclusive: false)
}`;

const DAYS = Array.from({ length: 10 }, (_, i) => new Date(Date.UTC(2026, 10, 1 + i, 12)));
let server: TestServer;
let dir: string;

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-log-'));
  fs.copyFileSync(DIRECTIVES_FILE, path.join(dir, 'directives.graphql'));
  fs.writeFileSync(path.join(dir, 'log.graphql'), SDL);
  server = await startTestServer({ TABLEGRAPH_SCHEMA_DIR: dir, TABLEGRAPH_WORKER: 'off' });
  const { model } = compileSchema(loadSchemaSources(dir), { tablePrefix: server.config.tablePrefix });
  const entry = model.entities.get('Entry')!;
  const writes = DAYS.map((at, i) => entityWrites(entry, { stream: 'S', at, note: `day ${i + 1}` }).primary);
  // Three invoices a day, the key going on after the date: inv_<inverted ticks>_<id>.
  const invoice = model.entities.get('Invoice')!;
  writes.push(
    ...DAYS.flatMap((date, i) =>
      [1, 2, 3].map((n) => entityWrites(invoice, { customer: 'C', date, id: String(i * 10 + n), note: `day ${i + 1} #${n}` }).primary),
    ),
  );
  await writeEgtBatches(server.store, planEgtBatches(writes, server.store.target), { concurrency: 1 });
});
afterAll(async () => {
  await server?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Every entry of a field for the window, newest first, read 2 at a time through the cursors. */
async function read(field: string, from: Date, to: Date, owner = 'stream: "S"'): Promise<string[]> {
  const notes: string[] = [];
  let after: string | undefined;
  for (let page = 0; page < 20; page++) {
    const r = await server.query(
      `query($from: DateTime!, $to: DateTime!, $after: String) { ${field}(${owner}, from: $from, to: $to, first: 2, after: $after) { edges { node { note } } pageInfo { hasNextPage endCursor } } }`,
      {
        from: from.toISOString(),
        to: to.toISOString(),
        after,
      },
    );
    expect(r.errors).toBeUndefined();
    expect(r.extensions.cost).toMatchObject({ partitionScans: 0, tableScans: 0, rangeQueries: 1 });
    const conn = r.data[field];
    notes.push(...conn.edges.map((e: any) => e.node.note));
    if (!conn.pageInfo.hasNextPage) return notes;
    after = conn.pageInfo.endCursor;
  }
  throw new Error('more than 20 pages');
}

/** The entries between `from` and `to`, newest first, computed without the store. */
function expected(from: Date, to: Date, fromIn: boolean, toIn: boolean): string[] {
  return DAYS.map((at, i) => ({ at, note: `day ${i + 1}` }))
    .filter(({ at }) => (fromIn ? at >= from : at > from) && (toIn ? at <= to : at < to))
    .reverse()
    .map((e) => e.note);
}

test('a closed window returns what SQL BETWEEN returns, the entries at both ends included', async () => {
  const [from, to] = [DAYS[2], DAYS[5]];
  expect(await read('between', from, to)).toEqual(expected(from, to, true, true));
  expect(await read('between', from, to)).toEqual(['day 6', 'day 5', 'day 4', 'day 3']);
});

test('the default bounds leave out the entry at `from`; fromInclusive: false leaves out the one at `to` too', async () => {
  const [from, to] = [DAYS[2], DAYS[5]];
  expect(await read('halfOpen', from, to)).toEqual(expected(from, to, false, true));
  expect(await read('open', from, to)).toEqual(expected(from, to, false, false));
  expect(await read('open', from, to)).toEqual(['day 5', 'day 4']);
});

test('a bound is a prefix: on a key that goes on after it, an inclusive end takes every entity of that day, an exclusive one none', async () => {
  const notes = (days: number[]) => days.flatMap((d) => [1, 2, 3].map((n) => `day ${d} #${n}`));
  const invoices = async (field: string, from: Date, to: Date) => {
    const read_ = await read(field, from, to, 'customer: "C"');
    return { count: read_.length, notes: new Set(read_) };
  };
  expect(await invoices('invoicesBetween', DAYS[4], DAYS[4])).toEqual({ count: 3, notes: new Set(notes([5])) }); // [d, d]
  expect(await invoices('invoicesBetween', DAYS[0], DAYS[9])).toEqual({ count: 30, notes: new Set(notes([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])) });
  expect(await invoices('invoicesInside', DAYS[2], DAYS[5])).toEqual({ count: 6, notes: new Set(notes([4, 5])) });
});
