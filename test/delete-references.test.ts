/**
 * A delete never leaves a non-null reference pointing at nothing (src/compiler/build-dependents.ts), on a schema
 * written for the test — a music store: customers, their invoices and invoice lines in the customer's partition, and
 * a catalogue of tracks the lines point at (through an index of lines by track, which also keeps each line's copy of
 * its track's name):
 * - `InvoiceLine.track` is RESTRICT (the default): a track with lines cannot be deleted (CONFLICT, HasReferrers,
 *   naming the reference), found through `Track.sales`;
 * - `Invoice.customer` is RESTRICT, told by the customer's count of invoices (HasDependents);
 * - `InvoiceLine.invoice` is `onDelete: CASCADE`: an invoice's delete is acknowledged at once (it reads as gone, a
 *   tombstone holding its address so that it cannot be created again meanwhile), and the worker deletes its lines
 *   through the write path, the customer's total spent following; then the tombstone goes.
 * Under redelivered, late and reversed messages, two workers that die mid-message, writers changing the lines while
 * they are deleted, a delete and re-create of one invoice, and storage that throttles or applies a write and loses
 * its answer: every write acknowledged if and only if stored, the summaries equal to a recount, `verify` clean.
 */
import fs from 'node:fs';
import { compileSchema } from '../src/compiler/compile';
import { formatVerifyReport, verifyDerived } from '../src/maintenance/verify-derived';
import { DIRECTIVES_FILE, testQueues, testStore, uniquePrefix } from './support/harness';
import { drainWithRedelivery, queueWriter, seededRng, useSdlWorld } from './support/fanout-fixtures';
import { startProxiedServer } from './support/proxied-server';
import { testSeed } from './support/seed';

const SDL = `
type Customer @entity(table: "Store", partitionKey: "{customerId}", rowKey: "customer") {
  etag: String!
  customerId: ID!
  name: String!
  invoiceCount: Int! @summary(of: "Invoice", via: "customer", count: true)
  spent: Decimal! @summary(of: "InvoiceLine", via: "customer", sum: ["amount"])
  invoices(first: Int, after: String): InvoiceConnection! @range(partitionKey: "{customerId}", rowKeyPrefix: "invoice_")
  lines(first: Int, after: String): InvoiceLineConnection! @range(partitionKey: "{customerId}", rowKeyPrefix: "line_")
}
type Invoice @entity(table: "Store", partitionKey: "{customerId}", rowKey: "invoice_{id:06}") {
  etag: String!
  customerId: ID!
  id: Int!
  lineCount: Int! @summary(of: "InvoiceLine", via: "invoice", count: true)
  total: Decimal! @summary(of: "InvoiceLine", via: "invoice", sum: ["amount"])
  customer: Customer! @point(partitionKey: "{customerId}", rowKey: "customer")
  lines(first: Int, after: String): InvoiceLineConnection! @range(partitionKey: "{customerId}", rowKeyPrefix: "line_{id:06}_")
}
type InvoiceLine @entity(table: "Store", partitionKey: "{customerId}", rowKey: "line_{invoiceId:06}_{lineId:03}")
  @index(name: "byTrack", table: "LinesByTrack", partitionKey: "{trackId}", rowKey: "sale_{customerId}_{invoiceId:06}_{lineId:03}") {
  etag: String!
  customerId: ID!
  invoiceId: Int!
  lineId: Int!
  trackId: ID!
  amount: Decimal!
  trackName: String @copy(from: "track", field: "name")
  invoice: Invoice! @point(partitionKey: "{customerId}", rowKey: "invoice_{invoiceId:06}", onDelete: CASCADE)
  customer: Customer! @point(partitionKey: "{customerId}", rowKey: "customer")
  track: Track! @point(partitionKey: "tracks", rowKey: "track_{trackId}")
}
type Track @entity(table: "Catalog", partitionKey: "tracks", rowKey: "track_{id}") {
  etag: String!
  id: ID!
  name: String!
  sales(first: Int, after: String): InvoiceLineConnection! @range(index: "byTrack", partitionKey: "{id}", rowKeyPrefix: "sale_")
}
type Query {
  customer(customerId: ID!): Customer @point
  invoice(customerId: ID!, id: Int!): Invoice @point
  track(id: ID!): Track @point
}
type Mutation {
  createCustomer(input: CreateCustomerInput!): CustomerPayload! @write(entity: "Customer", action: CREATE)
  deleteCustomer(input: DeleteCustomerInput!): CustomerPayload! @write(entity: "Customer", action: DELETE)
  createInvoice(input: CreateInvoiceInput!): InvoicePayload! @write(entity: "Invoice", action: CREATE)
  deleteInvoice(input: DeleteInvoiceInput!): InvoicePayload! @write(entity: "Invoice", action: DELETE)
  createLine(input: CreateInvoiceLineInput!): InvoiceLinePayload! @write(entity: "InvoiceLine", action: CREATE)
  updateLine(input: UpdateInvoiceLineInput!): InvoiceLinePayload! @write(entity: "InvoiceLine", action: UPDATE)
  createTrack(input: CreateTrackInput!): TrackPayload! @write(entity: "Track", action: CREATE)
  deleteTrack(input: DeleteTrackInput!): TrackPayload! @write(entity: "Track", action: DELETE)
}`;

const world = useSdlWorld(SDL);
const { ok, drain } = world;

async function attempt(mutation: string, input: Record<string, unknown>): Promise<{ code?: string; reason?: string; reference?: string; message?: string }> {
  const type = {
    deleteTrack: 'DeleteTrackInput',
    deleteCustomer: 'DeleteCustomerInput',
    deleteInvoice: 'DeleteInvoiceInput',
    createInvoice: 'CreateInvoiceInput',
    createLine: 'CreateInvoiceLineInput',
    updateLine: 'UpdateInvoiceLineInput',
  }[mutation];
  const r = await world.server.query(`mutation($input: ${type}!) { ${mutation}(input: $input) { __typename } }`, { input });
  const e = r.errors?.[0];
  return { code: e?.extensions?.code, reason: e?.extensions?.reason, reference: e?.extensions?.reference, message: e?.message };
}

/** A customer's summaries as stored, and as a recount of its lines and invoices gives them. */
async function customerTotals(customerId: string) {
  const r = await world.server.query(
    'query($c: ID!) { customer(customerId: $c) { invoiceCount spent invoices(first: 100) { edges { node { id } } } lines(first: 100) { edges { node { amount } } } } }',
    {
      c: customerId,
    },
  );
  expect(r.errors).toBeUndefined();
  const c = r.data.customer;
  // In cents: Decimal sums are exact, JS numbers are not.
  const recount = c.lines.edges.reduce((n: number, e: any) => n + Math.round(Number(e.node.amount) * 100), 0);
  return { stored: { invoices: c.invoiceCount, cents: Math.round(Number(c.spent) * 100) }, recounted: { invoices: c.invoices.edges.length, cents: recount } };
}

test('RESTRICT refuses, CASCADE deletes through the worker: under redelivery, kills, concurrent writers and a re-create; verify clean', async () => {
  const seed = testSeed();
  const rng = seededRng(seed);
  const random = () => rng.int(0x7fffffff) / 0x7fffffff;
  await ok('createCustomer', 'CreateCustomerInput', { customerId: 'c1', name: 'Ana' });
  for (const id of ['t1', 't2', 't3']) await ok('createTrack', 'CreateTrackInput', { id, name: `Song ${id}` });
  const lines: Array<[number, number, string, string]> = [
    [1, 1, 't1', '0.99'],
    [1, 2, 't2', '1.29'],
    [2, 1, 't1', '0.99'],
    [2, 2, 't3', '0.89'],
    [2, 3, 't1', '0.99'],
    [3, 1, 't3', '0.89'],
  ];
  for (const id of [1, 2, 3]) await ok('createInvoice', 'CreateInvoiceInput', { customerId: 'c1', id });
  for (const [invoiceId, lineId, trackId, amount] of lines)
    await ok('createLine', 'CreateInvoiceLineInput', { customerId: 'c1', invoiceId, lineId, trackId, amount });
  await drain(random);

  // RESTRICT: found through Track.sales (an index), told by the count of invoices.
  const track = await attempt('deleteTrack', { id: 't3' });
  // The reference that refused it, for a client to switch on without reading the message.
  expect(track).toMatchObject({ code: 'CONFLICT', reason: 'HasReferrers', reference: 'InvoiceLine.track' });
  expect(track.message).toMatch(/still pointed at by InvoiceLine\.track \(customerId: "c1", invoiceId: \d+, lineId: \d+\)/);
  expect(await attempt('deleteCustomer', { customerId: 'c1' })).toMatchObject({ code: 'CONFLICT', reason: 'HasDependents' });
  expect((await world.server.query('{ track(id: "t3") { name } }')).data.track).toEqual({ name: 'Song t3' });

  // CASCADE: invoice 2 reads as gone at once; it cannot be created again, nor given a line, until its lines are gone.
  await ok('deleteInvoice', 'DeleteInvoiceInput', { customerId: 'c1', id: 2 });
  expect((await world.server.query('{ invoice(customerId: "c1", id: 2) { id } }')).data.invoice).toBeNull();
  expect(await attempt('createInvoice', { customerId: 'c1', id: 2 })).toMatchObject({ code: 'CONFLICT', reason: 'DeletePending' });
  expect(await attempt('createLine', { customerId: 'c1', invoiceId: 2, lineId: 9, trackId: 't1', amount: '5' })).toMatchObject({
    code: 'NOT_FOUND',
    reason: expect.stringMatching(/^(SummaryHolderMissing|ReferenceMissing)$/),
  });
  // Writers change the lines while the worker deletes them: each write is refused, or lands before its line goes.
  const changed = await Promise.all([1, 2, 3].map((lineId) => attempt('updateLine', { customerId: 'c1', invoiceId: 2, lineId, amount: '2.00' })));
  for (const c of changed) if (c.code) expect(c.code).toMatch(/^(NOT_FOUND|CONFLICT)$/);
  const { messages, killed } = await drain(random);
  const left = await world.server.query('{ customer(customerId: "c1") { lines(first: 100) { edges { node { invoiceId lineId trackName } } } } }');
  expect(left.data.customer.lines.edges.map((e: any) => `${e.node.invoiceId}/${e.node.lineId}`)).toEqual(['1/1', '1/2', '3/1']);
  const totals = await customerTotals('c1');
  expect(totals.stored).toEqual(totals.recounted);
  expect(totals.stored).toEqual({ invoices: 2, cents: 99 + 129 + 89 });

  // The tombstone gone, invoice 2 is created again, empty: none of the old lines came back to it.
  await ok('createInvoice', 'CreateInvoiceInput', { customerId: 'c1', id: 2 });
  const again = await world.server.query('{ invoice(customerId: "c1", id: 2) { lineCount total lines { edges { node { lineId } } } } }');
  expect(again.data.invoice).toEqual({ lineCount: 0, total: '0', lines: { edges: [] } });

  // Deleted and created again before the worker ran: the re-create waits for the cascade, and then keeps nothing old.
  await ok('deleteInvoice', 'DeleteInvoiceInput', { customerId: 'c1', id: 3 });
  expect(await attempt('createInvoice', { customerId: 'c1', id: 3 })).toMatchObject({ reason: 'DeletePending' });
  await drain(random);
  await ok('createInvoice', 'CreateInvoiceInput', { customerId: 'c1', id: 3 });
  expect((await world.server.query('{ invoice(customerId: "c1", id: 3) { lineCount } }')).data.invoice).toEqual({ lineCount: 0 });

  // Track t3 has no line left: it goes. verify is clean.
  await ok('deleteTrack', 'DeleteTrackInput', { id: 't3' });
  await drain(random);
  const report = await verifyDerived({ store: world.server.store, model: world.model });
  if (!report.ok) console.log(formatVerifyReport(report));
  expect(report.problems).toBe(0);
  console.log(`delete references seed ${seed}: ${messages} messages delivered twice and late, ${killed} deliveries killed mid-message`);
}, 120_000);

describe('the compiler', () => {
  const directives = { name: 'directives.graphql', body: fs.readFileSync(DIRECTIVES_FILE, 'utf8') };
  const compile = (sdl: string) => () => compileSchema([directives, { name: 'store.graphql', body: sdl }]);

  test('a non-null reference to a type that can be deleted needs a way to find what points at it', () => {
    const without = SDL.replace(/\n {2}sales\(first: Int[^\n]*/, '').replace(/\n {2}trackName: String @copy[^\n]*/, '');
    expect(compile(without)).toThrow(
      /InvoiceLine\.track \(store\.graphql:\d+:\d+\): a Track can be deleted while InvoiceLine entities point at it, and this reference is non-null: declare a @range of Track over InvoiceLine/,
    );
    // Nullable, it may point at nothing: it then reads null.
    expect(compile(without.replace('track: Track! @point', 'track: Track @point'))).not.toThrow();
  });

  test('CASCADE needs the range; a cascade may not stop at a RESTRICT; a wide target cannot hold a tombstone', () => {
    expect(
      compile(
        SDL.replace(/\n {2}lines\(first: Int[^\n]*\n {2}lines/, '\n  lines').replace(
          /\n {2}lines\(first: Int, after: String\): InvoiceLineConnection! @range\(partitionKey: "\{customerId\}", rowKeyPrefix: "line_\{id:06\}_"\)/,
          '',
        ),
      ),
    ).toThrow(
      /InvoiceLine\.invoice .*onDelete: CASCADE deletes the InvoiceLine entities pointing at a deleted Invoice, found through a @range of Invoice over InvoiceLine/,
    );
    const stopped = SDL.replace(
      'type Query {',
      `type Refund @entity(table: "Store", partitionKey: "{customerId}", rowKey: "refund_{invoiceId:06}_{lineId:03}") {
  customerId: ID! invoiceId: Int! lineId: Int!
  line: InvoiceLine! @point(partitionKey: "{customerId}", rowKey: "line_{invoiceId:06}_{lineId:03}")
}
type Query {`,
    ).replace(
      'trackName: String @copy(from: "track", field: "name")',
      'trackName: String @copy(from: "track", field: "name")\n  refunds(first: Int, after: String): RefundConnection! @range(partitionKey: "{customerId}", rowKeyPrefix: "refund_{invoiceId:06}_{lineId:03}")',
    );
    expect(compile(stopped)).toThrow(
      /Refund\.line .*InvoiceLine entities are deleted with their Invoice \(InvoiceLine\.invoice: onDelete: CASCADE\), and this reference \(RESTRICT\) would stop that half-way/,
    );
    expect(
      compile(
        stopped.replace(
          'line: InvoiceLine! @point(partitionKey: "{customerId}", rowKey: "line_{invoiceId:06}_{lineId:03}")',
          'line: InvoiceLine! @point(partitionKey: "{customerId}", rowKey: "line_{invoiceId:06}_{lineId:03}", onDelete: CASCADE)',
        ),
      ),
    ).not.toThrow();
  });
});

test('deletes that cascade, under storage that throttles and loses answers: acknowledged if and only if done, verify clean after', async () => {
  const seed = testSeed();
  const proxied = await startProxiedServer(SDL, { seed, prefix: uniquePrefix(), env: { TABLEGRAPH_WORKER: 'off' } });
  const { proxy, ctx } = proxied;
  try {
    const run = async (mutation: string, type: string, input: Record<string, unknown>) => {
      const r = await ctx.server.query(`mutation($input: ${type}!) { ${mutation}(input: $input) { __typename } }`, { input });
      return r.errors?.[0]?.extensions?.code as string | undefined;
    };
    expect(await run('createCustomer', 'CreateCustomerInput', { customerId: 'f', name: 'F' })).toBeUndefined();
    expect(await run('createTrack', 'CreateTrackInput', { id: 't', name: 'T' })).toBeUndefined();
    for (let id = 1; id <= 20; id++) {
      expect(await run('createInvoice', 'CreateInvoiceInput', { customerId: 'f', id })).toBeUndefined();
      for (let lineId = 1; lineId <= 3; lineId++)
        expect(await run('createLine', 'CreateInvoiceLineInput', { customerId: 'f', invoiceId: id, lineId, trackId: 't', amount: '1' })).toBeUndefined();
    }
    proxy.setFaults({ busy: 0.1, throttled: 0.1, timedOutAfterApply: 0.1, resetAfterApply: 0.1 });
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => run('deleteInvoice', 'DeleteInvoiceInput', { customerId: 'f', id: i + 1 })));
    proxy.setFaults({});
    for (const code of answers) if (code) expect(code).toMatch(/^(STORAGE_BUSY|STORAGE_UNAVAILABLE)$/);
    // Acknowledged if and only if the invoice is gone (a tombstone, or nothing, at its address).
    const writer = queueWriter(ctx.model, ctx.server);
    await drainWithRedelivery(
      { model: ctx.model, store: ctx.server.store, writer, queues: testQueues(), tablePrefix: ctx.server.config.tablePrefix },
      () => 0.5,
    );
    for (let id = 1; id <= 20; id++) {
      const r = await ctx.server.query('query($id: Int!) { invoice(customerId: "f", id: $id) { lineCount } }', { id });
      // Refused: not deleted, its lines there (a lost answer is read back: applied, it is acknowledged).
      expect([id, r.data.invoice === null]).toEqual([id, answers[id - 1] === undefined]);
      if (r.data.invoice) expect(r.data.invoice.lineCount).toBe(3);
    }
    const r = await ctx.server.query(
      '{ customer(customerId: "f") { invoiceCount spent invoices(first: 100) { edges { node { id } } } lines(first: 100) { edges { node { invoiceId } } } } }',
    );
    const c = r.data.customer;
    expect(c.invoiceCount).toBe(c.invoices.edges.length);
    expect(Number(c.spent)).toBe(c.lines.edges.length);
    // Every line left belongs to an invoice left.
    const invoices = new Set(c.invoices.edges.map((e: any) => e.node.id));
    expect(c.lines.edges.filter((e: any) => !invoices.has(e.node.invoiceId))).toEqual([]);
    const report = await verifyDerived({ store: testStore(), model: ctx.model });
    if (!report.ok) console.log(formatVerifyReport(report));
    expect(report.problems).toBe(0);
    console.log(
      `cascading deletes under faults (seed ${seed}): ${JSON.stringify(answers.map((a) => a ?? 'ok'))}; injected ${JSON.stringify(proxy.injected())}`,
    );
  } finally {
    await proxied.close();
  }
}, 120_000);
