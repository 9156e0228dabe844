/**
 * One StorageObserver standing for several: each storage call is reported to all of them (a group commit's calls
 * count for every write it carries).
 */
import type { StorageCallRecord, StorageObserver } from './storage-types';

/** @returns undefined when no observer is given, the one when one is, else one that reports to each (deduplicated) */
export function sharedObserver(given: Array<StorageObserver | undefined>): StorageObserver | undefined {
  const observers = [...new Set(given.filter((o): o is StorageObserver => o !== undefined))];
  if (observers.length === 0) return undefined;
  if (observers.length === 1) return observers[0];
  return {
    onCallStart: () => observers.forEach((o) => o.onCallStart?.()),
    onCall: (r: StorageCallRecord) => observers.forEach((o) => o.onCall(r)),
  };
}
