/**
 * The per-tenant figures the server keeps (src/server/tenant-cost-metrics.ts, src/server/verified-tokens.ts): cost
 * series bounded to the top N tenants plus `other`, adding up to every tenant's cost; verified tokens honoured until
 * they expire or for at most their time to live, the oldest forgotten first.
 */
import client from 'prom-client';
import { OTHER_TENANTS, TenantCostMetrics } from '../../src/server/tenant-cost-metrics';
import { VerifiedTokens } from '../../src/server/verified-tokens';

test('the costliest tenants are named, the rest summed as other, and all of them add up', async () => {
  const registry = new client.Registry();
  const costs = new TenantCostMetrics(registry, 2);
  const spend = { small: 1, big: 50, middle: 7, tiny: 2 };
  for (const [tenant, n] of Object.entries(spend)) for (let i = 0; i < n; i++) costs.add(tenant, { azureTransactions: 2, cosmosRequestUnits: 3 });
  const [transactions] = (await registry.getMetricsAsJSON()).filter((m) => m.name === 'tablegraph_tenant_azure_transactions');
  const values = Object.fromEntries((transactions.values as Array<{ labels: { tenant: string }; value: number }>).map((v) => [v.labels.tenant, v.value]));
  expect(values).toEqual({ big: 100, middle: 14, [OTHER_TENANTS]: 6 });
  // A tenant that spends more takes a name; the one it passes joins `other`.
  for (let i = 0; i < 10; i++) costs.add('tiny', { azureTransactions: 2, cosmosRequestUnits: 3 });
  const again = (await registry.getMetricsAsJSON()).find((m) => m.name === 'tablegraph_tenant_azure_transactions')!;
  expect(Object.fromEntries((again.values as Array<{ labels: { tenant: string }; value: number }>).map((v) => [v.labels.tenant, v.value]))).toEqual({
    big: 100,
    tiny: 24,
    [OTHER_TENANTS]: 16,
  });
});

test('a verified token is honoured until it expires or its time to live ends; the oldest goes first', () => {
  const tokens = new VerifiedTokens(60_000, 2);
  const principal = { subject: 's', roles: [], claims: {} };
  const now = 1_000_000;
  tokens.set('a', principal, now / 1000 + 10, now); // expires in 10 s
  tokens.set('b', principal, undefined, now); // no exp: the time to live
  expect(tokens.get('a', now + 9_999)).toBe(principal);
  expect(tokens.get('a', now + 10_000)).toBeUndefined();
  expect(tokens.get('b', now + 59_999)).toBe(principal);
  expect(tokens.get('b', now + 60_000)).toBeUndefined();
  tokens.set('c', principal, undefined, now);
  tokens.set('d', principal, undefined, now);
  tokens.set('e', principal, undefined, now); // over the bound of 2: c, the oldest, goes
  expect([tokens.get('c', now), tokens.get('d', now), tokens.get('e', now)]).toEqual([undefined, principal, principal]);
  tokens.set('expired', principal, now / 1000 - 1, now); // already expired: not kept
  expect(tokens.get('expired', now)).toBeUndefined();
});
