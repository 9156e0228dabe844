/**
 * A Table service that answers slowly: an HTTP proxy in front of the test run's Azurite's Table endpoint that holds
 * each request the `delayMs` function names before passing it on unchanged — the request is applied only after the
 * wait, as on a storage account under load. Tests use it for writes whose EGT is applied long after it was planned.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface StorageProxy {
  /** The test Azurite's connection string with its TableEndpoint pointing at the proxy. */
  connectionString: string;
  /** Requests held so far (requests). */
  delayed(): number;
  close(): Promise<void>;
}

/**
 * @param connectionString the Azurite connection string (its TableEndpoint is proxied, the other services not)
 * @param delayMs how long to hold a request (ms; 0: pass it on at once), from its method and path
 */
export async function startStorageProxy(connectionString: string, delayMs: (method: string, path: string) => number): Promise<StorageProxy> {
  const endpoint = /TableEndpoint=([^;]+)/.exec(connectionString)?.[1];
  if (!endpoint) throw new Error('the connection string has no TableEndpoint');
  const target = new URL(endpoint);
  let delayed = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const wait = delayMs(req.method ?? 'GET', req.url ?? '/');
      if (wait > 0) delayed++;
      setTimeout(() => {
        if (res.destroyed) return; // the client gave up meanwhile: nothing is applied
        const upstream = http.request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        });
        upstream.on('error', () => {
          res.writeHead(502);
          res.end();
        });
        upstream.end(Buffer.concat(chunks));
      }, wait);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    connectionString: connectionString.replace(/TableEndpoint=[^;]+/, `TableEndpoint=http://127.0.0.1:${port}${target.pathname}`),
    delayed: () => delayed,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
