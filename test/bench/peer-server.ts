/**
 * The server a user would write by hand instead of adopting tablegraph: Apollo Server 5 with `startStandaloneServer`,
 * one resolver, a per-request DataLoader over `TableClient.getEntity` — the baseline of `npm run bench -- peer`
 * (peer-bench.ts). It serves the HR example's employees from the same table the benchmark's tablegraph server reads.
 *
 *   PEER_CONNECTION_STRING=… PEER_TABLE=pointbenchDirectory PORT=4100 npx tsx test/bench/peer-server.ts
 *
 * Prints `peer serving on <url>` once it listens.
 */
import { ApolloServer } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { TableClient } from '@azure/data-tables';
import DataLoader from 'dataloader';

interface Employee {
  departmentId: string;
  id: string;
  firstName?: string;
  lastName?: string;
  title?: string;
}

const typeDefs = `#graphql
  type Employee { departmentId: ID! id: ID! firstName: String lastName: String title: String }
  type Query { employee(departmentId: ID!, id: ID!): Employee }
`;

const table = TableClient.fromConnectionString(process.env.PEER_CONNECTION_STRING!, process.env.PEER_TABLE!, { allowInsecureConnection: true });

async function readEmployee(key: string): Promise<Employee | null> {
  const [departmentId, id] = key.split('\u0000');
  try {
    const e = await table.getEntity<Omit<Employee, 'departmentId' | 'id'>>(departmentId, `empid_${id.padStart(8, '0')}`, {
      queryOptions: { select: ['firstName', 'lastName', 'title'] },
    });
    return { departmentId, id, firstName: e.firstName, lastName: e.lastName, title: e.title };
  } catch (e) {
    if ((e as { statusCode?: number }).statusCode === 404) return null;
    throw e;
  }
}

interface Context {
  employees: DataLoader<string, Employee | null>;
}

const resolvers = {
  Query: {
    employee: (_: unknown, args: { departmentId: string; id: string }, ctx: Context) => ctx.employees.load(`${args.departmentId}\u0000${args.id}`),
  },
};

async function main(): Promise<void> {
  const server = new ApolloServer<Context>({ typeDefs, resolvers });
  const { url } = await startStandaloneServer(server, {
    listen: { port: Number(process.env.PORT), host: '127.0.0.1' },
    context: async () => ({ employees: new DataLoader((keys: readonly string[]) => Promise.all(keys.map(readEmployee))) }),
  });
  console.log(`peer serving on ${url}`);
  process.on('SIGTERM', () => void server.stop().then(() => process.exit(0)));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
