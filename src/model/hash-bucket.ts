/**
 * Hash buckets for keys: the guide's remedy in the "Prepend/append anti-pattern" — spread what would be a
 * hot spot, or a swarm of tiny partitions, over a fixed number of partitions by prefixing a hash. A bucket is
 * FNV-1a (32-bit) of the value's UTF-8 bytes modulo the bucket count, so any language can compute the same
 * PartitionKey, and a point or range query still knows its partition from the value alone.
 */

/** FNV-1a 32-bit hash of the UTF-8 bytes of `value` (an unsigned 32-bit integer). */
export function fnv1a32(value: string): number {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(value, 'utf8')) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash >>> 0;
}

/** Digits of the bucket numbers of `buckets` buckets (e.g. 64 → 2: `00`..`63`). */
export function bucketWidth(buckets: number): number {
  return String(buckets - 1).length;
}

/** The zero-padded bucket of `value` among `buckets` (e.g. `07` of 64). */
export function hashBucket(value: string, buckets: number): string {
  return String(fnv1a32(value) % buckets).padStart(bucketWidth(buckets), '0');
}
