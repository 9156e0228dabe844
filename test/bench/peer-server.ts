/**
 * The server a user would write by hand instead of adopting tablegraph: Apollo Server 5 with `startStandaloneServer`
 * and the resolvers of peer-schema.ts (per-request DataLoaders over `getEntity` and `listEntities`) — a baseline of
 * `npm run bench -- peer` (peer-bench.ts). It serves the HR example's employees from the same table the benchmark's
 * tablegraph server reads.
 *
 *   PEER_CONNECTION_STRING=… PEER_TABLE=peerbenchDirectory PORT=4100 npx tsx test/bench/peer-server.ts
 *
 * Prints `peer serving on <url>` once it listens.
 */
import { ApolloServer } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { peerContext, peerTable, resolvers, typeDefs, type PeerContext } from './peer-schema';

async function main(): Promise<void> {
  const table = peerTable();
  const server = new ApolloServer<PeerContext>({ typeDefs, resolvers });
  const { url } = await startStandaloneServer(server, {
    listen: { port: Number(process.env.PORT), host: '127.0.0.1' },
    context: async () => peerContext(table),
  });
  console.log(`peer serving on ${url}`);
  process.on('SIGTERM', () => void server.stop().then(() => process.exit(0)));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
