/**
 * Per-tenant budgets in storage units (docs/tenancy.md, "Noisy neighbours"): under `@tenancy`, each tenant may spend
 * at most `transactionsPerSecond` storage calls and `entitiesPerSecond` entities read a second, counted from each
 * operation's demand estimate (src/read/demand.ts) before any of its storage calls is sent. A tenant over either gets
 * RATE_LIMITED (HTTP 429, `Retry-After`) while the other tenants' requests go on: the Azure targets a table and an
 * account share — 2,000 entities/s per partition, 20,000 transactions/s per account ("Scalability and performance
 * targets") — are not spent by one tenant. Windows of one second, kept by rate-limiter-flexible.
 *
 * A tenant may have a budget of its own (its catalogue row, `npm run tenant -- budget`): the limiters count every
 * tenant against the default budget, and charge such a tenant's operations scaled by the default over its own — a
 * tenant with a tenth of the default pays ten points a call.
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

  /**
   * @param budget every tenant's budget, unless `budgetOf` gives one of its own
   * @param budgetOf a tenant's own budget (src/evolution/tenant-directory.ts), or undefined for the default
   */
  constructor(
    readonly budget: TenantBudget = DEFAULT_TENANT_BUDGET,
    private readonly budgetOf: (tenant: string) => TenantBudget | undefined = () => undefined,
  ) {
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
    const own = this.budgetOf(tenant) ?? this.budget;
    // In the default budget's points: a tenant's own budget scales what its operations cost.
    const calls = Math.min(estimate.storageCalls, own.transactionsPerSecond) * (this.budget.transactionsPerSecond / own.transactionsPerSecond);
    const entities = Math.min(estimate.entitiesRead, own.entitiesPerSecond) * (this.budget.entitiesPerSecond / own.entitiesPerSecond);
    try {
      if (calls > 0) await this.transactions.consume(tenant, Math.min(calls, this.budget.transactionsPerSecond));
    } catch (e) {
      throw this.refusal(e, 'transactions', own);
    }
    try {
      if (entities > 0) await this.entities.consume(tenant, Math.min(entities, this.budget.entitiesPerSecond));
    } catch (e) {
      // The calls were not spent: give them back.
      if (calls > 0) await this.transactions.reward(tenant, Math.min(calls, this.budget.transactionsPerSecond));
      throw this.refusal(e, 'entities', own);
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
      if (used && used.remainingPoints <= 0 && used.msBeforeNext > 0) throw this.refusal(used, what, this.budgetOf(tenant) ?? this.budget);
    }
  }

  private refusal(e: unknown, what: 'transactions' | 'entities', budget: TenantBudget): unknown {
    if (!(e instanceof RateLimiterRes)) return e;
    const retryAfter = Math.max(1, Math.ceil(e.msBeforeNext / 1000));
    const per = what === 'transactions' ? `${budget.transactionsPerSecond} storage calls` : `${budget.entitiesPerSecond} entities read`;
    return new GraphQLError(`Your tenant's budget of this second is spent (at most ${per} a second). Retry after ${retryAfter} s.`, {
      extensions: {
        code: RATE_LIMITED,
        reason: 'TenantBudget',
        retryAfterSeconds: retryAfter,
        budget,
        http: { status: 429, headers: new Map([['retry-after', String(retryAfter)]]) },
      },
    });
  }
}
