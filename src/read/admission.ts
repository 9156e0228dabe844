/**
 * Server-wide admission of storage reads: at most `maxInFlight` calls in flight across all requests, the rest
 * waiting in one lane per request, served round-robin — so a request with a thousand reads to make waits its
 * turn behind a request with one, instead of in front of it. When `maxQueued` calls wait already, a new call is
 * refused with OVERLOADED, and a new request is turned away at the door (HTTP 503) before it starts.
 * The guide's "Performance and scalability checklist": bound the parallelism of what one client can ask for.
 */
import { ErrorCode, TablegraphError } from '../errors';

export interface AdmissionLimits {
  /** Storage calls in flight at once, all requests together (calls). */
  maxInFlight: number;
  /** Storage calls waiting for a slot, all requests together (calls); beyond: OVERLOADED. */
  maxQueued: number;
}

/** The admission of one server. */
export class StorageAdmission {
  private inFlight = 0;
  private queued = 0;
  /** Waiting calls by request; Map order is the round-robin order (a served lane goes to the back). */
  private readonly lanes = new Map<string, Array<() => void>>();

  constructor(private readonly limits: AdmissionLimits) {}

  /** Whether the queue is full: a request arriving now would be refused its calls. */
  saturated(): boolean {
    return this.queued >= this.limits.maxQueued;
  }

  /** Calls in flight and waiting now (calls), for /health and tests. */
  load(): { inFlight: number; queued: number } {
    return { inFlight: this.inFlight, queued: this.queued };
  }

  /**
   * Runs `call` when a slot is free and it is `lane`'s turn.
   * @throws TablegraphError OVERLOADED when `maxQueued` calls wait already; whatever `call` throws
   */
  async run<T>(lane: string, call: () => Promise<T>): Promise<T> {
    if (this.inFlight >= this.limits.maxInFlight || this.queued > 0) {
      if (this.queued >= this.limits.maxQueued) {
        throw new TablegraphError(ErrorCode.OVERLOADED, 'The server has too many storage calls waiting; try again shortly.', { reason: 'StorageQueueFull' });
      }
      await new Promise<void>((resolve) => {
        const waiting = this.lanes.get(lane) ?? [];
        waiting.push(resolve);
        this.lanes.set(lane, waiting);
        this.queued++;
      });
    } else {
      this.inFlight++;
    }
    try {
      return await call();
    } finally {
      this.release();
    }
  }

  /** Frees a slot and gives it to the next lane in turn (its oldest call), that lane then going to the back. */
  private release(): void {
    const next = this.lanes.entries().next();
    if (next.done) {
      this.inFlight--;
      return;
    }
    const [lane, waiting] = next.value;
    const wake = waiting.shift()!;
    this.lanes.delete(lane);
    if (waiting.length > 0) this.lanes.set(lane, waiting);
    this.queued--;
    wake(); // the slot passes to it: inFlight stays the same
  }
}
