/**
 * One worker at a time runs a deployment-wide backup job (a capture pass, a scheduled snapshot): the one that holds
 * the job's blob lease — 15 s, the Blob service's least, renewed every 5 s while the job runs, released after. A
 * worker killed in a job lets its lease lapse within 15 s, by the service's clock; another takes it then.
 */
import type { BlobStore } from '../storage/blob-store';

/** The lease (s), and how often it is renewed while the job runs (ms). */
const LEASE_SECONDS = 15;
const RENEW_MS = 5_000;

/**
 * Runs `job` under the lease on blob `name` of `container` (created if missing).
 * @returns what `job` returns; `{ led: false }` when another worker holds the lease
 * @throws what `job` throws (the lease is released first)
 */
export async function asLeader<T>(blobs: BlobStore, container: string, name: string, job: () => Promise<T>): Promise<{ led: true; value: T } | { led: false }> {
  await blobs.ensureContainer(container);
  let leaseId: string;
  try {
    leaseId = await blobs.leaseNew(container, name, { metadata: {}, seconds: LEASE_SECONDS });
  } catch {
    return { led: false };
  }
  const renew = setInterval(() => void blobs.renewLease(container, name, leaseId).catch(() => undefined), RENEW_MS);
  try {
    return { led: true, value: await job() };
  } finally {
    clearInterval(renew);
    await blobs.deleteLeased(container, name, leaseId).catch(() => undefined);
  }
}
