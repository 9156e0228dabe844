/**
 * The continuous half of the backup benchmark (backup-bench.ts): what capture costs a write, and its lag under load.
 *
 * - cost: the same updates of imported employees written one at a time through the write path, with capture off and
 *   on, their storage calls counted: transactions and entities written per write;
 * - lag: updates at a steady 50 writes/s while the capture passes run as a worker runs them (every 10 s, the
 *   default); each write's lag is from its acknowledgement to the end of the first pass that started after it — by
 *   then it is in a durable segment (src/backup/capture-pass.ts).
 */
import pLimit from 'p-limit';
import { CaptureLoop } from '../../src/backup/capture-loop';
import type { Model } from '../../src/model/types';
import type { BlobStore } from '../../src/storage/blob-store';
import type { QueueStore } from '../../src/storage/queue-store';
import type { StorageCallRecord } from '../../src/storage/storage-types';
import type { TableStore } from '../../src/storage/table-store';
import { queueSender } from '../../src/queue/sender';
import { until } from '../support/wait';
import { WriteExecutor } from '../../src/write/write-executor';

export interface CaptureBenchDeps {
  store: TableStore;
  queues: QueueStore;
  queue: string;
  blobs: BlobStore;
  container: string;
  model: Model;
  tablePrefix: string;
  schemaHash: string;
}

/** An imported employee's keys. */
export interface EmployeeKey {
  departmentId: string;
  id: string;
}

/** Per write: transactions, entities written (by transactions), round trips. */
export interface WriteCost {
  transactions: number;
  entitiesWritten: number;
  roundTrips: number;
}

function writer(deps: CaptureBenchDeps, capture: boolean): WriteExecutor {
  return new WriteExecutor({ model: deps.model, store: deps.store, workQueue: queueSender(deps.queues, deps.queue), capture, tablePrefix: deps.tablePrefix });
}

const UPDATE = 'Mutation.updateEmployee';

/** One write of a cost run: the mutation's coordinate and its input. */
export type CostWrite = [coordinate: string, input: Record<string, unknown>];

/** `writes` made one at a time, capture on or off: the mean cost per write. */
export async function writeCost(deps: CaptureBenchDeps, writes: CostWrite[], capture: boolean): Promise<WriteCost> {
  const w = writer(deps, capture);
  const total: WriteCost = { transactions: 0, entitiesWritten: 0, roundTrips: 0 };
  const observer = {
    onCall(r: StorageCallRecord) {
      total.roundTrips += r.roundTrips;
      if (r.kind === 'transaction') {
        total.transactions += 1;
        total.entitiesWritten += r.entities;
      }
    },
  };
  for (const [coordinate, input] of writes) await w.execute(deps.model.writes.get(coordinate)!, input, observer);
  const n = writes.length;
  return { transactions: total.transactions / n, entitiesWritten: total.entitiesWritten / n, roundTrips: total.roundTrips / n };
}

/** What the load did: each write's acknowledgement, the passes, and T (when half the writes were acknowledged). */
export interface CaptureLoad {
  acks: number[];
  /** Each pass: its times (ms since the epoch), changes copied, and change entities read (rows). */
  passes: Array<{ startedAt: number; finishedAt: number; changes: number; rows: number }>;
  t: number;
  seconds: number;
  errors: number;
}

/**
 * Updates at `perSecond` for `seconds` (random employees; 16 in flight at most) while a capture loop runs every
 * `intervalMs`; then one more pass, so that every write is captured.
 */
export async function captureUnderLoad(
  deps: CaptureBenchDeps,
  employees: EmployeeKey[],
  opts: { perSecond: number; seconds: number; intervalMs: number },
): Promise<CaptureLoad> {
  const passes: CaptureLoad['passes'] = [];
  const loop = new CaptureLoop({
    ...{ store: deps.store, blobs: deps.blobs, container: deps.container, model: deps.model, tablePrefix: deps.tablePrefix },
    ...{ schemaHash: deps.schemaHash, subscriptionRetentionMs: 3_600_000, intervalMs: opts.intervalMs },
    onPass: (r) =>
      passes.push({
        ...{ startedAt: Date.parse(r.latest.startedAt), finishedAt: Date.parse(r.latest.finishedAt) },
        ...{ changes: r.latest.changes, rows: r.latest.read?.rows ?? 0 },
      }),
  });
  const w = writer(deps, true);
  const limit = pLimit(16);
  const acks: number[] = [];
  let errors = 0;
  const total = opts.perSecond * opts.seconds;
  let t = 0;
  loop.start();
  const started = Date.now();
  const writes: Array<Promise<void>> = [];
  for (let i = 0; i < total; i++) {
    const due = started + (i * 1000) / opts.perSecond;
    if (due > Date.now()) await new Promise((r) => setTimeout(r, due - Date.now()));
    const e = employees[(i * 7919) % employees.length];
    writes.push(
      limit(() => w.execute(deps.model.writes.get(UPDATE)!, { ...e, annualSalary: `${60_000 + i}` })).then(
        () => {
          acks.push(Date.now());
          if (acks.length === total / 2) t = Date.now();
        },
        () => void errors++,
      ),
    );
  }
  await Promise.all(writes);
  const seconds = (Date.now() - started) / 1000;
  const last = Math.max(...acks);
  await until('a capture pass started after the last write', () => passes.some((p) => p.startedAt > last), { timeoutMs: 10 * opts.intervalMs + 60_000 });
  await loop.stop();
  return { acks, passes, t, seconds, errors };
}

/** Each write's lag: from its acknowledgement to the end of the first pass that started after it (ms). */
export function captureLags(load: CaptureLoad): number[] {
  return load.acks.map((ack) => {
    const pass = load.passes.find((p) => p.startedAt >= ack);
    return pass ? pass.finishedAt - ack : Number.POSITIVE_INFINITY;
  });
}

/** The p-th percentile (0-100) of `values`. */
export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((sorted.length * p) / 100) - 1))];
}
