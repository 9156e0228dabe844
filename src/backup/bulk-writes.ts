/**
 * Bulk writes (`npm run load`, `npm run import`) write their EGTs directly, without change entities: continuous
 * backup does not capture them (docs/backup.md). So that a restore never silently misses what one wrote, each records
 * itself in the backup container before its first row (`bulk-writes/<id>.json`: the command, when it started, and —
 * once done — when it finished), and a restore to a time refuses a window from a snapshot to that time that a bulk
 * write overlaps (change-replay.ts): a snapshot taken after the bulk write covers it, and a worker takes one within
 * a minute of its end (snapshot-schedule.ts).
 */
import { randomUUID } from 'node:crypto';
import type { BlobStore } from '../storage/blob-store';
import { readJsonBlob, writeJsonBlob } from './backup-blobs';

/** The folder of the records. */
export const BULK_WRITES = 'bulk-writes';

/** One bulk write's record. Times ISO 8601. */
export interface BulkWrite {
  id: string;
  /** The command, e.g. `npm run load`. */
  command: string;
  startedAt: string;
  /** Absent while it runs — or when it was killed: then it counts as running for ever. */
  finishedAt?: string;
}

/**
 * Records a bulk write starting now.
 * @returns `finish`, which records its end (call it once the command's last row is written)
 * @throws TablegraphError STORAGE_UNAVAILABLE and others from the Blob service: the command then writes nothing
 */
export async function recordBulkWrite(blobs: BlobStore, container: string, command: string): Promise<{ finish(): Promise<void> }> {
  await blobs.ensureContainer(container);
  const record: BulkWrite = {
    id: `${new Date().toISOString().replace(/[-:.]/g, '')}-${randomUUID().slice(0, 8)}`,
    command,
    startedAt: new Date().toISOString(),
  };
  const name = `${BULK_WRITES}/${record.id}.json`;
  await writeJsonBlob(blobs, container, name, record);
  return {
    finish: async () => {
      const finished: BulkWrite = { ...record, finishedAt: new Date().toISOString() };
      await writeJsonBlob(blobs, container, name, finished);
      // What the workers' snapshot schedule reads: a snapshot is due once a bulk write ended after the newest began.
      await writeJsonBlob(blobs, container, LAST_BULK_WRITE, finished);
    },
  };
}

/**
 * The bulk write that finished last (`bulk-writes-latest.json`, beside the records): a worker's snapshot schedule
 * takes a snapshot once one finished after the newest snapshot started (snapshot-schedule.ts), so that what it wrote
 * becomes restorable.
 */
export const LAST_BULK_WRITE = 'bulk-writes-latest.json';

/** The bulk write that finished last; undefined for none (or none since this document was first written). */
export async function lastBulkWrite(blobs: BlobStore, container: string): Promise<BulkWrite | undefined> {
  const r = await readJsonBlob<BulkWrite>(blobs, container, LAST_BULK_WRITE);
  return r && typeof r.finishedAt === 'string' ? r : undefined;
}

/** Every bulk write recorded in the container, oldest first. */
export async function listBulkWrites(blobs: BlobStore, container: string): Promise<BulkWrite[]> {
  const names = (await blobs.list(container, `${BULK_WRITES}/`)).map((b) => b.name).sort();
  const records: BulkWrite[] = [];
  for (const name of names) {
    const r = await readJsonBlob<BulkWrite>(blobs, container, name);
    if (r && typeof r.startedAt === 'string') records.push(r);
  }
  return records;
}

/** The first bulk write that wrote between `from` and `to` (ms since the epoch): started by `to`, not finished by `from`. */
export function bulkWriteBetween(records: readonly BulkWrite[], from: number, to: number): BulkWrite | undefined {
  return records.find((r) => Date.parse(r.startedAt) <= to && (r.finishedAt === undefined || Date.parse(r.finishedAt) >= from));
}
