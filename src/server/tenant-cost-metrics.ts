/**
 * Per-tenant cost in /metrics with bounded labels (docs/tenancy.md, "Noisy neighbours"): the Azure Table transactions
 * and the Cosmos DB request units of each tenant's requests (the sums of their `extensions.cost`), since the process
 * started — as gauges whose `tenant` label names the `topN` costliest tenants, recomputed at each scrape, the rest
 * summed as `tenant="other"`. A tenant's series is its whole total since start; one that drops out of the top N
 * adds to `other` from then on, so the series always add up to every tenant's cost.
 */
import client from 'prom-client';
import type { StorageCost } from '../read/cost';

/** Tenants named in the series by default; the rest are `other`. */
export const DEFAULT_TENANT_LABELS = 20;

/** The label of every tenant not among the top N. */
export const OTHER_TENANTS = 'other';

/** Keeps each tenant's totals and publishes the top N of them. */
export class TenantCostMetrics {
  private readonly totals = new Map<string, { transactions: number; requestUnits: number }>();

  /**
   * @param registry the registry the two gauges go to: `tablegraph_tenant_azure_transactions{tenant}` and
   *   `tablegraph_tenant_cosmos_request_units{tenant}`
   * @param topN tenants named (tenants; default DEFAULT_TENANT_LABELS)
   */
  constructor(registry: client.Registry, topN = DEFAULT_TENANT_LABELS) {
    const publish = (gauge: client.Gauge<'tenant'>, of: (t: { transactions: number; requestUnits: number }) => number) => {
      gauge.reset();
      const ranked = [...this.totals].sort(([, a], [, b]) => of(b) - of(a));
      for (const [tenant, total] of ranked.slice(0, topN)) gauge.set({ tenant }, of(total));
      const rest = ranked.slice(topN).reduce((sum, [, total]) => sum + of(total), 0);
      if (ranked.length > topN) gauge.set({ tenant: OTHER_TENANTS }, rest);
    };
    new client.Gauge({
      name: 'tablegraph_tenant_azure_transactions',
      help: `Azure Table storage transactions of each tenant's requests since the process started: the ${topN} costliest tenants, the rest as "${OTHER_TENANTS}"`,
      labelNames: ['tenant'],
      registers: [registry],
      collect() {
        publish(this, (t) => t.transactions);
      },
    });
    new client.Gauge({
      name: 'tablegraph_tenant_cosmos_request_units',
      help: `Estimated Cosmos DB Table API request units of each tenant's requests since the process started: the ${topN} costliest tenants, the rest as "${OTHER_TENANTS}"`,
      labelNames: ['tenant'],
      registers: [registry],
      collect() {
        publish(this, (t) => t.requestUnits);
      },
    });
  }

  /** Adds one request's cost to its tenant's totals. */
  add(tenant: string, cost: Pick<StorageCost, 'azureTransactions' | 'cosmosRequestUnits'>): void {
    let total = this.totals.get(tenant);
    if (!total) this.totals.set(tenant, (total = { transactions: 0, requestUnits: 0 }));
    total.transactions += cost.azureTransactions;
    total.requestUnits += cost.cosmosRequestUnits;
  }
}
