/**
 * A graceful stop of the HTTP side: once the server starts to stop, it finishes every request it took and refuses
 * the rest with a coded, retryable answer — `SHUTTING_DOWN`, HTTP 503 with `Retry-After` and `Connection: close` —
 * never a 500 and never a socket closed under a request. Every answer given while it stops closes its connection, so
 * no client sends its next request on a keep-alive connection the server is about to close (the race that loses a
 * request unanswered).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { ErrorCode } from '../errors';
import { sendHttpError } from './http-errors';
import { assignRequestId } from './request-log';

/** What a refused request is told. */
const MESSAGE = 'The server is stopping: send the request again (another instance, or this one once it is back, answers it).';

export class ShutdownGate {
  private stopping = false;
  private readonly taken = new Set<ServerResponse>();
  private idleWaiters: Array<() => void> = [];

  /** Whether the server has started to stop. */
  get draining(): boolean {
    return this.stopping;
  }

  /** Requests taken and not yet answered. */
  get inFlight(): number {
    return this.taken.size;
  }

  /**
   * Takes a request, or refuses it when the server stops.
   * @returns true when the request was taken (the caller serves it), false when it was answered here
   */
  admit(req: IncomingMessage, res: ServerResponse): boolean {
    if (this.stopping) {
      refuse(req, res);
      return false;
    }
    this.taken.add(res);
    res.once('close', () => {
      this.taken.delete(res);
      if (this.taken.size === 0) this.wake();
    });
    return true;
  }

  /** A WebSocket upgrade while the server stops: refused with the same answer. @returns whether it was refused */
  refuseUpgrade(socket: Duplex): boolean {
    if (!this.stopping) return false;
    const body = JSON.stringify({ errors: [{ message: MESSAGE, extensions: { code: ErrorCode.SHUTTING_DOWN } }] });
    socket.end(
      `HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `Retry-After: 1\r\nConnection: close\r\n\r\n${body}`,
    );
    return true;
  }

  /** Starts stopping: every request from now on is refused, and the answers of those taken close their connections. */
  drain(): void {
    this.stopping = true;
    for (const res of this.taken) if (!res.headersSent) res.setHeader('connection', 'close');
  }

  /** Resolves once every request taken has been answered, or after `graceMs` (ms). @returns whether all were answered */
  idle(graceMs: number): Promise<boolean> {
    if (this.taken.size === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(this.taken.size === 0), graceMs);
      this.idleWaiters.push(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  }

  private wake(): void {
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }
}

function refuse(req: IncomingMessage, res: ServerResponse): void {
  const requestId = assignRequestId(req, res);
  res.setHeader('retry-after', '1');
  res.setHeader('connection', 'close');
  res.setHeader('cache-control', 'no-store');
  // The body is not read: the connection closes after the answer.
  sendHttpError(res, 503, ErrorCode.SHUTTING_DOWN, MESSAGE, requestId);
}
