/**
 * A Table service that does not sort query results, as the Cosmos DB Table API does not (its FAQ): an HTTP proxy
 * in front of the test run's Azurite that passes every request through unchanged and shuffles the `value` array of
 * every query answer — each service page comes back in a random order, its continuation token untouched. Tests of
 * connections run through it with the `cosmos` target, so they show that every entity still comes exactly once and
 * in the order a connection promises (TableStore.queryRange).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { seededRng } from './fanout-fixtures';

export interface ShufflingProxy {
  /** The test Azurite's connection string with its TableEndpoint pointing at the proxy. */
  connectionString: string;
  /** Query answers shuffled so far (answers holding at least two entities). */
  shuffled(): number;
  close(): Promise<void>;
}

/**
 * @param connectionString the Azurite connection string (its TableEndpoint is proxied, the other services not)
 * @param seed for the shuffles (printed by the caller so a failure can be replayed)
 */
export async function startShufflingProxy(connectionString: string, seed: number): Promise<ShufflingProxy> {
  const endpoint = /TableEndpoint=([^;]+)/.exec(connectionString)?.[1];
  if (!endpoint) throw new Error('the connection string has no TableEndpoint');
  const target = new URL(endpoint);
  const rng = seededRng(seed);
  let shuffled = 0;
  const server = http.createServer((req, res) => {
    const upstream = http.request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      const chunks: Buffer[] = [];
      answer.on('data', (c: Buffer) => chunks.push(c));
      answer.on('end', () => {
        let body = Buffer.concat(chunks);
        const headers = { ...answer.headers };
        if (req.method === 'GET' && String(headers['content-type'] ?? '').includes('json')) {
          try {
            const json = JSON.parse(body.toString('utf8')) as { value?: unknown[] };
            if (Array.isArray(json.value) && json.value.length > 1) {
              json.value = rng.shuffle(json.value);
              body = Buffer.from(JSON.stringify(json), 'utf8');
              shuffled++;
            }
          } catch {
            // not a JSON document: passed through as it is
          }
        }
        delete headers['transfer-encoding'];
        headers['content-length'] = String(body.length);
        res.writeHead(answer.statusCode ?? 502, headers);
        res.end(body);
      });
    });
    upstream.on('error', () => {
      res.writeHead(502);
      res.end();
    });
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const proxied = `http://127.0.0.1:${port}${target.pathname}`;
  return {
    connectionString: connectionString.replace(/TableEndpoint=[^;]+/, `TableEndpoint=${proxied}`),
    shuffled: () => shuffled,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
