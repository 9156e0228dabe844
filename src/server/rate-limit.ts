/**
 * Rate limiting per caller — the token's subject, or the client's IP address without one — with
 * rate-limiter-flexible: at most `perMinute` requests a minute each. Over it: RATE_LIMITED (HTTP 429, with
 * `Retry-After` in seconds), before anything of the request runs.
 */
import { GraphQLError } from 'graphql';
import { ErrorCode } from '../errors';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';

/** The stable code of a refused request. */
export const RATE_LIMITED = ErrorCode.RATE_LIMITED;

/** Counts one request of `caller`; @throws GraphQLError RATE_LIMITED (HTTP 429) over the limit */
export type RateLimit = (caller: string) => Promise<void>;

/** @param perMinute requests a caller may make per minute (requests) */
export function createRateLimit(perMinute: number): RateLimit {
  const limiter = new RateLimiterMemory({ points: perMinute, duration: 60 });
  return async (caller) => {
    try {
      await limiter.consume(caller);
    } catch (e) {
      if (!(e instanceof RateLimiterRes)) throw e;
      const retryAfter = Math.max(1, Math.ceil(e.msBeforeNext / 1000));
      throw new GraphQLError(`Too many requests: at most ${perMinute} a minute. Retry after ${retryAfter} s.`, {
        extensions: { code: RATE_LIMITED, retryAfterSeconds: retryAfter, http: { status: 429, headers: new Map([['retry-after', String(retryAfter)]]) } },
      });
    }
  };
}
