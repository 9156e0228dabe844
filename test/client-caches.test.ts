/**
 * The normalising caches of the clients a frontend app uses — Apollo Client 3's InMemoryCache and urql's Graphcache —
 * configured by the module the GraphQL Code Generator plugin writes (src/client-cache), against a real server, on a
 * schema written for the test whose ids are unique only within their partition: two libraries each have books 1, 2
 * and 3. With the generated configuration the libraries' books stay apart after queries, `fetchMore` pages and
 * mutations (an update normalised onto its book, a create added and a delete removed by the app's update from the
 * payload's keys, without a refetch); with each client's default cache, keyed by
 * `__typename` and `id`, one library's books show under the other.
 */
import ts from 'typescript';
import { ApolloClient, HttpLink, InMemoryCache, gql, type NormalizedCacheObject } from '@apollo/client/core';
import { Client, fetchExchange, gql as urqlGql } from '@urql/core';
import { cacheExchange, type CacheExchangeOpts, type UpdateResolver } from '@urql/exchange-graphcache';
import { cacheConfigModule } from '../src/cli/codegen-cache-plugin';
import { startSdlServer } from './support/harness';

const SDL = `
type Library @entity(table: "Libraries", partitionKey: "{code}", rowKey: "library") {
  code: ID!
  name: String!
  books(first: Int, after: String): BookConnection! @range(partitionKey: "{code}", rowKeyPrefix: "book_")
}
type Book @entity(table: "Libraries", partitionKey: "{library}", rowKey: "book_{id}") {
  library: ID!
  id: ID!
  title: String!
}
type Query {
  library(code: ID!): Library @point
  book(library: ID!, id: ID!): Book @point
}
type Mutation {
  createLibrary(input: CreateLibraryInput!): LibraryPayload! @write(entity: "Library", action: CREATE)
  createBook(input: CreateBookInput!): BookPayload! @write(entity: "Book", action: CREATE)
  updateBook(input: UpdateBookInput!): BookPayload! @write(entity: "Book", action: UPDATE)
  deleteBook(input: DeleteBookInput!): BookPayload! @write(entity: "Book", action: DELETE)
}
`;

const TITLES: Record<string, string[]> = { north: ['Ice', 'Fjords', 'Auroras'], south: ['Dunes', 'Reefs', 'Savannas'] };

let ctx: Awaited<ReturnType<typeof startSdlServer>>;
beforeAll(async () => {
  ctx = await startSdlServer(SDL, { TABLEGRAPH_AUTH: 'off' });
  for (const [code, titles] of Object.entries(TITLES)) {
    expect((await ctx.server.query(`mutation { createLibrary(input: { code: "${code}", name: "${code}" }) { library { code } } }`)).errors).toBeUndefined();
    for (const [i, title] of titles.entries())
      expect(
        (await ctx.server.query(`mutation { createBook(input: { library: "${code}", id: "${i + 1}", title: "${title}" }) { book { id } } }`)).errors,
      ).toBeUndefined();
  }
}, 60_000);
afterAll(() => ctx?.close());

/** The module the plugin writes for `client`, compiled as a bundler would and evaluated: its exports. */
function generated(client: 'apollo' | 'urql'): Record<string, any> {
  const text = cacheConfigModule({ schemaDir: ctx.dir, client });
  const js = ts.transpileModule(text, { compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022 } }).outputText;
  const module = { exports: {} as Record<string, any> };
  new Function('require', 'module', 'exports', js)(require, module, module.exports);
  return module.exports;
}

const LIBRARY = `query L($code: ID!, $after: String) {
  library(code: $code) { code books(first: 2, after: $after) { edges { node { library id title } } pageInfo { hasNextPage endCursor } } }
}`;
type LibraryData = { library: { books: { edges: { node: { library: string; id: string; title: string } }[]; pageInfo: { endCursor: string } } } };
const shown = (data: LibraryData) => data.library.books.edges.map((e) => `${e.node.library}/${e.node.id} ${e.node.title}`);

describe('Apollo Client', () => {
  const apollo = (cache: InMemoryCache) => new ApolloClient({ link: new HttpLink({ uri: ctx.server.url }), cache });
  const read = async (client: ApolloClient<NormalizedCacheObject>, code: string, fetchPolicy: 'network-only' | 'cache-only') =>
    shown((await client.query<LibraryData>({ query: gql(LIBRARY), variables: { code }, fetchPolicy })).data);

  test('the default cache shows one library’s books under the other (what the generated typePolicies prevent)', async () => {
    const client = apollo(new InMemoryCache());
    expect(await read(client, 'north', 'network-only')).toEqual(['north/1 Ice', 'north/2 Fjords']);
    await read(client, 'south', 'network-only');
    expect(await read(client, 'north', 'cache-only')).toEqual(['south/1 Dunes', 'south/2 Reefs']);
  });

  test('with the generated typePolicies: apart after queries, fetchMore pages appended, a create, an update and a delete shown without a refetch', async () => {
    const { typePolicies, possibleTypes } = generated('apollo');
    expect(typePolicies.Book.keyFields).toEqual(['library', 'id']);
    const client = apollo(new InMemoryCache({ typePolicies, possibleTypes }));
    const north = await client.query<LibraryData>({ query: gql(LIBRARY), variables: { code: 'north' } });
    await read(client, 'south', 'network-only');
    expect(await read(client, 'north', 'cache-only')).toEqual(['north/1 Ice', 'north/2 Fjords']);
    // fetchMore: the next page appended to the library's one list.
    const watched = client.watchQuery<LibraryData>({ query: gql(LIBRARY), variables: { code: 'north' } });
    await new Promise<void>((resolve, reject) => {
      const subscription = watched.subscribe({ next: () => resolve(subscription.unsubscribe()), error: reject });
    });
    await watched.fetchMore({ variables: { after: north.data.library.books.pageInfo.endCursor } });
    expect(await read(client, 'north', 'cache-only')).toEqual(['north/1 Ice', 'north/2 Fjords', 'north/3 Auroras']);
    // A point query by a book's keys answered from the cache: the book the page brought (a cache redirect).
    const book = await client.query({ query: gql('{ book(library: "north", id: "3") { library id title } }'), fetchPolicy: 'cache-only' });
    expect(book.data.book).toEqual({ __typename: 'Book', library: 'north', id: '3', title: 'Auroras' });
    // An update's payload normalises onto the one book it wrote.
    await client.mutate({
      mutation: gql('mutation { updateBook(input: { library: "north", id: "1", title: "Glaciers" }) { book { library id title } } }'),
    });
    // A delete's payload is the book as it was: its keys identify the one to evict.
    await client.mutate({
      mutation: gql('mutation { deleteBook(input: { library: "south", id: "2" }) { book { library id } } }'),
      update: (cache, { data }) => void cache.evict({ id: cache.identify(data.deleteBook.book) }),
    });
    // A create's payload is the book as written: the app adds it to its library's list.
    await client.mutate({
      mutation: gql('mutation { createBook(input: { library: "north", id: "4", title: "Tundra" }) { book { library id title } } }'),
      update: (cache, { data }) => {
        const book = data.createBook.book;
        cache.modify({
          id: cache.identify({ __typename: 'Library', code: book.library }),
          fields: { books: (page, { toReference }) => ({ ...page, edges: [...page.edges, { __typename: 'BookEdge', cursor: '', node: toReference(book) }] }) },
        });
      },
    });
    expect(await read(client, 'north', 'cache-only')).toEqual(['north/1 Glaciers', 'north/2 Fjords', 'north/3 Auroras', 'north/4 Tundra']);
    expect(await read(client, 'south', 'cache-only')).toEqual(['south/1 Dunes']);
    // And the cache holds what the server answers.
    expect(await read(client, 'south', 'network-only')).toEqual(['south/1 Dunes', 'south/3 Savannas']);
    await putBack('mutation { updateBook(input: { library: "north", id: "1", title: "Ice" }) { book { id } } }');
    await putBack('mutation { deleteBook(input: { library: "north", id: "4" }) { book { id } } }');
    await putBack('mutation { createBook(input: { library: "south", id: "2", title: "Reefs" }) { book { id } } }');
  });
});

/** Puts a book back as it was before a test changed it (the tests share the libraries). */
async function putBack(mutation: string): Promise<void> {
  expect((await ctx.server.query(mutation)).errors).toBeUndefined();
}

/**
 * An app's Graphcache update for a delete: the deleted book (its keys, from the payload) unlinked from each page of its
 * library's `books` held in the cache.
 */
const unlinkDeleted: UpdateResolver = (result, _args, cache) => {
  const book = (result as any).deleteBook.book;
  const library = { __typename: 'Library', code: book.library };
  const gone = cache.keyOfEntity(book);
  for (const { fieldKey } of cache.inspectFields(library).filter((f) => f.fieldName === 'books')) {
    const page = cache.resolve(library, fieldKey) as string;
    const edges = ((cache.resolve(page, 'edges') as string[] | null) ?? []).filter((edge) => cache.resolve(edge, 'node') !== gone);
    cache.link(page, 'edges', edges);
  }
};

/** An app's Graphcache update for a create: the book written (the payload) added to its library's list as cached. */
const appendCreated: UpdateResolver = (result, _args, cache) => {
  const book = (result as any).createBook.book;
  cache.updateQuery({ query: urqlGql(LIBRARY), variables: { code: book.library } }, (data: any) => {
    if (data) data.library.books.edges.push({ __typename: 'BookEdge', cursor: '', node: book });
    return data;
  });
};

describe('urql Graphcache', () => {
  // urql sends a query as a GET: with the header that tells the server a browser's form did not send it (docs/frontend.md).
  const urql = (opts: CacheExchangeOpts) =>
    new Client({
      url: ctx.server.url,
      exchanges: [cacheExchange(opts), fetchExchange],
      fetchOptions: { headers: { 'apollo-require-preflight': 'true' } },
    });
  const read = async (client: Client, code: string, requestPolicy: 'network-only' | 'cache-only', after?: string) => {
    const r = await client.query(urqlGql(LIBRARY), { code, ...(after && { after }) }, { requestPolicy }).toPromise();
    expect(r.error).toBeUndefined();
    return r.data as LibraryData;
  };

  test('the default cache shows one library’s books under the other (what the generated keys prevent)', async () => {
    const client = urql({});
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => undefined);
    try {
      await read(client, 'north', 'network-only');
      await read(client, 'south', 'network-only');
      expect(shown(await read(client, 'north', 'cache-only'))).toEqual(['south/1 Dunes', 'south/2 Reefs']);
      // Graphcache warns of the types it cannot key (Library has no `id`), not of the books it keys wrongly.
      expect(warn.mock.calls.map(([text]) => String(text).split('\n')[0])).toContain(
        'Invalid key: The GraphQL query at the field at `Query.library({"code":"north"})` has a selection set, but no key could be generated for the data at this field.',
      );
    } finally {
      warn.mockRestore();
    }
  });

  test('with the generated keys and resolvers: apart after queries, pages appended, a create, an update and a delete shown without a refetch', async () => {
    const { keys, resolvers } = generated('urql');
    const client = urql({ keys, resolvers, updates: { Mutation: { createBook: appendCreated, deleteBook: unlinkDeleted } } });
    const north = await read(client, 'north', 'network-only');
    await read(client, 'south', 'network-only');
    expect(shown(await read(client, 'north', 'cache-only'))).toEqual(['north/1 Ice', 'north/2 Fjords']);
    // relayPagination: the page after the first, read with `after`, is the two pages as one list.
    await read(client, 'north', 'network-only', north.library.books.pageInfo.endCursor);
    expect(shown(await read(client, 'north', 'cache-only'))).toEqual(['north/1 Ice', 'north/2 Fjords', 'north/3 Auroras']);
    const book = await client.query(urqlGql('{ book(library: "north", id: "3") { library id title } }'), {}, { requestPolicy: 'cache-only' }).toPromise();
    expect(book.data.book).toEqual({ library: 'north', id: '3', title: 'Auroras' });
    const mutate = async (text: string) => expect((await client.mutation(urqlGql(text), {}).toPromise()).error).toBeUndefined();
    await mutate('mutation { updateBook(input: { library: "south", id: "1", title: "Deserts" }) { book { library id title } } }');
    await mutate('mutation { deleteBook(input: { library: "north", id: "2" }) { book { library id } } }');
    await mutate('mutation { createBook(input: { library: "south", id: "4", title: "Steppes" }) { book { library id title } } }');
    expect(shown(await read(client, 'south', 'cache-only'))).toEqual(['south/1 Deserts', 'south/2 Reefs', 'south/4 Steppes']);
    expect(shown(await read(client, 'north', 'cache-only'))).toEqual(['north/1 Ice', 'north/3 Auroras']);
    expect(shown(await read(client, 'north', 'network-only'))).toEqual(['north/1 Ice', 'north/3 Auroras']);
    await putBack('mutation { updateBook(input: { library: "south", id: "1", title: "Dunes" }) { book { id } } }');
    await putBack('mutation { deleteBook(input: { library: "south", id: "4" }) { book { id } } }');
    await putBack('mutation { createBook(input: { library: "north", id: "2", title: "Fjords" }) { book { id } } }');
  });
});
