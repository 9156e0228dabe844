/**
 * A writer's marks in the capture journal (src/model/capture-journal.ts): before an EGT with change entities is sent to
 * a partition, the partition is marked in the bucket of now — once per partition and bucket in this process — so that
 * the capture pass reads that partition's changes. One per WriteExecutor, when continuous backup is on.
 *
 * Guide sections: "Log tail pattern", "Eventually consistent transactions pattern".
 */
import { bucketKey, bucketOf, journalEntity, journalTable } from '../model/capture-journal';
import type { TableStore } from '../storage/table-store';
import type { StorageObserver } from '../storage/storage-types';

/** Marks remembered at most by one process (entries): those of older buckets go first. */
const MAX_REMEMBERED = 100_000;

/**
 * A process's marks: each partition once per bucket, the upsert awaited by every write that needs it (one at a time
 * per partition and bucket).
 */
export class JournalMarks {
  private readonly marked = new Map<string, Promise<void>>();
  private table?: Promise<void>;

  constructor(
    private readonly store: TableStore,
    private readonly tablePrefix: string,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Marks `table` (its full name) and `partitionKey` in the bucket of now, unless this process did already.
   * @throws storage errors of the upsert (the write that asked must not be sent then: its change could be missed)
   */
  mark(table: string, partitionKey: string, observer?: StorageObserver): Promise<void> {
    const bucket = bucketKey('c', bucketOf(this.now()));
    const key = `${bucket}\u0000${table}\u0000${partitionKey}`;
    const known = this.marked.get(key);
    if (known) return known;
    const journal = journalTable(this.tablePrefix);
    this.table ??= this.store.ensureTable(journal).catch((e: unknown) => {
      this.table = undefined;
      throw e;
    });
    const marking = this.table
      .then(() => this.store.upsertEntity(journal, journalEntity(bucket, { table, partitionKey }), 'replace', { observer: markObserver(observer) }))
      .then(() => undefined);
    this.marked.set(key, marking);
    // A mark that failed is tried again by the next write.
    marking.catch(() => this.marked.delete(key));
    if (this.marked.size > MAX_REMEMBERED) this.forgetOld(bucket);
    return marking;
  }

  /** Forgets the marks of buckets before `bucket`. */
  private forgetOld(bucket: string): void {
    for (const key of this.marked.keys()) if (key.slice(0, bucket.length) < bucket) this.marked.delete(key);
  }
}

/** `observer` told of a mark as one (StorageCallRecord.captureMark): a request's cost counts it apart from its writes. */
function markObserver(observer: StorageObserver | undefined): StorageObserver | undefined {
  if (!observer) return undefined;
  return {
    onCallStart: () => observer.onCallStart?.(),
    onCall: (record) => observer.onCall({ ...record, captureMark: true }),
  };
}
