/**
 * The least any server in front of a Table must do per point query, with no GraphQL at all: node:http, the JSON body
 * parsed, one signed REST GET of the entity over undici (SharedKeyLite), the answer written — the ceiling row of
 * `npm run bench -- peer` (peer-bench.ts). No GraphQL server that sends a point query per request can be faster than
 * this one on the same machine.
 *
 *   PEER_CONNECTION_STRING=… PEER_TABLE=peerbenchDirectory PORT=4101 npx tsx test/bench/ceiling-server.ts
 *
 * Prints `peer serving on <port>` once it listens.
 */
import { createServer } from 'node:http';
import { createHmac } from 'node:crypto';
import { Agent, request } from 'undici';
import { parseConnectionString, tableEndpoint } from '../../src/storage/connection';

const connectionString = process.env.PEER_CONNECTION_STRING!;
const account = parseConnectionString(connectionString);
const base = new URL(`${tableEndpoint(connectionString)}/`);
const key = Buffer.from(account.accountkey, 'base64');
const agent = new Agent({ connections: 64 });
const table = process.env.PEER_TABLE!;

async function answer(body: { variables: { d: string; id: string } }): Promise<string> {
  const { d, id } = body.variables;
  const url = new URL(`${table}(PartitionKey='${d}',RowKey='empid_${id.padStart(8, '0')}')?$select=firstName,lastName,title`, base);
  const date = new Date().toUTCString();
  const signature = createHmac('sha256', key).update(`${date}\n/${account.accountname}${url.pathname}`).digest('base64');
  const res = await request(url, {
    dispatcher: agent,
    headers: {
      accept: 'application/json;odata=nometadata',
      'x-ms-date': date,
      'x-ms-version': '2019-02-02',
      authorization: `SharedKeyLite ${account.accountname}:${signature}`,
    },
  });
  const e = (await res.body.json()) as Record<string, unknown>;
  return JSON.stringify({ data: { employee: { id, firstName: e.firstName, lastName: e.lastName, title: e.title } } });
}

createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    answer(JSON.parse(Buffer.concat(chunks).toString('utf8'))).then(
      (out) => res.writeHead(200, { 'content-type': 'application/json' }).end(out),
      (e: Error) => res.writeHead(500).end(e.message),
    );
  });
}).listen(Number(process.env.PORT), '127.0.0.1', () => console.log(`peer serving on ${process.env.PORT}`));
process.on('SIGTERM', () => process.exit(0));
