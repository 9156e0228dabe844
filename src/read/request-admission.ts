/**
 * Server-wide admission of heavy requests: at most `maxHeavy` operations whose demand estimate exceeds
 * `heavyCalls` storage calls run at once; the others wait their turn first come, first served. A request that
 * could not finish before its deadline — its predicted wait plus its own run time, both from what recent heavy
 * requests took — is refused at once with OVERLOADED and a `Retry-After`, instead of taking its share of the
 * storage calls only to time out. Light requests (at most `heavyCalls`) never wait here: their few calls go
 * through the storage admission (admission.ts) next to the heavy ones, round-robin, so they stay fast however
 * many heavy requests arrive.
 *
 * Why: with fair sharing alone, 50 requests of 0.7 s each all finish after about 35 s — every one past a 30 s
 * deadline. Serving a few at a time finishes most of them, and refusing the rest early tells their clients to come
 * back (the guide's "Performance and scalability checklist": bound what clients can ask for, and back off).
 */
import { ErrorCode, TablegraphError } from '../errors';

export interface RequestAdmissionLimits {
  /** Heavy requests running at once (requests). */
  maxHeavy: number;
  /** An operation estimated at more storage calls than this is heavy (calls). */
  heavyCalls: number;
  /** What a heavy request is assumed to take before any has finished (ms, default 1000). */
  initialRunMs?: number;
}

/** A heavy request's place: call `release()` once its response is sent (idempotent). */
export interface AdmissionTicket {
  release(): void;
}

/** Share of the remaining time a request's predicted wait and run may take before it is refused (the rest: margin). */
const DEADLINE_SHARE = 0.5;
/** Weight of the newest run time in the moving average of heavy run times. */
const SMOOTHING = 0.2;

const NO_TICKET: AdmissionTicket = { release: () => undefined };

/** The admission of one server. */
export class RequestAdmission {
  private running = 0;
  private readonly waiting: Array<{ start: () => void }> = [];
  /** Moving average of how long a heavy request ran once admitted (ms). */
  private runMs: number;

  constructor(private readonly limits: RequestAdmissionLimits) {
    if (!Number.isInteger(limits.maxHeavy) || limits.maxHeavy < 1) throw new RangeError(`maxHeavy must be a whole number ≥ 1, not ${limits.maxHeavy}`);
    this.runMs = limits.initialRunMs ?? 1000;
  }

  /** Heavy requests running and waiting now (requests), and the run time assumed for the next one (ms). */
  load(): { running: number; waiting: number; runMs: number } {
    return { running: this.running, waiting: this.waiting.length, runMs: Math.round(this.runMs) };
  }

  /**
   * Admits an operation estimated at `storageCalls`: at once when it is light or a heavy slot is free, after the
   * heavy requests before it otherwise.
   * @param deadline when the request's time ends (ms since the epoch); absent: no deadline
   * @returns a ticket to release when the request ends
   * @throws TablegraphError OVERLOADED (reason `HeavyRequestsQueued`, `retryAfterSeconds`) when the request could
   *   not finish before its deadline: refused before it waits, or when its wait runs longer than predicted
   */
  async admit(storageCalls: number, deadline?: number): Promise<AdmissionTicket> {
    if (storageCalls <= this.limits.heavyCalls) return NO_TICKET;
    if (this.running < this.limits.maxHeavy && this.waiting.length === 0) return this.ticket();
    const waitMs = Math.ceil((this.waiting.length + 1) / this.limits.maxHeavy) * this.runMs;
    if (deadline !== undefined && waitMs + this.runMs > (deadline - Date.now()) * DEADLINE_SHARE) throw this.overloaded(waitMs);
    await new Promise<void>((resolve, reject) => {
      const entry = { start: resolve };
      this.waiting.push(entry);
      if (deadline === undefined) return;
      // Still waiting when only its own run time is left: it could no longer finish.
      const timer = setTimeout(
        () => {
          const at = this.waiting.indexOf(entry);
          if (at < 0) return;
          this.waiting.splice(at, 1);
          reject(this.overloaded(this.runMs));
        },
        Math.max(0, deadline - Date.now() - this.runMs),
      );
      entry.start = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    return this.ticket(true);
  }

  /** A running heavy request's ticket; `handedOver`: its slot was passed on by release(), not taken here. */
  private ticket(handedOver = false): AdmissionTicket {
    if (!handedOver) this.running++;
    const started = performance.now();
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.runMs += SMOOTHING * (performance.now() - started - this.runMs);
        const next = this.waiting.shift();
        if (next)
          next.start(); // the slot passes to it: `running` stays the same
        else this.running--;
      },
    };
  }

  private overloaded(waitMs: number): TablegraphError {
    const retryAfterSeconds = Math.max(1, Math.ceil(waitMs / 1000));
    return new TablegraphError(
      ErrorCode.OVERLOADED,
      `The server is busy with other heavy requests and could not finish this one in time; try again in ${retryAfterSeconds} s.`,
      {
        reason: 'HeavyRequestsQueued',
        retryAfterSeconds,
      },
    );
  }
}
