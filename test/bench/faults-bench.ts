/**
 * Throttling benchmark: `npm run bench -- faults [writes]` (not part of `npm test`).
 *
 * On its own in-memory Azurite, a server in this process whose Table endpoint is reached through the fault-injecting
 * proxy of the tests (test/support/storage-proxy.ts). The same creates (a unique e-mail each, a count and a sum kept
 * in the EGT) run at 8 in flight three times: with no fault (the baseline, through the same proxy), with 5% of
 * requests throttled, and with 20% — half of them 503 ServerBusy, half 429 asking for 100 ms — and, in each, 2% of
 * requests applied with their answer lost (500 OperationTimedOut). Prints per phase: creates/s and its ratio to the
 * baseline, the latency p50/p99 of an acknowledged create, the answers by code, and whether the creates acknowledged
 * are exactly those stored.
 */
import { loadConfig } from '../../src/runtime/config';
import { createLogger } from '../../src/log';
import { startServer } from '../../src/runtime/start-server';
import { startAzurite } from '../../src/storage/azurite';
import { TableStore } from '../../src/storage/table-store';
import { benchStorage } from './bench-storage';
import { DIRECTIVES_FILE, ROOT } from '../support/harness';
import { startStorageProxy } from '../support/storage-proxy';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const WRITES = Number(process.argv[2] ?? 300);
const SDL = `
type Bank @entity(table: "Banks", partitionKey: "{bank}", rowKey: "bank") {
  bank: ID!
  accounts: Int! @summary(of: "Account", via: "home", count: true)
  deposits: Int! @summary(of: "Account", via: "home", sum: ["balance"])
}
type Account @entity(table: "Banks", partitionKey: "{bank}", rowKey: "account_{id}")
  @index(name: "byEmail", table: "AccountsByEmail", partitionKey: "{email}", rowKey: "account", unique: true) {
  bank: ID!
  id: ID!
  email: String!
  balance: Int!
  home: Bank! @point(partitionKey: "{bank}", rowKey: "bank")
}
type Query { bank(bank: ID!): Bank @point }
type Mutation {
  createBank(input: CreateBankInput!): BankPayload! @write(entity: "Bank", action: CREATE)
  createAccount(input: CreateAccountInput!): AccountPayload! @write(entity: "Account", action: CREATE)
}
`;

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? 0 : sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)];
}

async function main(): Promise<void> {
  const azurite = await startAzurite({ inMemory: true });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-faults-'));
  fs.copyFileSync(DIRECTIVES_FILE, path.join(dir, 'directives.graphql'));
  fs.writeFileSync(path.join(dir, 'schema.graphql'), SDL);
  const proxy = await startStorageProxy(azurite.connectionString, { seed: 7 });
  const prefix = 'faults';
  const server = await startServer(
    loadConfig(
      {
        PORT: '0',
        AZURE_STORAGE_CONNECTION_STRING: proxy.connectionString,
        TABLEGRAPH_SCHEMA_DIR: dir,
        TABLEGRAPH_TABLE_PREFIX: prefix,
        TABLEGRAPH_AUTH: 'off',
        TABLEGRAPH_RATE_LIMIT: '100000000',
      },
      ROOT,
    ),
    benchStorage(proxy.connectionString),
    createLogger({ level: 'silent' }),
  );
  const direct = new TableStore({ connectionString: azurite.connectionString, target: 'azurite' });
  const post = async (query: string) => {
    const res = await fetch(server.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query }) });
    return (await res.json()) as { errors?: Array<{ extensions?: { code?: string } }> };
  };
  try {
    console.log(`in-memory Azurite 3.37, Node ${process.version}; ${WRITES} creates per phase at 8 in flight, through the fault-injecting proxy`);
    let baseline = 0;
    for (const [name, throttled] of [
      ['no fault (baseline)', 0],
      ['5% throttled', 0.05],
      ['20% throttled', 0.2],
    ] as const) {
      const bank = name.split(' ')[0].replace('%', 'pc');
      proxy.setFaults({});
      await post(`mutation { createBank(input: { bank: "${bank}" }) { bank { bank } } }`);
      proxy.setFaults(throttled === 0 ? {} : { busy: throttled / 2, throttled: throttled / 2, timedOutAfterApply: 0.02 });
      const latencies: number[] = [];
      const codes: Record<string, number> = {};
      const acknowledged = new Set<string>();
      let next = 0;
      const started = performance.now();
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          while (next < WRITES) {
            const id = String(++next);
            const t = performance.now();
            const r = await post(
              `mutation { createAccount(input: { bank: "${bank}", id: "${id}", email: "${bank}-${id}@bench.example", balance: 1 }) { account { id } } }`,
            );
            const code = r.errors?.[0]?.extensions?.code ?? 'ok';
            codes[code] = (codes[code] ?? 0) + 1;
            if (code === 'ok') {
              latencies.push(performance.now() - t);
              acknowledged.add(id);
            }
          }
        }),
      );
      const seconds = (performance.now() - started) / 1000;
      proxy.setFaults({});
      const stored = (
        await direct.queryRange({ table: `${prefix}Banks`, partitionKey: bank, rowKeyFrom: 'account_', rowKeyTo: 'account`', limit: 100_000 })
      ).entities.map((e) => String(e.properties.id));
      const exact = stored.length === acknowledged.size && stored.every((id) => acknowledged.has(id));
      const rate = acknowledged.size / seconds;
      if (throttled === 0) baseline = rate;
      console.log(
        `${name.padEnd(20)} ${rate.toFixed(1).padStart(6)} creates/s (${(rate / baseline).toFixed(2)}x), p50 ${percentile(latencies, 50).toFixed(0)} ms, p99 ${percentile(latencies, 99).toFixed(0)} ms; ` +
          `answers ${JSON.stringify(codes)}; acknowledged ${acknowledged.size}, stored ${stored.length}: ${exact ? 'exactly the same' : 'DIFFERENT'}; injected ${JSON.stringify(proxy.injected())}`,
      );
    }
  } finally {
    await server.close();
    await proxy.close();
    await azurite.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
