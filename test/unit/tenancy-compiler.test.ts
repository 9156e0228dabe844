/**
 * What the compiler makes of `@tenancy` and `@global` (src/compiler/tenant-isolation.ts, src/model/tenancy.ts), on
 * schemas written for this test: every PartitionKey of a tenant-scoped type — entities, index entities, paths,
 * subscriptions — starts with the tenant, bound to the token at the root and to the parent's own below it; and every
 * schema where something could reach another tenant is refused, with the coordinate and the line of the SDL.
 */
import { readFileSync } from 'node:fs';
import { compileSchema } from '../../src/compiler/compile';
import { renderKey } from '../../src/model/key-template';
import { tenantOfClaims, tenantPartitionRange } from '../../src/model/tenancy';
import { DIRECTIVES_FILE } from '../support/harness';
import { lineOf, schemaProblems } from '../support/schema-problems';

const DIRECTIVES = { name: 'schema/directives.graphql', body: readFileSync(DIRECTIVES_FILE, 'utf8') };
const compile = (sdl: string) => compileSchema([DIRECTIVES, { name: 'tenants.graphql', body: sdl }]);

const TENANCY = 'extend schema @tenancy(claim: "org")\n';
const BOOKS = `
type Shelf @entity(table: "Library", partitionKey: "shelf_{shelfId}", rowKey: "shelf") {
  shelfId: ID!
  label: String!
  bookCount: Int! @summary(of: "Book", via: "shelf", count: true)
  books(first: Int, after: String): BookConnection! @range(partitionKey: "shelf_{shelfId}", rowKeyPrefix: "book_")
}
type Book @entity(table: "Library", partitionKey: "shelf_{shelfId}", rowKey: "book_{isbn}")
  @index(name: "byAuthor", table: "BooksByAuthor", partitionKey: "author_{author}", rowKey: "{isbn}") {
  shelfId: ID!
  isbn: ID!
  author: String!
  shelf: Shelf! @point(partitionKey: "shelf_{shelfId}", rowKey: "shelf")
}
type Query {
  shelf(shelfId: ID!): Shelf @point
  booksBy(author: String!, first: Int, after: String): BookConnection! @range(index: "byAuthor", partitionKey: "author_{author}")
}
type Mutation {
  addBook(input: CreateBookInput!): BookPayload! @write(entity: "Book", action: CREATE)
}
type Subscription {
  shelfChanged(shelfId: ID!): BookChange! @subscribe(entity: "Book")
}
`;

/** The problems (coordinate, message, line) compiling `sdl` is refused with. */
const problems = (sdl: string) => schemaProblems(() => compile(sdl));

test('every PartitionKey of a tenant-scoped type starts with the tenant; the root binds it to the token, a field to its parent', () => {
  const { model, schema } = compile(TENANCY + BOOKS);
  expect(model.tenancy).toMatchObject({ claim: 'org', isolation: 'PARTITION_PREFIX' });
  const book = model.entities.get('Book')!;
  expect(book.tenantScoped).toBe(true);
  expect(book.keyFields).toEqual(['_tenant', 'shelfId', 'isbn']);
  expect(book.layout.partitionKey.source).toBe('{_tenant}_shelf_{shelfId}');
  expect(book.indexes.get('byAuthor')!.layout.partitionKey.source).toBe('{_tenant}_author_{author}');
  expect(renderKey(book.layout.partitionKey, { _tenant: 'acme', shelfId: 'a' })).toBe('acme_shelf_a');
  const root = model.accessPaths.get('Query.booksBy')!;
  expect(root.partitionKey.bindings.get('_tenant')).toEqual({ source: 'tenant', name: '_tenant' });
  expect(model.accessPaths.get('Shelf.books')!.partitionKey.bindings.get('_tenant')).toEqual({ source: 'parent', name: '_tenant' });
  expect(model.accessPaths.get('Book.shelf')!.partitionKey.bindings.get('_tenant')).toEqual({ source: 'parent', name: '_tenant' });
  // The tenant is nowhere in the served schema: no field, no input, no argument.
  expect(Object.keys(schema.getTypeMap()).flatMap((n) => Object.keys((schema.getType(n) as { getFields?: () => object }).getFields?.() ?? {}))).not.toContain(
    '_tenant',
  );
  expect(model.subscriptions.get('Subscription.shelfChanged')).toBeDefined();
});

test('without @tenancy nothing changes: no hidden field, the PartitionKeys as written', () => {
  const { model } = compile(BOOKS);
  expect(model.tenancy).toBeUndefined();
  expect(model.entities.get('Book')!.layout.partitionKey.source).toBe('shelf_{shelfId}');
  expect(model.entities.get('Book')!.keyFields).toEqual(['shelfId', 'isbn']);
});

describe('refused, with where', () => {
  const GENRE = `type Genre @global @entity(table: "Genres", partitionKey: "genres", rowKey: "{name}") {
  name: ID!
  shelfId: ID!
  topShelf: Shelf @point(partitionKey: "shelf_{shelfId}", rowKey: "shelf")
}
`;
  test('a @global type with a field that reaches a tenant-scoped type', () => {
    const sdl = TENANCY + BOOKS + GENRE;
    const found = problems(sdl);
    expect(found).toContainEqual({
      coordinate: 'Genre.topShelf',
      message: expect.stringMatching(/Genre is @global and its target is tenant-scoped/),
      line: lineOf(sdl, 'topShelf: Shelf'),
    });
  });

  test('a summary held by a @global type over tenant-scoped entities', () => {
    const sdl = `${TENANCY}${BOOKS}
type Stats @global @entity(table: "Stats", partitionKey: "stats", rowKey: "{author}") {
  author: ID!
  books: Int! @summary(of: "Book", via: "stats", count: true)
}
extend type Book { statsAuthor: ID! stats: Stats! @point(partitionKey: "stats", rowKey: "{statsAuthor}") }
`;
    const found = problems(sdl);
    expect(found.some((p) => p.coordinate === 'Stats.books' && /Stats is @global and Book is tenant-scoped/.test(p.message))).toBe(true);
  });

  test('a table shared by a @global and a tenant-scoped type', () => {
    const sdl = `${TENANCY}${BOOKS}
type Note @global @entity(table: "Library", partitionKey: "notes", rowKey: "note_{id}") { id: ID! }
`;
    expect(problems(sdl)).toContainEqual({
      coordinate: 'Note',
      message: expect.stringMatching(/shares table Library with Shelf, which is tenant-scoped/),
      line: lineOf(sdl, '@entity(table: "Library", partitionKey: "notes"'),
    });
  });

  test('an argument or an input field that names the tenant', () => {
    const sdl = `${TENANCY}${BOOKS}
extend type Query { shelfOf(shelfId: ID!, _tenant: String): Shelf @point(partitionKey: "shelf_{shelfId}", rowKey: "shelf") }
input AddShelfInput { shelfId: ID! label: String! _tenant: String }
extend type Mutation { addShelf(input: AddShelfInput!): ShelfPayload! @write(entity: "Shelf", action: CREATE) }
`;
    const found = problems(sdl);
    expect(found).toContainEqual({
      coordinate: 'Query.shelfOf(_tenant:)',
      message: expect.stringMatching(/never from an argument/),
      line: lineOf(sdl, '_tenant: String): Shelf'),
    });
    expect(found).toContainEqual({
      coordinate: 'Mutation.addShelf',
      message: expect.stringMatching(/AddShelfInput._tenant: the tenant comes from the caller's token/),
      line: expect.any(Number),
    });
  });

  test('a default tier TABLE with a table name too long for a tenant suffix, a @global without @tenancy, a field named _tenant', () => {
    const table = compile('extend schema @tenancy(claim: "org", isolation: TABLE)\n' + BOOKS).model;
    expect(table.tenancy?.isolation).toBe('TABLE');
    const long = 'Shelves'.padEnd(51, 'x');
    expect(problems('extend schema @tenancy(claim: "org", isolation: TABLE)\n' + BOOKS.replace(/table: "(\w+)"/, `table: "${long}"`))).toContainEqual({
      coordinate: 'schema',
      message: expect.stringMatching(new RegExp(`table ${long} is too long for a tenant's own \\(50 characters at most`)),
      line: 1,
    });
    expect(problems(BOOKS + 'type G @global @entity(table: "G", partitionKey: "g", rowKey: "{id}") { id: ID! }\n')).toContainEqual({
      coordinate: 'G',
      message: expect.stringMatching(/the schema has no @tenancy/),
      line: lineOf(BOOKS + 'type G', 'type G'),
    });
    expect(problems(TENANCY + BOOKS.replace('label: String!', 'label: String!\n  _tenant: String!'))).toContainEqual({
      coordinate: 'Shelf._tenant',
      message: expect.stringMatching(/reserved property name/),
      line: expect.any(Number),
    });
  });

  test('a move from a tenant-scoped type into a @global one', () => {
    const sdl = `${TENANCY}${BOOKS}
type Archived @global @entity(table: "Archive", partitionKey: "shelf_{shelfId}", rowKey: "book_{isbn}") { shelfId: ID! isbn: ID! author: String! }
extend type Mutation { archiveBook(input: MoveBookInput!): BookPayload! @write(entity: "Book", action: MOVE, to: "Archived") }
`;
    expect(problems(sdl)).toContainEqual({
      coordinate: 'Mutation.archiveBook',
      message: expect.stringMatching(/would take entities out of their tenant/),
      line: expect.any(Number),
    });
  });
});

test('a tenant id is the claim as given, lowercase letters, digits and hyphens: anything else is refused with why', () => {
  expect(tenantOfClaims({ org: '72f988bf-86f1-41af-91ab-2d7cd011db47' }, 'org')).toEqual({ tenant: '72f988bf-86f1-41af-91ab-2d7cd011db47' });
  for (const bad of ['', 'Acme', 'a_b', 'a b', 'x'.repeat(64), 7, null, ['acme']]) {
    expect(tenantOfClaims({ org: bad }, 'org')).toEqual({ why: expect.stringMatching(/org claim/) });
  }
  // One tenant's key range holds none of another's, even when one id starts with the other.
  const [a, ab] = [tenantPartitionRange('a'), tenantPartitionRange('a-b')];
  expect('a-b_shelf_1' >= a.from && 'a-b_shelf_1' < a.to).toBe(false);
  expect('a_shelf_1' >= ab.from && 'a_shelf_1' < ab.to).toBe(false);
  expect('a_shelf_1' >= a.from && 'a_shelf_1' < a.to).toBe(true);
});
