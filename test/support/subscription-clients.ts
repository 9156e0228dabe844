/**
 * Subscription clients for tests, as a browser app would use them: `graphql-sse`'s and `graphql-ws`'s own clients
 * (over Node's fetch and the `ws` package), each event collected as it arrives, with waits that fail after a time;
 * and the events a test waits for before it writes: an SSE subscription's stream opened (the server answers once
 * the subscription runs), or the number of subscribers a server's /metrics reports.
 */
import { createClient as createSseClient } from 'graphql-sse';
import { createClient as createWsClient, type Client as WsClient } from 'graphql-ws';
import WebSocket from 'ws';
import { until } from './wait';

export interface Collected {
  /**
   * Resolves once the server runs the subscription (over SSE: its stream answered, which the server does after the
   * subscription started watching), so that a write made after it is reported. Over WebSocket the protocol says
   * nothing when a subscription starts: wait for `subscribers` instead.
   */
  started: Promise<void>;
  /** The events' `data`, in arrival order. */
  events: any[];
  /** Errors the subscription ended with (an array of GraphQL errors, or a transport error). */
  error?: unknown;
  /** An SSE refusal: its HTTP status and its body's text (JSON errors with codes). */
  refusal?: { status: number; body: string };
  /** Whether the subscription ended. */
  done: boolean;
  /** Resolves once `n` events arrived, or rejects after `timeoutMs`. */
  waitFor(n: number, timeoutMs?: number): Promise<any[]>;
  /** Ends the subscription. */
  stop(): void;
}

function collector(start: (sink: { next(v: any): void; error(e: unknown): void; complete(): void }) => () => void, started: Promise<void>): Collected {
  let ended!: () => void;
  const end = new Promise<void>((resolve) => (ended = resolve));
  const c: Collected = {
    // Refused or ended before it ran: the wait for its start fails at once, naming why.
    started: Promise.race([
      started,
      end.then(() => {
        throw new Error(`the subscription ended before it started: ${JSON.stringify(c.error ?? c.refusal)}`);
      }),
    ]),
    events: [],
    done: false,
    async waitFor(n, timeoutMs = 10_000) {
      const enough = () => {
        if (c.events.length < n && c.done) throw new Error(`the subscription ended after ${c.events.length} of ${n} events: ${JSON.stringify(c.error)}`);
        return c.events.length >= n;
      };
      await until(() => `${n} events (${c.events.length} of ${n} events after ${timeoutMs} ms)`, enough, { timeoutMs, everyMs: 20 });
      return c.events.slice(0, n);
    },
    stop: () => {},
  };
  c.stop = start({
    next(v) {
      if (v.errors) c.error = v.errors;
      else c.events.push(v.data);
    },
    error(e) {
      c.error = e;
      const response = (e as { response?: Response }).response;
      if (response && typeof response.text === 'function') {
        // graphql-sse's NetworkError holds the refusal's response: read it before saying the subscription ended.
        void response.text().then((body) => {
          c.refusal = { status: response.status, body };
          c.done = true;
          ended();
        });
        return;
      }
      c.done = true;
      ended();
    },
    complete() {
      c.done = true;
      ended();
    },
  });
  c.started.catch(() => undefined); // a test that never waits for the start is not told of it
  return c;
}

/** Subscribes over SSE (`/graphql/stream`, distinct connections). */
export function sseSubscribe(graphqlUrl: string, query: string, variables: Record<string, unknown> = {}, token?: string): Collected {
  let opened!: () => void;
  const started = new Promise<void>((resolve) => (opened = resolve));
  const client = createSseClient({
    url: graphqlUrl.replace(/\/graphql$/, '/graphql/stream'),
    headers: token ? { authorization: `Bearer ${token}` } : {},
    retryAttempts: 0,
    on: { connected: () => opened() },
  });
  return collector((sink) => {
    const stop = client.subscribe({ query, variables }, sink);
    return () => {
      stop();
      client.dispose();
    };
  }, started);
}

/** A WebSocket client (`graphql-ws`) to `/graphql`; the token in the connection_init payload. */
export function wsClient(graphqlUrl: string, token?: string): WsClient {
  return createWsClient({
    url: graphqlUrl.replace(/^http/, 'ws'),
    webSocketImpl: WebSocket,
    connectionParams: token ? { authorization: `Bearer ${token}` } : {},
    retryAttempts: 0,
    lazy: true,
  });
}

/** Subscribes over a WebSocket client. */
export function wsSubscribe(client: WsClient, query: string, variables: Record<string, unknown> = {}): Collected {
  return collector((sink) => client.subscribe({ query, variables }, sink), new Promise<void>(() => {}));
}

/**
 * Waits until the server at `graphqlUrl` serves exactly `n` subscriptions (its /metrics, read from this machine):
 * a WebSocket subscription started, or ended ones gone.
 * @throws Error at the deadline (30 s), with the last count
 */
export async function subscribers(graphqlUrl: string, n: number): Promise<void> {
  let last = -1;
  await until(
    () => `${n} subscribers (last seen: ${last})`,
    async () => {
      const text = await (await fetch(graphqlUrl.replace(/\/graphql$/, '/metrics'))).text();
      last = Number(/^tablegraph_subscriptions\{of="subscribers"\} (\d+)$/m.exec(text)?.[1] ?? -1);
      return last === n;
    },
    { timeoutMs: 30_000, everyMs: 100 },
  );
}
