/**
 * The schema and resolvers a user would write by hand for the HR example's employees, shared by the two hand-written
 * servers of `npm run bench -- peer` (peer-server.ts: Apollo Server 5; mercurius-server.ts: Fastify + Mercurius with
 * graphql-jit): per-request DataLoaders over `TableClient.getEntity` for an employee or a department (null when there
 * is none, as tablegraph answers), and one `listEntities` page (a range query on the department's partition) for a
 * department's employees — the storage calls the benchmark's tablegraph makes for the same queries.
 */
import { TableClient } from '@azure/data-tables';
import DataLoader from 'dataloader';

export interface Employee {
  departmentId: string;
  id: string;
  firstName?: string;
  lastName?: string;
  title?: string;
}

interface Page {
  edges: Array<{ node: Employee; cursor: string }>;
  pageInfo: { hasNextPage: boolean; endCursor: string | null };
}

export const typeDefs = `
  type Employee { departmentId: ID! id: ID! firstName: String lastName: String title: String }
  type EmployeeEdge { node: Employee! cursor: String! }
  type PageInfo { hasNextPage: Boolean! endCursor: String }
  type EmployeeConnection { edges: [EmployeeEdge!]! pageInfo: PageInfo! }
  type Department { id: ID! employees(first: Int, after: String): EmployeeConnection! }
  type Query { employee(departmentId: ID!, id: ID!): Employee department(id: ID!): Department }
`;

export interface PeerContext {
  employees: DataLoader<string, Employee | null>;
  departments: DataLoader<string, { id: string } | null>;
  pages: DataLoader<string, Page>;
}

const SELECT = ['RowKey', 'firstName', 'lastName', 'title'];

/** The loaders of one request over `table`. */
export function peerContext(table: TableClient): PeerContext {
  const readEmployee = async (key: string): Promise<Employee | null> => {
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
  };
  const readDepartment = async (id: string): Promise<{ id: string } | null> => {
    try {
      await table.getEntity(id, 'department', { queryOptions: { select: ['PartitionKey'] } });
      return { id };
    } catch (e) {
      if ((e as { statusCode?: number }).statusCode === 404) return null;
      throw e;
    }
  };
  // One page of a department's employees: `departmentId \0 first \0 after`.
  const readPage = async (key: string): Promise<Page> => {
    const [departmentId, first, after] = key.split('\u0000');
    const filter = `PartitionKey eq '${departmentId.replace(/'/g, "''")}' and RowKey ge 'empid_' and RowKey lt 'empid\`'`;
    const pages = table
      .listEntities<{ RowKey: string; firstName?: string; lastName?: string; title?: string }>({ queryOptions: { filter, select: SELECT } })
      .byPage({ maxPageSize: Number(first), continuationToken: after || undefined });
    const { value } = await pages.next();
    const rows = value ?? [];
    const edges = rows.map((e: { rowKey?: string; firstName?: string; lastName?: string; title?: string }) => ({
      node: { departmentId, id: String(Number(e.rowKey!.slice('empid_'.length))), firstName: e.firstName, lastName: e.lastName, title: e.title },
      cursor: e.rowKey!,
    }));
    const token = (rows as { continuationToken?: string }).continuationToken;
    return { edges, pageInfo: { hasNextPage: token !== undefined, endCursor: token ?? null } };
  };
  return {
    employees: new DataLoader((keys: readonly string[]) => Promise.all(keys.map(readEmployee))),
    departments: new DataLoader((keys: readonly string[]) => Promise.all(keys.map(readDepartment))),
    pages: new DataLoader((keys: readonly string[]) => Promise.all(keys.map(readPage))),
  };
}

export const resolvers = {
  Query: {
    employee: (_: unknown, args: { departmentId: string; id: string }, ctx: PeerContext) => ctx.employees.load(`${args.departmentId}\u0000${args.id}`),
    department: (_: unknown, args: { id: string }, ctx: PeerContext) => ctx.departments.load(args.id),
  },
  Department: {
    employees: (d: { id: string }, args: { first?: number | null; after?: string | null }, ctx: PeerContext) =>
      ctx.pages.load(`${d.id}\u0000${args.first ?? 20}\u0000${args.after ?? ''}`),
  },
};

/** The benchmark's table, from the environment the benchmark gives the server. */
export function peerTable(): TableClient {
  return TableClient.fromConnectionString(process.env.PEER_CONNECTION_STRING!, process.env.PEER_TABLE!, { allowInsecureConnection: true });
}
