/**
 * Per-tenant budgets in storage units (docs/tenancy.md, "Noisy neighbours"): under `@tenancy`, each tenant may spend
 * at most `transactionsPerSecond` storage calls and `entitiesPerSecond` entities read a second, counted from each
 * operation's demand estimate (src/read/demand.ts) before any of its storage calls is sent. A tenant over either gets
 * RATE_LIMITED (HTTP 429, `Retry-After`) while the other tenants' requests go on: the Azure targets a table and an
 * account share — 2,000 entities/s per partition, 20,000 transactions/s per account ("Scalability and performance
 * targets") — are not spent by one tenant. Windows of one second, kept by rate-limiter-flexible.
 */
import { GraphQLError } from 'graphql';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import type { DemandEstimate } from '../read/demand';
import { RATE_LIMITED } from './rate-limit';

/** One tenant's budget a second. */
export interface TenantBudget {
  /** Storage calls (Azure Table transactions) a second, from the estimates of its operations (calls/s). */
  transactionsPerSecond: number;
  /** Entities read a second, from the estimates of its operations (entities/s). */
  entitiesPerSecond: number;
}

/** Defaults: a twentieth of an account's 20,000 transactions/s, and five partitions' worth of entities. */
export const DEFAULT_TENANT_BUDGET: TenantBudget = { transactionsPerSecond: 1000, entitiesPerSecond: 10_000 };

/** Charges each tenant's operations against its budget. */
export class TenantBudgets {
  private readonly transactions: RateLimiterMemory;
  private readonly entities: RateLimiterMemory;

  constructor(readonly budget: TenantBudget = DEFAULT_TENANT_BUDGET) {
    this.transactions = new RateLimiterMemory({ points: budget.transactionsPerSecond, duration: 1 });
    this.entities = new RateLimiterMemory({ points: budget.entitiesPerSecond, duration: 1 });
  }

  /**
   * Charges one operation of `tenant`. An operation estimated at more than a whole second's budget is charged that
   * second's budget: it waits for a second of its own rather than never running.
   * @param estimate the operation's worst case (storage calls, entities read)
   * @throws GraphQLError RATE_LIMITED (HTTP 429, `Retry-After` in s; extensions `reason: "TenantBudget"`,
   *   `retryAfterSeconds`, `budget`) when the tenant's budget of this second is spent
   */
  async charge(tenant: string, estimate: Pick<DemandEstimate, 'storageCalls' | 'entitiesRead'>): Promise<void> {
    const calls = Math.min(estimate.storageCalls, this.budget.transactionsPerSecond);
    const entities = Math.min(estimate.entitiesRead, this.budget.entitiesPerSecond);
    try {
      if (calls > 0) await this.transactions.consume(tenant, calls);
    } catch (e) {
      throw this.refusal(e, 'transactions');
    }
    try {
      if (entities > 0) await this.entities.consume(tenant, entities);
    } catch (e) {
      // The calls were not spent: give them back.
      if (calls > 0) await this.transactions.reward(tenant, calls);
      throw this.refusal(e, 'entities');
    }
  }

  /**
   * Refuses at the door, before the request is parsed, a tenant whose budget of this second is already spent: a
   * tenant far over its budget then costs little more than its token's check. Charges nothing.
   * @throws GraphQLError RATE_LIMITED, as `charge` does
   */
  async refuseIfSpent(tenant: string): Promise<void> {
    for (const [limiter, what] of [
      [this.transactions, 'transactions'],
      [this.entities, 'entities'],
    ] as const) {
      const used = await limiter.get(tenant);
      if (used && used.remainingPoints <= 0 && used.msBeforeNext > 0) throw this.refusal(used, what);
    }
  }

  private refusal(e: unknown, what: 'transactions' | 'entities'): unknown {
    if (!(e instanceof RateLimiterRes)) return e;
    const retryAfter = Math.max(1, Math.ceil(e.msBeforeNext / 1000));
    const per = what === 'transactions' ? `${this.budget.transactionsPerSecond} storage calls` : `${this.budget.entitiesPerSecond} entities read`;
    return new GraphQLError(`Your tenant's budget of this second is spent (at most ${per} a second). Retry after ${retryAfter} s.`, {
      extensions: {
        code: RATE_LIMITED,
        reason: 'TenantBudget',
        retryAfterSeconds: retryAfter,
        budget: this.budget,
        http: { status: 429, headers: new Map([['retry-after', String(retryAfter)]]) },
      },
    });
  }
}
