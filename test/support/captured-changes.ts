/**
 * What continuous backup captured of a prefix's writes (src/backup/): one capture pass into a container of the test's
 * own, read from its first change, and of each entity the last change captured — what a restore would take as the
 * entity's state. Tests compare it with what is stored.
 */
import { runCapturePass } from '../../src/backup/capture-pass';
import { commitOrder } from '../../src/backup/change-replay';
import { decodeChangeSegment, parsePassManifest, replayKey, CHANGES, type CapturedChange } from '../../src/backup/change-format';
import type { Model } from '../../src/model/types';
import { testBlobs, testStore } from './harness';

/**
 * @param container a container no other pass writes to (a valid name: lower case)
 * @returns the last change captured of each entity, by replayKey (its table after the prefix)
 */
export async function lastCapturedChanges(model: Model, tablePrefix: string, container: string): Promise<Map<string, CapturedChange>> {
  const blobs = testBlobs();
  await runCapturePass({ store: testStore(), blobs, container, model, tablePrefix, schemaHash: 'test', subscriptionRetentionMs: 3_600_000 });
  const last = new Map<string, CapturedChange>();
  for (const { name } of (await blobs.list(container, `${CHANGES}/`)).filter((b) => b.name.endsWith('/manifest.json'))) {
    const manifest = parsePassManifest((await blobs.download(container, name))!.bytes.toString('utf8'), name);
    for (const segment of manifest.segments) {
      for (const c of decodeChangeSegment((await blobs.download(container, segment.name))!.bytes, segment)) {
        const key = replayKey(c.table, c.partitionKey, c.rowKey);
        const before = last.get(key);
        if (!before || commitOrder(before, c) < 0) last.set(key, c);
      }
    }
  }
  return last;
}
