/**
 * graphql-ws's protocol server (`makeServer`) on the `ws` package's sockets: what graphql-ws's own `useServer` does
 * — the subprotocol, a ping every `keepAliveMs` and a socket that answers none closed, each message handed to the
 * protocol — but a failure of the server's own is written to the structured log with the socket's request id,
 * never to stdout, and closes the socket with 4500 and no internal text. (A refusal or an execution error is no
 * such failure: the protocol sends it on its subscription.)
 */
import type { IncomingMessage } from 'node:http';
import { randomUUID } from 'node:crypto';
import { CloseCode, handleProtocols, makeServer, type ServerOptions } from 'graphql-ws';
import type { WebSocket, WebSocketServer } from 'ws';
import type { Logger } from '../../log';

/** What each connection's context carries besides graphql-ws's own (`ctx.extra`). */
export interface SocketExtra {
  socket: WebSocket;
  request: IncomingMessage;
}

/**
 * Serves graphql-ws on every connection `wss` accepts.
 * @param keepAliveMs time between two pings of an idle socket, and how long a pong may take (ms)
 */
export function serveGraphqlWs<P extends Record<string, unknown> | undefined>(
  options: ServerOptions<P, SocketExtra>,
  wss: WebSocketServer,
  keepAliveMs: number,
  log: Logger,
): void {
  const server = makeServer(options);
  wss.options.handleProtocols = handleProtocols;
  wss.on('error', (err) => log.error({ err }, 'subscriptions: the WebSocket server failed'));
  wss.on('connection', (socket, request) => {
    const socketId = randomUUID();
    const fail = (err: unknown, what: string) => {
      log.error({ err, socketId }, `subscriptions: ${what}; the WebSocket is closed`);
      if (socket.readyState === socket.OPEN) socket.close(CloseCode.InternalServerError, 'Internal server error');
    };
    socket.once('error', (err) => fail(err, 'a WebSocket failed'));
    let pongWait: NodeJS.Timeout | undefined;
    const ping = setInterval(() => {
      if (socket.readyState !== socket.OPEN) return;
      pongWait = setTimeout(() => socket.terminate(), keepAliveMs);
      socket.once('pong', () => clearTimeout(pongWait));
      socket.ping();
    }, keepAliveMs);
    const closed = server.opened(
      {
        protocol: socket.protocol,
        send: (data) =>
          new Promise<void>((resolve, reject) => {
            if (socket.readyState !== socket.OPEN) return resolve();
            socket.send(data, (err) => (err ? reject(err) : resolve()));
          }),
        close: (code, reason) => socket.close(code, reason),
        onMessage: (cb) =>
          socket.on('message', (data) => {
            cb(String(data)).catch((err: unknown) => fail(err, 'a WebSocket message could not be handled'));
          }),
      },
      { socket, request },
    );
    socket.once('close', (code, reason) => {
      clearTimeout(pongWait);
      clearInterval(ping);
      void closed(code, String(reason)).catch((err: unknown) => log.error({ err, socketId }, 'subscriptions: a closed WebSocket could not be cleaned up'));
    });
  });
}
