/**
 * The fastest GraphQL server a user could write by hand in Node: Fastify + Mercurius with graphql-jit compiling every
 * document from its first run (`jit: 1`), and the resolvers of peer-schema.ts (per-request DataLoaders over
 * `getEntity` and `listEntities`) — a baseline of `npm run bench -- peer` (peer-bench.ts).
 *
 *   PEER_CONNECTION_STRING=… PEER_TABLE=peerbenchDirectory PORT=4102 npx tsx test/bench/mercurius-server.ts
 *
 * Prints `peer serving on <port>` once it listens.
 */
import Fastify from 'fastify';
import mercurius, { type IResolvers } from 'mercurius';
import { peerContext, peerTable, resolvers, typeDefs } from './peer-schema';

async function main(): Promise<void> {
  const table = peerTable();
  const app = Fastify({ logger: false });
  await app.register(mercurius, { schema: typeDefs, resolvers: resolvers as unknown as IResolvers, jit: 1, context: () => peerContext(table) });
  await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' });
  console.log(`peer serving on ${process.env.PORT}`);
  process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
