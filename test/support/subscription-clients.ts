/**
 * Subscription clients for tests, as a browser app would use them: `graphql-sse`'s and `graphql-ws`'s own clients
 * (over Node's fetch and the `ws` package), each event collected as it arrives, with waits that fail after a time.
 */
import { createClient as createSseClient } from 'graphql-sse';
import { createClient as createWsClient, type Client as WsClient } from 'graphql-ws';
import WebSocket from 'ws';

export interface Collected {
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

function collector(start: (sink: { next(v: any): void; error(e: unknown): void; complete(): void }) => () => void): Collected {
  const waiting: Array<() => void> = [];
  const c: Collected = {
    events: [],
    done: false,
    async waitFor(n, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while (c.events.length < n) {
        if (c.done) throw new Error(`the subscription ended after ${c.events.length} of ${n} events: ${JSON.stringify(c.error)}`);
        if (Date.now() > deadline) throw new Error(`${c.events.length} of ${n} events after ${timeoutMs} ms`);
        await new Promise<void>((resolve) => {
          waiting.push(resolve);
          setTimeout(resolve, 50);
        });
      }
      return c.events.slice(0, n);
    },
    stop: () => {},
  };
  const wake = () => waiting.splice(0).forEach((w) => w());
  c.stop = start({
    next(v) {
      if (v.errors) c.error = v.errors;
      else c.events.push(v.data);
      wake();
    },
    error(e) {
      c.error = e;
      const response = (e as { response?: Response }).response;
      if (response && typeof response.text === 'function') {
        // graphql-sse's NetworkError holds the refusal's response: read it before saying the subscription ended.
        void response.text().then((body) => {
          c.refusal = { status: response.status, body };
          c.done = true;
          wake();
        });
        return;
      }
      c.done = true;
      wake();
    },
    complete() {
      c.done = true;
      wake();
    },
  });
  return c;
}

/** Subscribes over SSE (`/graphql/stream`, distinct connections). */
export function sseSubscribe(graphqlUrl: string, query: string, variables: Record<string, unknown> = {}, token?: string): Collected {
  const client = createSseClient({
    url: graphqlUrl.replace(/\/graphql$/, '/graphql/stream'),
    headers: token ? { authorization: `Bearer ${token}` } : {},
    retryAttempts: 0,
  });
  return collector((sink) => {
    const stop = client.subscribe({ query, variables }, sink);
    return () => {
      stop();
      client.dispose();
    };
  });
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
  return collector((sink) => client.subscribe({ query, variables }, sink));
}
