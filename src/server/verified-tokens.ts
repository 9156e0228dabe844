/**
 * Tokens verified lately, by their text, with what they verified to: a client that sends one token with every request
 * has it checked once a minute rather than each time (a signature check and the claims' decoding cost about as much
 * as refusing a request). A token is kept until it expires or for `ttlMs`, whichever comes first, so a key taken out
 * of the issuer's set stops being honoured within `ttlMs`; at most `max` are kept, the oldest forgotten first. Only
 * tokens that verified are kept: a refusal is always checked afresh.
 */
import type { Principal } from '../model/authorization';

/** How long a verified token is honoured without a new check (ms), at most. */
export const VERIFIED_TTL_MS = 60_000;

/** Tokens kept at most. */
export const VERIFIED_MAX = 10_000;

export class VerifiedTokens {
  private readonly tokens = new Map<string, { principal: Principal; until: number }>();

  constructor(
    private readonly ttlMs = VERIFIED_TTL_MS,
    private readonly max = VERIFIED_MAX,
  ) {}

  /** The principal `token` verified to, while it may be honoured without a new check; else undefined. */
  get(token: string, now = Date.now()): Principal | undefined {
    const kept = this.tokens.get(token);
    if (!kept) return undefined;
    if (now < kept.until) return kept.principal;
    this.tokens.delete(token);
    return undefined;
  }

  /**
   * Keeps a token that verified.
   * @param expiresAt its `exp` (s since the epoch), if it has one
   */
  set(token: string, principal: Principal, expiresAt: number | undefined, now = Date.now()): void {
    const until = Math.min(now + this.ttlMs, expiresAt === undefined ? Infinity : expiresAt * 1000);
    if (until <= now) return;
    if (this.tokens.size >= this.max) this.tokens.delete(this.tokens.keys().next().value!);
    this.tokens.set(token, { principal, until });
  }
}
