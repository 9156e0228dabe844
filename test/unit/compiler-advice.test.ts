/**
 * What the compiler tells a schema's author is true for the schema it is given: a suggestion, applied, compiles (or
 * is not offered), and every refusal carries its file:line:column — in a subgraph's schema too, which
 * `@apollo/subgraph` builds with nodes of its own. Schemas written for this test: a record shop's tracks and invoice
 * lines, and a product with a value object.
 */
import { compileSchema } from '../../src/compiler/compile';
import { lineOf, schemaProblems } from '../support/schema-problems';

const compile = (sdl: string) => () => compileSchema([{ name: 'shop.graphql', body: sdl }]);

/** Tracks that can be deleted (and, with `move`, moved), and invoice lines that point at them with no way to find them. */
const shop = (opts: { move: boolean; extra?: string }) => `
type Track @entity(table: "Tracks", partitionKey: "album_{albumId}", rowKey: "track_{id}") {
  albumId: ID!
  id: ID!
  name: String!
  ${opts.extra ?? ''}
}
type InvoiceLine @entity(table: "Invoices", partitionKey: "invoice_{invoiceId}", rowKey: "line_{id}") {
  invoiceId: ID!
  id: ID!
  albumId: ID!
  trackId: ID!
  track: Track! @point(partitionKey: "album_{albumId}", rowKey: "track_{trackId}")
}
type Query {
  track(albumId: ID!, id: ID!): Track @point
  line(invoiceId: ID!, id: ID!): InvoiceLine @point
}
type Mutation {
  createTrack(input: CreateTrackInput!): TrackPayload! @write(entity: "Track", action: CREATE)
  deleteTrack(input: DeleteTrackInput!): TrackPayload! @write(entity: "Track", action: DELETE)
  ${opts.move ? 'moveTrack(input: MoveTrackInput!): TrackPayload! @write(entity: "Track", action: MOVE, to: "Track")' : ''}
  createLine(input: CreateInvoiceLineInput!): InvoiceLinePayload! @write(entity: "InvoiceLine", action: CREATE)
}
`;

/** The `@summary(...)` the refusal suggests, as a field to add to Track; undefined when it suggests none. */
const suggestedCount = (message: string) => /count them on Track \((@summary\([^)]*\))\)/.exec(message)?.[1];

test('a count of the referrers is suggested where it compiles, and then it does', () => {
  const [problem] = schemaProblems(compile(shop({ move: false })));
  expect(problem.coordinate).toBe('InvoiceLine.track');
  const count = suggestedCount(problem.message);
  expect(count).toBe('@summary(of: "InvoiceLine", via: "track", count: true)');
  expect(compile(shop({ move: false, extra: `lineCount: Int! ${count}` }))).not.toThrow();
});

test('a type that moves cannot hold a count: none is suggested, and the suggestion left compiles', () => {
  const [problem] = schemaProblems(compile(shop({ move: true })));
  expect(problem.coordinate).toBe('InvoiceLine.track');
  expect(suggestedCount(problem.message)).toBeUndefined();
  expect(problem.message).toMatch(/declare a @range of Track over InvoiceLine/);
  // What a count would meet: the move's refusal.
  expect(schemaProblems(compile(shop({ move: true, extra: 'lineCount: Int! @summary(of: "InvoiceLine", via: "track", count: true)' })))).toEqual([
    expect.objectContaining({ coordinate: 'Mutation.moveTrack', message: expect.stringMatching(/moving it would leave what they count behind/) }),
  ]);
  // The range it does suggest compiles, move and all.
  const ranged = shop({
    move: true,
    extra: 'lines(first: Int, after: String): InvoiceLineConnection! @range(index: "byTrack", partitionKey: "track_{albumId}_{id}")',
  }).replace(
    'type InvoiceLine @entity(table: "Invoices", partitionKey: "invoice_{invoiceId}", rowKey: "line_{id}")',
    'type InvoiceLine @entity(table: "Invoices", partitionKey: "invoice_{invoiceId}", rowKey: "line_{id}")\n  @index(name: "byTrack", table: "LinesByTrack", partitionKey: "track_{albumId}_{trackId}", rowKey: "{invoiceId}_{id}")',
  );
  expect(compile(ranged)).not.toThrow();
});

describe('every refusal has its file:line:column', () => {
  const product = (federated: boolean) => `
${federated ? 'extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key"])\n' : ''}type Product @entity(table: "Products", partitionKey: "products", rowKey: "{id}")${federated ? ' @key(fields: "id")' : ''} {
  id: ID!
  dimensions: ProductDimension
}
type ProductDimension {
  width: Int
  height: [[Int]]
}
type Query {
  product(id: ID!): Product @point(partitionKey: "products")
}
`;
  test.each([false, true])('federated: %s', (federated) => {
    const sdl = product(federated);
    expect(schemaProblems(compile(sdl))).toEqual([
      // A value object (an object type without @entity that an entity holds) is checked field by field.
      { coordinate: 'ProductDimension.height', message: expect.stringMatching(/holds non-null elements/), line: lineOf(sdl, 'height:') },
    ]);
  });
});
