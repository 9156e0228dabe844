/**
 * A Table service that pushes back, as Azure Table storage and the Cosmos DB Table API do and Azurite never does: an
 * HTTP proxy in front of the test run's Azurite's Table endpoint that, per request, by a seeded draw:
 * - holds it (`delayMs`) before passing it on — it is applied only after the wait;
 * - answers 503 `ServerBusy`, or 429 with `x-ms-retry-after-ms`, without passing it on (throttled: nothing applied);
 * - passes it on, then answers 500 `OperationTimedOut` instead of the service's answer (applied, reply lost);
 * - passes it on, then resets the connection (applied, reply lost).
 * Everything else passes through unchanged. Tests of writes under faults use it; so does the throttling benchmark.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { seededRng } from './fanout-fixtures';

/** The share of requests (0 to 1) that meet each fault. */
export interface FaultRates {
  /** 503 ServerBusy, not applied. */
  busy?: number;
  /** 429 with `x-ms-retry-after-ms: retryAfterMs`, not applied. */
  throttled?: number;
  /** Applied, then answered 500 OperationTimedOut. */
  timedOutAfterApply?: number;
  /** Applied, then the connection reset. */
  resetAfterApply?: number;
  /** Held `slowMs` before being passed on. */
  slow?: number;
}

export interface StorageProxyOptions {
  /** How long to hold a request (ms; 0: at once), from its method, path and body: every request, before any fault. */
  delayMs?: (method: string, path: string, body: string) => number;
  faults?: FaultRates;
  /** Which requests may meet a fault (default: all), from their method, path and body (an EGT's multipart text). */
  faultable?: (method: string, path: string, body: string) => boolean;
  /** The seed of the draws (printed by the caller so that a failure can be replayed). */
  seed?: number;
  /** `x-ms-retry-after-ms` of a 429 (ms; default 100). */
  retryAfterMs?: number;
  /** The hold of a `slow` request (ms; default 1500). */
  slowMs?: number;
  /**
   * Whether a held request its client gave up on meanwhile is passed on all the same (default false: dropped, nothing
   * applied), as a service that read it before its client timed out applies it: a write applied after its answer was
   * given up on.
   */
  passAbandoned?: boolean;
}

export interface StorageProxy {
  /** The test Azurite's connection string with its TableEndpoint pointing at the proxy. */
  connectionString: string;
  /** Requests held so far (requests). */
  delayed(): number;
  /** Faults injected so far, by kind. */
  injected(): Record<keyof FaultRates, number>;
  /**
   * Requests passed on and answered by the service so far, in order: method, path, the service's status, and whether
   * the Azure SDK sent it (its User-Agent), not the store's own REST calls.
   */
  forwarded(): Array<{ method: string; path: string; status: number; sdk: boolean }>;
  /** Turns the faults off (or on again with other rates). */
  setFaults(faults: FaultRates): void;
  close(): Promise<void>;
}

function odataError(code: string, message: string): string {
  return JSON.stringify({ 'odata.error': { code, message: { lang: 'en-US', value: message } } });
}

/**
 * @param connectionString the Azurite connection string (its TableEndpoint is proxied, the other services not)
 */
export async function startStorageProxy(connectionString: string, opts: StorageProxyOptions = {}): Promise<StorageProxy> {
  const endpoint = /TableEndpoint=([^;]+)/.exec(connectionString)?.[1];
  if (!endpoint) throw new Error('the connection string has no TableEndpoint');
  const target = new URL(endpoint);
  const rng = seededRng(opts.seed ?? 1);
  let faults: FaultRates = opts.faults ?? {};
  let delayed = 0;
  const forwarded: Array<{ method: string; path: string; status: number; sdk: boolean }> = [];
  const injected: Record<keyof FaultRates, number> = { busy: 0, throttled: 0, timedOutAfterApply: 0, resetAfterApply: 0, slow: 0 };
  const draw = (method: string, path: string, body: Buffer): keyof FaultRates | undefined => {
    if (opts.faultable && !opts.faultable(method, path, body.toString('utf8'))) return undefined;
    let x = rng.int(1_000_000) / 1_000_000;
    for (const kind of ['busy', 'throttled', 'timedOutAfterApply', 'resetAfterApply', 'slow'] as const) {
      x -= faults[kind] ?? 0;
      if (x < 0) return kind;
    }
    return undefined;
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const method = req.method ?? 'GET';
      const path = req.url ?? '/';
      const fault = draw(method, path, Buffer.concat(chunks));
      if (fault) injected[fault]++;
      if (fault === 'busy' || fault === 'throttled') {
        const status = fault === 'busy' ? 503 : 429;
        const body = fault === 'busy' ? odataError('ServerBusy', 'The server is busy.') : odataError('TooManyRequests', 'The request rate is too large.');
        res.writeHead(status, {
          'content-type': 'application/json;odata=minimalmetadata',
          ...(fault === 'throttled' ? { 'x-ms-retry-after-ms': String(opts.retryAfterMs ?? 100) } : {}),
        });
        res.end(body);
        return;
      }
      const wait = (opts.delayMs?.(method, path, Buffer.concat(chunks).toString('utf8')) ?? 0) + (fault === 'slow' ? (opts.slowMs ?? 1500) : 0);
      if (wait > 0) delayed++;
      // eslint-disable-next-line no-restricted-globals -- the latency the proxy injects, the fault a test is about
      setTimeout(() => {
        if (res.destroyed && !opts.passAbandoned) return; // the client gave up meanwhile: nothing is applied
        const upstream = http.request({ host: target.hostname, port: target.port, method, path, headers: req.headers }, (answer) => {
          const sdk = /azsdk-js/.test(req.headers['user-agent'] ?? '');
          answer.once('end', () => forwarded.push({ method, path, status: answer.statusCode ?? 0, sdk }));
          if (res.destroyed) {
            answer.resume(); // applied; nobody to tell
            return;
          }
          if (fault === 'timedOutAfterApply' || fault === 'resetAfterApply') {
            // Applied: the service's answer is read to its end and thrown away.
            answer.resume();
            answer.on('end', () => {
              if (fault === 'resetAfterApply') {
                req.socket.destroy();
                return;
              }
              res.writeHead(500, { 'content-type': 'application/json;odata=minimalmetadata' });
              res.end(odataError('OperationTimedOut', 'Operation could not be completed within the specified time.'));
            });
            return;
          }
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
    forwarded: () => [...forwarded],
    injected: () => ({ ...injected }),
    setFaults: (next) => void (faults = next),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
