/**
 * Retention's cost grows with what expires, not with what is kept (docs/backup.md, "Retention"): against the test
 * run's Azurite, a backup container holding old unfinished snapshots and passes (past the retention) beside 10 and
 * then 40 recent snapshots and passes; the blob names listed, the blobs downloaded and the blobs deleted are counted
 * through the BlobStore, and are the same at both sizes. What expired is exactly the old, and nothing recent is touched.
 */
import { expireSnapshots } from '../src/backup/retention';
import { snapshotId } from '../src/backup/backup-blobs';
import { BlobStore, type ListedBlob } from '../src/storage/blob-store';
import { connectionString, uniquePrefix } from './support/harness';

/** The test run's Blob service, counting what retention reads and deletes. */
class CountingBlobs extends BlobStore {
  listed = 0;
  downloaded = 0;
  deleted = 0;
  constructor() {
    super({ connectionString: connectionString() });
  }
  override async list(container: string, prefix: string): Promise<ListedBlob[]> {
    const out = await super.list(container, prefix);
    this.listed += out.length;
    return out;
  }
  override async listBefore(container: string, prefix: string, stop: string): Promise<ListedBlob[]> {
    const out = await super.listBefore(container, prefix, stop);
    this.listed += out.length;
    return out;
  }
  override async download(container: string, name: string) {
    this.downloaded++;
    return super.download(container, name);
  }
  override async delete(container: string, name: string) {
    this.deleted++;
    return super.delete(container, name);
  }
}

const DAY = 24 * 3600_000;
const json = (v: unknown) => Buffer.from(JSON.stringify(v));

/** A container with 2 old unfinished snapshots and 3 old unfinished passes, and `recent` snapshots and passes of the last hour. */
async function container(blobs: BlobStore, recent: number): Promise<{ name: string; old: { snapshots: string[]; passes: string[] } }> {
  const name = `${uniquePrefix()}-backup`;
  await blobs.ensureContainer(name);
  const now = Date.now();
  const old = {
    snapshots: [0, 1].map((i) => snapshotId(new Date(now - 10 * DAY + i * 1000))),
    passes: [0, 1, 2].map((i) => snapshotId(new Date(now - 9 * DAY + i * 1000))),
  };
  for (const id of old.snapshots) {
    await blobs.upload(name, `snapshots/${id}/progress.json`, json({ startedAt: new Date(now - 10 * DAY).toISOString() }), 'application/json');
    await blobs.upload(name, `snapshots/${id}/000001-Thing.ndjson.gz`, Buffer.from('x'), 'application/gzip');
  }
  for (const id of old.passes) await blobs.upload(name, `changes/${id}/000001-Things.ndjson.gz`, Buffer.from('x'), 'application/gzip');
  let newest = '';
  for (let i = 0; i < recent; i++) {
    const at = new Date(now - 3600_000 + i * 1000);
    newest = snapshotId(at);
    await blobs.upload(name, `snapshots/${newest}/000001-Thing.ndjson.gz`, Buffer.from('x'), 'application/gzip');
    await blobs.upload(name, `changes/${snapshotId(at)}/000001-Things.ndjson.gz`, Buffer.from('x'), 'application/gzip');
  }
  const pointer = { id: newest, startedAt: new Date(now - 3600_000).toISOString(), finishedAt: new Date(now - 3000_000).toISOString() };
  await blobs.upload(name, 'snapshots/latest.json', json(pointer), 'application/json');
  return { name, old };
}

test('retention lists, reads and deletes the same at 10 and at 40 kept snapshots and passes: only what expires', async () => {
  const counts = [];
  for (const recent of [10, 40]) {
    const setup = new BlobStore({ connectionString: connectionString() });
    const { name, old } = await container(setup, recent);
    const blobs = new CountingBlobs();
    const result = await expireSnapshots({ blobs, container: name, retentionDays: 7 });
    expect(result).toEqual({ complete: [], unfinished: old.snapshots, passes: 3, blobs: 7 });
    counts.push({ listed: blobs.listed, downloaded: blobs.downloaded, deleted: blobs.deleted });
    // Everything recent is there still.
    const left = await setup.list(name, '');
    expect(left).toHaveLength(2 * recent + 1);
  }
  console.log(`retention at 10 and 40 kept snapshots and passes: ${JSON.stringify(counts)}`);
  expect(counts[1]).toEqual(counts[0]);
  // The pointer and the two old progress documents read; the old blobs listed (and listed again to delete them).
  expect(counts[0]).toEqual({ listed: 14, downloaded: 3, deleted: 7 });
}, 60_000);
